from memory_core.facts import merge_ops, similarity
from memory_core.models import Fact
from memory_core.summarize import FactDraft


def test_same_fact_twice_is_kept_once() -> None:
    existing = [Fact(id="f1", kind="preference", text="Alice prefers tea", subject="Alice")]
    ops = merge_ops(
        existing,
        [FactDraft("preference", "alice prefers TEA", "Alice")],
        now_iso="2025-08-13T00:00:00+00:00",
        message_ids=["1-0"],
        facts_max=10,
    )
    assert ops == []


def test_contradiction_updates_and_keeps_history() -> None:
    existing = [Fact(id="f1", kind="preference", text="Alice prefers green tea", subject="Alice")]
    ops = merge_ops(
        existing,
        [FactDraft("preference", "Alice prefers green coffee", "Alice")],
        now_iso="2025-08-14T00:00:00+00:00",
        message_ids=["2-0"],
        facts_max=10,
    )
    assert len(ops) == 1 and ops[0][0] == "upd" and ops[0][1] == "f1"
    updated = Fact.from_json(ops[0][2])
    assert updated.text == "Alice prefers green coffee"
    assert updated.history == ["Alice prefers green tea"]


def test_new_facts_respect_the_cap() -> None:
    drafts = [FactDraft("decision", f"decision number {i} about topic {i * 7}") for i in range(5)]
    ops = merge_ops([], drafts, now_iso="x", message_ids=[], facts_max=3)
    assert [op[0] for op in ops] == ["new", "new", "new"]


def test_similarity_bounds() -> None:
    assert similarity("abc def", "abc def") == 1.0
    assert similarity("abc", "") == 0.0
