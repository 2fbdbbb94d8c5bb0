"""The LoCoMo harness's pure parts: dates, evidence ids, loading, metrics, BM25, the report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_core.errors import InputError
from memory_core.prompt.assembly import Prompt
from memorybot_bench.evaluation import LocomoReport, QuestionResult
from memorybot_bench.locomo_data import (
    ATTRIBUTION,
    TURN_GAP,
    Question,
    normalize_evidence,
    parse_locomo,
    parse_session_time,
)
from memorybot_bench.locomo_scoring import (
    BM25,
    Scored,
    answer_f1,
    answer_in,
    evidence_share,
    fill_turns,
    memory_text,
    token_f1,
    words,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:19 am on 4 January, 2024", datetime(2024, 1, 4, 0, 19, tzinfo=UTC)),
        ("12:05 pm on 1 June, 2023", datetime(2023, 6, 1, 12, 5, tzinfo=UTC)),
        ("10:04 am on 19 December, 2023", datetime(2023, 12, 19, 10, 4, tzinfo=UTC)),
        ("9:00 AM on 2 Sept, 2022", datetime(2022, 9, 2, 9, 0, tzinfo=UTC)),
        ("  7:31 pm on 21 January 2022 ", datetime(2022, 1, 21, 19, 31, tzinfo=UTC)),
    ],
)
def test_session_times_parse(text: str, expected: datetime) -> None:
    assert parse_session_time(text, "UTC") == expected


def test_session_times_are_wall_clock_in_the_timezone() -> None:
    when = parse_session_time("1:56 pm on 8 May, 2023", "Asia/Tokyo")
    assert when.utcoffset() == timedelta(hours=9)
    assert when.astimezone(UTC) == datetime(2023, 5, 8, 4, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    ["yesterday", "13:00 pm on 1 May, 2023", "1:60 pm on 1 May, 2023", "1:00 pm on 31 Feb, 2023"],
)
def test_bad_session_times_say_what_is_expected(text: str) -> None:
    with pytest.raises(InputError, match="session time"):
        parse_session_time(text, "UTC")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D:11:26", ["D11:26"]),
        ("D30:05", ["D30:5"]),
        (" d2 : 4 ", ["D2:4"]),
        ("D", []),
        ("", []),
    ],
)
def test_evidence_ids_are_normalised(raw: str, expected: list[str]) -> None:
    assert normalize_evidence(raw) == expected


def _sample(**overrides: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_2_date_time": "9:00 am on 2 March, 2024",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Second day."}],
            "session_1_date_time": "11:00 pm on 1 March, 2024",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hello  there."},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "Look at this.",
                    "blip_caption": "a photo of a cat",
                },
                {"speaker": "Ann", "dia_id": "D1:3", "text": "", "blip_caption": "a sunset"},
            ],
        },
        "qa": [
            {"question": "Q1?", "answer": 2022, "evidence": ["D1:1", "D:2:01"], "category": 2},
            {"question": "Q2?", "answer": "x", "evidence": ["D1:2; D9:9", "D"], "category": 1},
            {"question": "Q3?", "adversarial_answer": "y", "evidence": ["D1:1"], "category": 5},
            {"question": "Q4?", "answer": "z", "evidence": [], "category": 3},
        ],
    }
    sample.update(overrides)
    return sample


def test_loading_orders_sessions_times_turns_and_keeps_categories_one_to_four() -> None:
    (conv,) = parse_locomo([_sample()])
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1"]
    start = datetime(2024, 3, 1, 23, 0, tzinfo=UTC)
    assert [t.ts for t in conv.turns[:3]] == [start, start + TURN_GAP, start + 2 * TURN_GAP]
    assert conv.turns[3].ts == datetime(2024, 3, 2, 9, 0, tzinfo=UTC)
    assert conv.turns[0].text == conv.turns[0].stored == "Hello there."
    assert conv.turns[1].text == "Look at this."
    assert conv.turns[1].stored == "Look at this. [shares a photo: a photo of a cat]"
    assert conv.turns[2].stored == "[shares a photo: a sunset]"
    assert [q.text for q in conv.questions] == ["Q1?", "Q2?", "Q4?"]
    assert conv.questions[0].answer == "2022"
    assert conv.questions[0].evidence == ("D1:1", "D2:1")
    assert conv.questions[1].evidence == ("D1:2",)
    assert conv.dropped_evidence == 2  # D9:9 names no turn; "D" names nothing


def test_loading_limits_conversations_and_questions() -> None:
    convs = parse_locomo([_sample(), _sample(sample_id="s2")], questions_per_conversation=1)
    assert [len(c.questions) for c in convs] == [1, 1]
    assert [c.sample_id for c in parse_locomo([_sample(), _sample()], conversations=1)] == ["s1"]


def test_a_session_earlier_than_the_last_turn_does_not_move_time_backwards() -> None:
    sample = _sample()
    sample["conversation"]["session_2_date_time"] = "10:00 pm on 1 March, 2024"
    (conv,) = parse_locomo([sample])
    times = [t.ts for t in conv.turns]
    assert times == sorted(times) and len(set(times)) == len(times)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"not": "a list"}, "JSON list"),
        ([{"sample_id": "s", "conversation": [], "qa": []}], "must be an object"),
        ([_sample(conversation={"session_1": [{"dia_id": "D1:1", "text": "x"}]})], "date_time"),
        ([_sample(conversation={"speaker_a": "A"})], "no turns"),
    ],
)
def test_bad_files_are_input_errors(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_locomo(data)


def test_evidence_share_counts_whole_turns_with_whitespace_normalised() -> None:
    messages = ["[10:00] Ann: I adopted  a\ncat named Miso.", "[10:01] Ben: Nice!"]
    assert evidence_share(["I adopted a cat named Miso."], messages) == 1.0
    assert evidence_share(["I adopted a cat named Miso.", "Where is it?"], messages) == 0.5
    assert evidence_share(["I adopted a cat named Miso. Nice!"], messages) == 0.0  # one message
    assert evidence_share([], messages) is None


@pytest.mark.parametrize(
    ("answer", "found"),
    [("Miso", True), ("miso", True), ("a cat  named miso", True), ("Mis", False), ("2", False)],
)
def test_answer_in_prompt_is_case_insensitive_and_whole_words(answer: str, found: bool) -> None:
    assert answer_in(answer, ["In 2023 Ann adopted a cat named Miso."]) is found


def test_an_empty_answer_is_never_found() -> None:
    assert not answer_in("  ", ["anything"])


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("deep teal", "deep teal", 1.0),
        ("The cat.", "cat", 1.0),  # articles and punctuation do not count
        ("deep teal glaze", "deep teal", 0.8),  # precision 2/3, recall 1
        ("blue", "deep teal", 0.0),
        ("", "deep teal", 0.0),
    ],
)
def test_token_f1(prediction: str, gold: str, expected: float) -> None:
    assert token_f1(prediction, gold) == pytest.approx(expected)


def test_answer_f1_by_category() -> None:
    # Multi-hop: each gold part scores its best predicted part, then the mean.
    assert answer_f1("ladybugs", "soapy water, ladybugs", 1) == pytest.approx(0.5)
    assert answer_f1("ladybugs, soapy water", "soapy water, ladybugs", 1) == pytest.approx(1.0)
    # Open-domain: only the gold's first ';' part counts.
    assert answer_f1("likely yes", "Likely yes; she grows tomatoes", 3) == pytest.approx(1.0)
    assert answer_f1("7 May 2023", "7 May 2023", 2) == pytest.approx(1.0)


def test_bm25_ranks_rare_shared_terms_first_and_skips_unrelated_turns() -> None:
    docs = [words(t) for t in ["the cat sat", "the dog ran", "a cat and a dog", "sunny day"]]
    index = BM25(docs)
    ranked = index.rank(words("Where did the cat sit?"))
    assert ranked[0] == 0 and set(ranked) == {0, 1, 2}
    assert index.rank(words("weather")) == []
    assert BM25([words("same"), words("same")]).rank(["same"]) == [1, 0]  # ties: newer first


def test_filling_a_budget_contiguously_or_by_rank() -> None:
    costs = [10, 50, 10, 10]
    assert fill_turns([3, 2, 1, 0], costs, 30, contiguous=True) == [3, 2]
    assert fill_turns([3, 2, 1, 0], costs, 30, contiguous=False) == [3, 2, 0]


def test_memory_text_leaves_out_the_persona_and_the_question() -> None:
    prompt = Prompt(
        messages=[
            {
                "role": "system",
                "content": "You are a bot. Today is 2024-01-01.\n\n<memory>M</memory>",
            },
            {"role": "user", "content": "[10:00] Ann: hi"},
            {"role": "user", "content": "[10:05] Questioner: when?"},
        ],
        tokens=0,
        budget=500,
    )
    assert memory_text(prompt) == ["<memory>M</memory>", "[10:00] Ann: hi"]


def _result(
    category: int, recall: float | None, found: bool, tokens: int, sample_id: str = "s"
) -> QuestionResult:
    scored = Scored(recall=recall, answer_in_prompt=found, tokens=tokens)
    return QuestionResult(
        sample_id=sample_id,
        question=Question(text="q", answer="a", category=category, evidence=()),
        memory=scored,
        baselines={b: scored for b in ("recent", "bm25", "full_history")},
        sections={"window": tokens},
    )


def test_the_report_averages_per_question_and_per_category() -> None:
    results = [_result(1, 1.0, True, 100), _result(1, 0.0, False, 300), _result(4, None, True, 200)]
    results[0].f1 = 0.5
    results[1].f1 = 1.0
    report = LocomoReport(results, 1, 10, 500, 0, "test", answered=True)
    data = report.as_dict()
    assert data["questions"] == 3 and data["questions_with_evidence"] == 2
    assert data["evidence_recall"] == 0.5  # the question without evidence is left out
    assert data["answer_in_prompt"] == pytest.approx(2 / 3, abs=1e-4)
    assert (data["prompt_tokens_mean"], data["prompt_tokens_max"]) == (200.0, 300)
    assert data["by_category"]["1"]["questions"] == 2
    assert data["by_category"]["2"]["questions"] == 0
    assert data["by_category"]["2"]["evidence_recall"] is None
    assert data["baselines"]["bm25"]["by_category"]["4"]["answer_in_prompt"] == 1.0
    assert data["answer_f1"] == 0.75 and data["answer_f1_by_category"]["1"] == 0.75
    assert data["answer_f1_by_category"]["4"] is None
    assert data["prompt_sections_mean"] == {"window": 200.0}
    assert data["attribution"] == ATTRIBUTION and "CC BY-NC 4.0" in ATTRIBUTION
    assert "answer_f1" not in LocomoReport(results, 1, 10, 500, 0, "t", answered=False).as_dict()


def test_the_report_gives_each_conversation_s_recall_and_the_spread() -> None:
    results = [
        _result(1, 1.0, True, 100, "conv-a"),
        _result(4, 0.5, True, 100, "conv-a"),
        _result(1, 0.0, False, 100, "conv-b"),
        _result(2, None, False, 100, "conv-b"),
    ]
    data = LocomoReport(results, 2, 10, 500, 0, "test", answered=False).as_dict()
    a, b = data["by_conversation"]["conv-a"], data["by_conversation"]["conv-b"]
    assert list(data["by_conversation"]) == ["conv-a", "conv-b"]
    assert (a["questions"], a["evidence_recall"], b["questions"], b["evidence_recall"]) == (
        2,
        0.75,
        2,
        0.0,
    )
    assert a["by_category"] == {"1": 1.0, "2": None, "3": None, "4": 0.5}
    assert b["by_category"]["1"] == 0.0 and b["by_category"]["2"] is None
    assert a["bm25_evidence_recall"] == 0.75  # (the baselines score alike here)
    assert (data["conversation_recall_min"], data["conversation_recall_max"]) == (0.0, 0.75)
