"""One path for a message, whatever the front door it came through.

Discord, Slack and the console only translate: a platform event becomes an
``IncomingMessage``, and the answer goes out through a :class:`ReplySink` the door implements.
The steps in between are here, once:

- :meth:`Conversation.receive`: store the message and decide whether to answer it.
- :meth:`Conversation.edit` and :meth:`Conversation.delete`: a message edited or deleted on
  its platform, in memory too; each platform event applied once (its delivery claimed, and
  released when applying it failed, so the platform's retry runs), failures logged, never
  raised into the door.
- :meth:`Conversation.answer`: the model writes the answer (``store=False``) while the sink
  shows typing; the draft streams through :class:`StreamedReply` (shown with the first words,
  then updated at most once per interval, at the platform's pace:
  :mod:`memory_core.service.streaming`); the answer is delivered, split under the sink's
  limit, never twice; a reply that fails on the store becomes the apology; and the answer is
  remembered only once delivered, because an answer nobody saw is not part of the
  conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, TypeVar

from config.prompts import load_prompts
from memory_core.errors import InputError, StoreError
from memory_core.models import Attachment, IncomingMessage, IngestResult, Reply
from memory_core.service.answer_record import remember_basis
from memory_core.service.intake import Intake
from memory_core.service.prepared import Prepared
from memory_core.service.replies import Replier
from memory_core.service.sources import SourceLinks, source_text
from memory_core.service.streaming import ReplySink, StreamedReply
from memory_core.text.language import reply_language

log = logging.getLogger(__name__)

HandleT = TypeVar("HandleT")


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored message the bot is to answer, as it was stored (``prepared``: its text
    validated, capped and counted once, for the store and for the prompt alike)."""

    message: IncomingMessage
    stored: IngestResult
    prepared: Prepared | None = None


@dataclass(frozen=True, slots=True)
class Delivered:
    """What :meth:`Conversation.answer` did: whether the answer (or the apology for it)
    reached the person, and the reply the model wrote (None when there was none)."""

    ok: bool
    reply: Reply | None = None

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class Delivery:
    """One platform event (Slack's event id): an edit or delete it carries is applied once,
    however often the platform delivers it."""

    platform: str
    event_id: str


