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


async def test_a_short_year_s_facts_are_measured_by_age(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)  # (only for its settings: the run has its own store)
    report = await evaluate_year(core.settings, days=120, per_day=10, retention_days=20)
    data = report.to_json()
    planted = [p for p in PLANTED if p.day < 120]
    assert data["planted"] == len(planted) and data["messages"] == 1200
    assert sum(row["planted"] for row in data["by_age"]) == len(planted)
    assert data["reached"] == len(planted) - len(data["missed"])
    # Raw messages live 20 days here: the oldest facts reach the prompt from day records.
    assert data["reached"] >= len(planted) - 2, data["missed"]
