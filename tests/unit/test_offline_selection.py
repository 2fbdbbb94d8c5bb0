"""What the offline reply shows for a question: recall's hits that answer on their own scale
(not merely the best of a poor lot), near the best, best first, each message once, with
the question it answers or its answer; within the reply's size; with recall off, the
window ranked the same way. Pure: hits and windows are built here, ranked by recall's own
ranking."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from config.prompts import load_prompts
from memory_core.models import LogEntry, ScopeState
from memory_core.prompt.assembly import AssemblyInput, Prompt
from memory_core.recall.documents import Doc, Hit, index_entries
from memory_core.recall.ranking import rank
from memory_core.service.offline import (
    MEANING_MIN,
    WORDS_MIN,
    offline_reply,
    select_relevant,
)
from memory_core.text.tokens import TokenCounter

NOW = datetime(2025, 8, 13, 12, 0, tzinfo=UTC)
counter = TokenCounter()

CHATTER = [
    "the coffee machine is broken again",
    "did anyone see the game last night?",
    "yes, what a finish",
    "lunch at the noodle place today?",
    "sure, at noon",
    "I'll bring the slides for the review",
    "the printer on floor 2 is out of toner",
]


def said(minutes_ago: int, text: str, author: str = "Alice") -> LogEntry:
    ts = NOW - timedelta(minutes=minutes_ago)
    ms = int(ts.timestamp() * 1000)
    return LogEntry(
        id=f"{ms}-0",
        ts=ts,
        role="user",
        author=author,
        author_id=author,
        text=text,
        tokens=counter.count(text),
    )


def doc(n: int, text: str, author: str = "Alice") -> Doc:
    return Doc(id=f"{n}-0", ms=n, author=author, text=text, kind="message", n_terms=5)


def hit(*docs: Doc, score: float, words: float = 1.0, meaning: float = 0.0, at: int = 0) -> Hit:
    return Hit(docs=docs, score=score, words=words, meaning=meaning, at=at)


def chat(*texts: str) -> list[LogEntry]:
    """A window, newest first (as the store reads it), one message a minute."""
    return [said(i + 1, text) for i, text in enumerate(reversed(texts))]


def ask(
    question: str, recent: list[LogEntry], hits: list[Hit], language: str = "en"
) -> AssemblyInput:
    return AssemblyInput(
        scope="discord:1:2",
        state=ScopeState(),
        facts=[],
        recent=recent,
        new_author="Bob",
        new_text=question,
        now=NOW,
        tz="UTC",
        language=language,
        bot_name="memorybot",
        recalled=hits,
    )


def ranked(question: str, recent: list[LogEntry]) -> list[Hit]:
    """What recall's ranking returns for ``question`` over ``recent``."""
    index = index_entries(sorted(recent, key=lambda entry: entry.id))
    return rank(index, question, exclude_ids=set(), limit=200)


def test_a_hit_is_shown_only_when_it_answers_on_its_own_scale() -> None:
    assert (WORDS_MIN, MEANING_MIN) == (0.45, 0.5)  # what the cases below straddle
    weak = hit(doc(1, "lunch at noon"), score=9.0, words=0.44, meaning=0.49)
    by_words = hit(doc(2, "Carol arrives on March 4"), score=5.0, words=0.45)
    by_meaning = hit(doc(3, "she lands Tuesday"), score=4.0, words=0.0, meaning=0.5)
    shown = [d.text for _, d in select_relevant([weak, by_words, by_meaning])]
    assert shown == ["Carol arrives on March 4", "she lands Tuesday"]  # best first
    assert select_relevant([weak]) == []


def test_only_the_hits_near_the_best_and_a_few_of_them() -> None:
    hits = [hit(doc(i, f"message {i}"), score=10.0 - i) for i in range(6)]
    shown = [d.text for _, d in select_relevant(hits)]
    assert shown == ["message 0", "message 1", "message 2"]  # three hits at most
    far = [hit(doc(1, "close"), score=10.0), hit(doc(2, "far behind"), score=4.9)]
    assert [d.text for _, d in select_relevant(far)] == ["close"]


def test_each_message_once_never_the_question_and_where_it_was_said_kept() -> None:
    said_twice = [
        hit(doc(5, "the gate code is 4512"), score=9.0),
        hit(doc(2, "The gate code is 4512 "), score=8.0),  # the same words again
        hit(doc(7, "what is the gate code?", author="Bob"), score=7.0),  # the question
        hit(doc(5, "the gate code is 4512"), score=6.0, words=1.0),  # its id again
        Hit(  # the same id in the thread's channel: another message
            docs=(doc(5, "in the channel: the gate code changed to 7788"),),
            score=6.0,
            scope="discord:1:1",
            words=1.0,
        ),
    ]
    pairs = select_relevant(said_twice, exclude_id="7-0")
    assert [(where, d.text) for where, d in pairs] == [
        ("", "the gate code is 4512"),
        ("discord:1:1", "in the channel: the gate code changed to 7788"),
    ]


