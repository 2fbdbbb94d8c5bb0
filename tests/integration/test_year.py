"""``memorybot eval year``'s harness: a year-long transcript of our own, its planted facts
asked about once their raw messages expired, the prompts checked (a shorter year here)."""

from __future__ import annotations

from bots.bench.year import PLANTED, evaluate_year, transcript
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
    older than half a year lives only in its day's record by now: all of them reach the
    prompt (before day records counted as found both ways, 11 of those 13 did, 20 of 25 in
    all)."""
    core = await make_core(offline=True)  # (only for its settings: the run has its own store)
    # Recall by meaning on, as a fresh install has it (the tests' settings have it off).
    memory = core.settings.memory.model_copy(update={"recall_embedder": "local"})
    report = await evaluate_year(core.settings.model_copy(update={"memory": memory}))
    data = report.to_json()
    assert data["planted"] == len(PLANTED) and data["messages"] == 365 * 30
    assert sum(row["planted"] for row in data["by_age"]) == len(PLANTED)
    assert data["reached"] == len(PLANTED) - len(data["missed"])
    oldest = next(row for row in data["by_age"] if row["age_days"] == "181-366")
    assert oldest["reached"] == oldest["planted"] == 13, data["missed"]
    assert data["reached"] >= 23, data["missed"]
