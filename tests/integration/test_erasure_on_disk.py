"""``Store.persist(erase=True)`` on the embedded store: once it returns, no file of the data
directory holds what was deleted before it (the append-only file's commands, its base's RDB
preamble, plain or LZF-compressed), because a rewrite that STARTED AFTER the deletes has
completed and the server has deleted the files it replaced. Forgets at once share one
rewrite; a failed rewrite (a full disk) is an error that says what to fix. The rewrite is
recorded as owed (``erase-owed``) before it starts and until one that started after the
record has succeeded: a crash in between (a ``kill -9`` of the server) leaves the record, and
the next start of the store finishes the rewrite.

These use plain keys, not memorybot's streams: what a forget leaves in a stream's nodes is
the business of the forget itself (see ``test_durable_forget.py`` for the whole path)."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import StoreError
from memory_core.store import embedded
from memory_core.store.server import AOF_REWRITE, Store, open_store, rewrite
from tests.helpers import make_settings, wait_until_gone
from tests.rdb_scan import decompressed_strings, files_holding

SECRET = "078-05-1120-SECRET"
# Long and repetitive: Valkey stores it LZF-compressed in an RDB (and so in a rewritten base).
LONG = "the quarterly planning notes repeat themselves " * 5 + SECRET + " and again" * 20


async def _open(data_dir: Path) -> Store:
    return await open_store(make_settings(data_dir=data_dir).store)


async def _persistence(store: Store) -> dict[str, Any]:
    info: Any = await store.client.info("persistence")
    return dict(info)


async def _rewrites(store: Store) -> int:
    return int((await _persistence(store))["aof_rewrites"])


async def _secret_in_a_base(store: Store, data_dir: Path) -> Path:
    """Store the secret (short, and in the long text), have the server rewrite its files so
    it sits in a base file, LZF-compressed; the base."""
    await store.client.set("short", f"ssn {SECRET}")
    await store.client.set("long", LONG)
    await store.client.hset("hash", mapping={"note": LONG, "other": "kept"})
    await store.client.set("kept", "the rest of memory")
    await rewrite(store.client.execute_command, AOF_REWRITE, timeout_s=60)
    [base] = (data_dir / embedded.AOF_DIRNAME).glob("*.base.rdb")
    assert files_holding(data_dir, SECRET) == [base]  # the new incr file is empty of it
    assert LONG.encode() not in base.read_bytes()  # compressed:
    assert LONG.encode() in decompressed_strings(base.read_bytes())
    return base


def _owed(data_dir: Path) -> Path:
    return data_dir / embedded.ERASE_OWED_FILENAME


async def _rewriting(store: Store, data_dir: Path) -> None:
    """Until the server's rewrite runs with the record of it owed on disk."""
    for _ in range(1000):
        if _owed(data_dir).exists() and (await _persistence(store))["aof_rewrite_in_progress"]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no rewrite started with its record on disk")


def _aof_files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / embedded.AOF_DIRNAME).iterdir())


async def test_after_an_erasing_persist_no_file_holds_what_was_deleted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = await _open(data)
    try:
        base = await _secret_in_a_base(store, data)
        await store.client.delete("short", "long")
        await store.client.hdel("hash", "note")
        assert files_holding(data, SECRET) == [base]  # the incr file: DEL short long, no text
        await store.persist(erase=True)
        assert files_holding(data, SECRET) == []
        assert not base.exists()
        assert not _owed(data).exists()  # the rewrite it owed is done
        # What is left is what the manifest lists: the new base, one incr file, the manifest.
        files = _aof_files(data)
        assert len(files) == 3 and files[-1] == "appendonly.aof.manifest"
        for name in files[:-1]:
            assert name in (data / embedded.AOF_DIRNAME / files[-1]).read_text()
    finally:
        await store.close()
    again = await _open(data)  # the rewritten files bring back the rest of memory
    try:
        assert await again.client.get("kept") == "the rest of memory"
        assert await again.client.hgetall("hash") == {"other": "kept"}
        assert await again.client.get("short") is None
    finally:
        await again.close()


