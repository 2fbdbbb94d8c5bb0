"""One path for a message, whatever the front door it came through.

Discord, Slack and the console only translate: a platform event becomes an
``IncomingMessage``, and the answer goes out through a :class:`ReplySink` the door implements.
The steps in between are here, once:

- :meth:`Conversation.receive`: store the message and decide whether to answer it.
- :meth:`Conversation.answer`: the model writes the answer (``store=False``) while the sink
  shows typing; the draft streams through :class:`StreamedReply` (posted with the first words,
  then edited at most once per interval); the answer is delivered, split under the sink's
  limit; a reply that fails on the store becomes the apology; and the answer is remembered
  only once delivered, because an answer nobody saw is not part of the conversation.
- :class:`Throttle`, and :func:`memory_core.text.chunks.split_message` (the cut under a
  platform's limit), the pieces of the streaming writer.

The core imports no platform library: a sink's handle (a Discord message, a Slack ts) is
opaque here, and a sink reports a failed post or edit by its return value, having logged it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from config.prompts import load_prompts
from memory_core.errors import StoreError
from memory_core.models import IncomingMessage, IngestResult
from memory_core.service.answer_record import remember_basis
from memory_core.service.pipeline import MemoryPipeline
from memory_core.service.sources import source_text
from memory_core.text.chunks import split_message

log = logging.getLogger(__name__)

STREAMING_MARK = " …"  # shown at the end of a draft while the answer is still coming


class Throttle:
    """True at most once per ``interval_s`` (streaming edits: about one a second)."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last = float("-inf")

    def ready(self) -> bool:
        now = self._clock()
        if now - self._last >= self.interval_s:
            self._last = now
            return True
        return False


HandleT = TypeVar("HandleT")


class ReplySink(Protocol[HandleT]):
    """How one answer reaches the person who asked, on one platform.

    ``post`` and ``edit`` never raise for a platform failure: they log it (without the text)
    and return None or False, so a refusal never escapes into the model's stream and the
    answer is still finished.
    """

    message_chars: int  # the longest message the platform shows well

    def can_send(self) -> bool:
        """Whether an answer could be posted at all (checked before paying for one)."""
        ...

    def typing(self) -> AbstractAsyncContextManager[object]:
        """Show that the answer is being written, for as long as the block runs."""
        ...

    def markup(self, text: str) -> str:
        """The model's Markdown as the platform writes it."""
        ...

    async def post(self, *, text: str) -> HandleT | None:
        """Post one message of the answer (the first one answers the message that asked);
        its handle, or None when the platform refused it."""
        ...

    async def edit(self, *, handle: HandleT, text: str) -> bool:
        """Replace the text of a posted message; False when the platform refused."""
        ...

    def message_id(self, handle: HandleT) -> str:
        """The platform's id of a posted message ("" where there is none): the answer is
        remembered under it, so that deleting it on the platform forgets it."""
        ...


