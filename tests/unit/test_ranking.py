"""Ranking without Redis or vectors: what the rest of a day and the dates a question names
do to a message's place."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memory_core.models import DaySummary
from memory_core.recall import ranking
from memory_core.recall.documents import Doc, ScopeIndex, add_day_record
from memory_core.recall.ranking import (
    _members,
    _shares,
    _top,
    query_days,
    query_months,
    rank,
    rank_words,
)
from memory_core.recall.textsearch import terms

HOUR = 3_600_000


def _ms(day: str, hour: int = 12) -> int:
    return (
        int(datetime.fromisoformat(f"{day}T{hour:02d}:00:00").replace(tzinfo=UTC).timestamp())
        * 1000
    )


def _index(messages: list[tuple[str, int, str]], records: list[tuple[str, str]] = ()) -> ScopeIndex:
    """``messages``: (day, hour, text), in time order; ``records``: (day, text) day records."""
    index = ScopeIndex()
    for n, (day, hour, text) in enumerate(messages):
        words = terms(text)
        index.add(
            Doc(
                id=f"{_ms(day, hour)}-{n}",
                ms=_ms(day, hour),
                author="Ann",
                text=text,
                kind="message",
                n_terms=len(words),
            ),
            words,
        )
    for day, text in records:
        words = terms(text)
        index.add(
            Doc(id="", ms=_ms(day), author="", text=text, kind="day", n_terms=len(words), day=day),
            words,
        )
        index.day_rows[day] = len(index.docs) - 1
    return index


def _first(index: ScopeIndex, query: str) -> str:
    hits = rank(index, query, exclude_ids=set(), limit=10)
    return hits[0].docs[0].text


FILLER = [
    "the weather was grey all morning here",
    "lunch was soup and bread again",
    "the train home was late tonight",
]


def test_a_message_of_a_day_that_talks_about_the_question_comes_first() -> None:
    """Two messages match alike; the one whose day is also about the question's topic
    (another message of that day matches it well) ranks first, even though the other one
    is newer (the tie-break)."""
    index = _index(
        [
            ("2024-03-01", 9, "we adopted a puppy, the puppy sleeps all day, a puppy"),
            ("2024-03-01", 10, "she chewed my shoes"),
            ("2024-03-01", 11, FILLER[0]),
            ("2024-03-02", 9, FILLER[1]),
            ("2024-03-02", 10, "she chewed my shoes"),
            ("2024-03-02", 11, FILLER[2]),
        ]
    )
    hits = rank(index, "who chewed the shoes of the puppy", exclude_ids=set(), limit=10)
    shoes = [h for h in hits if any(d.text == "she chewed my shoes" for d in h.docs)]
    assert next(h.docs[-1].ms for h in shoes) == _ms("2024-03-01", 10)


def test_a_day_record_that_matches_lifts_the_messages_of_its_day() -> None:
    """A day's record (its summary) is a key to its messages: of two messages that match a
    question alike, the one from the day whose record matches it comes first."""
    index = _index(
        [
            ("2024-03-01", 9, "we finally booked it"),
            ("2024-03-01", 10, FILLER[0]),
            ("2024-03-05", 9, "we finally booked it"),
            ("2024-03-05", 10, FILLER[1]),
        ],
        records=[("2024-03-01", "Ann planned a holiday in Lisbon and booked the flights")],
    )
    hits = rank(index, "when was the Lisbon holiday booked", exclude_ids=set(), limit=10)
    booked = [h.docs[0] for h in hits if h.docs[0].text == "we finally booked it"]
    assert booked[0].ms == _ms("2024-03-01", 9)


def test_a_day_retention_cut_into_keeps_its_record_a_whole_day_does_not() -> None:
    """Retention cuts the log at a time of day. The oldest day left lost its morning: its
    record is the only memory of what was said then, so it is recalled. A day whose messages
    are all still here is recalled by them, not by its record as well."""
    index = _index(
        [
            ("2024-03-02", 14, "the weather was grey, the cat slept"),  # 9:00 and 11:00 are gone
            ("2024-03-03", 9, "the vet said the cat is fine"),
            ("2024-03-03", 10, FILLER[1]),
        ]
    )
    cut = "Ann: our cat is called Miso. the cat slept"
    add_day_record(index, DaySummary(day="2024-03-02", summary=cut, messages=3))
    whole = "Ann: the vet said the cat is fine"
    add_day_record(index, DaySummary(day="2024-03-03", summary=whole, messages=2))
    hits = rank(index, "what is the cat called", exclude_ids=set(), limit=10)
    recalled = [doc.text for hit in hits for doc in hit.docs if doc.kind == "day"]
    assert any("Miso" in text for text in recalled), recalled
    assert not any(whole in text for text in recalled), recalled


def test_a_record_using_the_question_s_own_word_form_comes_first() -> None:
    """A day record has no meaning to tell the senses of a stem apart: "training" and "the
    train" are one stem. Of records that match alike, the one saying "training", as the
    question does, comes first, even against records that say "train" twice."""
    grey = "the weather was grey"
    index = _index(
        [(f"2024-03-{day}", 10, FILLER[day % 2]) for day in range(20, 28)],
        records=[
            ("2024-03-01", f"the train was late. Ann: the train was late. Dev: {grey}"),
            ("2024-03-02", f"{grey}. Ann: I'm training for my pilot licence. Dev: {grey}"),
            ("2024-03-03", "the train was late. Ann: the train was late again. Dev: lunch"),
        ],
    )
    assert "pilot licence" in _first(index, "What is Ann training for?")


def test_a_hit_brings_the_turns_it_needs_and_not_those_it_does_not() -> None:
    """A short answer comes with its question, a question with its answer, a statement with
    a bare "yes!" after it; a long answer stands alone (not the question before it, nor the
    reaction after it): they would take another hit's room."""
    index = _index(
        [
            ("2024-03-01", 9, "Did you go anywhere this spring?"),
            ("2024-03-01", 9, "We went to Lisbon in May, loved the tiled streets and pastries"),
            ("2024-03-01", 9, "wow, congrats, sounds amazing"),
            ("2024-03-02", 9, "Where is the retreat this year?"),
            ("2024-03-02", 9, "Porto!"),
            ("2024-03-03", 9, "Shall we book the sailing boat in Cascais then"),
            ("2024-03-03", 9, "Yes!"),
            ("2024-03-04", 9, "Have you tried the fado bar?"),
            ("2024-03-04", 9, "Not yet, it was closed on Monday"),
            *[(f"2024-03-{day}", 10, FILLER[day % 3]) for day in range(10, 20)],
        ]
    )

    def group(query: str) -> list[str]:
        return [doc.text for doc in rank(index, query, exclude_ids=set(), limit=1)[0].docs]

    assert group("the tiled streets and pastries of Lisbon") == [
        "We went to Lisbon in May, loved the tiled streets and pastries"
    ]
    assert group("Porto") == ["Where is the retreat this year?", "Porto!"]
    assert group("the sailing boat in Cascais") == [
        "Shall we book the sailing boat in Cascais then",
        "Yes!",
    ]
    assert group("the fado bar") == [
        "Have you tried the fado bar?",
        "Not yet, it was closed on Monday",
    ]


