"""The scope tree under random interleavings: members talk and pin notes about themselves
in channels of random audience (the whole workspace, some members, shared with another
organisation), in the channels' threads and in their DMs, across two workspaces, while a
model summarises and profiles everyone; they forget texts, themselves (here, and
everywhere) and whole channels with their threads. Afterwards no prompt holds text that was
forgotten or that its place could not see, and nothing forgotten is in any Redis value."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience, Scope
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, all_keys, key_values
from tests.hostile.strategies import profiling_model

CHANNELS = ("slack:T1:C10", "slack:T1:C11", "slack:T2:C10")
THREADS = tuple(f"{c}:1700000000.000100" for c in CHANNELS)
PEOPLE = {"U7": "Ann", "U8": "Ben"}
MARK = re.compile(r"mk\d+x")
OPS = (
    "say",
    "say",
    "say",
    "say",
    "pin",
    "forget_text",
    "forget_me",
    "forget_me_everywhere",
    "forget_all",
)
AUDIENCES = (Audience.SERVER, Audience.PRIVATE, Audience.SHARED)


def dm(person: str, channel: str) -> str:
    """The person's DM with the bot in the workspace of ``channel``."""
    return f"slack:{Scope.of(channel).server}:D{person}"


@dataclass
class Note:
    """A marker as it was said or pinned."""

    place: str  # where
    person: str  # by whom
    pinned_in: str = ""  # a note pinned about oneself: the scope holding it


def subtree(place: str) -> set[str]:
    s = Scope.of(place)
    if s.is_thread or s.is_dm:
        return {place}
    return {place, s.thread_scope("1700000000.000100").key}


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    audiences=st.tuples(*(st.sampled_from(AUDIENCES) for _ in CHANNELS)),
    plan=st.lists(
        st.tuples(
            st.sampled_from(OPS),
            st.integers(0, 2 * len(CHANNELS)),  # a channel, its thread, or the person's DM
            st.sampled_from(sorted(PEOPLE)),
            st.integers(0, 10_000),
        ),
        min_size=12,
        max_size=40,
    ),
)
async def test_no_prompt_in_the_tree_holds_what_its_place_could_not_see_or_was_forgotten(
    make_core: CoreFactory,
    fake_llm: FakeOpenAI,
    audiences: tuple[Audience, ...],
    plan: list[tuple[str, int, str, int]],
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0},
    )
    await core.store.client.flushdb()
    fake_llm.responder = profiling_model  # type: ignore[assignment]
    audience = dict(zip(CHANNELS, audiences, strict=True))

    def audience_of(place: str) -> Audience:
        s = Scope.of(place)
        return Audience.DM if s.is_dm else audience[s.root.key]

    notes: dict[str, Note] = {}  # marker -> where it was said or pinned
    alive: set[str] = set()
    forgotten: set[str] = set()
    admin = core.admin

    def forget(marks: set[str]) -> None:
        forgotten.update(marks & alive)
        alive.difference_update(marks)

    for n, (op, where, person, pick) in enumerate(plan):
        places = (*CHANNELS, *THREADS)
        scope = places[where] if where < len(places) else dm(person, CHANNELS[pick % 3])
        if op.startswith("forget") and pick % 3:  # mostly in a channel: its threads too
            scope = Scope.of(scope).root.key
        clock.advance(timedelta(minutes=7))
        mark = f"mk{n}x"
        reach = subtree(scope)
        server = Scope.of(scope).server_key
        if op == "say":
            await core.intake.accept(
                IncomingMessage(
                    scope=scope,
                    text=f"{mark} note about the project planning today " + "tea " * 8,
                    author=PEOPLE[person],
                    author_id=person,
                    audience=audience_of(scope),
                )
            )
            notes[mark] = Note(scope, person)
            alive.add(mark)
        elif op == "pin":
            fact = await admin.remember_me(scope, f"{mark} is me", user_id=person, name="x")
            holder = Scope.of(scope).person_scope(person) if fact.shared else None
            notes[mark] = Note(scope, person, holder.key if holder else scope)
            alive.add(mark)
        elif op == "forget_text":
            targets = sorted(m for m in alive if notes[m].place in reach)
            if targets:
                await admin.text.forget_text(scope, targets[pick % len(targets)])
                forget({targets[pick % len(targets)]})
        elif op in ("forget_me", "forget_me_everywhere"):
            everywhere = op == "forget_me_everywhere"
            if everywhere:
                await admin.person.forget_user_everywhere(
                    scope, user_id=person, name=PEOPLE[person]
                )
            else:
                await admin.person.forget_user(scope, user_id=person, name=PEOPLE[person])
            own = Scope.of(scope).person_scope(person)
            forget(
                {
                    m
                    for m, note in notes.items()
                    if note.person == person
                    and (
                        (everywhere and Scope.of(note.place).server_key == server)
                        or note.place in reach
                        or (own is not None and note.pinned_in == own.key)
                    )
                }
            )
        elif op == "forget_all":
            await admin.place.forget_all(scope)
            forget({m for m, note in notes.items() if note.place in reach})
    clock.advance(timedelta(days=2))  # every day closes: summaries, day records, tiers
    everything = {*CHANNELS, *THREADS, *(dm(p, c) for p in PEOPLE for c in CHANNELS)}
    for scope in everything:
        await core.maintenance.maintain(scope)

    values = [v for key in await all_keys(core) for v in await key_values(core, key)]
    left = {m for v in values for m in MARK.findall(v)}
    assert not left & forgotten, f"forgotten but still stored: {sorted(left & forgotten)}"
    for scope in sorted(everything):
        place = Scope.of(scope)
        for person in PEOPLE:
            if place.is_dm and scope != dm(person, scope):
                continue  # only its user talks in a DM
            prompt = await core.replier.build_prompt(
                IncomingMessage(
                    scope=scope,
                    text="what do you know?",
                    author="x",
                    author_id=person,
                    audience=audience_of(scope),
                )
            )
            for mark in MARK.findall(json.dumps(prompt.messages)):
                assert mark not in forgotten, f"{scope} prompt holds forgotten {mark}"
                note = notes[mark]
                said = Scope.of(note.place)
                travels = (
                    note.person == person
                    and said.same_boundary(place)
                    and audience_of(scope).lets_facts_in
                    and (
                        audience_of(note.place) is Audience.SERVER
                        or note.pinned_in == f"slack:{said.server}:user:{person}"
                    )
                )
                assert note.place == scope or said == place.parent or travels, (
                    f"{scope} prompt for {person} holds {mark} from {note}"
                )
