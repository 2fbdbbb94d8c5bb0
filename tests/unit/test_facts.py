from memory_core.calendar import from_ms
from memory_core.models import Fact, LogEntry
from memory_core.tiers.facts import merge_ops, provenance, similarity
from memory_core.tiers.summarize import FactDraft


def test_same_fact_twice_is_kept_once_and_counts_as_confirmed() -> None:
    existing = [Fact(id="f1", kind="preference", text="Alice prefers tea", subject="Alice")]
    ops = merge_ops(
        existing,
        [FactDraft("preference", "alice prefers TEA", "Alice", message_ids=("1-0",))],
        now_iso="2025-08-13T00:00:00+00:00",
        facts_max=10,
    )
    assert [op[:2] for op in ops] == [["upd", "f1"]]
    confirmed = Fact.from_json(ops[0][2])
    assert confirmed.text == "Alice prefers tea"
    assert confirmed.seen == "2025-08-13T00:00:00+00:00"
    assert confirmed.message_ids == ["1-0"]
    # Said again the same day: nothing to write.
    again = merge_ops(
        [confirmed],
        [FactDraft("preference", "Alice prefers tea", "Alice")],
        now_iso="2025-08-13T09:00:00+00:00",
        facts_max=10,
    )
    assert again == []


def test_contradiction_updates_and_keeps_history() -> None:
    existing = [Fact(id="f1", kind="preference", text="Alice prefers green tea", subject="Alice")]
    ops = merge_ops(
        existing,
        [FactDraft("preference", "Alice prefers green coffee", "Alice", message_ids=("2-0",))],
        now_iso="2025-08-14T00:00:00+00:00",
        facts_max=10,
    )
    assert len(ops) == 1 and ops[0][0] == "upd" and ops[0][1] == "f1"
    updated = Fact.from_json(ops[0][2])
    assert updated.text == "Alice prefers green coffee"
    assert updated.history == ["Alice prefers green tea"]
    assert updated.message_ids == ["2-0"]


def test_new_facts_respect_the_cap() -> None:
    drafts = [FactDraft("decision", f"decision number {i} about topic {i * 7}") for i in range(5)]
    ops = merge_ops([], drafts, now_iso="x", facts_max=3)
    assert [op[0] for op in ops] == ["new", "new", "new"]


def test_a_full_scope_evicts_the_least_recently_confirmed_unpinned_fact() -> None:
    existing = [
        Fact(
            id="f1", kind="note", text="the wiki moved to confluence", ts="2025-01-01", pinned=True
        ),
        Fact(id="f2", kind="decision", text="ship on fridays", ts="2025-01-02", seen="2025-03-01"),
        Fact(id="f3", kind="decision", text="standup at ten", ts="2025-02-01"),
    ]
    ops = merge_ops(
        existing,
        [FactDraft("decision", "retro every second thursday")],
        now_iso="2025-04-01T00:00:00+00:00",
        facts_max=3,
    )
    assert [op[:2] for op in ops] == [["del", "f3"], ["new", ""]]
    # Everything pinned: nothing is pushed out, the new fact waits.
    pinned = [Fact(id=f"f{i}", kind="note", text=f"note {i}", pinned=True) for i in range(3)]
    assert merge_ops(pinned, [FactDraft("note", "another")], now_iso="x", facts_max=3) == []


def _entry(n: int, author_id: str, text: str) -> LogEntry:
    return LogEntry(
        id=f"{n}-0",
        ts=from_ms(n),
        role="user",
        author=author_id,
        author_id=author_id,
        text=text,
        tokens=1,
    )


def test_provenance_is_the_subjects_messages_that_share_words_with_the_fact() -> None:
    chunk = [
        _entry(1, "u1", "I really like hojicha in the morning"),
        _entry(2, "u2", "hojicha is overrated"),
        _entry(3, "u1", "see you tomorrow"),
    ]
    assert provenance("Alice likes hojicha", "u1", chunk) == ("1-0",)
    # Nothing in common: all of the subject's messages.
    assert provenance("Alice is a designer", "u1", chunk) == ("1-0", "3-0")
    # No subject: anyone's messages that share words.
    assert provenance("hojicha divides the team", "", chunk) == ("1-0", "2-0")


def test_similarity_bounds() -> None:
    assert similarity("abc def", "abc def") == 1.0
    assert similarity("abc", "") == 0.0
