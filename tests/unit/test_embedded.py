"""Tests of the embedded store: persistence, locking, atomic saves and corruption handling."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core import embedded
from memory_core.embedded import EmbeddedStore
from memory_core.errors import StoreError

# Remaining TTLs are compared loosely: time passes between the dump before closing and the
# dump after reopening, and a slow CI machine should not make the tests flaky.
TTL_TOLERANCE_MS = 5_000

LUA_XRANGE = "return redis.call('XRANGE', KEYS[1], '-', '+')"


async def populate(client: Any) -> None:
    """Create one or more keys of every type, with the awkward cases the format must keep."""
    await client.set("s:plain", "hello")
    await client.set("s:empty", "")
    await client.set("s:ja", "日本語のメモ 🍣", px=600_000)
    await client.set("s:nul", "a\x00b")
    await client.set("メモ:キー", "値")
    await client.hset("h", mapping={"name": "太郎", "empty": "", "": "empty field name"})
    await client.hset("h:ttl", mapping={"keep": "1", "fade": "2"})
    await client.hpexpire("h:ttl", 600_000, "fade")
    await client.expire("h", 3_600)
    await client.rpush("l", "a", "", "a", "日本")
    await client.sadd("set", "x", "", "ユ")
    await client.zadd(
        "z", {"a": 1.5, "b": float("-inf"), "c": float("inf"), "d": 1 / 3, "e": 0, "": 2}
    )
    # A stream with exact IDs, a repeated field name, a last ID past its last entry, consumer
    # groups with pending entries (one of them for a deleted message) and an idle consumer.
    await client.xadd("x", {"role": "user", "text": "こんにちは"}, id="1-0")
    await client.execute_command("XADD", "x", "1-5", "f", "1", "f", "2")
    await client.xadd("x", {"empty": ""}, id="2-0")
    await client.xgroup_create("x", "g", "0")
    await client.xreadgroup("g", "c1", {"x": ">"}, count=2)
    await client.xgroup_createconsumer("x", "g", "c2")
    await client.xgroup_create("x", "g2", "$")
    await client.xadd("x", {"n": "9"}, id="9-0")
    await client.xdel("x", "1-0", "9-0")
    # An empty stream whose last ID is 0-0, and one filled by a Lua script.
    await client.xgroup_create("x:empty", "tmp", "$", mkstream=True)
    await client.xgroup_destroy("x:empty", "tmp")
    await client.eval("return redis.call('XADD', KEYS[1], ARGV[1]..'-*', 'f', 'v')", 1, "x:lua", 7)


async def dump(client: Any) -> dict[str, Any]:
    """Everything observable about every key, read with the typed commands."""
    result: dict[str, Any] = {}
    for key in sorted(await client.keys("*")):
        key_type = await client.type(key)
        item: dict[str, Any] = {"type": key_type, "pttl": await client.pttl(key)}
        if key_type == "string":
            item["value"] = await client.get(key)
        elif key_type == "hash":
            item["value"] = await client.hgetall(key)
            fields = sorted(item["value"])
            item["field_pttl"] = dict(zip(fields, await client.hpttl(key, *fields), strict=True))
        elif key_type == "list":
            item["value"] = await client.lrange(key, 0, -1)
        elif key_type == "set":
            item["value"] = sorted(await client.smembers(key))
        elif key_type == "zset":
            item["value"] = await client.zrange(key, 0, -1, withscores=True)
        elif key_type == "stream":
            # Through Lua, because redis-py would merge repeated field names into a dict.
            item["value"] = await client.eval(LUA_XRANGE, 1, key)
            info = await client.xinfo_stream(key)
            item["last_id"] = info["last-generated-id"]
            groups = []
            for group in await client.xinfo_groups(key):
                pending = await client.xpending_range(key, group["name"], "-", "+", 100)
                consumers = await client.xinfo_consumers(key, group["name"])
                groups.append(
                    {
                        "name": group["name"],
                        "last_delivered_id": group["last-delivered-id"],
                        "entries_read": group["entries-read"],
                        "consumers": sorted(c["name"] for c in consumers),
                        "pending": [
                            (p["message_id"], p["consumer"], p["times_delivered"]) for p in pending
                        ],
                    }
                )
            item["groups"] = groups
        result[key] = item
    return result


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert sorted(before) == sorted(after)
    for key, old in before.items():
        new = after[key]
        assert _without_ttls(new) == _without_ttls(old), key
        _assert_ttl_close(old["pttl"], new["pttl"], key)
        for field, ttl in old.get("field_pttl", {}).items():
            _assert_ttl_close(ttl, new["field_pttl"][field], f"{key}.{field}")


def _without_ttls(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("pttl", "field_pttl")}


def _assert_ttl_close(old: int, new: int, what: str) -> None:
    if old < 0:
        assert new == old, what
    else:
        assert 0 < new <= old, (what, old, new)
        assert old - new < TTL_TOLERANCE_MS, (what, old, new)


def other_files(data_dir: Path) -> list[str]:
    """Files in the data directory besides the snapshot and the lock file."""
    ignored = {embedded.SNAPSHOT_FILENAME, embedded.LOCK_FILENAME}
    return sorted(p.name for p in data_dir.iterdir() if p.name not in ignored)


def read_snapshot(data_dir: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((data_dir / embedded.SNAPSHOT_FILENAME).read_bytes())
    return result


# ---- round trip -------------------------------------------------------------------------------


async def test_round_trip_of_every_type(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await populate(store.client)
    before = await dump(store.client)
    await store.close()

    snapshot = read_snapshot(tmp_path)
    assert snapshot["format"] == "memorybot-embedded"
    assert snapshot["version"] == 1
    assert {entry["type"] for entry in snapshot["keys"]} == {
        "string",
        "hash",
        "list",
        "set",
        "zset",
        "stream",
    }
    # Japanese stays readable in the file (ensure_ascii=False), not \\u-escaped.
    assert "日本語のメモ" in (tmp_path / embedded.SNAPSHOT_FILENAME).read_text("utf-8")
    assert other_files(tmp_path) == []

    reopened = await EmbeddedStore.open(tmp_path)
    try:
        after = await dump(reopened.client)
        assert_same(before, after)
        # Spot checks of the subtle parts, so that a bug in dump() cannot hide them.
        assert await reopened.client.get("s:empty") == ""
        assert await reopened.client.get("s:nul") == "a\x00b"
        assert await reopened.client.zscore("z", "c") == float("inf")
        assert await reopened.client.eval(LUA_XRANGE, 1, "x") == [
            ["1-5", ["f", "1", "f", "2"]],
            ["2-0", ["empty", ""]],
        ]
        assert after["x"]["last_id"] == "9-0"
        # The deleted message 1-0 is still pending for c1, as it was before the restart.
        assert after["x"]["groups"][0]["pending"] == [("1-0", "c1", 1), ("1-5", "c1", 1)]
        assert after["x:empty"] == {
            "type": "stream",
            "pttl": -1,
            "value": [],
            "last_id": "0-0",
            "groups": [],
        }
        # New IDs continue after the restored last ID, never before it.
        assert await reopened.client.xadd("x", {"k": "v"}, id="9-*") == "9-1"
        # The restored state saves to the same content.
        assert await reopened.save() == len(before)
    finally:
        await reopened.close()


async def test_values_that_are_not_utf8_round_trip_as_base64(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    # Only a Lua script or a non-decoding client can create such values; saving must not
    # crash on them, and they come back byte for byte.
    await store.client.eval("return redis.call('SET', KEYS[1], string.char(255, 0, 65))", 1, "bin")
    raw = store._raw  # the store's bytes client: the decoding client cannot read these values
    await raw.rpush(b"list\xfe", b"\xff", b"ok")
    await store.client.set("text", "plain")
    await store.close()

    entries = {
        entry["type"] + ":" + entry.get("encoding", "utf-8"): entry
        for entry in read_snapshot(tmp_path)["keys"]
    }
    assert entries["string:base64"]["value"] == "/wBB"
    assert entries["string:utf-8"]["value"] == "plain"

    reopened = await EmbeddedStore.open(tmp_path)
    try:
        assert await reopened._raw.get(b"bin") == b"\xff\x00A"
        assert await reopened._raw.lrange(b"list\xfe", 0, -1) == [b"\xff", b"ok"]
        assert await reopened.client.get("text") == "plain"
    finally:
        await reopened.close()


async def test_keys_that_expired_while_stopped_are_not_restored(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.client.set("short", "1", px=60_000)
    await store.client.set("long", "1", ex=86_400)
    await store.client.set("forever", "1")
    await store.client.hset("h", mapping={"stay": "1", "go": "2"})
    await store.client.hpexpire("h", 60_000, "go")
    await store.close()

    # Pretend the snapshot was written two hours ago: time runs on while memorybot is stopped.
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    snapshot = json.loads(path.read_bytes())
    snapshot["saved_at"] = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    path.write_text(json.dumps(snapshot), "utf-8")

    reopened = await EmbeddedStore.open(tmp_path)
    try:
        assert await reopened.client.exists("short") == 0
        remaining = await reopened.client.pttl("long")
        assert abs(remaining - 22 * 3_600_000) < TTL_TOLERANCE_MS
        assert await reopened.client.get("forever") == "1"
        assert await reopened.client.hgetall("h") == {"stay": "1"}
    finally:
        await reopened.close()


async def test_lua_scripts_can_write_streams(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    try:
        script = "return redis.call('XADD', KEYS[1], ARGV[1]..'-*', 'f', 'v')"
        assert await store.client.eval(script, 1, "events", "1700000000000") == "1700000000000-0"
        assert await store.client.eval(script, 1, "events", "1700000000000") == "1700000000000-1"
        assert await store.client.xlen("events") == 2
    finally:
        await store.close()


# ---- locking ----------------------------------------------------------------------------------


async def test_second_open_of_the_same_directory_fails_with_a_helpful_message(
    tmp_path: Path,
) -> None:
    first = await EmbeddedStore.open(tmp_path)
    try:
        with pytest.raises(StoreError) as caught:
            await EmbeddedStore.open(tmp_path)
        message = str(caught.value)
        assert "another memorybot process" in message
        assert str(tmp_path / embedded.SNAPSHOT_FILENAME) in message
        assert "REDIS_URL" in message
        assert f"pid {os.getpid()}" in message
    finally:
        await first.close()
    # Closing releases the lock.
    second = await EmbeddedStore.open(tmp_path)
    await second.close()


# ---- corrupt or unreadable snapshots ----------------------------------------------------------


def _snapshot_with(keys: list[dict[str, Any]], **header: Any) -> bytes:
    document = {
        "format": "memorybot-embedded",
        "version": 1,
        "saved_at": "2025-01-01T00:00:00.000+00:00",
        "keys": keys,
    }
    document.update(header)
    return json.dumps(document).encode("utf-8")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(b'{"format": "memorybot-embedded", "vers', "not valid JSON", id="truncated"),
        pytest.param(b"\xff\xfe\x00garbage", "not UTF-8", id="binary"),
        pytest.param(b"[1, 2, 3]", "not a memorybot snapshot", id="not-ours"),
        pytest.param(_snapshot_with([], version=2), "newer memorybot", id="newer-version"),
        pytest.param(
            _snapshot_with([{"key": "k", "type": "bloom", "ttl_ms": None, "value": ""}]),
            "keys.0",
            id="unknown-type",
        ),
        pytest.param(
            _snapshot_with([{"key": "k", "type": "string", "ttl_ms": None, "value": 5}]),
            "keys.0",
            id="wrong-value-type",
        ),
        pytest.param(
            _snapshot_with(
                [
                    {"key": "k", "type": "string", "ttl_ms": None, "value": "a"},
                    {"key": "k", "type": "string", "ttl_ms": None, "value": "b"},
                ]
            ),
            "appears twice",
            id="duplicate-key",
        ),
        pytest.param(
            _snapshot_with(
                [
                    {
                        "key": "x",
                        "type": "stream",
                        "ttl_ms": None,
                        "value": {
                            "entries": [
                                {"id": "5-0", "fields": [["f", "v"]]},
                                {"id": "3-0", "fields": [["f", "v"]]},
                            ],
                            "last_id": "5-0",
                            "groups": [],
                        },
                    }
                ]
            ),
            "increasing ID order",
            id="stream-ids-out-of-order",
        ),
        pytest.param(
            _snapshot_with(
                [
                    {
                        "key": "x",
                        "type": "stream",
                        "ttl_ms": None,
                        "value": {
                            "entries": [{"id": "0-0", "fields": [["f", "v"]]}],
                            "last_id": "0-0",
                            "groups": [],
                        },
                    }
                ]
            ),
            "cannot be restored",
            id="stream-id-redis-rejects",
        ),
        pytest.param(
            _snapshot_with(
                [
                    {
                        "key": "k",
                        "type": "string",
                        "ttl_ms": None,
                        "encoding": "base64",
                        "value": "not base64!",
                    }
                ]
            ),
            "not valid base64",
            id="bad-base64",
        ),
    ],
)
async def test_corrupt_snapshot_is_reported_and_left_untouched(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    path.write_bytes(content)
    before = path.stat()

    with pytest.raises(StoreError) as caught:
        await EmbeddedStore.open(tmp_path)
    assert str(path) in str(caught.value)
    assert reason in str(caught.value)

    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert other_files(tmp_path) == []
    # The failed open released its lock: the same error again, not "another process".
    with pytest.raises(StoreError, match="cannot be loaded"):
        await EmbeddedStore.open(tmp_path)


async def test_unreadable_snapshot_is_reported(tmp_path: Path) -> None:
    # A directory where the file should be (chmod would not stop root, which runs CI).
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    path.mkdir()
    with pytest.raises(StoreError, match="cannot read") as caught:
        await EmbeddedStore.open(tmp_path)
    assert str(path) in str(caught.value)
    assert path.is_dir()


# ---- saving -----------------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["replace", "fsync"])
async def test_failed_save_keeps_the_previous_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    store = await EmbeddedStore.open(tmp_path)
    try:
        await store.client.set("k", "old")
        assert await store.save() == 1
        path = tmp_path / embedded.SNAPSHOT_FILENAME
        old = path.read_bytes()

        await store.client.set("k", "new")

        def fail(*args: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

        with monkeypatch.context() as patch:
            patch.setattr(os, failing, fail)
            with pytest.raises(StoreError, match="previous snapshot was left intact") as caught:
                await store.save()
        assert str(path) in str(caught.value)
        assert path.read_bytes() == old
        assert other_files(tmp_path) == []  # no temporary file left behind

        # The failed save did not count as saved: the next one writes.
        assert await store.save() == 1
        assert "new" in path.read_text("utf-8")
    finally:
        await store.close()


async def test_save_without_changes_does_not_rewrite(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    try:
        await store.client.set("k", "v")
        await store.client.set("ttl", "v", ex=3_600)  # remaining TTLs drift; the digest must not
        assert await store.save() == 2
        path = tmp_path / embedded.SNAPSHOT_FILENAME
        first = path.stat()
        await asyncio.sleep(0.02)

        assert await store.save() == 2
        second = path.stat()
        assert (second.st_ino, second.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)

        await store.client.set("k", "changed")
        assert await store.save() == 2
        assert path.stat().st_ino != first.st_ino
        assert "changed" in path.read_text("utf-8")

        # A snapshot deleted behind our back is written again even without changes.
        path.unlink()
        assert await store.save() == 2
        assert path.exists()
    finally:
        await store.close()


async def test_reopening_without_changes_writes_nothing(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.close()
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    assert not path.exists()  # an untouched empty store leaves no file

    store = await EmbeddedStore.open(tmp_path)
    await store.client.set("k", "v", ex=3_600)
    await store.close()
    first = path.stat()

    store = await EmbeddedStore.open(tmp_path)
    await store.close()
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


async def test_reopening_a_full_store_without_changes_writes_nothing(tmp_path: Path) -> None:
    # The digest must be stable across a restore for every type: TTLs, hash field TTLs,
    # consumer groups and pending entries included.
    store = await EmbeddedStore.open(tmp_path)
    await populate(store.client)
    await store.close()
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    first = path.stat()

    store = await EmbeddedStore.open(tmp_path)
    await asyncio.sleep(0.02)
    await store.close()
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


async def test_a_cancelled_save_never_overwrites_a_newer_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.client.set("k", "old")
    real_write = EmbeddedStore._write_snapshot
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_first_write(self: EmbeddedStore, *args: Any) -> os.stat_result:
        if not started.is_set():
            loop.call_soon_threadsafe(started.set)
            time.sleep(0.3)  # runs in the writer thread: a slow disk, this time only
        return real_write(self, *args)

    monkeypatch.setattr(EmbeddedStore, "_write_snapshot", slow_first_write)
    save = asyncio.create_task(store.save())
    await started.wait()
    save.cancel()
    with pytest.raises(asyncio.CancelledError):
        await save
    # The thread of the cancelled save is still writing "old"; close() must wait for it
    # before writing "new", or "old" would land last.
    await store.client.set("k", "new")
    await store.close()
    await asyncio.sleep(0.4)  # were close() not waiting, the stale write would land by now

    reopened = await EmbeddedStore.open(tmp_path)
    try:
        assert await reopened.client.get("k") == "new"
    finally:
        await reopened.close()
    assert other_files(tmp_path) == []


async def test_autosave_writes_within_a_short_interval(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    try:
        store.start_autosave(0.05)
        await store.client.set("autosaved", "yes")
        path = tmp_path / embedded.SNAPSHOT_FILENAME
        for _ in range(200):
            if path.exists() and "autosaved" in path.read_text("utf-8"):
                break
            await asyncio.sleep(0.025)
        else:
            pytest.fail("autosave did not write the snapshot within 5 seconds")
    finally:
        await store.close()


async def test_autosave_survives_a_failed_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = await EmbeddedStore.open(tmp_path)
    path = tmp_path / embedded.SNAPSHOT_FILENAME
    try:
        await store.client.set("k", "v")

        def disk_full(*args: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", disk_full)
            store.start_autosave(0.05)
            for _ in range(200):
                if "autosave failed" in caplog.text:
                    break
                await asyncio.sleep(0.025)
            else:
                pytest.fail("the failed autosave was not logged")
        assert "No space left on device" in caplog.text
        # The disk has room again: the same autosave task writes at its next tick.
        for _ in range(200):
            if path.exists():
                break
            await asyncio.sleep(0.025)
        else:
            pytest.fail("autosave stopped after a failure")
    finally:
        await store.close()
    assert other_files(tmp_path) == []


async def test_autosave_rejects_a_bad_interval(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    try:
        with pytest.raises(ValueError, match="positive"):
            store.start_autosave(0)
    finally:
        await store.close()


async def test_unknown_type_fails_loudly_instead_of_being_dropped(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.client.set("k", "v")
    await store.save()
    await store.client.ts().create("timeseries")  # a module type (RedisTimeSeries)
    with pytest.raises(StoreError, match="timeseries"):
        await store.save()
    # close() reports the failed final save but still releases everything.
    with pytest.raises(StoreError, match="timeseries"):
        await store.close()
    reopened = await EmbeddedStore.open(tmp_path)
    try:
        assert await reopened.client.get("k") == "v"
    finally:
        await reopened.close()


async def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    store.start_autosave(10)
    await store.client.set("k", "v")
    await store.close()
    await store.close()
    assert "k" in (tmp_path / embedded.SNAPSHOT_FILENAME).read_text("utf-8")
    with pytest.raises(StoreError, match="closed"):
        await store.save()
    with pytest.raises(StoreError, match="closed"):
        store.start_autosave(1)


async def test_async_context_manager_saves_on_exit(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path) as store:
        await store.client.set("k", "v")
    async with await EmbeddedStore.open(tmp_path) as store:
        assert await store.client.get("k") == "v"


async def test_open_creates_the_data_directory_and_removes_stale_temp_files(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "nested" / "data"
    store = await EmbeddedStore.open(data_dir)
    await store.client.set("k", "v")
    await store.close()
    stale = data_dir / ".memorybot-store.abc123.tmp"
    stale.write_text("half-written", "utf-8")
    unrelated = data_dir / "notes.txt"
    unrelated.write_text("mine", "utf-8")

    store = await EmbeddedStore.open(data_dir)
    try:
        assert not stale.exists()
        assert unrelated.read_text("utf-8") == "mine"
        assert await store.client.get("k") == "v"
    finally:
        await store.close()
