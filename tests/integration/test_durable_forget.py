"""On the embedded store a forget is on disk when it returns: every way to forget (a text,
a person, a fact, a platform delete, the whole scope) waits for the server's fsync (WAITAOF)
before it answers, so a crash after the answer cannot bring the forgotten text back. Here the
crash is a SIGKILL of the Valkey server itself; the next start replays its append-only file.
(A real Redis persists by its own settings; memorybot does not force it.)"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, make_settings, wait_until_gone
from tests.helpers import scope_values

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
    await core.pipeline.ingest(message)


async def forget_text(core: Core) -> None:
    await core.admin.forget_text(SCOPE, "hojicha")


async def forget_me(core: Core) -> None:
    await core.admin.forget_user(SCOPE, user_id="alice", name="Alice")


async def platform_delete(core: Core) -> None:
    await core.admin.forget_message(SCOPE, "m-1")


async def forget_all(core: Core) -> None:
    await core.admin.forget_all(SCOPE)


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
    assert await core.admin.forget_fact(SCOPE, fact.id)
    core = await cores.crash_and_reopen()
    text = await stored(core)
    assert "hojicha" not in text
    assert "standup is at 10:00" in text
