"""A shard of a Redis Cluster goes away (its process terminated) and comes back (the same
port, directory, nodes.conf and append-only file): meanwhile the scopes on the two other
nodes are stored and answered as if nothing happened, the stopped shard's messages are held
in memory, and they are stored, in order, once it is back."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.errors import StoreUnavailable
from memory_core.models import IncomingMessage
from memory_core.store import KeySchema
from memorybot_testkit.converse import converse
from memorybot_testkit.redis_servers import LocalCluster
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, make_settings, until

PER_NODE = 3  # scopes on each node
ROUNDS = 4  # messages per scope while the shard is away


def _scopes_by_node(cluster: LocalCluster, keys: KeySchema, lost: int) -> dict[int, list[str]]:
    """``PER_NODE`` console scopes served by each node (by their keys' hash tag); on a live
    node, one of them, where the buckets allow it, with its scope index entry on the lost
    node (a bucket that straddles two nodes)."""
    by_node: dict[int, list[str]] = {i: [] for i in range(len(cluster.servers))}
    straddling: list[str] = []
    for i in range(20_000):
        scope = f"console:team{i}"
        node = cluster.node_of(keys.scope(scope).log)
        if node != lost and not straddling and cluster.node_of(keys.scopes_index_of(scope)) == lost:
            straddling.append(scope)
            by_node[node].append(scope)
        elif len(by_node[node]) < PER_NODE:
            by_node[node].append(scope)
        if straddling and all(len(names) >= PER_NODE for names in by_node.values()):
            break
    return by_node


@pytest.mark.slow
@pytest.mark.parametrize("lost", [0, 1])
async def test_with_one_shard_away_the_others_store_and_answer_and_it_catches_up(
    fake_llm: FakeOpenAI, lost: int
) -> None:
    with LocalCluster(3, appendonly=True) as cluster:
        # Node 0 serves slot 0: the first primary of redis-py's view of the cluster (the node
        # it asks for the command table on every refresh). Node 1 holds the scope index
        # entries of some scopes on the other nodes (a bucket straddling two nodes): their
        # messages are stored all the same.
        keys = KeySchema("mb")
        settings = make_settings(
            redis_url=cluster.servers[1].url,  # not the lost node's address either
            cluster=True,
            llm_url=fake_llm.base_url,
            memory={"compact_trigger_tokens": 10**6},
        )
        clock = ManualClock(START)
        core = await build_core(settings, clock=clock)
        try:
            by_node = _scopes_by_node(cluster, keys, lost)
            live = [s for node, names in by_node.items() if node != lost for s in names]
            away = by_node[lost]
            sent: dict[str, list[str]] = {s: [] for s in live + away}

            async def say(scope: str, text: str) -> bool:
                """Send one message; True when it was stored at once (False: held)."""
                clock.advance(timedelta(seconds=1))
                msg = IncomingMessage(scope=scope, text=text, author="Ann", author_id="1")
                result = await asyncio.wait_for(core.intake.accept(msg), timeout=15)
                assert result.stored or result.buffered, (scope, result)
                sent[scope].append(text)
                return result.stored

            for scope in live + away:
                assert await say(scope, f"{scope} before")

            cluster.servers[lost].terminate()
            for n in range(ROUNDS):
                # The lost shard's scopes first: what is held for them must not hold up the rest.
                for scope in away:
                    assert not await say(scope, f"{scope} away {n}"), "held while it is away"
                for scope in live:
                    assert await say(scope, f"{scope} live {n}"), f"{scope} stored at once"
            assert core.intake.held == ROUNDS * len(away)
            # A caller that does not hold (replay) is refused only for the lost shard's
            # scopes: it waits for its own scope's held messages, not the whole buffer.
            for scope in live:
                clock.advance(timedelta(seconds=1))
                msg = IncomingMessage(scope=scope, text=f"{scope} replayed", author="Ann")
                result = await asyncio.wait_for(core.intake.accept(msg, hold=False), 15)
                assert result.stored, scope
                sent[scope].append(msg.text)
            msg = IncomingMessage(scope=away[0], text="not held", author="Ann")
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(core.intake.accept(msg, hold=False), 15)
            for scope in live:  # asked and answered with memory; both are in memory
                clock.advance(timedelta(seconds=1))
                ask = f"recap {scope}"
                msg = IncomingMessage(scope=scope, text=ask, author="Ann", addressed=True)
                reply = await asyncio.wait_for(converse(core, msg), timeout=15)
                assert reply is not None and reply.kind == "llm", (scope, reply)
                assert reply.stored_id, f"the answer in {scope} is stored at once"
                assert f"{scope} live {ROUNDS - 1}" in fake_llm.requests[-1].prompt_text
                sent[scope] += [ask, reply.text]

            cluster.servers[lost].start()
            cluster.wait_ready()
            await asyncio.wait_for(until(lambda: core.intake.held == 0), timeout=30)
            for scope, texts in sent.items():
                stored = [e.text for e in await core.repo.reads.all_entries(scope)]
                assert stored == texts, scope  # everything, in order, once
        finally:
            await core.close()
