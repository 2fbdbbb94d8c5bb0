"""Forget as a new user meets it in the terminal: text hidden by invisible characters and a
person known only by name (a replay without user ids), through the real `memorybot` CLI; on
the embedded store, no file holding the text afterwards, even when a crash (a ``kill -9`` of
the server) interrupted the forget's rewrite of the files, and `memorybot doctor` saying
while such a rewrite is still owed."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import stat
from typing import Any

import pytest

from memory_core.errors import StoreError
from memory_core.store import embedded
from memory_core.store.server import Store, open_store
from tests.helpers import CLI, make_settings, spawn_memorybot, wait_until_gone
from tests.rdb_scan import files_holding


async def test_console_forgets_text_spelled_with_invisible_characters(
    cli: CLI, clean_redis: str
) -> None:
    said = (
        "the vault word is ZEBRA\u200bFALCON\n"
        "we bought new soft\u00adware licences\n"
        "the offsite is in İSTANBUL in May\n"
        "nothing to forget here\n"
    )
    forget = "/memory forget zebrafalcon\n/memory forget software\n/memory forget istanbul\n"
    run = await cli(
        "console", "--scope", "team", stdin=said + forget + "/memory show\n", REDIS_URL=clean_redis
    )
    assert run.code == 0, run.err
    assert run.out.count("Forgot") == 3 and "1 messages" in run.out
    shown = run.out.rsplit("Memory of console:team", 1)[1]
    assert "nothing to forget here" in shown
    for hidden in ("FALCON", "ware licences", "STANBUL"):
        assert hidden not in shown


async def test_forget_me_by_name_after_a_replay_without_user_ids(
    cli: CLI, clean_redis: str
) -> None:
    lines = [
        {"ts": "2025-08-11T09:00:00+00:00", "user": "al", "text": "al's secret plan"},
        {"ts": "2025-08-11T09:01:00+00:00", "user": "Alice", "text": "alice's plan"},
    ]
    path = cli.home / "chat.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    env = {"REDIS_URL": clean_redis}
    assert (await cli("replay", str(path), "--scope", "notes", "--no-reply", **env)).code == 0
    forgot = await cli("memory", "forget", "me", "--scope", "notes", "--user", "al", **env)
    assert forgot.code == 0 and "1 messages" in forgot.out, forgot.out + forgot.err
    shown = await cli("memory", "show", "--scope", "notes", **env)
    assert "alice's plan" in shown.out and "secret plan" not in shown.out


async def test_a_forget_on_the_embedded_default_leaves_no_file_holding_the_text(
    cli: CLI,
) -> None:
    """A new user's machine: a data directory made beforehand with `mkdir -p` (0755), the
    console on the embedded store, a secret said, the store compacted (so the base file holds
    it, LZF-compressed), then forgotten in a later console. No file of the data directory
    holds it afterwards, and the directory and its files are private."""
    data_dir = cli.home / "data" / "memorybot"
    data_dir.mkdir(parents=True)
    data_dir.chmod(0o755)
    filler = " ".join(f"note{n}" for n in range(40))  # long enough to be compressed
    said = f"my card PIN is 4417-SECRET-9921, keep it safe {filler}\nlunch is at noon\n"
    first = await cli("console", "--user", "Alice", stdin=said)
    assert first.code == 0, first.err
    compact = await cli("store", "compact")
    assert compact.code == 0, compact.err
    assert files_holding(data_dir, "4417-SECRET-9921")  # the base file holds it now
    forget = await cli(
        "console", "--user", "Alice", stdin="/memory forget 4417-SECRET\n/memory show\n"
    )
    assert forget.code == 0, forget.err
    assert "Forgot" in forget.out and "lunch is at noon" in forget.out
    assert files_holding(data_dir, "4417-SECRET-9921") == []
    assert files_holding(data_dir, "lunch is at noon")  # (the scan does find what is kept)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for path in data_dir.rglob("*"):
        if path.is_file() and not path.is_symlink() and not path.is_socket():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def _doctor_row(out: str, check: str) -> str:
    """The line of doctor's table for ``check`` (run with a wide COLUMNS: one line a row)."""
    rows = [" ".join(line.replace("│", " ").split()) for line in out.splitlines()]
    [row] = [row for row in rows if row.startswith(check + " ")]
    return row


async def _open_beside(cli: CLI) -> Store:
    """The embedded store of the CLI's data directory, opened by the test: it keeps the
    server running between the commands, as a running bot would."""
    return await open_store(make_settings(data_dir=cli.home / "data" / "memorybot").store)


async def _persistence(store: Store) -> dict[str, Any]:
    info: Any = await store.client.info("persistence")
    return dict(info)


