"""Summary helpers: log-to-text conversion, JSON parsing of model answers, fact drafts."""

from datetime import UTC, datetime

import pytest

from memory_core.errors import LLMBadOutput
from memory_core.llm.client import OfflineLLM
from memory_core.models import LogEntry
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.summarize import (
    Summarizer,
    _fact_drafts,
    parse_json_object,
    render_entries,
)


def test_log_to_text_conversion_has_time_speaker_and_text() -> None:
    ts = datetime(2025, 8, 13, 6, 30, tzinfo=UTC)
    entries = [
        LogEntry("1-0", ts, "user", "Alice", "a", "We ship Friday", 4),
        LogEntry("2-0", ts, "assistant", "memorybot", "bot", "Noted!", 2),
    ]
    text = render_entries(entries, "Asia/Tokyo")
    assert text.splitlines() == [
        "2025-08-13 15:30 Alice: We ship Friday",
        "2025-08-13 15:30 memorybot: Noted!",
    ]


@pytest.mark.parametrize(
    "answer",
    [
        '{"summary": "x"}',
        '```json\n{"summary": "x"}\n```',
        'Sure! Here it is: {"summary": "x"} Hope that helps.',
    ],
)
def test_parse_json_object_tolerates_wrapping(answer: str) -> None:
    assert parse_json_object(answer) == {"summary": "x"}


@pytest.mark.parametrize("answer", ["", "no json here", "{broken", "[1, 2]", '{"a": }'])
def test_parse_json_object_rejects_garbage(answer: str) -> None:
    with pytest.raises(LLMBadOutput):
        parse_json_object(answer)


def test_fact_drafts_drop_malformed_items() -> None:
    drafts = _fact_drafts(
        [
            {"kind": "preference", "subject": "Alice", "text": "prefers tea"},
            {"kind": "weird", "subject": None, "text": "becomes a note"},
            {"kind": "decision", "text": ""},
            "not a dict",
            {"text": 5},
        ]
    )
    assert [(d.kind, d.subject, d.text) for d in drafts] == [
        ("preference", "Alice", "prefers tea"),
        ("note", "", "becomes a note"),
    ]
    assert _fact_drafts("nope") == []


def test_an_over_long_answer_is_cut_after_a_whole_sentence_keeping_its_lines() -> None:
    summarizer = Summarizer(OfflineLLM(), TokenCounter())
    answer = "We ship on Friday.\nDr. Tanaka pays 3.5k for the venue. " + "Filler words here. " * 40
    fitted = summarizer.fit(answer, 20)
    assert fitted.startswith("We ship on Friday.\nDr. Tanaka pays 3.5k for the venue.")
    assert fitted.endswith("here.") and TokenCounter().count(fitted) <= 30
    assert summarizer.fit("  short enough.  ", 20) == "short enough."


async def test_the_extractive_stand_in_brings_the_facts_the_rules_find() -> None:
    """Offline, the summary is extractive and the plainly stated facts come with it, as
    drafts marked as the rules' with the messages that said them."""
    summarizer = Summarizer(OfflineLLM(), TokenCounter())
    ts = datetime(2025, 8, 13, 6, 30, tzinfo=UTC)
    entries = [
        LogEntry("1-0", ts, "user", "Alice", "a", "I'm vegetarian, just so you know", 6),
        LogEntry("2-0", ts, "user", "Bob", "b", "We decided to ship on Friday.", 6),
        LogEntry("3-0", ts, "user", "Carol", "c", "Bob said he is vegetarian", 6),
    ]
    outcome = await summarizer.compact(
        day="2025-08-13", previous="", entries=entries, tz="UTC", lang="en", max_tokens=200
    )
    assert outcome.degraded and outcome.summary
    assert [(d.kind, d.subject, d.text, d.message_ids, d.source) for d in outcome.facts] == [
        ("profile", "Alice", "Alice is vegetarian", ("1-0",), "rules"),
        ("decision", "", "Decided to ship on Friday", ("2-0",), "rules"),
    ]
