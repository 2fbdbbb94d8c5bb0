"""Forgetting is the store's promise: a forget of each kind lands between any two of a
writer's round trips to Redis, and afterwards nothing it forgot is in any key, any prompt or
any export, whichever way in wrote it.

The writers: learning a channel's past (read, staged, stored, summarised), loading an export,
messages held while the store was away and stored late, images' captions (the model asked,
the message's text rewritten), maintenance (compaction, the day's rollover, the tiers made
from the days). A new way into memory joins :data:`WRITERS` to be
allowed in. The forgets: a text, a person here, a person everywhere in the server (with their
DM), a platform delete of one message, a whole channel.

How a forget lands "between two round trips": the store's client is wrapped so that the
writer's n-th command (n drawn by Hypothesis) first waits for the whole forget to run.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience
from memory_core.service.exports import EXPORT_FORMAT, EXPORT_VERSION
from memory_core.service.past import LearnRefused, PastMessage
from tests.captions_data import VISION, Image
from tests.helpers import START, CoreFactory, ListSource, all_keys, key_values

CHANNEL = "discord:1:2"
THREAD = "discord:1:2:30"
OTHER = "discord:1:4"  # another channel of the server: only "everywhere" reaches it
DM = "discord:dm:U1"  # Alice's DM with the bot
NOW = START + timedelta(days=30)
NEEDLE = "zebrafalcon"
DELETED = "del-7"  # the platform id a delete forgets
MARK = re.compile(r"mk\d+[a-z]x")
WRITER = contextvars.ContextVar("writer", default=False)


@dataclass
class Said:
    mark: str
    scope: str
    author_id: str
    platform_id: str
    text: str


@dataclass
class World:
    """What was said, in the past (a learn or an export holds it) and in memory before."""

    past: list[Said] = field(default_factory=list)  # the channel's and thread's history

    def message(self, said: Said, ts_offset_h: int) -> PastMessage:
        return PastMessage(
            scope=said.scope,
            platform_id=said.platform_id,
            ts=NOW - timedelta(days=10, hours=-ts_offset_h),
            text=said.text,
            author={"U1": "Alice", "U2": "Bob"}[said.author_id],
            author_id=said.author_id,
            audience=Audience.SERVER,
        )


def build_world() -> World:
    world = World()
    n = 0
    for scope in (CHANNEL, CHANNEL, THREAD):
        for author in ("U1", "U2", "U1"):
            n += 1
            kind = "a" if author == "U1" else "b"
            needle = f" the {NEEDLE} plan" if n % 3 == 0 else ""
            pid = DELETED if n == 7 else f"p{n}"
            text = f"mk{n}{kind}x talks about the garden project{needle} and the tea"
            world.past.append(Said(f"mk{n}{kind}x", scope, author, pid, text))
    return world


# -- the forgets, and what each takes ---------------------------------------------------
def gone_by(kind: str, said: Said) -> bool:
    if kind == "text":
        return NEEDLE in said.text
    if kind in ("me", "everywhere"):
        return said.author_id == "U1"
    if kind == "delete":
        return said.platform_id == DELETED
    return True  # "all": the channel with its threads


async def forget(core: Core, kind: str) -> None:
    admin = core.admin
    if kind == "text":
        await admin.text.forget_text(CHANNEL, NEEDLE)
    elif kind == "me":
        await admin.person.forget_user(CHANNEL, user_id="U1", name="Alice")
    elif kind == "everywhere":
        await admin.person.forget_user_everywhere(CHANNEL, user_id="U1", name="Alice")
    elif kind == "delete":
        await admin.messages.forget_message(THREAD, DELETED)  # (said in the thread)
    else:
        await admin.place.forget_all(CHANNEL)


# -- the writers --------------------------------------------------------------------------
async def learn(core: Core, world: World) -> None:
    messages = [world.message(s, i) for i, s in enumerate(world.past)]
    try:
        await core.learner.read(ListSource(CHANNEL, messages, page=3), days=20)
        await core.learner.store_read(CHANNEL)
    except LearnRefused:
        pass  # a forget dropped what it had read: nothing to store


async def import_export(core: Core, world: World) -> None:
    await core.admin.import_(CHANNEL, world_export(world))


def late(world: World, i: int, said: Said, **extra: Any) -> IncomingMessage:
    """A message of the past arriving now, with its own time (held while the store was
    away, or an image's message stored before its caption)."""
    past = world.message(said, i)
    return IncomingMessage(
        scope=said.scope,
        text=said.text,
        author=past.author,
        author_id=said.author_id,
        ts=past.ts,
        platform_id=said.platform_id,
        audience=Audience.SERVER,
        **extra,
    )


async def held(core: Core, world: World) -> None:
    """Messages held while the store was away, stored late with their own times."""
    for i, said in enumerate(world.past):
        await core.intake.accept(late(world, i, said), hold=False)


async def captioned(core: Core, world: World) -> None:
    """Messages with an image, each captioned by the vision model as it is stored (a core
    without background work captions at once): the caption rewrites the message's text."""
    for i, said in enumerate(world.past):
        image = late(world, i, said, attachments=(Image().attachment(),))
        await core.intake.accept(image, hold=False)


async def maintenance(core: Core, world: World) -> None:
    for scope in (THREAD, CHANNEL):
        await core.maintenance.maintain(scope)


Writer = Callable[[Core, World], Awaitable[None]]
# Every way into memory, with what it needs in memory before it runs ("" nothing) and
# whether it needs the model (the fake one: a vision model for captions).
WRITERS: dict[str, tuple[Writer, str, bool]] = {
    "learn": (learn, "", False),
    "import": (import_export, "", False),
    "held": (held, "", False),
    "caption": (captioned, "", True),
    "maintenance": (maintenance, "stored", False),
}


def world_export(world: World) -> dict[str, Any]:
    """A memorybot export of the channel holding the past (as it was taken before the
    forgets), with a summary that repeats each message."""
    log = [
        {
            "id": f"{1754900000000 + i}-0",
            "ts": world.message(s, i).ts.isoformat(),
            "role": "user",
            "author": world.message(s, i).author,
            "author_id": s.author_id,
            "text": s.text,
            "tokens": 12,
            "platform_id": s.platform_id,
        }
        for i, s in enumerate(world.past)
        if s.scope == CHANNEL
    ]
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "scope": CHANNEL,
        "exported_at": NOW.isoformat(),
        "state": {"mid": " ".join(f"{s.text}." for s in world.past if s.scope == CHANNEL)},
        "log": log,
        "days": [],
        "episodes": [],
        "weeks": [],
        "facts": [],
        "done": [],
    }


