"""``execute`` runs every /memory command through one table of handlers, after the checks they
all share; ``render_show`` lays out ``/memory show`` by the section asked for. No server: the
admin is a stand-in that fails the test if a refused command reaches it."""

from __future__ import annotations

from datetime import datetime
from typing import cast, get_args

import pytest

from bots.acting import ANYWHERE_ACTIONS, Where
from bots.commands import HANDLERS, USAGE, Action, Actor, Command, execute, render_show
from config.prompts import load_prompts
from memory_core.errors import PermissionDenied, UsageError
from memory_core.models import DaySummary, Fact, LogEntry, ScopeState, WeekSummary
from memory_core.service.admin import MemoryAdmin, ScopeView
from memory_core.service.budget import SpendLine, SpendReport
from memory_core.service.learning import LearnProgress

SCOPE = "discord:1:2"
P = load_prompts("en")


class UnreachedAdmin:
    """Stands in for the admin where no command may reach it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the admin was reached: {name}")


NO_ADMIN = cast(MemoryAdmin, UnreachedAdmin())


def test_every_action_has_one_handler() -> None:
    assert set(HANDLERS) == set(get_args(Action))


@pytest.mark.parametrize("where", [Where.NOT_SERVED, Where.UNCHECKED])
@pytest.mark.parametrize("action", get_args(Action))
async def test_a_refused_command_reaches_no_handler(action: Action, where: Where) -> None:
    actor = Actor(user_id="1", name="Ada", is_admin=True, where=where)
    command = Command(action, arg="x", key="1")
    if action in ANYWHERE_ACTIONS:  # help: it touches no memory
        result = await execute(NO_ADMIN, scope=SCOPE, command=command, actor=actor)
        assert result.sections == [("", USAGE)]
    else:
        with pytest.raises(PermissionDenied):
            await execute(NO_ADMIN, scope=SCOPE, command=command, actor=actor)


async def test_an_action_without_a_handler_is_a_usage_error() -> None:
    actor = Actor(user_id="1", name="Ada", is_admin=True, where=Where.OWN_DM)
    command = Command("dance")  # type: ignore[arg-type]  # what a door might build by mistake
    with pytest.raises(UsageError, match="unknown /memory command 'dance'"):
        await execute(NO_ADMIN, scope=SCOPE, command=command, actor=actor)


def _fact(fact_id: str) -> Fact:
    return Fact(id=fact_id, kind="note", text=f"text of {fact_id}")


def _view(*, full: bool) -> ScopeView:
    when = datetime(2026, 1, 2, 9, 0)
    state = ScopeState(
        day="2026-01-02",
        short="today" if full else "",
        mid="this week" if full else "",
        long="long ago" if full else "",
        overview="overall" if full else "",
        paused=full,
        failures=2 if full else 0,
    )
    entry = LogEntry(
        id="1-0", ts=when, role="user", author="Ada", author_id="1", text="hi", tokens=1
    )
    return ScopeView(
        scope=SCOPE,
        state=state,
        days=[DaySummary(day="2026-01-01", summary="a day")] if full else [],
        weeks=[WeekSummary(week="2025-12-29", summary="a week")] if full else [],
        facts=[_fact("f1")] if full else [],
        recent=[entry] if full else [],
        messages=1 if full else 0,
        mode="all",
        timezone="UTC",
        language="auto",
        about_you=[_fact("f2")] if full else [],
        thread_facts=[(f"{SCOPE}:3", _fact("f3"))] if full else [],
        spend=SpendReport([SpendLine("scope", 10, 100, "00:00")]) if full else None,
        learn=LearnProgress(place=SCOPE, source="discord", status="read") if full else None,
    )


H, SAY = P.headings, P.say
SHORT, FACTS = SAY("heading_short_day", date="2026-01-02"), H["facts"]
RECENT, DAYS, WEEKS = SAY("heading_recent"), SAY("heading_days"), SAY("heading_weeks")
THREADS, ABOUT = SAY("heading_thread_facts"), SAY("heading_about_you")


@pytest.mark.parametrize(
    ("section", "headings"),
    [
        ("overview", ["", H["overview"], SHORT, RECENT, FACTS, THREADS, ABOUT]),
        ("tiers", ["", H["long"], H["mid"], H["overview"], SHORT, DAYS, WEEKS, RECENT]),
        ("facts", ["", FACTS, THREADS, ABOUT]),
        ("stats", ["", SAY("heading_stats"), SAY("heading_spend")]),
    ],
)
def test_show_lays_out_the_sections_asked_for(section: str, headings: list[str]) -> None:
    result = render_show(_view(full=True), section, P)
    assert [heading for heading, _ in result.sections] == headings
    settings = result.sections[0][1]
    assert SAY("paused") in settings
    if section == "stats":
        stats = result.sections[1][1]
        assert "summary failures in a row: 2" in stats and "discord" in stats


@pytest.mark.parametrize(
    ("section", "after_settings"),
    [
        ("overview", [("", SAY("no_memory"))]),
        ("tiers", [("", SAY("no_memory"))]),
        ("facts", [(FACTS, SAY("no_facts"))]),
    ],
)
def test_show_of_an_empty_place_says_so(
    section: str, after_settings: list[tuple[str, str]]
) -> None:
    assert render_show(_view(full=False), section, P).sections[1:] == after_settings
