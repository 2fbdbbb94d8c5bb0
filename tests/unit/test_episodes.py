"""Episode records from a finished day's summary and the facts learned that day."""

from memory_core.models import DaySummary, Fact
from memory_core.tiers.episodes import episode


def make(summary: str, facts: list[Fact] | None = None) -> DaySummary:
    return episode("2025-08-13", summary, messages=9, degraded=True, facts=facts or [])


def test_topic_decisions_and_follow_ups_come_from_the_summary_sentences() -> None:
    record = make(
        "[2025-08-13] Alice: The offsite is in Kyoto. We decided to fly on Friday. "
        "Who books the hotel? ok\n[2025-08-13] Bob: 明日までに予約する予定。誰が払う？"
    )
    assert record.topic == "The offsite is in Kyoto."
    assert record.decisions == (
        "We decided to fly on Friday.",
        "[2025-08-13] Bob: 明日までに予約する予定。",
    )
    assert record.follow_ups == ("Who books the hotel?", "誰が払う？")
    assert (record.day, record.messages, record.degraded) == ("2025-08-13", 9, True)


def test_facts_learned_that_day_come_first_and_are_not_repeated() -> None:
    facts = [
        Fact("f1", "decision", "We decided to fly on Friday.", ts="2025-08-13T10:00:00+00:00"),
        Fact("f2", "question", "Who pays for dinner?", ts="2025-08-13T11:00:00+00:00"),
        Fact("f3", "decision", "An older decision.", ts="2025-08-12T11:00:00+00:00"),
    ]
    record = make("We decided to fly on Friday. Who books the hotel?", facts)
    assert record.decisions == ("We decided to fly on Friday.",)
    assert record.follow_ups == ("Who pays for dinner?", "Who books the hotel?")


def test_decimals_and_abbreviations_do_not_cut_the_topic() -> None:
    record = make("The budget rose to 3.5k after Dr. Tanaka joined. We will meet at 3 p.m. daily.")
    assert record.topic == "The budget rose to 3.5k after Dr. Tanaka joined."
    assert record.decisions == ("We will meet at 3 p.m. daily.",)


def test_an_empty_summary_has_no_topic() -> None:
    assert make("").topic == "" and make("ok").decisions == ()
