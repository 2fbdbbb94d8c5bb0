"""Background embedding in a process of its own: a running bot (background work on, the
local model) stores messages and a worker process beside it embeds them, so the bot's own
interpreter never runs the model for a message. It reads from Redis and writes vectors
there; it is started again when it dies, catches up what was stored before a restart,
reports its backlog for /metrics, and stops with the bot.

The real worker (``python -m memory_core.recall.worker``) against the private Redis."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import socket
import time
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.recall import embedding
from memory_core.recall import worker as worker_module
from memory_core.recall.background import BackgroundEmbedding
from memory_core.recall.worker import EmbeddingWorker, read_status
from memory_core.store.keys import KeySchema
from tests.helpers import START, CoreFactory

LOCAL = {"recall_embedder": "local"}


async def running_bot(make_core: CoreFactory, clock: ManualClock | None = None) -> Core:
    core = await make_core(
        clock=clock or ManualClock(START), offline=True, background=True, memory=LOCAL
    )
    worker = core.recall.worker if core.recall is not None else None
    assert worker is not None and await worker.ready()
    return core


def worker_of(core: Core) -> BackgroundEmbedding:
    assert core.recall is not None and core.recall.worker is not None
    return core.recall.worker


async def say(core: Core, scope: str, *texts: str, author: str = "Mel") -> None:
    assert isinstance(core.clock, ManualClock)
    for text in texts:
        core.clock.advance(timedelta(seconds=20))
        await core.intake.accept(IncomingMessage(scope=scope, text=text, author=author))


async def vectors(core: Core, scope: str) -> set[str]:
    client: Any = core.store.client
    return set(await client.hkeys(core.store.keys.scope(scope).vectors))


async def log_ids(core: Core, scope: str) -> set[str]:
    return {e.id for e in await core.repo.reads.all_entries(f"console:{scope}")}


async def test_messages_are_embedded_by_a_worker_process_not_the_bot(
    make_core: CoreFactory,
) -> None:
    """Storing messages never loads the model in the bot's process: the worker (another
    pid) embeds them, each once, with the message before it as context."""
    embedding._model = None  # (another test of this process may have loaded it)
    core = await running_bot(make_core)
    worker = worker_of(core)
    assert worker.pid is not None and worker.pid != os.getpid() and worker.alive
    for room in ("pets", "plans", "food"):
        await say(core, room, *(f"{room} message {i} about our weekend" for i in range(12)))
    await core.drain()
    for room in ("pets", "plans", "food"):
        assert await vectors(core, f"console:{room}") == await log_ids(core, room)
    assert embedding._model is None  # nothing of it ran here
    status = await read_status(core.store.client, core.store.keys)
    assert status["workers"] == 1 and status["backlog"] == 0 and status["embedded"] == 36


async def test_recall_by_meaning_finds_what_the_worker_embedded(make_core: CoreFactory) -> None:
    core = await running_bot(make_core)
    await say(core, "pets", "We adopted a kitten called Bailey last spring")
    await say(core, "pets", *(f"the release {i} ships on friday" for i in range(30)), author="Ops")
    await core.drain()
    assert core.recall is not None
    hits = await core.recall.search("console:pets", "any cats?")
    index = core.recall._indexes["console:pets"]
    assert index.unembedded == []  # every vector loaded from what the worker stored
    assert any("Bailey" in doc.text for hit in hits[:3] for doc in hit.docs)


async def test_a_forget_wins_over_the_worker(make_core: CoreFactory) -> None:
    """Forgotten at once after being stored, while the worker may be embedding it: no
    vector of a forgotten message is left, whichever came first."""
    core = await running_bot(make_core)
    await say(core, "pets", *(f"my address is {i} Elm Street" for i in range(40)))
    await core.admin.place.forget_all("console:pets")
    await core.drain()
    assert await vectors(core, "console:pets") == set()


async def test_a_worker_that_dies_is_started_again_and_catches_up(
    make_core: CoreFactory,
) -> None:
    core = await running_bot(make_core)
    worker = worker_of(core)
    worker.restart_after_s = 0.2
    first = worker.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    for _ in range(200):
        if not worker.alive:
            break
        await asyncio.sleep(0.05)
    await say(core, "pets", *(f"said while it was down {i}" for i in range(5)))
    for _ in range(600):  # started again within a moment (the model loads meanwhile)
        if worker.alive and await worker.ready(timeout_s=0.1):
            break
        await asyncio.sleep(0.05)
    assert worker.alive and worker.pid != first
    await core.drain()
    assert await vectors(core, "console:pets") == await log_ids(core, "pets")


async def test_messages_stored_before_a_restart_are_embedded_after_it(
    make_core: CoreFactory,
) -> None:
    """Stored while no worker ran (a replay, another version): the first search of the
    scope after the start meets them and asks the worker for a look through the scope."""
    clock = ManualClock(START)
    before = await make_core(clock=clock, offline=True, background=False, memory=LOCAL)
    await say(before, "pets", *(f"an old message {i} about the garden" for i in range(25)))
    assert await vectors(before, "console:pets") == set()
    core = await running_bot(make_core, clock)
    assert core.recall is not None
    await core.recall.search("console:pets", "the garden?")
    await core.drain()
    assert await vectors(core, "console:pets") == await log_ids(core, "pets")


async def test_the_worker_stops_with_the_bot(make_core: CoreFactory) -> None:
    """Closing the bot stops the worker (no process left) and takes its status out of the
    fleet's view."""
    core = await running_bot(make_core)
    watcher = await make_core(offline=True)
    worker = worker_of(core)
    pid = worker.pid
    await say(core, "pets", "one more thing")
    assert (await read_status(watcher.store.client, watcher.store.keys))["workers"] == 1
    await core.close()
    assert not worker.alive
    assert pid is not None and not await asyncio.to_thread(os.path.exists, f"/proc/{pid}")
    assert (await read_status(watcher.store.client, watcher.store.keys))["workers"] == 0