class StreamedReply(Generic[HandleT]):
    """One answer on its way through a sink: optionally streamed as a draft (the first
    message, edited at most once per ``stream_interval_s``), then completed, with what
    overflows the first message posted after it."""

    def __init__(
        self,
        sink: ReplySink[HandleT],
        *,
        stream_interval_s: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.throttle = (
            Throttle(stream_interval_s, clock) if stream_interval_s is not None else None
        )
        self.draft: HandleT | None = None  # the first message, once posted
        self.shown = ""  # what the first message shows now
        self.broken = False  # a draft post or edit failed: no more drafting
        self.first: HandleT | None = None  # the answer's first message that stayed

    @property
    def streams(self) -> bool:
        return self.throttle is not None

    def chunks(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(self.sink.markup(text), limit or self.sink.message_chars)

    async def progress(self, text_so_far: str) -> None:
        """The pipeline's ``on_progress``: show the answer growing, throttled."""
        if self.throttle is None or self.broken or not text_so_far.strip():
            return
        if not self.throttle.ready():
            return
        # The first message only, under the limit with the mark; what overflows is posted
        # when the answer is complete.
        chunks = self.chunks(text_so_far, self.sink.message_chars - len(STREAMING_MARK))
        if not chunks:
            return
        preview = chunks[0].rstrip() + STREAMING_MARK
        if self.draft is None:
            self.draft = await self.sink.post(text=preview)
            shown = self.draft is not None
        else:
            shown = await self.sink.edit(handle=self.draft, text=preview)
        if shown:
            self.shown = preview
        else:
            self.broken = True

    async def finish(self, text: str) -> bool:
        """Post (or complete) the answer. Returns whether all of it was posted."""
        chunks = self.chunks(text)
        if not chunks:
            return False
        rest = chunks
        if self.draft is not None and (
            chunks[0] == self.shown or await self.sink.edit(handle=self.draft, text=chunks[0])
        ):
            rest = chunks[1:]
            self.first = self.draft
        # else: nothing streamed, or the last edit failed: the whole answer as new messages.
        for chunk in rest:
            posted = await self.sink.post(text=chunk)
            if posted is None:
                return False
            if self.first is None:
                self.first = posted
        return True


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored message the bot is to answer."""

    message: IncomingMessage
    stored: IngestResult


class Conversation:
    """The steps from a person's message to the bot's remembered answer."""

    def __init__(self, pipeline: MemoryPipeline) -> None:
        self.pipeline = pipeline

    async def receive(self, message: IncomingMessage) -> Turn | None:
        """Store the message; the turn to answer, or None when the bot stays quiet.

        The store keeps a message once, by its platform id, in the same round trip: a
        repeat delivery comes back as a duplicate and is not answered. While Redis is away
        the message waits in memory and is stored when it is back. Raises what ``ingest``
        raises (StoreError, InputError): each door says where it happened."""
        stored = await self.pipeline.ingest(message)
        if stored.outcome == "duplicate":
            log.debug("%s in %s already handled", message.platform_id, message.scope)
        if not self.pipeline.should_reply(message, stored):
            return None
        return Turn(message=message, stored=stored)

    async def answer(
        self,
        turn: Turn,
        sink: ReplySink[HandleT],
        *,
        stream_interval_s: float | None,
    ) -> bool:
        """Write, deliver and remember the answer to ``turn``; whether it (or the apology
        for it) was delivered.

        ``stream_interval_s``: stream the draft, edited at most this often (None: post the
        answer once it is complete)."""
        if not sink.can_send():
            return False
        message, pipeline = turn.message, self.pipeline
        writer = StreamedReply(sink, stream_interval_s=stream_interval_s)
        try:
            async with sink.typing():
                reply = await pipeline.reply(
                    message,
                    exclude_id=turn.stored.id,
                    on_progress=writer.progress if writer.streams else None,
                    store=False,
                )
        except StoreError as exc:
            # The message itself is stored; say so rather than stay silent.
            log.error("could not answer in %s: %s", message.scope, exc)
            language = turn.stored.lang or pipeline.settings.memory.language
            return await writer.finish(load_prompts(language).apology)
        log.info(
            "replied in %s (%s, %d prompt tokens)", message.scope, reply.kind, reply.prompt_tokens
        )
        text = await source_text(reply, message.text, sink, repo=pipeline.repo, scope=message.scope)
        if not await writer.finish(text):
            return False  # an answer nobody saw is not part of the conversation
        posted = sink.message_id(writer.first) if writer.first is not None else ""
        try:  # without the source line
            await pipeline.remember_answer(message, reply, platform_id=posted)
        except StoreError as exc:
            log.error("could not store the answer in %s: %s", message.scope, exc)
        memory = pipeline.settings.memory
        await remember_basis(
            pipeline.repo, message, reply, now=pipeline.clock.now(), ttl_hours=memory.why_ttl_hours
        )
        return True
