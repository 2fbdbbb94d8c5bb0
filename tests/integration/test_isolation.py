"""One scope's text never reaches another scope's prompt, export or /memory show."""

from __future__ import annotations

import json
import random
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory

SCOPES = [
    "discord:1:10",
    "discord:1:11",
    "discord:2:10",
    "discord:dm:7",
    "slack:T1:C1",
    "slack:T2:C1",
    "console:a",
]


def marker(scope: str, i: int) -> str:
    return f"zq{abs(hash(scope)) % 10**8}x{i}"


async def _check(core, scopes_used: set[str]) -> None:  # type: ignore[no-untyped-def]
    for scope in scopes_used:
        prompt = await core.replier.build_prompt(
            IncomingMessage(scope=scope, text="recap please", author="Q")
        )
        export = json.dumps(await core.admin.export(scope), ensure_ascii=False)
        view = await core.admin.show(scope)
        shown = json.dumps(
            [
                view.state.short,
                view.state.mid,
                view.state.overview,
                [d.summary for d in view.days],
                [e.text for e in view.recent],
                [f.text for f in view.facts],
            ],
            ensure_ascii=False,
        )
        everything = json.dumps(prompt.messages, ensure_ascii=False) + export + shown
        for other in scopes_used - {scope}:
            assert marker(other, 0)[:12] not in everything, (scope, other)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    plan=st.lists(st.tuples(st.sampled_from(SCOPES), st.integers(0, 3)), min_size=5, max_size=60),
    seed=st.integers(0, 1000),
)
async def test_random_interleavings_never_mix_scopes(
    make_core: CoreFactory, fake_llm: FakeOpenAI, plan: list[tuple[str, int]], seed: int
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={
            "compact_trigger_tokens": 120,
            "compact_min_messages": 3,
            "compact_keep_tokens": 20,
        },
    )
    await core.store.client.flushdb()
    rng = random.Random(seed)
    used: set[str] = set()
    for scope, hop in plan:
        clock.advance(timedelta(hours=hop * 7, minutes=rng.randint(1, 50)))
        text = f"{marker(scope, 0)} said {' '.join(rng.choice('abcdefg') * 3 for _ in range(12))}"
        await core.intake.accept(IncomingMessage(scope=scope, text=text, author="P"))
        used.add(scope)
    clock.advance(timedelta(days=2))
    for scope in used:
        await core.maintenance.maintain(scope)
    await _check(core, used)


async def test_threads_read_only_their_own_guilds_parent(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await core.admin.edit_tier("discord:1:10", "overview", "guild one channel secret plan")
    await core.admin.edit_tier("discord:2:10", "overview", "guild two channel other plan")
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="discord:1:10:99", text="?", author="Q")
    )
    system = prompt.messages[0]["content"]
    assert "guild one channel secret plan" in system
    assert "guild two" not in system
