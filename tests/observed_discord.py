"""The real discord.py bot, observed: :class:`ObservedBot` only signals when it finished
handling a message, an edit or a deletion, so tests wait for the bot instead of sleeping."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import discord

from bots.discord.bot import MemoryBot
from memory_core.bootstrap import Core
from tests.fakes.discord import JSON, SentMessage

WAIT = 5.0


class ObservedBot(MemoryBot):
    """The real bot; it only also records which messages it finished handling."""

    def __init__(self, core: Core, **options: Any) -> None:
        options.setdefault("guild_ready_timeout", 0.05)
        super().__init__(core, **options)
        self.handled_ids: set[int] = set()
        self.deleted_ids: set[int] = set()
        self.edit_counts: Counter[int] = Counter()
        self.changed = asyncio.Event()

    async def on_message(self, message: discord.Message) -> None:
        try:
            await super().on_message(message)
        finally:
            self.handled_ids.add(message.id)
            self.changed.set()

    async def forget_deleted(
        self, guild_id: int | None, channel_id: int, message_ids: list[int]
    ) -> None:
        try:
            await super().forget_deleted(guild_id, channel_id, message_ids)
        finally:
            self.deleted_ids.update(message_ids)
            self.changed.set()

    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        try:
            await super().on_raw_message_edit(event)
        finally:
            self.edit_counts[event.message_id] += 1
            self.changed.set()

    async def edited(self, message: JSON, *, updates: int = 1) -> None:
        """Wait until ``updates`` MESSAGE_UPDATEs of ``message`` were handled in all."""
        async with asyncio.timeout(WAIT):
            while self.edit_counts[int(message["id"])] < updates:
                self.changed.clear()
                await self.changed.wait()

    async def handled(self, *messages: JSON | SentMessage) -> None:
        """Wait until on_message has finished with each of ``messages``."""
        await self._wait(self.handled_ids, messages)

    async def deleted(self, *messages: JSON) -> None:
        """Wait until the deletion of each of ``messages`` was handled."""
        await self._wait(self.deleted_ids, messages)

    async def _wait(self, done: set[int], messages: tuple[JSON | SentMessage, ...]) -> None:
        ids = {m.id if isinstance(m, SentMessage) else int(m["id"]) for m in messages}
        async with asyncio.timeout(WAIT):
            while not ids <= done:
                self.changed.clear()
                await self.changed.wait()
