"""The platforms' limits counted fleet-wide (memory_core/fleet/pacing.py), on a real Redis: two
cores (two connections, as two bot processes) take their calls from one allowance; a call
that may wait for later is refused when there is no room, one that must go waits for it (or
says it would wait too long); a draft's share leaves room for an answer's last words; with
Redis away, calls go unpaced rather than not at all."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memory_core.fleet.pacing import KEPT_FOR_LAST_WORDS, Allowance, Pacing
from memory_core.store.keys import KeySchema
from tests.helpers import CoreFactory


async def test_two_processes_share_one_allowance(make_core: CoreFactory) -> None:
    a, b = await make_core(offline=True), await make_core(offline=True)
    allowance = Allowance(calls=5, window_s=1.0)
    name = "slack:T1:chat.update"
    admitted = [await (a if n % 2 else b).pacing.now(name, allowance) for n in range(8)]
    assert admitted == [True] * 5 + [False] * 3
    assert await a.pacing.now("slack:T2:chat.update", allowance)  # another workspace's own
    await asyncio.sleep(1.3)  # the window (and its margin) has passed
    assert await b.pacing.now(name, allowance)


async def test_a_call_that_must_go_waits_for_room_or_says_it_would_wait_too_long(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True)
    allowance = Allowance(calls=1, window_s=0.5)
    name = "discord:edit:1"
    assert await core.pacing.now(name, allowance)
    assert not await core.pacing.wait(name, allowance, max_wait_s=0.1)  # nothing taken
    started = time.monotonic()
    assert await core.pacing.wait(name, allowance, max_wait_s=5.0)
    assert 0.3 <= time.monotonic() - started <= 2.0
    assert not await core.pacing.now(name, allowance)


async def test_a_drafts_share_leaves_room_for_the_last_words(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)
    allowance = Allowance(calls=5, window_s=5.0)
    drafts = allowance.leaving(2)
    assert drafts == Allowance(calls=3, window_s=5.0)
    assert Allowance(calls=1, window_s=1.0).leaving(2).calls == 1
    name = "discord:edit:2"
    assert [await core.pacing.now(name, drafts) for _ in range(4)] == [True] * 3 + [False]
    # the answers' last words still find their two calls, at once
    for _ in range(2):
        assert await core.pacing.wait(name, allowance, max_wait_s=0.05)
    assert not await core.pacing.wait(name, allowance, max_wait_s=0.05)
    with pytest.raises(ValueError, match="at least one call"):
        Allowance(calls=0, window_s=1.0)


async def test_the_doors_rule_keeps_the_last_words_room_and_lets_them_wait(
    make_core: CoreFactory,
) -> None:
    """:meth:`Pacing.room`, the rule both doors answer by: a draft's update takes no more
    than the share that leaves KEPT_FOR_LAST_WORDS calls; the last words take those, and
    wait for the window when even they are spent."""
    core = await make_core(offline=True)
    allowance = Allowance(calls=KEPT_FOR_LAST_WORDS + 2, window_s=3.0)
    name = "slack:T1:post:C1"
    drafts = [await core.pacing.room(name, allowance, wait=False) for _ in range(4)]
    assert drafts == [True, True, False, False]  # two of four: two kept for the last words
    started = time.monotonic()
    for _ in range(KEPT_FOR_LAST_WORDS):
        assert await core.pacing.room(name, allowance, wait=True)
    assert time.monotonic() - started < 2.5  # the kept calls were there, not a window later
    assert await core.pacing.room(name, allowance, wait=True)  # waited for the window
    assert time.monotonic() - started >= 1.5


async def test_with_redis_away_calls_go_unpaced(caplog: pytest.LogCaptureFixture) -> None:
    # Nothing listens there (the store's own client would also fail fast: no retries).
    client = Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    try:
        pacing = Pacing(client, KeySchema("mb"))
        allowance = Allowance(calls=1, window_s=60.0)
        assert await pacing.now("slack:T1:chat.update", allowance)
        assert await pacing.now("slack:T1:chat.update", allowance)
        assert await pacing.wait("slack:T1:chat.update", allowance, max_wait_s=1.0)
    finally:
        await client.aclose()
    unpaced = [r for r in caplog.records if "unpaced" in r.getMessage()]
    assert len(unpaced) == 1  # said once
