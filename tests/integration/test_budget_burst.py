"""Budgets that hold under bursts: a reply's tokens are held against the limits in the
step that checks them, so concurrent questions see each other (also on a Redis Cluster,
where the channel's and the server's holds are on two tags); a failed call gives its hold
back; a hold a dead process left lapses by itself."""

from __future__ import annotations

import asyncio

from memory_core.bootstrap import Core
from memory_core.fleet.spending import HOLD_LAPSE_MS
from memory_core.models import IncomingMessage, Reply
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory

SCOPE = "discord:1:2"


def question(n: int, *, member: str = "7", scope: str = SCOPE) -> IncomingMessage:
    return IncomingMessage(
        scope=scope, text=f"question number {n}?", author="Max", author_id=member, direct=True
    )


async def burst(core: Core, count: int, **kw: object) -> list[Reply]:
    replies = await asyncio.gather(
        *(converse(core, question(n, **kw)) for n in range(count))  # type: ignore[arg-type]
    )
    assert all(r is not None for r in replies)
    return [r for r in replies if r is not None]


async def test_twenty_concurrent_questions_past_a_members_limit_make_one_call(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"user_daily_tokens": 50})
    fake_llm.delay = 0.2  # every call still in flight when the others are checked
    replies = await burst(core, 20)
    assert fake_llm.count("reply") == 1, [r.kind for r in replies]
    assert sorted(r.kind for r in replies) == ["budget"] * 19 + ["llm"]
    # Another member is not held back by Max's burst.
    other = await converse(core, question(99, member="8"))
    assert other is not None and other.kind == "llm"


async def test_a_channel_and_a_server_limit_hold_under_a_burst_too(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"daily_tokens": 50})
    fake_llm.delay = 0.2
    members = [str(n) for n in range(10)]
    replies = await asyncio.gather(
        *(converse(core, question(n, member=m)) for n, m in enumerate(members))
    )
    assert fake_llm.count("reply") == 1
    server = await make_core(budget={"servers": {"discord:5": 50}})
    replies = await asyncio.gather(
        *(converse(server, question(n, scope=f"discord:5:{n}")) for n in range(10))
    )
    assert fake_llm.count("reply") == 2, [r.kind for r in replies if r]


async def test_a_failed_call_gives_its_hold_back(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"user_daily_tokens": 10_000})
    fake_llm.down = True
    failed = await converse(core, question(1))
    assert failed is not None and failed.kind == "apology"
    holds = core.store.keys.spend_holds(SCOPE)
    assert await core.store.client.zcard(holds) == 0  # nothing held any more
    fake_llm.down = False
    answered = await converse(core, question(2))
    assert answered is not None and answered.kind == "llm"


async def test_a_hold_left_by_a_dead_process_lapses(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"user_daily_tokens": 50})
    holds = core.store.keys.spend_holds(SCOPE)
    # A process died holding 10,000 tokens for Max; its hold lapsed a second ago.
    await core.store.client.zadd(holds, {"dead|7|10000|": 1})
    replied = await converse(core, question(1))
    assert replied is not None and replied.kind == "llm"
    assert HOLD_LAPSE_MS >= 60_000  # longer than any reply (llm.reply_deadline_s)
