"""The memory pipeline every message runs through.

``handle`` = ``ingest`` (one Redis round trip, no LLM) + maybe ``reply`` (one prompt read,
one LLM call, the answer stored). Summaries never run on this path: when a message makes
maintenance due (a new local day, or enough unsummarised text), the scope is handed to a
background worker, one at a time per scope in this process and one at a time per scope in
the fleet (a Redis lock inside the maintainer).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import (
    EmptyMessage,
    StoreUnavailable,
)
from memory_core.llm.client import LLM
from memory_core.models import IncomingMessage, IngestResult, Reply
from memory_core.prompt.assembly import Prompt, PromptAssembler
from memory_core.recall.index import RecallIndex
from memory_core.scopes import parse_scope
from memory_core.service.captions import Captioner
from memory_core.service.outage import OutageBuffer
from memory_core.service.prepared import Prepared
from memory_core.service.replies import Replier
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.store.repo import MemoryRepo
from memory_core.text.attachments import stored_text
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.maintenance import Maintainer, MaintenanceReport

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics
    from memory_core.service.budget import Budget

log = logging.getLogger(__name__)

RECENT_FETCH = 100  # raw messages read for the working window


class MemoryPipeline:
    def __init__(
        self,
        *,
        settings: Settings,
        repo: MemoryRepo,
        llm: LLM,
        maintainer: Maintainer,
        assembler: PromptAssembler,
        counter: TokenCounter,
        clock: Clock,
        recall: RecallIndex | None = None,
        metrics: Metrics | None = None,
        background: bool = True,
        captioner: Captioner | None = None,
        budget: Budget | None = None,  # daily token limits; None: none
        maintenance: MaintenanceScheduler | None = None,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.llm = llm
        self.maintainer = maintainer
        self.assembler = assembler
        self.counter = counter
        self.clock = clock
        self.recall = recall
        self.background = background
        self.captioner = captioner
        self.budget = budget
        self.metrics = metrics
        # When a scope's maintenance runs: given (a test's ManualMaintenance), or in the
        # background as ``background`` says.
        self.maintenance = maintenance or MaintenanceScheduler(
            maintainer,
            concurrency=settings.llm.concurrency,
            background=background,
            metrics=metrics,
        )
        self.outage = OutageBuffer(
            limit=settings.store.outage_buffer,
            cluster=settings.store.cluster,
            store=lambda prepared, msg: self._store(prepared, msg, held=True),
            after=self._stored_late,
            metrics=metrics,
        )
        self._unknown_zones: set[str] = set()  # stored timezones already warned about
        self.replies = Replier(
            settings=settings,
            repo=repo,
            llm=llm,
            assembler=assembler,
            clock=clock,
            counter=counter,
            recall=recall,
            budget=budget,
            metrics=metrics,
            prepare=self.prepare,
            ingest=self.ingest,
            scope_tz=self._scope_tz,
        )

    # -- ingest ------------------------------------------------------------------------
    def prepare(self, msg: IncomingMessage) -> Prepared:
        scope = parse_scope(msg.scope)
        text, truncated = stored_text(
            msg.text, self.settings.memory.max_message_chars, msg.attachments
        )
        if not text:
            raise EmptyMessage("the message is empty: there is nothing to remember")
        ts = msg.ts or self.clock.now()
        return Prepared(
            scope=scope,
            text=text,
            truncated=truncated,
            ts_ms=calendar.to_ms(ts),
            tokens=self.counter.count(text),
        )

    async def ingest(
        self,
        msg: IncomingMessage,
        *,
        hold: bool = True,
        own_day: bool = False,
        prepared: Prepared | None = None,
    ) -> IngestResult:
        """Store one message (one round trip) and hand the scope to maintenance if due.

        If Redis cannot be reached, the message waits in a bounded in-memory buffer and is
        stored, in order, as soon as Redis is back (``IngestResult.buffered``). On a Redis
        Cluster the order kept is each scope's: a scope whose shard answers is stored at
        once while another shard's scopes wait (see :meth:`_waits_behind`). Past the
        bound, StoreUnavailable says the message was not kept, so the front door does not
        acknowledge it as stored. ``hold=False``: StoreUnavailable at once instead (replay
        waits for Redis itself, its clock held at the message). ``own_day``: refuse the
        message (``outcome`` "day_closed") rather than count it in a later day than its own.
        ``prepared``: the message as :meth:`prepare` made it, when the caller has it already
        (a conversation's turn)."""
        prepared = prepared or self.prepare(msg)
        if own_day:
            prepared = replace(prepared, own_day=True)
        if self.outage.waits_behind(prepared.scope):  # an outage is being caught up: stay in order
            if not hold:
                raise StoreUnavailable(f"{self.held} messages wait for Redis to come back")
            return self.outage.hold(prepared, msg)
        try:
            result = await self._store(prepared, msg, held=False)
        except StoreUnavailable:
            if not hold:
                raise
            return self.outage.hold(prepared, msg)
        if result.stored and self._due_after_ingest(prepared.scope, result, prepared.ts_ms):
            await self.schedule(prepared.scope)
        if result.stored and self.background and self.recall is not None:
            self.recall.embed_soon(prepared.scope)  # its vector, once, off the reply path
        if result.stored and result.outcome != "duplicate" and self.captioner is not None:
            await self.captioner.soon(msg)  # its images' captions, once, in the background
        return result

    async def _store(self, prepared: Prepared, msg: IncomingMessage, *, held: bool) -> IngestResult:
        tz = self.settings.memory.timezone
        day = calendar.local_day_ms(prepared.ts_ms, tz)
        result = await self.repo.ingest(
            prepared.scope,
            ts_ms=prepared.ts_ms,
            role=msg.role,
            author=msg.author,
            author_id=msg.author_id,
            text=prepared.text,
            platform_id=msg.platform_id,
            tokens=prepared.tokens,
            day=day,
            place_name=msg.place_name[:120],
            held=held,
            own_day_end_ms=calendar.day_end_ms(day, tz) if prepared.own_day else 0,
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

    async def _stored_late(self, prepared: Prepared, result: IngestResult) -> None:
        if result.stored and self._due_after_ingest(prepared.scope, result, prepared.ts_ms):
            await self.schedule(prepared.scope)

    def _scope_tz(self, scope: str, stored: str) -> str:
        """The timezone a reply shows the scope's times in. A stored one that does not exist
        (an import, a hand edit) falls back to the default, with a warning: a bad setting
        must not cost a reply. Maintenance does not guess: it reports such a scope."""
        default = self.settings.memory.timezone
        name = stored or default
        usable = calendar.known_zone_or(name, default)
        if usable != name and name not in self._unknown_zones:
            self._unknown_zones.add(name)
            log.warning(
                "%s has an unknown timezone %r: replies use the default %s and its rollover "
                "waits until it is fixed (/memory config timezone)",
                scope,
                name[:80],
                default,
            )
        return usable

    def _due_after_ingest(self, scope: str, result: IngestResult, ts_ms: int) -> bool:
        tz = self._scope_tz(scope, result.tz)
        if tz != (result.tz or self.settings.memory.timezone):
            return False  # its maintenance would only report the bad zone: the sweep does
        if result.state_day and calendar.local_day_ms(ts_ms, tz) > result.state_day:
            return True  # the first message of a new local day: lazy rollover
        if result.retry_at > ts_ms:
            return False
        return self.maintainer.compaction_due(result.unsum_tokens, result.unsum_count)

    # -- maintenance -------------------------------------------------------------------
    async def schedule(self, scope: str) -> None:
        """Hand ``scope`` to maintenance (:class:`MaintenanceScheduler`)."""
        await self.maintenance.schedule(scope)

    async def maintain(self, scope: str) -> MaintenanceReport:
        """Maintain ``scope`` now, awaited (replay, benchmarks, tests)."""
        return await self.maintenance.maintain(scope)

    @property
    def reports(self) -> list[MaintenanceReport]:
        return self.maintenance.reports

    async def drain(self) -> None:
        """Wait for background maintenance to finish (shutdown, end of a replay), and for
        messages held during an outage to be stored, if Redis is there to take them."""
        await self.outage.settle(10.0)
        await self.maintenance.drain()
        if self.captioner is not None:
            await self.captioner.drain()
        if self.recall is not None:
            await self.recall.drain()

    # -- reply -------------------------------------------------------------------------
    def should_reply(self, msg: IncomingMessage, result: IngestResult) -> bool:
        if result.outcome in ("duplicate", "day_closed", "forgotten"):
            return False  # a repeat delivery (answered the first time), or not stored
        if msg.direct:
            return True
        mode = result.mode or self.settings.memory.default_mode
        if mode == "off":
            return False
        return mode == "all" or msg.addressed

    async def handle(
        self,
        msg: IncomingMessage,
        *,
        on_progress: Callable[[str], Awaitable[None]] | None = None,
    ) -> Reply | None:
        """The whole path for a user message: store it, then answer if the bot should."""
        result = await self.ingest(msg)
        if not self.should_reply(msg, result):
            return None
        return await self.reply(msg, exclude_id=result.id, on_progress=on_progress)

    # -- reply (memory_core.service.replies) -------------------------------------------
    def _count_reply(self, reply: Reply) -> Reply:
        return self.replies.count(reply)

    async def build_prompt(
        self,
        msg: IncomingMessage,
        *,
        exclude_id: str = "",
        text: str | None = None,
        prepared: Prepared | None = None,
    ) -> Prompt:
        """The prompt a reply to ``msg`` would send (also ``ask --dry-run``: nothing stored)."""
        return await self.replies.build_prompt(
            msg, exclude_id=exclude_id, text=text, prepared=prepared
        )

    async def reply(
        self,
        msg: IncomingMessage,
        *,
        exclude_id: str = "",
        on_progress: Callable[[str], Awaitable[None]] | None = None,
        store: bool = True,
        prepared: Prepared | None = None,
    ) -> Reply:
        """Answer ``msg`` (:meth:`Replier.reply`)."""
        return await self.replies.reply(
            msg, exclude_id=exclude_id, on_progress=on_progress, store=store, prepared=prepared
        )

    async def remember_answer(
        self,
        msg: IncomingMessage,
        reply: Reply,
        *,
        platform_id: str = "",
        also_ids: tuple[str, ...] = (),
    ) -> str:
        """Store the bot's delivered answer to ``msg`` (:meth:`Replier.remember_answer`)."""
        return await self.replies.remember_answer(
            msg, reply, platform_id=platform_id, also_ids=also_ids
        )

    async def offline_text(self, msg: IncomingMessage) -> str:
        """The offline reply to ``msg``, nothing stored (:meth:`Replier.offline_text`)."""
        return await self.replies.offline_text(msg)
