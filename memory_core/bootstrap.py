"""Wiring: the one place where the store, the LLM, the clock and the message path are built and
handed to whoever needs them. Front doors call :func:`build_core` once at start-up.

Every object gets its dependencies in its constructor, so they are built in dependency
order (the admin before the maintainer, which finishes its interrupted forgets; the metrics
before the intake, which counts into them) and nothing is patched in afterwards.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from config.settings import Settings
from memory_core.calendar import ZoneFallback
from memory_core.clock import Clock, SystemClock
from memory_core.fleet.metrics import Metrics
from memory_core.fleet.pacing import Pacing
from memory_core.fleet.queue import FleetQueue
from memory_core.fleet.ratelimit import FleetRateLimiter
from memory_core.fleet.scheduler import RolloverScheduler
from memory_core.fleet.spending import SpendLedger
from memory_core.llm.client import LLM, build_llm
from memory_core.prompt.assembly import PromptAssembler
from memory_core.recall.background import BackgroundEmbedding
from memory_core.recall.embedding import LocalEmbedder
from memory_core.recall.index import Embedder, RecallIndex
from memory_core.service.admin import MemoryAdmin
from memory_core.service.budget import Budget
from memory_core.service.captions import Captioner
from memory_core.service.conversation import Conversation
from memory_core.service.intake import AfterStore, Intake
from memory_core.service.learning import Learner
from memory_core.service.replies import Replier
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.store.platform_state import PlatformState
from memory_core.store.repo import MemoryRepo
from memory_core.store.server import Store, delete_matching, open_store
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.maintenance import Maintainer
from memory_core.tiers.summarize import Summarizer

log = logging.getLogger(__name__)


@dataclass
class Core:
    settings: Settings
    store: Store
    repo: MemoryRepo
    llm: LLM
    clock: Clock
    counter: TokenCounter
    summarizer: Summarizer
    maintainer: Maintainer
    maintenance: MaintenanceScheduler  # when a scope's maintenance runs
    recall: RecallIndex
    captioner: Captioner
    intake: Intake  # every message into memory
    replier: Replier  # the answer: the prompt read from memory, the model's reply
    conversation: Conversation  # the doors' one path: receive, then answer
    admin: MemoryAdmin
    platform: PlatformState
    scheduler: RolloverScheduler
    metrics: Metrics
    budget: Budget
    learner: Learner  # a channel's past, learned
    pacing: Pacing  # the platforms' limits, counted fleet-wide (the doors' calls)

    def describe(self) -> list[str]:
        """Start-up lines for humans: where memory lives and which LLM answers (no secrets)."""
        llm = self.settings.llm
        if self.llm.offline:
            llm_line = (
                "LLM: offline mode (no OPENAI_API_KEY or OPENAI_BASE_URL): extractive summaries, "
                "replies show the remembered messages related to each question"
            )
        else:
            where = llm.base_url or "api.openai.com"
            llm_line = f"LLM: {llm.chat_model} (summaries: {llm.summary_model}) at {where}"
            if llm.vision_model:
                llm_line += f"; image captions: {llm.vision_model}"
        return [f"Memory: {self.store.description}", llm_line]

    async def discard(self) -> None:
        """Close a throwaway core (benchmarks, evaluation) and delete every key under its
        private key prefix, metrics included."""
        await self.scheduler.stop()
        await self.stop_workers()
        await self.drain()
        await self.intake.after.close()
        await self.metrics.stop()
        await delete_matching(self.store.client, f"{self.store.keys.prefix}:*")
        await self.llm.close()
        await self.store.close()

    async def drain(self) -> None:
        """Wait for the background work to finish (shutdown, the end of a replay): the
        messages held during an outage stored (if Redis is there to take them), then
        maintenance, captions and vectors."""
        await self.intake.outage.settle(10.0)
        await self.intake.after.drain()
        await self.maintenance.drain()
        await self.captioner.drain()
        await self.recall.drain()

    async def stop_workers(self) -> None:
        """Stop the helper processes (the embedding worker) before the store they use."""
        await self.recall.close()

    async def close(self) -> None:
        """Stop everything; what the last work handed on raised (a one-shot core's) is raised
        once the store and the model's client are closed, not instead of closing them."""
        await self.scheduler.stop()
        await self.stop_workers()
        try:
            await self.drain()
        finally:
            await self.intake.after.close()
            await self.metrics.stop()
            await self.llm.close()
            await self.store.close()


def choose_embedder(settings: Settings, llm: LLM) -> Embedder | None:
    """What recall embeds with: the configured embedding model when there is one and a model
    to ask, else the offline local one (unless memory.recall_embedder is off)."""
    if settings.llm.embedding_model and not llm.offline:
        return llm.embed
    if settings.memory.recall_embedder == "local":
        return LocalEmbedder()
    return None


def embedding_worker(store: Store, embedder: Embedder | None) -> BackgroundEmbedding | None:
    """The worker process that embeds messages with the local model, off this interpreter
    (a model behind an API is I/O: this process asks it itself); started last."""
    if not isinstance(embedder, LocalEmbedder):
        return None
    return BackgroundEmbedding(
        url=store.url,
        cluster=store.cluster,
        prefix=store.keys.prefix,
        timeout_s=store.connect_timeout_s,
    )


async def build_core(
    settings: Settings,
    *,
    clock: Clock | None = None,
    llm: LLM | None = None,
    store: Store | None = None,
    background: bool = True,
    helpers: bool | None = None,
) -> Core:
    """Everything a front door needs, wired. ``background``: maintenance, captions and
    embedding run in the background (a running bot). ``helpers`` (default: as
    ``background``): the local model's helper processes start with the core; a one-shot
    command or the dashboard does without them (its few questions embedded in-process)."""
    clock = clock or SystemClock()
    store = store or await open_store(settings.store)
    limiter = None
    if settings.llm.rpm_limit:
        limiter = FleetRateLimiter(
            store.client,
            store.keys,
            limit=settings.llm.rpm_limit,
            window_s=settings.llm.rpm_window_s,
        )
    # Every model call's usage is counted against the daily budgets (an LLM handed in is
    # not: benchmarks and evaluations run offline or on their own bill).
    ledger = SpendLedger(store.client, store.keys, clock=clock, default_tz=settings.memory.timezone)
    llm = llm or build_llm(settings.llm, limiter=limiter, on_usage=ledger.record)
    counter = TokenCounter()
    repo = MemoryRepo(store.client, store.keys, lane=store.lane)
    summarizer = Summarizer(llm, counter)
    embedder = choose_embedder(settings, llm)
    wanted = background if helpers is None else helpers
    worker = embedding_worker(store, embedder) if wanted else None
    recall = RecallIndex(
        store.client,
        store.keys,
        embedder=embedder,
        worker=worker,
        lane=store.lane,
        cache_bytes=settings.memory.recall_cache_mb * 2**20,
    )
    metrics = Metrics(
        store.client,
        store.keys,
        llm_stats=lambda: llm.stats,
        summary_stats=lambda: summarizer.stats,
        recall_stats=lambda: recall.cache_stats,
        recall_limit_bytes=recall.sync.cache.max_bytes,
    )
    budget = Budget(settings=settings, ledger=ledger, clock=clock, metrics=metrics)
    admin = MemoryAdmin(
        repo=repo, settings=settings, clock=clock, persist=store.persist, budget=budget
    )
    maintainer = Maintainer(
        repo=repo,
        summarizer=summarizer,
        settings=settings.memory,
        clock=clock,
        lock_ttl_ms=int(settings.scheduler.lock_ttl_s * 1000),
        recover=admin.requests.resume,
        over_budget=budget.over,
    )
    zones = ZoneFallback(settings.memory.timezone)
    maintenance = MaintenanceScheduler(
        maintainer,
        zones=zones,
        concurrency=settings.llm.concurrency,
        background=background,
        metrics=metrics,
    )
    captioner = Captioner(
        settings=settings, llm=llm, store=admin.messages, background=background, budget=budget
    )
    after = AfterStore(maintenance, recall=recall, captioner=captioner, background=background)
    intake = Intake(
        settings=settings,
        messages=repo.messages,
        counter=counter,
        clock=clock,
        after=after,
        metrics=metrics,
    )
    replier = Replier(
        settings=settings,
        repo=repo,
        llm=llm,
        assembler=PromptAssembler(counter, settings.memory),
        clock=clock,
        counter=counter,
        recall=recall,
        budget=budget,
        metrics=metrics,
        intake=intake,
        zones=zones,
    )
    fleet = FleetQueue(store.client, store.keys)
    scheduler = RolloverScheduler(
        repo=repo,
        maintainer=maintainer,
        maintain=maintenance.maintain,
        fleet=fleet,
        settings=settings,
        clock=clock,
    )
    if worker is not None:
        await worker.start()
    platform = PlatformState(store.client, store.keys)
    return Core(
        settings=settings,
        store=store,
        repo=repo,
        llm=llm,
        clock=clock,
        counter=counter,
        summarizer=summarizer,
        maintainer=maintainer,
        maintenance=maintenance,
        recall=recall,
        captioner=captioner,
        intake=intake,
        replier=replier,
        conversation=Conversation(intake, replier, changes=admin.messages, deliveries=platform),
        admin=admin,
        platform=platform,
        scheduler=scheduler,
        metrics=metrics,
        budget=budget,
        learner=Learner(
            intake=intake,
            maintenance=maintenance,
            reads=repo.reads,
            ledger=repo.ledger,
            store=repo.learning,
            clock=clock,
            recall=recall,
        ),
        pacing=Pacing(store.client, store.keys),
    )
