"""The memory pipeline every message runs through.

``handle`` = ``ingest`` (one Redis round trip, no LLM) + maybe ``reply`` (one prompt read,
one LLM call, the answer stored). Summaries never run on this path: when a message makes
maintenance due (a new local day, or enough unsummarised text), the scope is handed to a
background worker, one at a time per scope in this process and one at a time per scope in
the fleet (a Redis lock inside the maintainer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from config.prompts import PromptSet, load_prompts
from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import (
    EmptyMessage,
    LLMBadOutput,
    LLMUnavailable,
    StoreError,
    StoreUnavailable,
)
from memory_core.llm.client import LLM
from memory_core.models import IncomingMessage, IngestResult, Reply, stored_text
from memory_core.prompt.answers import (
    SecretMask,
    StreamedAnswer,
    capped,
    read_stream,
    with_marker,
)
from memory_core.prompt.assembly import AssemblyInput, Prompt, PromptAssembler
from memory_core.prompt.thread_start import thread_start
from memory_core.recall.index import RecallIndex
from memory_core.scopes import Scope, parse_scope
from memory_core.service.captions import Captioner
from memory_core.service.offline import offline_reply
from memory_core.service.outage import OutageBuffer
from memory_core.store.repo import MemoryRepo
from memory_core.text.language import reply_language
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.fact_routing import travelling
from memory_core.tiers.maintenance import Maintainer, MaintenanceReport

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics
    from memory_core.service.budget import Budget

log = logging.getLogger(__name__)

RECENT_FETCH = 100  # raw messages read for the working window


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated message, ready to store."""

    scope: str
    text: str
    truncated: bool
    ts_ms: int
    tokens: int
    own_day: bool = False  # refused rather than counted in a later day (replay)


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
        self.secrets = SecretMask(settings.secret_values())
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._gate = asyncio.Semaphore(max(1, settings.llm.concurrency))
        self.reports: list[MaintenanceReport] = []
        self.on_report: Callable[[MaintenanceReport], None] | None = None
        self.metrics = metrics
        self.outage = OutageBuffer(
            limit=settings.store.outage_buffer,
            cluster=settings.store.cluster,
            store=lambda prepared, msg: self._store(prepared, msg, held=True),
            after=self._stored_late,
            metrics=metrics,
        )
        self._unknown_zones: set[str] = set()  # stored timezones already warned about
        # False: maintenance runs without the fleet lock (replay; correctness never depends
        # on the lock, it only saves duplicate LLM calls).
        self.maintenance_lock = True

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
        """Run maintenance for ``scope``: in the background, or now (replay, tests)."""
        if not self.background:
            await self.maintain(scope)
            return
        if scope in self._running:
            self._again.add(scope)
            return
        self._running[scope] = asyncio.create_task(self._background(scope))

    async def _background(self, scope: str) -> None:
        try:
            while True:
                self._again.discard(scope)
                async with self._gate:
                    await self.maintain(scope)
                if scope not in self._again:
                    break
        except Exception:
            log.exception("maintenance of %s failed", scope)
        finally:
            self._running.pop(scope, None)

    async def maintain(self, scope: str) -> MaintenanceReport:
        report = await self.maintainer.run(scope, lock=self.maintenance_lock)
        self.reports.append(report)
        if self.metrics is not None:
            self.metrics.maintenance(report)
        if len(self.reports) > 1000:
            del self.reports[:500]
        if self.on_report is not None:
            self.on_report(report)
        return report

    async def drain(self) -> None:
        """Wait for background maintenance to finish (shutdown, end of a replay), and for
        messages held during an outage to be stored, if Redis is there to take them."""
        await self.outage.settle(10.0)
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)
        if self.captioner is not None:
            await self.captioner.drain()
        if self.recall is not None:
            await self.recall.drain()

    # -- reply -------------------------------------------------------------------------
    def should_reply(self, msg: IncomingMessage, result: IngestResult) -> bool:
        if result.outcome in ("duplicate", "day_closed"):
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

    def _count_reply(self, reply: Reply) -> Reply:
        if self.metrics is not None:
            self.metrics.incr(f"replies_{reply.kind}")
        return reply

    async def build_prompt(
        self,
        msg: IncomingMessage,
        *,
        exclude_id: str = "",
        text: str | None = None,
        prepared: Prepared | None = None,
    ) -> Prompt:
        """The prompt a reply to ``msg`` would send (also ``ask --dry-run``: nothing stored).
        ``prepared``: the message as stored (a turn's), not prepared a second time."""
        prepared = (prepared or self.prepare(msg)) if text is None else None
        scope = prepared.scope if prepared else parse_scope(msg.scope)
        # What is known about the asker across the server, where it may be used: not in a
        # DM, nor where another organisation reads (Audience.lets_facts_in).
        person = Scope.of(scope).person_scope(msg.author_id)
        if not msg.audience.lets_facts_in:
            person = None
        new_text = prepared.text if prepared else (text or "")
        recall = self.recall if self.settings.memory.recall_tokens else None
        # The question's meaning is embedded (a few ms of CPU) while memory is read.
        meaning = recall.embed_query(scope, new_text) if recall else None
        try:
            snapshot = await self.repo.prompt_snapshot(
                scope, recent=RECENT_FETCH, user=person.key if person else None
            )
            tz = self._scope_tz(scope, snapshot.state.tz)
            started = thread_start(scope, snapshot.before_thread, snapshot.from_thread)
            recalled = (
                await recall.for_reply(
                    scope, new_text, exclude_id=exclude_id, tz=tz, meaning=meaning
                )
                if recall
                else []
            )
        finally:
            if meaning is not None and not meaning.done():
                meaning.cancel()
        lang = reply_language(snapshot.state.lang, self.settings.memory.language, [new_text])
        return self.assembler.assemble(
            AssemblyInput(
                scope=scope,
                state=snapshot.state,
                facts=snapshot.facts,
                personal=travelling(snapshot.user_facts, scope),
                recent=snapshot.recent,
                new_author=msg.author,
                new_text=new_text,
                now=msg.ts or self.clock.now(),
                tz=tz,
                language=lang,
                bot_name=self.settings.bot.name,
                parent_state=snapshot.parent_state,
                exclude_id=exclude_id,
                recalled=recalled,
                thread_start=started,
            )
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
        """Answer ``msg``; the answer is stored (``store=False``: the caller stores it with
        :meth:`remember_answer` once it is delivered, so an answer nobody saw is not in
        memory). With ``on_progress`` the answer streams in and ``on_progress`` gets the text
        so far after each piece (the caller throttles).

        What is sent, streamed and stored has the configured secrets masked and is at most
        ``bot.reply_max_chars`` long; the whole answer (retries, pieces, ``on_progress``)
        ends within ``llm.reply_deadline_s``, with what has streamed in and a marker."""
        try:
            prompt = await self.build_prompt(msg, exclude_id=exclude_id, prepared=prepared)
        except StoreError as exc:
            # Memory is out of reach (the message itself is held until Redis is back).
            log.warning("reply in %s without memory: %s", msg.scope, exc)
            language = reply_language(None, self.settings.memory.language, [msg.text])
            return self._count_reply(Reply(text=load_prompts(language).store_down, kind="apology"))
        prompts = load_prompts(prompt.language)
        if self.llm.offline:  # what it shows (recalled messages too) is what /memory why lists
            text, shown = await self._offline(msg.scope, prompt)
            reply = Reply(text=text, kind="offline", prompt_tokens=prompt.tokens, prompt=shown)
            return self._count_reply(reply)
        hold = None
        if self.budget:
            notice, hold = await self.budget.admit(
                msg, prompt_tokens=prompt.tokens, language=prompt.language
            )
            if notice is not None:
                return self._count_reply(notice)  # a limit is reached: no model call
        try:
            return await self._answer(msg, prompt, prompts, on_progress=on_progress, store=store)
        finally:
            if self.budget:
                await self.budget.settle(hold)

    async def _answer(
        self,
        msg: IncomingMessage,
        prompt: Prompt,
        prompts: PromptSet,
        *,
        on_progress: Callable[[str], Awaitable[None]] | None,
        store: bool,
    ) -> Reply:
        """The model's answer to ``msg`` from ``prompt``, within the reply's deadline."""
        max_chars = self.settings.bot.reply_max_chars
        deadline_s = self.settings.llm.reply_deadline_s
        limit = self.settings.llm.reply_max_tokens
        streamed = StreamedAnswer(self.secrets, max_chars=max_chars)
        try:
            # One deadline for the whole answer: every retry and every streamed piece.
            async with asyncio.timeout(deadline_s) as deadline:
                asked = prompt.messages
                if on_progress is None:
                    done = await self.llm.complete(asked, purpose="reply", max_tokens=limit)
                    text = self.secrets.mask(done.text)
                else:
                    pieces = self.llm.stream(asked, purpose="reply", max_tokens=limit)
                    text = await read_stream(pieces, streamed, on_progress)
        except TimeoutError:
            if not deadline.expired():
                raise  # not ours: some step's own timeout
            if not streamed.shown.strip():
                log.warning(
                    "reply in %s gave up after %ss (llm.reply_deadline_s)", msg.scope, deadline_s
                )
                return self._apology(prompt, prompts.apology)
            log.warning(
                "reply in %s cut at %ss (llm.reply_deadline_s): sent what had streamed in",
                msg.scope,
                deadline_s,
            )
            text = with_marker(streamed.shown, prompts.say("reply_cut_slow"), max_chars)
        except (LLMUnavailable, LLMBadOutput) as exc:
            log.warning("reply in %s failed: %s", msg.scope, exc)
            return self._apology(prompt, prompts.apology)
        text = capped(text, max_chars, prompts.say("reply_cut_long"))
        reply = Reply(text=text, kind="llm", prompt_tokens=prompt.tokens, prompt=prompt)
        if store:
            reply = replace(reply, stored_id=await self.remember_answer(msg, reply))
        return self._count_reply(reply)

    async def remember_answer(
        self, msg: IncomingMessage, reply: Reply, *, platform_id: str = ""
    ) -> str:
        """Store the bot's answer to ``msg`` (a model's answer only: an apology or the
        offline note is not conversation), under ``platform_id``, the posted answer's (a
        delete on the platform forgets it), noting whom and which message it answers.
        Returns its entry id ("" when not stored)."""
        if reply.kind != "llm":
            return ""
        stored = await self.ingest(
            IncomingMessage(
                scope=msg.scope,
                text=reply.text,
                author=self.settings.bot.name,
                author_id="bot",
                role="assistant",
                ts=self.clock.now() if msg.ts is None else msg.ts,
                audience=msg.audience,
                reply_to=msg.author_id,
                answers=msg.platform_id,
                platform_id=platform_id,
            )
        )
        return stored.id

    def _apology(self, prompt: Prompt, text: str) -> Reply:
        return self._count_reply(Reply(text=text, kind="apology", prompt_tokens=prompt.tokens))

    async def offline_text(self, scope: str, language: str) -> str:
        """The offline reply: say no LLM is configured and show what is remembered."""
        return (await self._offline(scope, Prompt([], 0, 0, language=language)))[0]

    async def _offline(self, scope: str, prompt: Prompt) -> tuple[str, Prompt]:
        return await offline_reply(self.repo, self.counter, scope, prompt, zone_of=self._scope_tz)