class Gate:
    """Runs ``action`` before the writer's ``at``-th command to the store."""

    def __init__(self, at: int, action: Callable[[], Awaitable[None]]) -> None:
        self.at, self.action, self.calls, self.fired = at, action, 0, False

    async def point(self) -> None:
        if not WRITER.get() or self.fired:
            return
        self.calls += 1
        if self.calls >= self.at:
            self.fired = True
            token = WRITER.set(False)
            try:
                await self.action()
            finally:
                WRITER.reset(token)

    def wrap(self, client: Any) -> None:
        command = client.execute_command
        make_pipeline = client.pipeline

        async def execute_command(*args: Any, **kwargs: Any) -> Any:
            await self.point()
            return await command(*args, **kwargs)

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = make_pipeline(*args, **kwargs)
            run = pipe.execute

            async def execute(*a: Any, **k: Any) -> Any:
                await self.point()
                return await run(*a, **k)

            pipe.execute = execute
            return pipe

        client.execute_command = execute_command
        client.pipeline = pipeline


async def prepare(core: Core, world: World, needs: str, clock: ManualClock) -> None:
    """What is in memory before the writer runs: Bob in another channel, Alice in her DM
    and in another channel; for maintenance, the past stored live as it was said."""
    others = ((OTHER, "U1", "mk90ax"), (OTHER, "U2", "mk91bx"), (DM, "U1", "mk92ax"))
    for scope, author, mark in others:
        await core.intake.accept(
            IncomingMessage(
                scope=scope,
                text=f"{mark} likes the garden project and the tea",
                author="Alice" if author == "U1" else "Bob",
                author_id=author,
                ts=NOW - timedelta(days=12),
                platform_id=f"o{mark[2:4]}",
                audience=Audience.DM if scope == DM else Audience.SERVER,
            )
        )
    if needs == "stored":
        await held(core, world)
        clock.set(NOW + timedelta(days=1))  # the days since close in maintenance


def forgotten_marks(kind: str, world: World) -> set[str]:
    marks = {s.mark for s in world.past if gone_by(kind, s)}
    if kind == "everywhere":
        marks |= {"mk90ax", "mk92ax"}
    return marks


@pytest.mark.parametrize("writer", sorted(WRITERS))
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(("text", "me", "everywhere", "delete", "all")),
    at=st.integers(1, 160),
)
async def test_nothing_forgotten_comes_back_by_any_writer(
    make_core: CoreFactory, writer: str, kind: str, at: int
) -> None:
    clock = ManualClock(NOW)
    write, needs, online = WRITERS[writer]
    core = await make_core(
        clock=clock,
        offline=not online,
        llm=VISION if online else None,
        memory={"compact_trigger_tokens": 100, "compact_min_messages": 2, "compact_keep_tokens": 0},
    )
    await core.store.client.flushdb()
    core.repo.lane = None  # every command through the client the gate wraps
    world = build_world()
    await prepare(core, world, needs, clock)

    gate = Gate(at, lambda: forget(core, kind))
    gate.wrap(core.store.client)
    token = WRITER.set(True)
    try:
        await write(core, world)
    finally:
        WRITER.reset(token)
    if not gate.fired:  # the writer made fewer calls: the forget comes after it
        await forget(core, kind)
    gone = forgotten_marks(kind, world)

    # Later work on what is left brings nothing back either.
    clock.advance(timedelta(days=2))
    for scope in (THREAD, CHANNEL, OTHER, DM):
        await core.maintenance.maintain(scope)
    values = [v for key in await all_keys(core) for v in await key_values(core, key)]
    left = {m for v in values for m in MARK.findall(v)}
    assert not left & gone, f"{writer}, forget {kind} at {at}: still stored {sorted(left & gone)}"
    for scope in (CHANNEL, THREAD, OTHER, DM):
        prompt = await core.replier.build_prompt(
            IncomingMessage(scope=scope, text="what about the garden?", author="x", author_id="U1")
        )
        shown = set(MARK.findall(json.dumps(prompt.messages))) & gone
        assert not shown, f"{writer}, forget {kind} at {at}: {scope} prompt holds {shown}"
        exported = set(MARK.findall(json.dumps(await core.admin.export(scope)))) & gone
        assert not exported, f"{writer}, forget {kind} at {at}: {scope} export holds {exported}"
