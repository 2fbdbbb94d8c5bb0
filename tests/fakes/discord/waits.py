"""Waiting on the fake Discord's records (messages, edits, typing, responses, follow-ups, synced
commands, sessions) instead of sleeping.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from .models import (
    JSON,
    FakeDiscordTimeout,
    FakeInteraction,
    Followup,
    InteractionResponse,
    MessageEdit,
    SentMessage,
    SyncedCommands,
    TypingEvent,
)

if TYPE_CHECKING:
    pass


class WaitsMixin:
    """wait_for_* helpers over the records."""

    async def dispatch(
        self, event: str, data: JSON, *, guild_id: int | None = None, timeout: float = 5.0
    ) -> None:
        """Send any raw DISPATCH event to the sessions owning ``guild_id`` (escape hatch)."""
        await self._wait_for_owner_session(guild_id, timeout)
        self._dispatch(event, data, guild_id=guild_id, intent=None)
        await self._flush_sessions(guild_id)

    # ------------------------------------------------------------------ waiters

    async def wait_for(
        self, predicate: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` is true; re-checked after every request/event."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                sent = [(m.channel_id, m.content) for m in self.sent_messages]
                responses = [(r.type, r.data) for r in self.interaction_responses]
                errors = [r for r in self.requests if r.status >= 400]
                raise FakeDiscordTimeout(
                    f"timed out after {timeout}s waiting for {what}; sent_messages={sent!r} "
                    f"interaction_responses={responses!r} "
                    f"unknown_routes={self.unknown_routes!r} errors={errors!r}"
                )
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await asyncio.wait({waiter}, timeout=remaining)
            finally:
                self._waiters.discard(waiter)

    async def wait_for_messages(
        self, channel_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[SentMessage]:
        """Wait until the bot posted ``count`` messages (in ``channel_id``, if given)."""

        def matching() -> list[SentMessage]:
            return [
                m for m in self.sent_messages if channel_id is None or m.channel_id == channel_id
            ]

        await self.wait_for(
            lambda: len(matching()) >= count,
            timeout=timeout,
            what=f"{count} message(s) in channel {channel_id}",
        )
        return matching()

    async def wait_for_edits(
        self, message_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[MessageEdit]:
        """Wait until ``count`` edits happened (of ``message_id``, if given)."""

        def matching() -> list[MessageEdit]:
            return [e for e in self.edits if message_id is None or e.message_id == message_id]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} edit(s)"
        )
        return matching()

    async def wait_for_typing(
        self, channel_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[TypingEvent]:
        """Wait until the bot triggered typing ``count`` times (in ``channel_id``, if given)."""

        def matching() -> list[TypingEvent]:
            return [t for t in self.typing if channel_id is None or t.channel_id == channel_id]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} typing event(s)"
        )
        return matching()

    async def wait_for_response(
        self, interaction: FakeInteraction | int, *, timeout: float = 5.0
    ) -> InteractionResponse:
        """Wait for the initial response to an interaction."""
        iid = interaction if isinstance(interaction, int) else interaction.id

        def found() -> InteractionResponse | None:
            return next((r for r in self.interaction_responses if r.interaction_id == iid), None)

        await self.wait_for(
            lambda: found() is not None,
            timeout=timeout,
            what=f"a response to interaction {iid}",
        )
        response = found()
        assert response is not None
        return response

    async def wait_for_interaction_responses(
        self, count: int = 1, *, timeout: float = 5.0
    ) -> list[InteractionResponse]:
        """Wait until ``count`` interaction responses were recorded."""
        await self.wait_for(
            lambda: len(self.interaction_responses) >= count,
            timeout=timeout,
            what=f"{count} interaction response(s)",
        )
        return list(self.interaction_responses)

    async def wait_for_followups(
        self,
        interaction: FakeInteraction | int | None = None,
        count: int = 1,
        *,
        timeout: float = 5.0,
    ) -> list[Followup]:
        """Wait until ``count`` follow-ups were sent (for ``interaction``, if given)."""
        iid = interaction.id if isinstance(interaction, FakeInteraction) else interaction

        def matching() -> list[Followup]:
            return [f for f in self.followups if iid is None or f.interaction_id == iid]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} follow-up(s)"
        )
        return matching()

    async def wait_for_synced_commands(
        self, count: int = 1, *, timeout: float = 5.0
    ) -> list[SyncedCommands]:
        """Wait until ``count`` command syncs happened."""
        await self.wait_for(
            lambda: len(self.synced_commands) >= count,
            timeout=timeout,
            what=f"{count} command sync(s)",
        )
        return list(self.synced_commands)

    async def wait_for_sessions(
        self, count: int = 1, *, shard_id: int | None = None, timeout: float = 5.0
    ) -> None:
        """Wait until ``count`` gateway sessions (of ``shard_id``, if given) got READY."""

        def ready() -> int:
            return sum(
                1
                for s in self._sessions
                if s.ready and not s.closed and (shard_id is None or s.shard_id == shard_id)
            )

        await self.wait_for(
            lambda: ready() >= count, timeout=timeout, what=f"{count} ready gateway session(s)"
        )
