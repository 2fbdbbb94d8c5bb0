"""A reply: the prompt built from memory (the question embedded while memory is read), the
model's answer within its deadline (streamed, masked, capped), the apology when it fails,
the offline reply, and the answer remembered once it is delivered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from config.prompts import PromptSet, load_prompts
from config.settings import Settings
from memory_core.calendar import ZoneFallback
from memory_core.clock import Clock
from memory_core.errors import InvalidScope, LLMBadOutput, LLMUnavailable, StoreError
from memory_core.llm.client import LLM
from memory_core.models import IncomingMessage, Reply
from memory_core.prompt.answers import SecretMask, StreamedAnswer, capped, read_stream, with_marker
from memory_core.prompt.assembly import AlsoRead, AssemblyInput, Prompt, PromptAssembler
from memory_core.prompt.thread_start import lacks_starter, thread_start
from memory_core.recall.index import RecallIndex
from memory_core.scopes import Scope, parse_scope
from memory_core.service.intake import Intake
from memory_core.service.offline import offline_reply
from memory_core.service.prepared import Prepared
from memory_core.service.thread_starters import ThreadStarters
from memory_core.store.repo import MemoryRepo
from memory_core.text.language import reply_language
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.fact_routing import usable_here

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics
    from memory_core.service.budget import Budget

log = logging.getLogger(__name__)

RECENT_FETCH = 100  # raw messages read for the working window


def also_readable(scope: str, other: str) -> str | None:
    """``other`` (an ``IncomingMessage.also_reads``) when an answer in ``scope`` may read
    it, else None. The door vouches that the person asking can read it on the platform; the
    core still keeps its own rules: a channel or thread of the same server (memory never
    crosses a server), never a DM (what is said in one stays there) nor a person's facts,
    and not the scope itself or its channel (read already)."""
    if not other:
        return None
    try:
        place, there = Scope.of(scope), Scope.of(other)
    except InvalidScope:
        return None
    if there.key in (place.key, place.root.key) or not there.same_boundary(place):
        return None
    if there.is_dm or there.kind not in ("channel", "thread") or not there.server:
        return None
    return there.key


class Replier:
    def __init__(
        self,
        *,
        settings: Settings,
        repo: MemoryRepo,
        llm: LLM,
        assembler: PromptAssembler,
        clock: Clock,
        counter: TokenCounter,
        recall: RecallIndex | None,
        budget: Budget | None,
        metrics: Metrics | None,
        intake: Intake,
        zones: ZoneFallback,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.llm = llm
        self.assembler = assembler
        self.clock = clock
        self.counter = counter
        self.recall = recall
        self.budget = budget
        self.metrics = metrics
        self.secrets = SecretMask(settings.secret_values())
        self.intake = intake  # a message prepared as it is stored; the answer stored
        self.zones = zones
        self.starters = ThreadStarters(
            repo.starters, clock=clock, max_chars=settings.memory.max_message_chars
        )

    def count(self, reply: Reply) -> Reply:
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
        data = await self.read_memory(msg, exclude_id=exclude_id, text=text, prepared=prepared)
        return self.assembler.assemble(data)

    async def read_memory(
        self,
        msg: IncomingMessage,
        *,
        exclude_id: str = "",
        text: str | None = None,
        prepared: Prepared | None = None,
        recall_wait_s: float | None = None,
    ) -> AssemblyInput:
        """What memory holds for a reply to ``msg``: the scope's state, facts and window,
        and what recall found for it (best first), ready to assemble. ``recall_wait_s``: the
        longest to wait for recall (a live reply's; a dry run waits for it whole)."""
        prepared = (prepared or self.intake.prepare(msg)) if text is None else None
        scope = prepared.scope if prepared else parse_scope(msg.scope)
        # What is known about the asker across the server, where it may be used: not in a
        # DM, nor where another organisation reads (Audience.lets_facts_in).
        person = Scope.of(scope).person_scope(msg.author_id)
        if not msg.audience.lets_facts_in:
            person = None
        new_text = prepared.text if prepared else (text or "")
        recall = self.recall if self.settings.memory.recall_tokens else None
        also = also_readable(scope, msg.also_reads)
        # The question's meaning is embedded (a few ms of CPU) while memory is read.
        meaning = recall.embed_query(scope, new_text) if recall else None
        try:
            snapshot = await self.repo.reads.prompt_snapshot(
                scope, recent=RECENT_FETCH, user=person.key if person else None
            )
            also_read = await self._also_read(also)
            tz = self.zones.usable(scope, snapshot.state.tz)
            starter = None
            if msg.thread_starter is not None and lacks_starter(scope, snapshot.from_thread):
                starter = await self.starters.starter(scope, msg.thread_starter)
            started = thread_start(
                scope, snapshot.before_thread, snapshot.from_thread, starter=starter
            )
            recalled = (
                await recall.for_reply(
                    scope,
                    new_text,
                    exclude_id=exclude_id,
                    tz=tz,
                    meaning=meaning,
                    wait_s=recall_wait_s,
                    also=[also] if also else [],
                )
                if recall
                else []
            )
        finally:
            if meaning is not None and not meaning.done():
                meaning.cancel()
        lang = reply_language(snapshot.state.lang, self.settings.memory.language, [new_text])
        return AssemblyInput(
            scope=scope,
            state=snapshot.state,
            facts=snapshot.facts,
            personal=usable_here(snapshot.user_facts, scope),
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
            also_read=also_read,
        )

    async def _also_read(self, scope: str | None) -> AlsoRead | None:
        """Another place's summaries and facts, for an answer that may read them."""
        if scope is None:
            return None
        state = await self.repo.reads.state(scope)
        facts = (await self.repo.reads.facts_of([scope]))[scope]
        return AlsoRead(scope=scope, state=state, facts=facts)

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
            data = await self.read_memory(
                msg,
                exclude_id=exclude_id,
                prepared=prepared,
                recall_wait_s=self.settings.memory.recall_wait_s,
            )
        except StoreError as exc:
            # Memory is out of reach (the message itself is held until Redis is back).
            log.warning("reply in %s without memory: %s", msg.scope, exc)
            language = reply_language(None, self.settings.memory.language, [msg.text])
            return self.count(Reply(text=load_prompts(language).store_down, kind="apology"))
        prompt = self.assembler.assemble(data)
        prompts = load_prompts(prompt.language)
        if self.llm.offline:  # what it shows (its recalled messages) is what /memory why lists
            text, shown = self._offline(data, prompt)
            reply = Reply(text=text, kind="offline", prompt_tokens=prompt.tokens, prompt=shown)
            return self.count(reply)
        hold = None
        if self.budget:
            notice, hold = await self.budget.admit(
                msg, prompt_tokens=prompt.tokens, language=prompt.language
            )
            if notice is not None:
                return self.count(notice)  # a limit is reached: no model call
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
        return self.count(reply)

    async def remember_answer(
        self,
        msg: IncomingMessage,
        reply: Reply,
        *,
        platform_id: str = "",
        also_ids: tuple[str, ...] = (),
    ) -> str:
        """Store the bot's answer to ``msg`` (a model's answer only: an apology or the
        offline note is not conversation), under ``platform_id``, the posted answer's (a
        delete on the platform forgets it), and ``also_ids``, its other posted parts',
        noting whom and which message it answers.
        Returns its entry id ("" when not stored)."""
        if reply.kind != "llm":
            return ""
        stored = await self.intake.accept(
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
                also_ids=also_ids,
            )
        )
        return stored.id

    def _apology(self, prompt: Prompt, text: str) -> Reply:
        return self.count(Reply(text=text, kind="apology", prompt_tokens=prompt.tokens))

    async def offline_text(self, msg: IncomingMessage) -> str:
        """The offline reply to ``msg`` (nothing stored): say no LLM is configured and show
        what memory holds that looks related to it."""
        data = await self.read_memory(msg)
        return self._offline(data, self.assembler.assemble(data))[0]

    def _offline(self, data: AssemblyInput, prompt: Prompt) -> tuple[str, Prompt]:
        searched = self.recall is not None and self.settings.memory.recall_tokens > 0
        max_chars = self.settings.bot.reply_max_chars
        return offline_reply(data, prompt, self.counter, max_chars=max_chars, searched=searched)