async def test_a_forget_whose_rewrite_a_killed_server_interrupted_is_erased_at_the_next_start(
    cli: CLI,
) -> None:
    """A console forgets a secret that sits in the base file, LZF-compressed; the server is
    killed (``kill -9``) while the forget's rewrite runs (made slow by the test), so the forget
    is not reported done and the files still hold the secret. The next memorybot command to
    start (``doctor``) finishes the rewrite, says so, and leaves no file holding it."""
    data_dir = cli.home / "data" / "memorybot"
    filler = " ".join(f"note{n}" for n in range(40))
    said = f"my card PIN is 4417-SECRET-9921, keep it safe {filler}\nlunch is at noon\n"
    assert (await cli("console", "--user", "Alice", stdin=said)).code == 0
    assert (await cli("store", "compact")).code == 0  # the base file holds it now
    beside = await _open_beside(cli)
    assert beside.embedded is not None
    pid = beside.embedded.pid
    assert pid is not None
    try:
        await beside.client.config_set("rdb-key-save-delay", 500_000)  # 0.5 s a key
        console = await spawn_memorybot(cli.home, "console", "--user", "Alice")
        talking = asyncio.create_task(console.communicate(b"/memory forget 4417-SECRET\n"))
        owed = data_dir / embedded.ERASE_OWED_FILENAME
        for _ in range(3000):
            if owed.exists() and (await _persistence(beside))["aof_rewrite_in_progress"]:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the forget's rewrite did not start with its record on disk")
        os.kill(pid, signal.SIGKILL)
        wait_until_gone(pid)
        out, _ = await asyncio.wait_for(talking, timeout=90)
        assert "Forgot" not in out.decode()  # not reported done: its files still hold it
    finally:
        await beside.close()
    assert files_holding(data_dir, "4417-SECRET-9921") and owed.exists()

    doctor = await cli("doctor", COLUMNS="1000")
    assert doctor.code == 0, doctor.out + doctor.err
    assert files_holding(data_dir, "4417-SECRET-9921") == []
    assert not owed.exists()
    assert "finished a forget's rewrite of its files that was still owed at start" in doctor.err
    assert "a rewrite a crash had interrupted was finished at this start" in _doctor_row(
        doctor.out, "erasure"
    )
    shown = await cli("console", stdin="/memory show\n")
    assert "lunch is at noon" in shown.out and "4417" not in shown.out


async def test_doctor_and_status_say_while_a_rewrite_is_owed_and_compact_clears_it(
    cli: CLI,
) -> None:
    """A rewrite that fails (a full disk: a file size limit on the server) leaves the forget's
    rewrite owed: ``doctor``, whose own start tries it again, warns and says what to run,
    ``store status`` says it too, and ``store compact`` once there is space clears it."""
    data_dir = cli.home / "data" / "memorybot"
    beside = await _open_beside(cli)
    assert beside.embedded is not None
    pid = beside.embedded.pid
    assert pid is not None
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    try:
        fine = await cli("doctor", COLUMNS="1000")
        assert "erasure ok none pending" in _doctor_row(fine.out, "erasure")
        await beside.client.set("big", "".join(str(n) for n in range(60_000)))  # ~290 kB
        await beside.client.set("secret", "my card PIN is 4417-SECRET-9921")
        await beside.persist(erase=True)
        await beside.client.delete("secret")
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (100_000, hard))
        with pytest.raises(StoreError):
            await beside.persist(erase=True)
        owed = data_dir / embedded.ERASE_OWED_FILENAME
        assert owed.exists()

        doctor = await cli("doctor", COLUMNS="1000")
        assert doctor.code == 0, doctor.out + doctor.err  # a warning, not a failed check
        row = _doctor_row(doctor.out, "erasure")
        assert row.startswith("erasure warn a forget's rewrite of the files is not done")
        assert "Run: memorybot store compact" in row and str(owed) in row
        assert "could not finish a forget's rewrite" in doctor.err
        assert "memorybot store compact" in doctor.err
        status = await cli("store", "status")
        assert status.code == 0, status.err
        assert "erasure pending: a forget's rewrite of the files is not done" in status.out
        assert files_holding(data_dir, "4417-SECRET-9921")

        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        compact = await cli("store", "compact")
        assert compact.code == 0, compact.err
        assert "the forget's rewrite that was pending is done" in compact.out
        assert not owed.exists()
        assert files_holding(data_dir, "4417-SECRET-9921") == []
        after = await cli("doctor", COLUMNS="1000")
        assert "erasure ok none pending" in _doctor_row(after.out, "erasure")
        assert "erasure pending" not in (await cli("store", "status")).out
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        await beside.close()
