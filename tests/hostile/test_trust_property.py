"""Privacy and forgetting under random interleavings: members talk in channels of random
visibility and in DMs, edit and delete messages, forget texts, themselves and whole
channels, while a model summarises and profiles everyone (a fact about each speaker made of
what they said). Afterwards no prompt holds text its place could not see, and nothing
forgotten is in any Redis value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, all_keys, key_values
from tests.hostile.strategies import MARK, profiling_model

CHANNELS = ("discord:1:10", "discord:1:11", "discord:1:12")
PEOPLE = {"7": "Ann", "8": "Ben", "9": "Ann"}  # two members share a display name
OPS = ("say", "say", "say", "edit", "delete", "forget_text", "forget_me", "forget_all")


@dataclass
class Said:
    scope: str
    person: str
    mark: str
    platform_id: str


def dm(person: str) -> str:
    return f"discord:dm:{person}"


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    public=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    plan=st.lists(
        st.tuples(
            st.sampled_from(OPS),
            st.integers(0, len(CHANNELS)),  # len(CHANNELS): the person's DM
            st.sampled_from(sorted(PEOPLE)),
            st.integers(0, 10_000),
        ),
        min_size=8,
        max_size=40,
    ),
)
async def test_no_prompt_holds_what_its_place_could_not_see_or_was_forgotten(
    make_core: CoreFactory,
    fake_llm: FakeOpenAI,
    public: tuple[bool, bool, bool],
    plan: list[tuple[str, int, str, int]],
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0},
    )
    await core.store.client.flushdb()
    fake_llm.responder = profiling_model  # type: ignore[assignment]
    visible = dict(zip(CHANNELS, public, strict=True))
    alive: list[Said] = []
    said_where: dict[str, str] = {}  # marker -> the scope it was said in
    forgotten: set[str] = set()
    admin = core.admin
    for n, (op, place, person, pick) in enumerate(plan):
        scope = dm(person) if place == len(CHANNELS) else CHANNELS[place]
        clock.advance(timedelta(minutes=7))
        mine = [s for s in alive if s.scope == scope]
        target = mine[pick % len(mine)] if mine else None
        mark = f"mk{n}x"
        if op == "say" or (target is None and op in ("edit", "delete", "forget_text")):
            said = Said(scope, person, mark, f"p{n}")
            await core.intake.accept(
                IncomingMessage(
                    scope=scope,
                    text=f"{mark} note about the project planning today " + "tea " * 8,
                    author=PEOPLE[person],
                    author_id=person,
                    platform_id=said.platform_id,
                    audience=Audience.SERVER if visible.get(scope) else Audience.PRIVATE,
                )
            )
            alive.append(said)
            said_where[mark] = scope
        elif op == "edit" and target is not None:
            changed = await admin.messages.edit_message(
                scope, target.platform_id, f"{mark} edited note about the planning " + "tea " * 8
            )
            assert changed
            forgotten.add(target.mark)
            said_where[mark] = scope
            target.mark = mark
        elif op == "delete" and target is not None:
            await admin.messages.forget_message(scope, target.platform_id)
            forgotten.add(target.mark)
            alive.remove(target)
        elif op == "forget_text" and target is not None:
            await admin.text.forget_text(scope, target.mark)
            forgotten.add(target.mark)
            alive.remove(target)
        elif op == "forget_me":
            await admin.person.forget_user(scope, user_id=person, name=PEOPLE[person])
            for gone in [s for s in mine if s.person == person]:
                forgotten.add(gone.mark)
                alive.remove(gone)
        elif op == "forget_all":
            await admin.place.forget_all(scope)
            for gone in mine:
                forgotten.add(gone.mark)
                alive.remove(gone)
    clock.advance(timedelta(days=2))  # every day closes: summaries, day records, tiers
    for scope in {*CHANNELS, *(dm(p) for p in PEOPLE)}:
        await core.maintenance.maintain(scope)

    values = [v for key in await all_keys(core) for v in await key_values(core, key)]
    left = {m for v in values for m in MARK.findall(v)}
    assert not left & forgotten, f"forgotten but still stored: {sorted(left & forgotten)}"
    for scope in {*CHANNELS, *(dm(p) for p in PEOPLE)}:
        for person in PEOPLE:
            if scope.startswith("discord:dm:") and scope != dm(person):
                continue  # only its user talks in a DM
            prompt = await core.replier.build_prompt(
                IncomingMessage(scope=scope, text="what do you know?", author="x", author_id=person)
            )
            for mark in MARK.findall(json.dumps(prompt.messages)):
                where = said_where[mark]
                assert mark not in forgotten, f"{scope} prompt holds forgotten {mark}"
                assert where == scope or visible.get(where, False), (
                    f"{scope} prompt for {person} holds {mark}, said in private {where}"
                )
