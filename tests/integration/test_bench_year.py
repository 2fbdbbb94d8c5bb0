"""``memorybot eval year``'s harness: a year-long transcript of our own, its planted facts
asked about once their raw messages expired, the prompts checked (a shorter year here)."""

from __future__ import annotations

from memorybot_bench.year import PLANTED, evaluate_year, transcript
from tests.helpers import CoreFactory


def test_the_transcript_plants_each_fact_once_on_its_day() -> None:
    lines = transcript(365, 30)
    assert len(lines) == 365 * 30
    for fact in PLANTED:
        said = [(when, who) for when, who, text in lines if text == fact.said]
        assert len(said) == 1 and said[0][1] == fact.speaker
        assert (said[0][0] - lines[0][0]).days == fact.day
    # The answers are said nowhere else: a prompt holding one holds its fact.
    for fact in PLANTED:
        others = [t for _, _, t in lines if fact.answer.lower() in t.lower() and t != fact.said]
        assert others == [] or fact.answer == "Lisbon", (fact.answer, others[:2])


async def test_a_year_s_old_facts_reach_the_prompt(make_core: CoreFactory) -> None:
    """The README's year (365 days, 30 lines a day, raw messages kept 30 days). Every fact
    older than a month lives only in its day's record by now, and one was said the morning
    of the day retention is cutting: all of them reach the prompt, whatever their age (20 of
    25 before day records counted as found both ways, 23 before the record of a day
    retention cut into was recalled and before a record's own word form ("training", not
    "the train") counted)."""
    core = await make_core(offline=True)  # (only for its settings: the run has its own store)
    # Recall by meaning on, as a fresh install has it (the tests' settings have it off).
    memory = core.settings.memory.model_copy(update={"recall_embedder": "local"})
    report = await evaluate_year(core.settings.model_copy(update={"memory": memory}))
    data = report.to_json()
    assert data["planted"] == len(PLANTED) and data["messages"] == 365 * 30
    assert [row["age_days"] for row in data["by_age"]] == ["0-30", "31-90", "91-180", "181-366"]
    assert [row["planted"] for row in data["by_age"]] == [2, 4, 6, 13]
    assert data["missed"] == []
    assert [row["reached"] for row in data["by_age"]] == [2, 4, 6, 13]
    assert data["reached"] == len(PLANTED)
