"""An export file is user input: whatever edit is made to a valid export, ``memory import``
either imports it (and the scope then works: a message is stored, a prompt is built, no
other guild is reachable) or raises an InputError that names what to fix, having written
nothing. Nothing else escapes."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.errors import InputError
from memory_core.models import IncomingMessage
from tests.helpers import START, CoreFactory, conversation, feed, forgotten, scope_values
from tests.hostile.strategies import NASTY, hostile_text

SOURCE = "discord:1:2"
THREAD = "discord:1:2:5"
TARGET = "discord:1:9"
OTHER = "discord:200:1"
SECRET = "quartz-heron-200"
MAX_ERROR = 400

Path = tuple[str | int, ...]

# Values that are almost right somewhere in an export: other guilds' scopes, stream ids,
# times, days, zones, counters in every spelling.
NEAR_MISSES: tuple[Any, ...] = (
    "discord:200:1",
    "discord:1:2",
    "discord:dm:7",
    "slack:T1:C1",
    "console:team",
    TARGET,
    "1-0",
    "0-0",
    "1755600000000-0",
    "99999999999999-0",
    "18446744073709551616-0",
    "2025-08-13T15:30:00+09:00",
    "2025-08-13T15:30:00",
    "9999-12-31T23:59:59+23:59",
    "1969-12-31T23:59:59+00:00",
    "2025-08-13",
    "2025-02-30",
    "Asia/Tokyo",
    "Asia",
    "../../etc/passwd",
    "user",
    "assistant",
    "note",
    "mention",
    "ja",
    "day:2025-08-13",
    "0",
    "1",
    "-1",
    "9" * 30,
    2**63,
    -(2**63),
    2**53 + 1,
)
# Stands for 3 MB of text, put in when the edit is made (hypothesis prints every example
# it reports: a mark keeps that short).
HUGE_MARK = "<3 MB of text>"
HUGE = "z" * 3_000_000

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | hostile_text(max_size=30)
    | st.sampled_from(NEAR_MISSES)
    | st.sampled_from([n for n in NASTY if len(n) <= 300])
    | st.just(HUGE_MARK),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


class Base:
    """The core and a valid export of it. Hypothesis prints the fixture with a failing
    example: its repr is kept short."""

    def __init__(self, core: Core, export: dict[str, Any]) -> None:
        self.core = core
        self.export = export

    def __repr__(self) -> str:
        return f"Base(export of {len(self.export['log'])} messages)"


def every_path(node: Any, path: Path = ()) -> list[Path]:
    """Every place in the export an edit can land: each object field and list item."""
    found: list[Path] = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += every_path(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += every_path(value, (*path, index))
    return found


@pytest.fixture
async def base(make_core: CoreFactory) -> Base:
    """A real export (days, weeks, facts, a pinned note), kept small so each example is
    quick."""
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await feed(core, clock, SOURCE, conversation(START, days=8, per_day=4))
    await core.admin.remember(SOURCE, "standup is at 10", by="Ada")
    await core.intake.accept(IncomingMessage(scope=THREAD, text="in the thread", author="Ada"))
    # Another guild's memory, which an edited export naming that guild must never reach.
    await core.intake.accept(IncomingMessage(scope=OTHER, text=f"planned: {SECRET}", author="Eve"))
    clock.set(clock.now() + timedelta(minutes=1))
    export = json.loads(json.dumps(await core.admin.export(SOURCE)))
    assert export["days"] and export["facts"] and export["done"], "a rich export"
    return Base(core=core, export=export)


def edit(data: Any, path: Path, action: str, value: Any) -> Any:
    """``data`` with one edit at ``path``: the value replaced, the field or item removed,
    an unknown field added, or a list item repeated."""
    if value == HUGE_MARK:
        value = HUGE
    if not path:
        return value if action == "replace" else data
    parent: Any = data
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "repeat" and isinstance(parent, list):
        parent.insert(int(last), copy.deepcopy(parent[last]))
    elif action == "add" and isinstance(parent[last], dict):
        parent[last][str(value)[:20]] = value
    return data


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    edits=st.lists(
        st.tuples(
            # Where: a part of the export (so the state and facts are hit as often as the
            # long log), then any place inside it.
            st.sampled_from(
                (None, "state", "state", "log", "days", "episodes", "weeks", "facts", "done")
            ),
            st.integers(min_value=0),
            st.sampled_from(("replace", "replace", "delete", "repeat", "add")),
            json_values,
        ),
        min_size=1,
        max_size=3,
    )
)
async def test_any_edit_of_an_export_imports_or_is_refused_clearly(
    base: Base, edits: list[tuple[str | None, int, str, Any]]
) -> None:
    core = base.core
    await core.repo.writes.forget_scope(TARGET)
    data: Any = copy.deepcopy(base.export)
    for part, pick, action, value in edits:
        if part is not None and isinstance(data, dict) and part in data:
            paths = every_path(data[part], (part,))
        else:
            paths = every_path(data)
        data = edit(data, paths[pick % len(paths)], action, value)
    try:
        count = await core.admin.import_(TARGET, data)
    except InputError as exc:
        message = str(exc)
        assert message.strip() and len(message) <= MAX_ERROR, message[:500]
        message.encode("utf-8")  # printable: no lone surrogate from the file is echoed
        left = await scope_values(core, TARGET)  # nothing, or the last example's forget epoch
        assert left == [] or await forgotten(core, TARGET), "nothing written for a refused import"
        return
    assert count == await core.repo.reads.log_length(TARGET)
    assert {f.origin for f in await core.repo.reads.facts(TARGET)} <= {"", TARGET}
    # The imported scope works as any other: it takes a message and builds a prompt.
    await core.intake.accept(IncomingMessage(scope=TARGET, text="after import", author="Ada"))
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope=TARGET, text="what is planned?", author="Ada")
    )
    # What another guild said is never reached. (The name "discord:200:1" itself may be in
    # the prompt: an edit can put it in as the text of a summary, which is only text.)
    assert SECRET not in json.dumps(prompt.messages)


async def test_the_unedited_export_imports(base: Base) -> None:
    """The baseline the property test edits is valid: it imports whole."""
    count = await base.core.admin.import_(TARGET, copy.deepcopy(base.export))
    assert count == len(base.export["log"])