async def test_a_plain_persist_rewrites_nothing(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        await store.client.set("k", "v")
        before = await _rewrites(store)
        await store.persist()
        assert await _rewrites(store) == before
    finally:
        await store.close()


async def test_a_rewrite_running_since_before_the_deletes_does_not_count(tmp_path: Path) -> None:
    """Its child copied memory before the deletes: its base would hold the text. The forget
    waits for it to end, then for a rewrite of its own (Valkey refuses a second BGREWRITEAOF
    while one runs, so it is asked for once the first has ended)."""
    data = tmp_path / "data"
    store = await _open(data)
    try:
        await store.client.set("short", f"ssn {SECRET}")
        for n in range(3):
            await store.client.set(f"other:{n}", "x")
        # A slow rewrite: 0.1 s per key, so it still runs when the delete comes.
        await store.client.config_set("rdb-key-save-delay", 100_000)
        before = await _rewrites(store)
        await store.client.bgrewriteaof()
        await store.client.delete("short")
        assert (await _persistence(store))["aof_rewrite_in_progress"] == 1
        await store.persist(erase=True)
        assert await _rewrites(store) == before + 2
        assert files_holding(data, SECRET) == []
    finally:
        await store.client.config_set("rdb-key-save-delay", 0)
        await store.close()


async def test_a_snapshot_running_when_the_forget_asks_delays_its_rewrite(
    tmp_path: Path,
) -> None:
    """While a BGSAVE child runs, Valkey schedules BGREWRITEAOF instead of starting it: the
    forget waits for the scheduled one, without asking twice."""
    data = tmp_path / "data"
    store = await _open(data)
    try:
        await store.client.set("short", f"ssn {SECRET}")
        for n in range(3):
            await store.client.set(f"other:{n}", "x")
        await store.client.config_set("rdb-key-save-delay", 100_000)
        before = await _rewrites(store)
        await store.client.bgsave()
        await store.client.delete("short")
        erasing = asyncio.create_task(store.persist(erase=True))
        await asyncio.sleep(0.1)
        assert (await _persistence(store))["aof_rewrite_scheduled"] == 1
        await erasing
        assert await _rewrites(store) == before + 1
        assert files_holding(data, SECRET) == []
    finally:
        await store.client.config_set("rdb-key-save-delay", 0)
        await store.close()


async def test_erasing_persists_at_once_share_one_rewrite(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    other = await _open(tmp_path)  # another memorybot process of the same data directory
    try:
        await store.client.set("k", "v")
        before = await _rewrites(store)
        await asyncio.gather(*(store.persist(erase=True) for _ in range(10)))
        assert await _rewrites(store) == before + 1
        assert not _owed(tmp_path).exists()  # it came after each one's record: it settled all
        # Two processes at once: each needs a rewrite that started after its own call; one
        # rewrite may serve both, never more than one each.
        before = await _rewrites(store)
        await asyncio.gather(
            *(s.persist(erase=True) for _ in range(5) for s in (store, other)),
        )
        assert 1 <= await _rewrites(store) - before <= 2
        assert not _owed(tmp_path).exists()
        # One after the other: each needs a rewrite that started after it.
        before = await _rewrites(store)
        for _ in range(3):
            await store.persist(erase=True)
        assert await _rewrites(store) == before + 3
    finally:
        await other.close()
        await store.close()


async def test_an_erasing_persist_that_gives_up_does_not_stop_the_others(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        before = await _rewrites(store)
        first = asyncio.create_task(store.persist(erase=True))
        second = asyncio.create_task(store.persist(erase=True))
        await asyncio.sleep(0)
        first.cancel()
        await second
        assert await _rewrites(store) == before + 1
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        await store.close()


async def test_a_failed_rewrite_is_an_error_that_says_what_to_fix(tmp_path: Path) -> None:
    """A full disk, as the rewrite's child meets it: a file size limit under the size of the
    new base (the child is killed by SIGXFSZ, as a write to a full disk fails)."""
    data = tmp_path / "data"
    store = await _open(data)
    assert store.embedded is not None
    pid = store.embedded.pid
    assert pid is not None
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    try:
        await store.client.set("big", "".join(str(n) for n in range(60_000)))  # ~290 kB
        await store.client.set("short", f"ssn {SECRET}")
        await store.persist(erase=True)  # the base holds them; the incr file is empty again
        await store.client.delete("short")
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (100_000, hard))
        with pytest.raises(StoreError) as failed:
            await store.persist(erase=True)
        message = str(failed.value)
        assert "the forget is done in memory, but its text is still in the files" in message
        assert f"Free disk space in {data}" in message and "memorybot store compact" in message
        assert str(data / embedded.LOG_FILENAME) in message
        assert (await _persistence(store))["aof_last_bgrewrite_status"] == "err"
        assert files_holding(data, SECRET)  # the old files are still there: nothing lost
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        await store.persist(erase=True)  # space again: the next one erases
        assert files_holding(data, SECRET) == []
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        await store.close()


async def test_a_snapshot_made_by_hand_is_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    store = await _open(data)
    try:
        await store.client.set("short", f"ssn {SECRET}")
        await store.client.save()  # someone's SAVE: valkey-dump.rdb, never read by memorybot
        assert data / embedded.DUMP_FILENAME in files_holding(data, SECRET)
        await store.client.delete("short")
        await store.persist(erase=True)
        assert files_holding(data, SECRET) == []
        assert not (data / embedded.DUMP_FILENAME).exists()
        assert "a snapshot made by hand that held forgotten text" in caplog.text
    finally:
        await store.close()


async def test_a_temporary_file_of_a_killed_rewrite_is_removed_at_the_next_start(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    store = await _open(data)
    await store.close()
    leftover = data / "temp-rewriteaof-4242.aof"
    leftover.write_text(f"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$22\r\nssn {SECRET}\r\n")
    again = await _open(data)
    await again.close()
    assert not leftover.exists()


async def test_a_rewrite_a_killed_server_interrupted_is_finished_at_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server is killed (``kill -9``, its rewrite's child with it) after the forget's
    deletes and before its rewrite is done: the files still hold the text. The record of the
    rewrite owed is on disk (owner-only), so the next start of the store rewrites them."""
    data = tmp_path / "data"
    store = await _open(data)
    assert store.embedded is not None
    pid = store.embedded.pid
    assert pid is not None
    try:
        await _secret_in_a_base(store, data)
        for n in range(50):
            await store.client.set(f"other:{n}", "x")
        await store.client.delete("short", "long")
        await store.client.hdel("hash", "note")
        await store.client.config_set("rdb-key-save-delay", 100_000)  # 0.1 s a key: slow
        erasing = asyncio.create_task(store.persist(erase=True))
        await _rewriting(store, data)
        assert stat.S_IMODE(_owed(data).stat().st_mode) == 0o600
        os.kill(pid, signal.SIGKILL)
        wait_until_gone(pid)
        with pytest.raises(StoreError, match="memorybot store compact"):
            await erasing
    finally:
        await store.close()
    assert files_holding(data, SECRET)  # what the crash left: nothing rewrote them
    assert _owed(data).exists()
    caplog.set_level(logging.WARNING, logger="memory_core.store.server")
    again = await _open(data)
    try:
        assert again.embedded is not None and again.embedded.started
        assert files_holding(data, SECRET) == []
        assert not _owed(data).exists()
        assert "finished a forget's rewrite of its files that was still owed" in caplog.text
        assert await again.client.get("kept") == "the rest of memory"
        assert await again.client.get("short") is None
    finally:
        await again.close()


async def test_the_record_stays_until_a_rewrite_that_started_after_it_is_done(
    tmp_path: Path,
) -> None:
    """Two processes: the first one's rewrite runs when the second forgets (its record is
    written after that rewrite started, which copied memory from before the second's
    deletes). The first one's rewrite ending does not remove the record; the second's does."""
    data = tmp_path / "data"
    first = await _open(data)
    second = await _open(data)
    try:
        await first.client.set("short", f"ssn {SECRET}")
        for n in range(10):
            await first.client.set(f"other:{n}", "x")
        await first.client.config_set("rdb-key-save-delay", 100_000)
        before = await _rewrites(first)
        first_erasing = asyncio.create_task(first.persist(erase=True))
        await _rewriting(first, data)
        await second.client.delete("short")
        second_erasing = asyncio.create_task(second.persist(erase=True))
        while (await _persistence(first))["aof_rewrite_in_progress"]:
            assert not second_erasing.done()
            await asyncio.sleep(0.01)
        await first_erasing
        assert _owed(data).exists() and not second_erasing.done()
        await second_erasing
        assert await _rewrites(first) == before + 2
        assert not _owed(data).exists()
        assert files_holding(data, SECRET) == []
    finally:
        await first.client.config_set("rdb-key-save-delay", 0)
        await second.close()
        await first.close()


async def test_a_rewrite_owed_that_fails_at_start_is_a_warning_and_stays_owed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The start goes on (memory is there), a warning says what to run, the record stays
    for the next start or ``memorybot store compact``."""
    data = tmp_path / "data"
    store = await _open(data)
    assert store.embedded is not None
    pid = store.embedded.pid
    assert pid is not None
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    try:
        await store.client.set("big", "".join(str(n) for n in range(60_000)))
        await store.persist(erase=True)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (100_000, hard))  # a full disk
        with pytest.raises(StoreError):
            await store.persist(erase=True)
        assert _owed(data).exists()
        caplog.set_level(logging.WARNING, logger="memory_core.store.server")
        joined = await _open(data)  # another process starting: it tries, and says so
        try:
            assert await joined.client.get("big")
        finally:
            await joined.close()
        assert _owed(data).exists()
        [warning] = [r for r in caplog.records if "could not finish" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert "memorybot store compact" in warning.getMessage()
        assert str(_owed(data)) in warning.getMessage()
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        await store.persist(erase=True)
        assert not _owed(data).exists()
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        await store.close()