class MessageChanges(Protocol):
    """What memory does with a message changed on its platform (the admin's message changes)."""

    async def edit_message(
        self,
        scope: str,
        platform_id: str,
        text: str,
        *,
        when: datetime | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> bool: ...

    async def forget_message(
        self, scope: str, platform_id: str, *, when: datetime | None = None
    ) -> int: ...


class Deliveries(Protocol):
    """Which platform events were handled already (the store's platform state)."""

    async def first_delivery(self, platform: str, event_id: str, *, ttl_s: int = 3600) -> bool: ...

    async def forget_delivery(self, platform: str, event_id: str) -> None: ...


class Conversation:
    """The steps from a person's message to the bot's remembered answer, and what happens to
    memory when that message is edited or deleted."""

    def __init__(
        self,
        intake: Intake,
        replier: Replier,
        *,
        changes: MessageChanges | None = None,
        deliveries: Deliveries | None = None,
    ) -> None:
        self.intake = intake  # the message stored, and the work it makes due handed on
        self.replier = replier
        self.settings = replier.settings
        self.changes = changes  # edits and deletes (the admin's message changes)
        self.deliveries = deliveries

    async def receive(self, message: IncomingMessage) -> Turn | None:
        """Store the message; the turn to answer, or None when the bot stays quiet.

        The store keeps a message once, by its platform id, in the same round trip: a
        repeat delivery comes back as a duplicate and is not answered. While Redis is away
        the message waits in memory and is stored when it is back. Raises what ``ingest``
        raises (StoreError, InputError): each door says where it happened."""
        prepared = self.intake.prepare(message)
        stored = await self.intake.accept(message, prepared=prepared)
        if not self.should_reply(message, stored):
            return None
        return Turn(message=message, stored=stored, prepared=prepared)

    def should_reply(self, message: IncomingMessage, stored: IngestResult) -> bool:
        """Whether the bot answers ``message``, stored as ``stored`` says: never a repeat
        delivery (answered the first time) nor a message not stored; always a direct one;
        else as the scope's mode says (off, all, or when addressed)."""
        if stored.outcome in ("duplicate", "day_closed", "forgotten"):
            return False
        if message.direct:
            return True
        mode = stored.mode or self.settings.memory.default_mode
        if mode == "off":
            return False
        return mode == "all" or message.addressed

    async def answer(
        self,
        turn: Turn,
        sink: ReplySink[HandleT],
        *,
        stream_interval_s: float | None,
        links: SourceLinks | None = None,
    ) -> Delivered:
        """Write, deliver and remember the answer to ``turn``: whether it (or the apology
        for it) was delivered, and the reply written (:class:`Delivered`, true when
        delivered).

        ``stream_interval_s``: stream the draft, edited at most this often (None: post the
        answer once it is complete). ``links``: the door's links to its messages, for the
        source line a scope may ask for (none: no source line)."""
        if not sink.can_send():
            return Delivered(ok=False)
        message, replier = turn.message, self.replier
        writer = StreamedReply(sink, stream_interval_s=stream_interval_s)
        try:
            async with sink.typing():
                reply = await replier.reply(
                    message,
                    exclude_id=turn.stored.id,
                    on_progress=writer.progress if writer.streams else None,
                    store=False,
                    prepared=turn.prepared,
                )
        except StoreError as exc:
            # The message itself is stored; say so rather than stay silent.
            log.error("could not answer in %s: %s", message.scope, exc)
            language = reply_language(
                turn.stored.lang, self.settings.memory.language, [message.text]
            )
            return Delivered(ok=await writer.finish(load_prompts(language).apology))
        log.info(
            "replied in %s (%s, %d prompt tokens)", message.scope, reply.kind, reply.prompt_tokens
        )
        text = await source_text(reply, message.text, links, repo=replier.repo, scope=message.scope)
        if not await writer.finish(text):
            return Delivered(ok=False, reply=reply)  # nobody saw it: not conversation
        posted = sink.message_id(writer.first) if writer.first is not None else ""
        parts = tuple(sink.message_id(handle) for handle in writer.more)
        try:  # without the source line; under every part's id (a delete of any forgets it)
            stored_id = await replier.remember_answer(
                message, reply, platform_id=posted, also_ids=parts
            )
            reply = replace(reply, stored_id=stored_id)
        except StoreError as exc:
            log.error("could not store the answer in %s: %s", message.scope, exc)
        memory = self.settings.memory
        await remember_basis(
            replier.repo, message, reply, now=replier.clock.now(), ttl_hours=memory.why_ttl_hours
        )
        return Delivered(ok=True, reply=reply)

    async def edit(
        self,
        scope: str,
        platform_id: str,
        text: str,
        *,
        when: datetime | None,
        attachments: Sequence[Attachment] = (),
        delivery: Delivery | None = None,
    ) -> bool:
        """A message edited on its platform: memory holds its new text instead and forgets
        what the edit took out. Whether memory changed (False too when the edit could not
        be applied: logged, and its delivery released for the platform's retry)."""
        changes = self._changes()
        try:
            if not await self._first(delivery):
                return False
            changed = await changes.edit_message(
                scope, platform_id, text, when=when, attachments=attachments
            )
        except (StoreError, InputError) as exc:
            log.error("the edit of message %s in %s was not applied: %s", platform_id, scope, exc)
            await self._release(delivery)
            return False
        if changed:
            log.info("applied the edit of message %s in %s", platform_id, scope)
        return changed

    async def delete(
        self,
        scope: str,
        deleted: Sequence[tuple[str, datetime | None]],
        *,
        delivery: Delivery | None = None,
    ) -> int:
        """Messages deleted on their platform, (platform id, when it was sent) each: deleted
        from memory too, with the facts and summary sentences made of them. How many
        stored entries went (what could not be forgotten is logged, its delivery released
        for the platform's retry)."""
        changes = self._changes()
        removed = 0
        try:
            if not await self._first(delivery):
                return 0
            for platform_id, when in deleted:
                gone = await changes.forget_message(scope, platform_id, when=when)
                if gone:
                    log.info("forgot deleted message %s in %s", platform_id, scope)
                removed += gone
        except (StoreError, InputError) as exc:
            log.error("deleted messages in %s were not forgotten: %s", scope, exc)
            await self._release(delivery)
        return removed

    def _changes(self) -> MessageChanges:
        if self.changes is None:  # (a Conversation built for answering only, in a test)
            raise RuntimeError("this Conversation was built without the admin service")
        return self.changes

    async def _first(self, delivery: Delivery | None) -> bool:
        if delivery is None or self.deliveries is None:
            return True
        return await self.deliveries.first_delivery(delivery.platform, delivery.event_id)

    async def _release(self, delivery: Delivery | None) -> None:
        if delivery is None or self.deliveries is None:
            return
        try:
            await self.deliveries.forget_delivery(delivery.platform, delivery.event_id)
        except StoreError as exc:  # (Redis away: the claim expires by itself in an hour)
            log.warning("could not release a %s delivery: %s", delivery.platform, exc)
