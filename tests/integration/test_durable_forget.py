"""On the embedded store a forget is on disk when it returns: every way to forget (a text,
a person, a fact, a platform delete, the whole scope) writes the snapshot before it answers,
so a crash after the answer cannot bring the forgotten text back. (A real Redis persists by
its own settings; memorybot does not force it.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from memory_core import embedded
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, make_settings

SCOPE = "console:tea"


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[Core]:
    # No autosave: the only snapshots are the ones the code asks for.
    settings = make_settings(data_dir=tmp_path / "store")
    core = await build_core(settings, clock=ManualClock(START), background=False, autosave=False)
    try:
        yield core
    finally:
        await core.close()


def snapshot_text(core: Core) -> str:
    assert core.store.embedded is not None
    return (core.store.embedded.path.parent / embedded.SNAPSHOT_FILENAME).read_text("utf-8")


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
async def test_every_forget_is_in_the_snapshot_when_it_returns(
    core: Core, forget: Callable[[Core], Awaitable[None]]
) -> None:
    await say(core, "I like hojicha in the morning", author="Alice", platform_id="m-1")
    await say(core, "sencha for me", author="Bob", platform_id="m-2")
    await core.store.persist()
    assert "hojicha" in snapshot_text(core)
    await forget(core)
    assert "hojicha" not in snapshot_text(core)
    if forget is not forget_all:
        assert "sencha for me" in snapshot_text(core)  # the rest of memory is still there


async def test_forget_fact_is_in_the_snapshot_when_it_returns(core: Core) -> None:
    fact = await core.admin.remember(SCOPE, "the team drinks hojicha on Fridays")
    await core.admin.remember(SCOPE, "standup is at 10:00")
    await core.store.persist()
    assert "hojicha" in snapshot_text(core)
    assert await core.admin.forget_fact(SCOPE, fact.id)
    assert "hojicha" not in snapshot_text(core)
    assert "standup is at 10:00" in snapshot_text(core)