async def test_a_question_is_embedded_beside_the_bot_and_here_when_that_is_gone(
    make_core: CoreFactory,
) -> None:
    """A reply's question goes to the query embedder (another process, never behind the
    background's batches): the bot's interpreter runs no model. With the query embedder
    gone, the question is embedded here and recall still works by meaning."""
    embedding._model = None
    core = await running_bot(make_core)
    worker = worker_of(core)
    assert worker.query_pid not in (None, os.getpid(), worker.pid)
    await say(core, "pets", "We adopted a kitten called Bailey last spring")
    await say(core, "pets", *(f"the release {i} ships on friday" for i in range(30)), author="Ops")
    await core.drain()
    assert core.recall is not None
    hits = await core.recall.search("console:pets", "any cats?")
    assert any("Bailey" in doc.text for hit in hits[:3] for doc in hit.docs)
    assert embedding._model is None  # the question was embedded beside the bot
    worker.restart_after_s = 60  # (not back during this test)
    query_pid = worker.query_pid
    assert query_pid is not None
    os.kill(query_pid, signal.SIGKILL)
    for _ in range(200):
        if worker.query_pid is None or not await asyncio.to_thread(
            os.path.exists, f"/proc/{query_pid}/stat"
        ):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # (the bot hears it is gone)
    hits = await core.recall.search("console:pets", "any cats?")
    assert any("Bailey" in doc.text for hit in hits[:3] for doc in hit.docs)
    assert embedding._model is not None  # embedded here instead


async def test_with_redis_away_the_worker_waits_between_rounds_and_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis unreachable (a closed local port): a round fails for every scope, says so in
    one warning, keeps the scopes for a look through them later, and waits RETRY_S before
    the next round instead of hammering Redis in a loop."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends
    client = Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)
    monkeypatch.setattr(worker_module, "RETRY_S", 0.3)
    worker = EmbeddingWorker(client, KeySchema("mbtest"), io.StringIO())
    for scope in ("console:a", "console:b", "console:c"):
        worker.take(json.dumps({"n": scope, "c": 2}))
    with caplog.at_level(logging.WARNING, logger="memorybot.embedding-worker"):
        started = time.monotonic()
        await worker.round()
        waited = time.monotonic() - started
    await client.aclose()
    assert waited >= 0.3
    assert len(caplog.records) == 1 and "could not read" in caplog.records[0].getMessage()
    assert list(worker.queue) == ["console:a", "console:b", "console:c"]
    assert all(work.rescan for work in worker.scopes.values())
    assert worker.embedded == 0