def test_a_question_naming_a_month_prefers_that_month() -> None:
    """'in June 2022' prefers June 2022's messages (and is not read as the 20th)."""
    index = _index(
        [
            ("2022-06-14", 9, "I ran a charity race for the shelter"),
            ("2022-06-29", 9, FILLER[0]),
            ("2022-06-30", 9, FILLER[1]),
            ("2022-08-02", 9, FILLER[2]),
            ("2022-08-03", 9, "I ran a charity race for the shelter"),
        ]
    )
    hits = rank(index, "What race did Ann run in June 2022?", exclude_ids=set(), limit=10)
    assert hits[0].docs[0].ms == _ms("2022-06-14", 9)
    assert query_months("in June 2022, and March, 2023") == {(2022, 6), (2023, 3)}
    assert query_months("on 13 June 2022 or June 13, 2022") == set()
    assert query_days("What is Nate organizing in June 2022?") == set()


def test_a_month_out_of_the_calendar_is_no_error() -> None:
    index = _index(
        [("2022-06-14", 9, "I ran a charity race for the shelter")]
        + [("2022-06-15", 9 + n, text) for n, text in enumerate(FILLER)]
    )
    assert rank(index, "the race in June 0000 or December 9999", exclude_ids=set(), limit=5)


def test_of_two_messages_as_close_in_meaning_the_one_that_says_more_comes_first() -> None:
    """Found by meaning alone, equally close: the longer message is the likelier answer
    (LENGTH_PRIOR; without it the newer, shorter one came first); a message the query is
    not close to stays out however long it is."""
    short = "me too, Lisbon"
    long = "we moved to Lisbon in May because my new job at the harbour office started then"
    unrelated = " ".join(["the weather was grey all morning and lunch was soup"] * 3)
    index = _index(
        [("2025-03-01", 9, long), ("2025-03-02", 9, short), ("2025-03-03", 9, unrelated)]
    )
    similarity = np.array([0.5, 0.5, 0.1], dtype=np.float32)
    hits = rank(
        index, "where does she live now", exclude_ids=set(), limit=10, similarity=similarity
    )
    assert [h.docs[0].text for h in hits] == [long, short]


