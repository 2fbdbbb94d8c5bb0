"""Another place's memory in a prompt, read only (``IncomingMessage.also_reads``: Slack's
assistant panel, the channel the member views): which places the core accepts whatever the
door says, and how assembly shows one (its own section, within the budget, its facts not
taken for the asking place's)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from config.settings import MemorySettings
from memory_core.models import Fact, ScopeState
from memory_core.prompt.assembly import AlsoRead, AssemblyInput, PromptAssembler
from memory_core.service.replies import also_readable
from memory_core.text.tokens import TokenCounter

THREAD = "slack:T1:D1:1700000000.000100"  # an assistant thread, in the member's DM
NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("asking", "other", "read"),
    [
        (THREAD, "slack:T1:C1", "slack:T1:C1"),  # a channel of the workspace
        (THREAD, "slack:T1:G7", "slack:T1:G7"),  # a private one (the door checked)
        (THREAD, "slack:T1:C1:1700000000.000200", "slack:T1:C1:1700000000.000200"),
        (THREAD, "", None),
        (THREAD, "slack:T2:C1", None),  # another workspace: memory never crosses it
        (THREAD, "slack:T1:D2", None),  # someone's DM: what is said there stays there
        (THREAD, "slack:T1:D2:1700000000.000300", None),  # ... and its threads
        (THREAD, "slack:T1:user:U2", None),  # a person's facts
        (THREAD, "slack:T1:D1", None),  # the thread's own DM: read already
        (THREAD, THREAD, None),  # itself
        (THREAD, "discord:1:2", None),
        (THREAD, "console:team", None),
        (THREAD, "slack:T1:C1 junk", None),  # no scope at all
        ("console:team", "console:other", None),  # flat places have no server
        ("discord:1:2", "discord:1:3", "discord:1:3"),
        ("discord:1:2", "discord:dm:5", None),
    ],
)
def test_the_core_reads_only_a_channel_or_thread_of_the_same_server(
    asking: str, other: str, read: str | None
) -> None:
    assert also_readable(asking, other) == read


def assemble(also: AlsoRead | None, *, budget: int = 3000) -> tuple[str, list[Fact]]:
    data = AssemblyInput(
        scope=THREAD,
        state=ScopeState(day="2026-05-04"),
        facts=[Fact(id="f1", kind="note", text="my own note")],
        recent=[],
        new_author="Alice",
        new_text="what is going on here?",
        now=NOW,
        tz="UTC",
        language="en",
        bot_name="memorybot",
        also_read=also,
    )
    prompt = PromptAssembler(TokenCounter(), MemorySettings(budget_tokens=budget)).assemble(data)
    assert prompt.tokens <= budget
    return prompt.messages[0]["content"], list(prompt.used.facts)


def test_another_places_memory_has_a_section_of_its_own() -> None:
    viewed = AlsoRead(
        scope="slack:T1:C1",
        state=ScopeState(short="Today the team renamed the release to Osprey."),
        facts=[Fact(id="f1", kind="decision", text="Deploys happen on Thursdays")],
    )
    system, facts = assemble(viewed)
    section = system.split("## From the channel the person asking is looking at", 1)[1]
    assert "Osprey" in section
    assert "[decision] Deploys happen on Thursdays" in section
    # Its fact f1 is not the thread's f1: /memory why and forget fact name the thread's.
    assert [f.text for f in facts] == ["my own note"]


def test_no_place_no_section() -> None:
    system, _ = assemble(None)
    assert "looking at" not in system
    empty, _ = assemble(AlsoRead(scope="slack:T1:C1", state=ScopeState()))
    assert "looking at" not in empty


def test_another_places_memory_stays_within_the_budget() -> None:
    huge = AlsoRead(
        scope="slack:T1:C1",
        state=ScopeState(overview="the overview goes on and on " * 2000),
        facts=[Fact(id=f"f{i}", kind="note", text=f"note {i} " * 50) for i in range(200)],
    )
    system, _ = assemble(huge, budget=800)
    assert "looking at" in system
