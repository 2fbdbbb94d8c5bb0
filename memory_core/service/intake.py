"""A message into memory: validated and counted once, stored in one round trip, and the work
it makes due handed on.

No LLM runs here. When a stored message makes maintenance due (the first message of a new
local day, or enough unsummarised text) the scope goes to the :class:`MaintenanceScheduler`;
its vector and its images' captions are made in the background. While Redis is away a message
waits in a bounded buffer (:class:`OutageBuffer`) and is stored, in order, once it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import EmptyMessage, StoreUnavailable
from memory_core.models import IncomingMessage, IngestResult
from memory_core.scopes import parse_scope
from memory_core.service.captions import Captioner
from memory_core.service.outage import OutageBuffer
from memory_core.service.prepared import Prepared
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.store.ingest import MessageIngest
from memory_core.text.attachments import stored_text
from memory_core.text.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics
    from memory_core.recall.index import RecallIndex

log = logging.getLogger(__name__)

Handed = tuple[IncomingMessage, Prepared, IngestResult]


class AfterStore:
    """What a stored message hands on, off the path that stored it: maintenance when it is
    due, its vector (recall), its images' captions, done by one worker, in order, from a
    queue. A running bot's core does not wait for it (a failure there is logged, never the
    message's); a one-shot core (a command, a replay: maintenance at each message's time)
    waits for it before the message's path returns, and is told what failed."""

    def __init__(
        self,
        maintenance: MaintenanceScheduler,
        *,
        recall: RecallIndex | None = None,
        captioner: Captioner | None = None,
        background: bool = True,
    ) -> None:
        self.maintenance = maintenance
        self.recall = recall
        self.captioner = captioner
        self.background = background
        self._queue: asyncio.Queue[Handed] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._failed: Exception | None = None  # a one-shot core's, raised by drain

    async def stored(self, msg: IncomingMessage, prepared: Prepared, result: IngestResult) -> None:
        if not result.stored:
            return
        self._queue.put_nowait((msg, prepared, result))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        if not self.background:
            await self.drain()

    async def hand_on(self, msg: IncomingMessage, prepared: Prepared, result: IngestResult) -> None:
        """The work a stored message made due, handed on."""
        scope = prepared.scope
        if self.maintenance.due_after(scope, result, prepared.ts_ms):
            await self.maintenance.schedule(scope)
        if self.background and self.recall is not None:
            self.recall.embed_soon(scope)  # its vector, once, off the reply path
        if result.outcome != "duplicate" and self.captioner is not None:
            await self.captioner.soon(msg)  # its images' captions, once

    async def _work(self) -> None:
        while True:
            handed = await self._queue.get()
            try:
                await self.hand_on(*handed)
            except Exception as exc:
                if not self.background:
                    self._failed = self._failed or exc  # the caller waiting is told
                else:  # a background worker has no caller to tell: log it, loudly
                    log.exception("the work after a message in %s failed", handed[1].scope)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait for what was handed on so far (shutdown, the end of a replay); in a one-shot
        core, raise what failed meanwhile."""
        if self._worker is not None and not self._worker.done():
            await self._queue.join()
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    async def close(self) -> None:
        """Stop the worker, once what was handed on is done (what failed there was raised by
        the drain before this, or is raised by this one)."""
        try:
            await self.drain()
        finally:
            if self._worker is not None:
                self._worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._worker
                self._worker = None


class Intake:
    """Where every message enters memory: a person's, the bot's answer, a replayed or
    learned one, one held through an outage."""

    def __init__(
        self,
        *,
        settings: Settings,
        messages: MessageIngest,
        counter: TokenCounter,
        clock: Clock,
        after: AfterStore,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.messages = messages
        self.counter = counter
        self.clock = clock
        self.after = after
        self.metrics = metrics
        self.outage = OutageBuffer(
            limit=settings.store.outage_buffer,
            cluster=settings.store.cluster,
            store=lambda prepared, msg: self._store(prepared, msg, held=True),
            after=self.after.stored,
            metrics=metrics,
        )

    def prepare(self, msg: IncomingMessage, *, own_day: bool = False) -> Prepared:
        """``msg`` validated, capped and counted once, for the store and the prompt alike.
        ``own_day``: with the end of its day, so that it is refused rather than counted in a
        later day (``outcome`` "day_closed")."""
        tz = self.settings.memory.timezone
        ts_ms = calendar.to_ms(msg.ts or self.clock.now())
        day = calendar.local_day_ms(ts_ms, tz)
        day_end_ms = calendar.day_end_ms(day, tz) if own_day else 0
        text, truncated = stored_text(
            msg.text, self.settings.memory.max_message_chars, msg.attachments
        )
        if not text:
            raise EmptyMessage("the message is empty: there is nothing to remember")
        return Prepared(
            scope=parse_scope(msg.scope),
            text=text,
            truncated=truncated,
            ts_ms=ts_ms,
            tokens=self.counter.count(text),
            day=day,
            own_day_end_ms=day_end_ms,
        )

    async def accept(
        self,
        msg: IncomingMessage,
        *,
        hold: bool = True,
        own_day: bool = False,
        prepared: Prepared | None = None,
    ) -> IngestResult:
        """Store one message (one round trip) and hand on the work it makes due.

        If Redis cannot be reached, the message waits in a bounded in-memory buffer and is
        stored, in order, as soon as Redis is back (``IngestResult.buffered``). On a Redis
        Cluster the order kept is each scope's: a scope whose shard answers is stored at
        once while another shard's scopes wait. Past the bound, StoreUnavailable says the
        message was not kept, so the front door does not acknowledge it as stored.
        ``hold=False``: StoreUnavailable at once instead (replay waits for Redis itself, its
        clock held at the message). ``own_day``: refuse the message (``outcome``
        "day_closed") rather than count it in a later day than its own. ``prepared``: the
        message as :meth:`prepare` made it, when the caller has it already."""
        if prepared is None or (own_day and not prepared.own_day_end_ms):
            prepared = self.prepare(msg, own_day=own_day)
        if self.outage.waits_behind(prepared.scope):  # an outage is being caught up: in order
            if not hold:
                raise StoreUnavailable(f"{self.held} messages wait for Redis to come back")
            return self.outage.hold(prepared, msg)
        try:
            result = await self._store(prepared, msg, held=False)
        except StoreUnavailable:
            if not hold:
                raise
            return self.outage.hold(prepared, msg)
        await self.after.stored(msg, prepared, result)
        return result

    async def _store(self, prepared: Prepared, msg: IncomingMessage, *, held: bool) -> IngestResult:
        result = await self.messages.ingest(
            prepared.scope,
            ts_ms=prepared.ts_ms,
            role=msg.role,
            author=msg.author,
            author_id=msg.author_id,
            text=prepared.text,
            platform_id=msg.platform_id,
            tokens=prepared.tokens,
            day=prepared.day,
            place_name=msg.place_name[:120],
            held=held,
            own_day_end_ms=prepared.own_day_end_ms,
            public=msg.public,
            reply_to=msg.reply_to,
            audience=msg.audience.value,
            answers=msg.answers,
            also_ids=msg.also_ids,
        )
        if prepared.truncated:
            result = replace(result, truncated=True)
        if self.metrics is not None and result.stored and result.outcome != "duplicate":
            self.metrics.incr("messages")
        return result

    @property
    def held(self) -> int:
        """Messages waiting in memory for Redis to come back."""
        return self.outage.held

    async def wait_held(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the held messages to be stored; True when none
        is left. (Replay: its clock must not run past messages that are not stored yet, or
        the days in between would be closed without them.) Re-raises what stopped the
        catching up, e.g. an outage during the maintenance it ran."""
        return await self.outage.wait(seconds)