async def test_the_worker_keeps_the_state_of_a_bounded_number_of_idle_scopes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scopes it has nothing to do for are forgotten, least recently announced first, past
    KEPT_SCOPES; scopes with work waiting are kept whatever their number."""
    monkeypatch.setattr(worker_module, "KEPT_SCOPES", 3)
    worker = EmbeddingWorker(None, KeySchema("mbtest"), io.StringIO())
    for i in range(6):
        worker.scopes[f"console:s{i}"] = worker_module.ScopeWork(rescan=False)
    worker.scopes["console:s1"].todo.append(("1-0", "", "text"))
    worker.queue["console:s2"] = None
    worker.forget_idle()
    assert list(worker.scopes) == [
        "console:s1",
        "console:s2",
        "console:s3",
        "console:s4",
        "console:s5",
    ]
    worker.take(json.dumps({"n": "console:s3", "c": 1}))  # announced: the most recent now
    worker.queue.clear()
    worker.scopes["console:s3"].waiting = 0
    worker.scopes["console:s1"].todo.clear()
    worker.forget_idle()
    assert list(worker.scopes) == ["console:s4", "console:s5", "console:s3"]


class InFlight:
    """A Redis client that counts the commands awaiting an answer at once."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.now = 0
        self.most = 0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        command = getattr(self.client, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
            try:
                return await command(*args, **kwargs)
            finally:
                self.now -= 1

        return counted


async def test_the_worker_never_has_more_than_one_command_in_flight(
    make_core: CoreFactory,
) -> None:
    """A round over many scopes reads and stores them in turn: Redis serves its clients'
    commands in turn, so a hundred gathered commands would put a hundred ahead of the
    bot's next read. Everything is still embedded."""
    core = await make_core(clock=ManualClock(START), offline=True, memory=LOCAL)
    rooms = [f"room{i}" for i in range(12)]
    for room in rooms:
        await say(core, room, *(f"{room} note {i} about the trip" for i in range(3)))
    client = InFlight(core.store.client)
    worker = EmbeddingWorker(client, core.store.keys, io.StringIO())
    for room in rooms:
        worker.take(json.dumps({"n": f"console:{room}", "c": 3}))
    while worker.queue:
        await worker.round()
    assert worker.embedded == 36 and worker.failures == 0
    assert client.calls >= 2 * len(rooms)  # a read and a store per scope at least
    assert client.most == 1
    for room in rooms:
        assert await vectors(core, f"console:{room}") == await log_ids(core, room)


async def test_a_search_syncs_its_index_and_vectors_in_one_round_trip(
    make_core: CoreFactory,
) -> None:
    """Before a reply, the index learns the new messages, their vectors, and the vectors of
    the messages that had none at the last look, in one script call by the store's own
    connection: the vectors the worker stored since are used at once, the message stored a
    moment ago is noted for later, and nothing else is sent."""
    core = await running_bot(make_core)
    recall = core.recall
    assert recall is not None and core.store.lane is not None
    scope = "console:trips"
    await say(core, "trips", *(f"trip note {i} about the coast" for i in range(5)))
    await core.drain()
    await recall.search(scope, "the coast")  # built, every vector loaded
    await say(core, "trips", "the ferry leaves at nine")  # stored, not embedded yet
    await recall.search(scope, "the ferry")
    index = recall._indexes[scope]
    assert [index.docs[row].text for row in index.unembedded] == ["the ferry leaves at nine"]
    await core.drain()  # the worker embeds it
    await say(core, "trips", "bring a coat")
    sent: list[tuple[object, ...]] = []
    call = core.store.lane.call

    async def spied(*args: object) -> object:
        sent.append(args)
        return await call(*args)

    core.store.lane.call = spied  # type: ignore[method-assign]
    hits = await recall.search(scope, "When does the ferry leave?")
    assert len(sent) == 1 and sent[0][0] == "EVALSHA"  # the sync, with the vectors
    assert [index.docs[row].text for row in index.unembedded] == ["bring a coat"]
    ferry = next(row for row, doc in enumerate(index.docs) if doc.text.startswith("the ferry"))
    assert index.vectors is not None and index.vectors[ferry].any()
    assert any(doc.text.startswith("the ferry") for doc in hits[0].docs)
    await core.discard()
