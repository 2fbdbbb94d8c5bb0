"""``memorybot store compact``: the store's server rewrites its files now, so what was deleted
from memory leaves them too. On a Redis at REDIS_URL (whose persistence memorybot does not
manage): BGREWRITEAOF when it keeps an append-only file, BGSAVE when it takes RDB snapshots,
waited for and said; a server that refuses CONFIG (a managed Redis) gets one clear line. On
the embedded store: the rewrite a forget makes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import redis

from memory_core.store import embedded
from memory_core.store.server import compact
from memorybot_testkit.redis_servers import LocalCluster, LocalRedis
from tests.helpers import CLI, make_settings
from tests.rdb_scan import files_holding

SECRET = "078-05-1120-SECRET"
LONG = "the quarterly planning notes repeat themselves " * 5 + SECRET + " and again" * 20


def _persistence(client: redis.Redis) -> dict[str, Any]:
    info: Any = client.info("persistence")
    return dict(info)


def _wait_for_rewrite(client: redis.Redis) -> None:
    deadline = time.monotonic() + 30
    while _persistence(client)["aof_rewrite_in_progress"] and time.monotonic() < deadline:
        time.sleep(0.01)


def _files_holding_soon(directory: Path, needle: str) -> list[Path]:
    """The server deletes the files a rewrite replaced in a background thread, just after it
    reports the rewrite done: what still holds ``needle`` a moment later."""
    deadline = time.monotonic() + 5
    while (found := files_holding(directory, needle)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


async def test_compact_rewrites_the_append_only_file_and_snapshot_of_a_redis(
    tmp_path: Path,
) -> None:
    server = LocalRedis(extra=["--appendonly", "yes", "--save", "3600 1"])
    client = server.client()
    try:
        client.set("short", f"ssn {SECRET}")
        client.set("long", LONG)
        client.set("kept", "the rest of memory")
        client.save()  # a snapshot holds it
        client.bgrewriteaof()  # and the base of the append-only file
        _wait_for_rewrite(client)
        assert len(files_holding(Path(server.dir), SECRET)) == 2
        client.delete("short", "long")
        before = _persistence(client)
        run = await CLI(tmp_path)("store", "compact", REDIS_URL=server.url)
        assert run.code == 0, run.err
        assert "append-only file rewrite done (BGREWRITEAOF" in run.out
        assert "RDB snapshot done (BGSAVE" in run.out
        assert "docs/erasure.md" in run.out
        after = _persistence(client)
        assert after["aof_rewrites"] == before["aof_rewrites"] + 1
        assert after["rdb_saves"] == before["rdb_saves"] + 1
        assert _files_holding_soon(Path(server.dir), SECRET) == []
        assert client.get("kept") == "the rest of memory"
    finally:
        client.close()
        server.stop()


async def test_compact_says_so_when_a_redis_keeps_nothing_on_disk(tmp_path: Path) -> None:
    server = LocalRedis()  # appendonly no, save ""
    try:
        run = await CLI(tmp_path)("store", "compact", REDIS_URL=server.url)
    finally:
        server.stop()
    assert run.code == 0, run.err
    assert 'no persistence (appendonly no, save ""): nothing on its disk to compact' in run.out


async def test_compact_on_a_redis_that_refuses_config_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    server = LocalRedis(extra=["--rename-command", "CONFIG", ""])  # as managed services do
    try:
        run = await CLI(tmp_path)("store", "compact", REDIS_URL=server.url)
    finally:
        server.stop()
    assert run.code == 1
    [line] = run.err.strip().splitlines()
    assert line.startswith("error: Redis at redis://127.0.0.1:")
    assert "refuses CONFIG GET" in line and "docs/erasure.md" in line


async def test_compact_on_the_embedded_store_rewrites_its_append_only_file(
    tmp_path: Path,
) -> None:
    cli = CLI(tmp_path)
    run = await cli("store", "compact")
    assert run.code == 0, run.err
    data_dir = tmp_path / "data" / "memorybot"
    assert "embedded store: append-only file rewritten" in run.out
    assert f"the files it replaced in {data_dir / embedded.AOF_DIRNAME} are deleted" in run.out
    assert embedded.status(data_dir).pid is None  # started for it, stopped after it


async def test_compact_on_a_cluster_goes_to_every_node(redis_cluster: LocalCluster) -> None:
    settings = make_settings(redis_url=redis_cluster.url, cluster=True)
    lines = await asyncio.wait_for(compact(settings.store), timeout=60)
    nodes = {f"node 127.0.0.1:{server.port}" for server in redis_cluster.servers}
    assert {line.split(": ")[0] for line in lines} == nodes and len(lines) == len(nodes)
    assert all(": no persistence (appendonly no" in line for line in lines)
