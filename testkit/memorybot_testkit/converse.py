"""A core driven the way the front doors drive it, for callers without a platform (the
tests, the benchmarks): :meth:`Conversation.receive`, then, when the bot answers,
:meth:`Conversation.answer` into a sink that keeps the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memory_core.models import IncomingMessage, Reply
from memory_core.service.streaming import KeptAnswer

if TYPE_CHECKING:
    from memory_core.bootstrap import Core


async def converse(core: Core, msg: IncomingMessage) -> Reply | None:
    """``msg`` down the doors' own path: stored, then, when the bot answers it, written,
    delivered and remembered. The reply written, or None when the bot stays quiet (or could
    not answer: the apology was delivered instead)."""
    turn = await core.conversation.receive(msg)
    if turn is None:
        return None
    delivered = await core.conversation.answer(turn, KeptAnswer(), stream_interval_s=None)
    return delivered.reply


async def converse_streamed(
    core: Core, msg: IncomingMessage, on_progress: Callable[[str], Awaitable[None]] | None
) -> Reply | None:
    """:func:`converse`, the answer taken from the replier's own stream (each text so far to
    ``on_progress``, unthrottled: what a door's sink is fed) and stored as it ends."""
    turn = await core.conversation.receive(msg)
    if turn is None:
        return None
    return await core.replier.reply(
        msg, exclude_id=turn.stored.id, on_progress=on_progress, prepared=turn.prepared
    )
