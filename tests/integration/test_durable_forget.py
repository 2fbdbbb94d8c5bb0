"""On the embedded store a forget is on disk when it returns: every way to forget (a text,
a person, a fact, a platform delete, the whole scope) waits for the server's fsync (WAITAOF)
before it answers, so a crash after the answer cannot bring the forgotten text back. Here the
crash is a SIGKILL of the Valkey server itself; the next start replays its append-only file.
(A real Redis persists by its own settings; memorybot does not force it.)

And gone means gone on disk: when a forget returns, no file of the data directory holds the
text (not the append-only file's commands, not the base a rewrite wrote, plain or
LZF-compressed: ``tests/rdb_scan.py``), and forgets at once share the rewrite that takes it
out."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.store import embedded
from memory_core.store.server import AOF_REWRITE, rewrite
from tests.helpers import START, make_settings, scope_values, wait_until_gone
from tests.rdb_scan import decompressed_strings, files_holding

SCOPE = "console:tea"


class Cores:
    """Cores on one data directory; :meth:`crash` kills the server under the current one."""

    def __init__(self, data_dir: Path) -> None:
        self.settings = make_settings(data_dir=data_dir)
        self.current: Core | None = None

    async def open(self) -> Core:
        self.current = await build_core(self.settings, clock=ManualClock(START), background=False)
        return self.current

    async def crash_and_reopen(self) -> Core:
        assert self.current is not None and self.current.store.embedded is not None
        pid = self.current.store.embedded.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # no SHUTDOWN, no last fsync: what is not on disk is gone
        wait_until_gone(pid)
        await self.current.close()
        return await self.open()

    async def restart(self) -> Core:
        """Close (the server stops with its last user) and open again: memory comes back from
        the files alone."""
        assert self.current is not None and self.current.store.embedded is not None
        pid = self.current.store.embedded.pid
        await self.current.close()
        assert pid is not None
        wait_until_gone(pid)
        return await self.open()

    async def close(self) -> None:
        if self.current is not None:
            await self.current.close()


@pytest.fixture
async def cores(tmp_path: Path) -> AsyncIterator[Cores]:
    made = Cores(tmp_path / "store")
    try:
        yield made
    finally:
        await made.close()


async def stored(core: Core) -> str:
    return " ".join(await scope_values(core, SCOPE))


async def say(core: Core, text: str, *, author: str, platform_id: str = "") -> None:
    message = IncomingMessage(
        scope=SCOPE, text=text, author=author, author_id=author.lower(), platform_id=platform_id
    )
    await core.intake.accept(message)


async def forget_text(core: Core) -> None:
    await core.admin.text.forget_text(SCOPE, "hojicha")


async def forget_me(core: Core) -> None:
    await core.admin.person.forget_user(SCOPE, user_id="alice", name="Alice")


async def platform_delete(core: Core) -> None:
    await core.admin.messages.forget_message(SCOPE, "m-1")


async def forget_all(core: Core) -> None:
    await core.admin.place.forget_all(SCOPE)


@pytest.mark.parametrize(
    "forget",
    [forget_text, forget_me, platform_delete, forget_all],
    ids=["forget-text", "forget-me", "platform-delete", "forget-all"],
)
async def test_every_forget_survives_a_server_crash_right_after_it_returns(
    cores: Cores, forget: Callable[[Core], Awaitable[None]]
) -> None:
    core = await cores.open()
    await say(core, "I like hojicha in the morning", author="Alice", platform_id="m-1")
    await say(core, "sencha for me", author="Bob", platform_id="m-2")
    await forget(core)
    core = await cores.crash_and_reopen()
    text = await stored(core)
    assert "hojicha" not in text
    if forget is not forget_all:
        assert "sencha for me" in text  # the rest of memory is still there


async def test_forget_fact_survives_a_server_crash_right_after_it_returns(cores: Cores) -> None:
    core = await cores.open()
    fact = await core.admin.remember(SCOPE, "the team drinks hojicha on Fridays")
    await core.admin.remember(SCOPE, "standup is at 10:00")
    assert await core.admin.text.forget_fact(SCOPE, fact.id)
    core = await cores.crash_and_reopen()
    text = await stored(core)
    assert "hojicha" not in text
    assert "standup is at 10:00" in text


SECRET = "078-05-1120-SECRET"


async def aof_rewrites(core: Core) -> int:
    info: Any = await core.store.client.info("persistence")
    return int(info["aof_rewrites"])


async def test_a_forget_returns_once_no_file_of_the_data_directory_holds_the_text(
    cores: Cores,
) -> None:
    core = await cores.open()
    data_dir = cores.settings.store.data_dir
    # Long and repetitive: in an RDB (a rewrite's base) Valkey LZF-compresses it.
    long = f"{'the quarterly planning notes repeat themselves ' * 5}{SECRET}{' and again' * 20}"
    assert len(long) > 200
    await say(core, f"my number is {SECRET}", author="Alice", platform_id="m-1")
    await say(core, long, author="Alice", platform_id="m-2")
    await say(core, "sencha for me", author="Bob", platform_id="m-3")
    # A rewrite first: the secret is in a base file, compressed, not only in commands.
    await rewrite(core.store.client.execute_command, AOF_REWRITE, timeout_s=60)
    [base] = (data_dir / embedded.AOF_DIRNAME).glob("*.base.rdb")
    assert files_holding(data_dir, SECRET) == [base]
    # In it also LZF-compressed (the long message, or a stream node holding it): a search
    # for the plain bytes alone would miss that copy.
    assert any(SECRET.encode() in text for text in decompressed_strings(base.read_bytes()))

    await core.admin.text.forget_text(SCOPE, SECRET)
    assert files_holding(data_dir, SECRET) == []  # at once: the forget waited for it

    core = await cores.restart()
    text = await stored(core)
    assert SECRET not in text
    assert "sencha for me" in text  # the rest of memory came back from the files
    assert files_holding(data_dir, SECRET) == []


async def test_a_burst_of_forgets_costs_at_most_two_rewrites(cores: Cores) -> None:
    """Ten forgets at once (a person forgotten everywhere, a clean-up script): the first asks
    for a rewrite; those whose writes came after it started share one more."""
    core = await cores.open()
    places = [f"console:burst{n}" for n in range(10)]
    for n, place in enumerate(places):
        message = IncomingMessage(
            scope=place, text=f"code {n}: {SECRET}", author="Alice", author_id="alice"
        )
        await core.intake.accept(message)
        await core.intake.accept(
            IncomingMessage(scope=place, text="sencha for me", author="Bob", author_id="bob")
        )
    before = await aof_rewrites(core)
    await asyncio.gather(*(core.admin.text.forget_text(place, SECRET) for place in places))
    assert 1 <= await aof_rewrites(core) - before <= 2
    assert files_holding(cores.settings.store.data_dir, SECRET) == []