def test_a_hit_comes_with_the_question_it_answers_or_its_answer_not_other_turns() -> None:
    question, answer, aside = (
        doc(1, "when is the party?"),
        doc(2, "Saturday at 8"),
        doc(3, "ok"),
    )
    answered = hit(question, answer, aside, score=5.0, at=1)
    shown = [d.text for _, d in select_relevant([answered])]
    assert shown == ["when is the party?", "Saturday at 8"]
    asked = hit(question, answer, score=5.0, at=0)
    assert [d.text for _, d in select_relevant([asked])] == ["when is the party?", "Saturday at 8"]
    statement = hit(doc(4, "Carol arrives on March 4"), doc(5, "coffee is out"), score=5.0)
    assert [d.text for _, d in select_relevant([statement])] == ["Carol arrives on March 4"]


def test_recall_ranks_the_answer_above_the_chatter_and_a_chit_chat_question_gets_nothing() -> None:
    recent = chat("Carol arrives on March 4 at the north gate", *CHATTER)
    pairs = select_relevant(ranked("When does Carol arrive?", recent))
    assert [d.text for _, d in pairs] == ["Carol arrives on March 4 at the north gate"]
    assert select_relevant(ranked("how are you doing?", recent)) == []
    # One word in common ("review") of several telling ones: recall finds it, for a model to
    # judge; by itself it does not answer.
    partial = ranked("what did the review board decide about the budget?", recent)
    assert [h.docs[h.at].text for h in partial] == ["I'll bring the slides for the review"]
    assert select_relevant(partial) == []


@pytest.mark.parametrize("stored", [False, True])
def test_a_question_stored_or_not_is_judged_alike(stored: bool) -> None:
    """The question is in the index when it was stored first (a reply's), not when it was
    not (memory paused, a thread's channel): the words it shares with its answer are not
    made to look common by it, nor its own words rare."""
    question = "who said au lait?"
    recent = chat("caf\ufffd au lait", "the printer is out of toner", "lunch at noon")
    if stored:
        recent = [said(0, question, author="Bob"), *recent]
    hits = ranked(question, recent)
    if stored:
        hits = [h for h in hits if h.docs[h.at].text != question]
    [(_, shown)] = select_relevant(hits)
    assert shown.text == "caf\ufffd au lait"
    [first] = hits[:1]
    assert first.words == pytest.approx(2 / 3, abs=0.05)  # "au", "lait" of three alike


def test_the_reply_shows_date_time_and_author_and_records_what_it_showed() -> None:
    recent = chat("Carol arrives on March 4 at the north gate", *CHATTER)
    data = ask("When does Carol arrive?", recent, ranked("When does Carol arrive?", recent))
    text, shown = offline_reply(data, Prompt([], 0, 0), counter, max_chars=4000)
    prompts = load_prompts("en")
    assert text.startswith(prompts.offline_reply)
    when = recent[-1].ts.strftime("%Y-%m-%d %H:%M")
    assert text.endswith(
        f"{prompts.offline_found}\n[{when}] Alice: Carol arrives on March 4 at the north gate"
    )
    assert [d.id for d in shown.used.recalled] == [recent[-1].id]
    assert shown.used.recalled_from == ("",) and shown.sections["recall"] > 0


@pytest.mark.parametrize("language", ["en", "ja"])
def test_nothing_related_or_nothing_at_all_is_said_plainly(language: str) -> None:
    prompts = load_prompts(language)
    recent = chat(*CHATTER)
    data = ask("what is the wifi password?", recent, ranked("wifi password", recent), language)
    text, shown = offline_reply(data, Prompt([], 0, 0, language=language), counter, max_chars=4000)
    assert text == f"{prompts.offline_reply}\n\n{prompts.offline_unrelated}"
    assert shown.used.recalled == () and shown.sections == {}
    empty = ask("hello?", [], [], language)
    text, _ = offline_reply(empty, Prompt([], 0, 0, language=language), counter, max_chars=4000)
    assert text == f"{prompts.offline_reply}\n\n{prompts.offline_nothing}"


def test_the_reply_keeps_within_its_size_and_records_only_what_fits() -> None:
    hits = [hit(doc(i, f"fact {i}: " + "word " * 30), score=10.0 - i) for i in range(3)]
    data = ask("facts?", [], hits)
    whole, _ = offline_reply(data, Prompt([], 0, 0), counter, max_chars=4000)
    limit = len(whole) - 10
    text, shown = offline_reply(data, Prompt([], 0, 0), counter, max_chars=limit)
    assert len(text) <= limit and "fact 0" in text and "fact 2" not in text
    assert [d.text[:6] for d in shown.used.recalled] == ["fact 0", "fact 1"]


def test_with_recall_off_the_window_is_ranked_the_same_way() -> None:
    recent = chat("Carol arrives on March 4 at the north gate", *CHATTER)
    data = ask("When does Carol arrive?", recent, [])
    text, shown = offline_reply(data, Prompt([], 0, 0), counter, max_chars=4000, searched=False)
    assert "Alice: Carol arrives on March 4 at the north gate" in text
    assert [d.id for d in shown.used.recalled] == [recent[-1].id]
    searched, _ = offline_reply(data, Prompt([], 0, 0), counter, max_chars=4000)
    assert "Carol" not in searched  # recall on and it found nothing: nothing is shown