def test_the_top_of_the_scores_is_what_a_full_stable_sort_starts_with() -> None:
    """Pseudo-relevance feedback reads the best few documents without sorting them all:
    the same documents, in the same order, ties included (scores with many ties), up to
    the first that scores nothing."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 50, 5_000):
        for _ in range(100):
            scores = rng.integers(-1, 4, n).astype(np.float32)
            expected = [i for i in np.argsort(-scores, kind="stable")[:3] if scores[i] > 0]
            assert _top(scores, 3).tolist() == expected


def test_membership_by_binary_search_agrees_with_numpy_isin() -> None:
    """_members (what a hit's share of the question's words is counted with) is np.isin for
    ascending postings: small and large, hits before, between and after them."""
    rng = np.random.default_rng(11)
    for size, span in [(1, 5), (3, 10), (40, 100), (5000, 100_000)]:
        postings = np.unique(rng.integers(0, span, size=size)).astype(np.int32)
        for _ in range(20):
            found = rng.choice(span + 50, size=min(200, span), replace=False).astype(np.int64)
            expected = np.isin(found, postings)
            assert np.array_equal(_members(found, postings), expected)


def test_a_small_index_s_shares_worked_out_ahead_are_the_hits_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each document's share of the question's words, worked out before the vector comes
    (a small index), is what counting it for the hits after gives, to the bit; and the hits
    of a small index are the same either way."""
    messages = [
        ("2025-03-0" + str(1 + n % 9), 8 + n % 10, text)
        for n, text in enumerate(
            [*FILLER, "the deploy moved to friday", "friday lunch deploy?", "deploy notes"] * 30
        )
    ]
    index = _index(sorted(messages), records=[("2025-03-02", "deploy plans and lunch")])
    query = "when is the deploy on friday, and lunch?"
    words = rank_words(index, query)
    assert words is not None and words.shares is not None
    every = np.arange(len(index.docs), dtype=np.int64)
    assert np.array_equal(words.shares, _shares(index, words.telling, every))
    assert words.shares.max() == 1.0 and words.shares.min() == 0.0
    ahead = rank(index, query, exclude_ids=set(), limit=20)
    monkeypatch.setattr(ranking, "SHARES_AHEAD_MAX", 0)  # (as a big index: counted after)
    assert rank_words(index, query).shares is None  # type: ignore[union-attr]
    after = rank(index, query, exclude_ids=set(), limit=20)
    assert ahead == after and any(hit.words for hit in ahead)
