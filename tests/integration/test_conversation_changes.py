"""Edits and deletes made on a platform reach memory through the one conversation every
door uses: each platform event applied once, a failure logged and its delivery released so
the platform's retry applies it, never raised into the door. On a real Redis."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from memory_core.bootstrap import Core
from memory_core.errors import StoreUnavailable
from memory_core.models import IncomingMessage
from memory_core.service.conversation import Conversation, Delivery
from tests.helpers import CoreFactory

SCOPE = "slack:T1:C1"


async def said(core: Core, text: str, ts: str) -> None:
    await core.intake.accept(
        IncomingMessage(scope=SCOPE, text=text, author="Ann", author_id="U1", platform_id=ts)
    )


async def texts(core: Core) -> list[str]:
    return sorted(e.text for e in await core.repo.reads.all_entries(SCOPE))


class Flaky:
    """The admin's message changes, failing the first ``failures`` calls as Redis going away
    would."""

    def __init__(self, changes: Any, failures: int) -> None:
        self.changes = changes
        self.failures = failures

    async def edit_message(self, *args: Any, **kwargs: Any) -> bool:
        self._maybe_fail()
        return bool(await self.changes.edit_message(*args, **kwargs))

    async def forget_message(self, *args: Any, **kwargs: Any) -> int:
        self._maybe_fail()
        return int(await self.changes.forget_message(*args, **kwargs))

    def _maybe_fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("Redis went away")


async def test_an_edit_and_a_delete_are_applied_once_per_platform_event(
    make_core: CoreFactory,
) -> None:
    core = await make_core()
    conversation = core.conversation
    await said(core, "lunch at noon", "1.1")
    await said(core, "bring the zebrafalcon slides", "1.2")
    edited = Delivery("slack", "Ev1")
    assert await conversation.edit(SCOPE, "1.1", "lunch at one", when=None, delivery=edited)
    assert await texts(core) == ["bring the zebrafalcon slides", "lunch at one"]
    # The same event delivered again (Slack retries): nothing happens, even with other text.
    assert not await conversation.edit(SCOPE, "1.1", "lunch at two", when=None, delivery=edited)
    assert await texts(core) == ["bring the zebrafalcon slides", "lunch at one"]
    deleted = Delivery("slack", "Ev2")
    assert await conversation.delete(SCOPE, [("1.2", None)], delivery=deleted) == 1
    assert await conversation.delete(SCOPE, [("1.2", None)], delivery=deleted) == 0
    assert await texts(core) == ["lunch at one"]


async def test_a_change_that_fails_is_logged_and_its_retry_applies_it(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    core = await make_core()
    await said(core, "the launch is on friday", "2.1")
    await said(core, "the budget is 400", "2.2")
    flaky = Conversation(
        core.intake, core.replier, changes=Flaky(core.admin.messages, 2), deliveries=core.platform
    )
    edit, delete = Delivery("slack", "Ev3"), Delivery("slack", "Ev4")
    assert not await flaky.edit(SCOPE, "2.1", "the launch is on monday", when=None, delivery=edit)
    assert await flaky.delete(SCOPE, [("2.2", datetime.now())], delivery=delete) == 0
    assert "was not applied: Redis went away" in caplog.text
    assert "were not forgotten: Redis went away" in caplog.text
    assert await texts(core) == ["the budget is 400", "the launch is on friday"]
    # The platform's retries of the same events: applied now.
    assert await flaky.edit(SCOPE, "2.1", "the launch is on monday", when=None, delivery=edit)
    assert await flaky.delete(SCOPE, [("2.2", None)], delivery=delete) == 1
    assert await texts(core) == ["the launch is on monday"]


async def test_a_conversation_for_answers_only_says_it_cannot_change_messages(
    make_core: CoreFactory,
) -> None:
    core = await make_core()
    with pytest.raises(RuntimeError, match="without the admin service"):
        await Conversation(core.intake, core.replier).delete(SCOPE, [("3.1", None)])
