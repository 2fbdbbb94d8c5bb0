"""``memorybot eval locomo``: does memory put the right past turns into the prompt?

Each LoCoMo conversation is replayed into its own scope, its session dates driving the clock
(so days roll over and summaries form as in real use), then every question of categories 1-4
is asked as a reply would be: ``replier.build_prompt`` with the question as the new message.
Whatever prompt assembly produces (window, summaries, recall) is what gets measured, so the
numbers follow the product as it changes. Three baselines are computed on the same questions
in the same run: the newest turns that fit the same budget (``recent``), the whole
conversation (``full_history``), and plain BM25 over single turns (``bm25``).

The run uses a private key prefix (and, on the embedded store, a private temporary data
directory) and deletes its keys afterwards: it never touches real memory. Memory is always
built offline (extractive summaries), so runs are deterministic and comparable; ``answer``
only adds the model's answers to the prompts, scored with LoCoMo's token F1.

The data is read by :mod:`memorybot_bench.locomo_data`, each prompt scored by
:mod:`memorybot_bench.locomo_scoring`; this module runs the replay and the questions and reports.
LoCoMo is CC BY-NC 4.0: :data:`ATTRIBUTION` goes wherever its results are shown.
"""

import asyncio
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

from config.settings import MemorySettings, Settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.errors import InputError, LLMBadOutput, LLMOffline, LLMUnavailable
from memory_core.llm.client import LLM, OfflineLLM, build_llm
from memory_core.models import IncomingMessage
from memory_core.prompt.assembly import Prompt
from memorybot_bench.locomo_data import (
    ATTRIBUTION,
    CATEGORIES,
    Conversation,
    Question,
    load_locomo,
)
from memorybot_bench.locomo_scoring import (
    Baselines,
    Scored,
    answer_f1,
    answer_in,
    evidence_share,
    fixed_cost,
    memory_text,
)

# ``memorybot eval locomo`` loads the data through here.
__all__ = ["LocomoReport", "QuestionResult", "evaluate_locomo", "load_locomo"]

BASELINES = ("recent", "bm25", "full_history")
ASKER = "Questioner"
QUESTION_DELAY = timedelta(minutes=10)  # questions come a little after the last session
ANSWER_HINT = "\n(Answer with a short phrase; use the exact words from memory where possible.)"
ANSWER_MAX_TOKENS = 64

Progress = Callable[[str], None]  # called with "turn", "question" or "answer" per item done


@dataclass(slots=True)
class QuestionResult:
    sample_id: str
    question: Question
    memory: Scored
    baselines: dict[str, Scored]
    sections: dict[str, int] = field(default_factory=dict)
    prediction: str | None = None
    f1: float | None = None


# -- the run ---------------------------------------------------------------------------
@dataclass(slots=True)
class LocomoReport:
    results: list[QuestionResult]
    conversations: int
    turns: int
    budget: int
    dropped_evidence: int
    store: str
    answered: bool
    seconds: float = 0.0
    replay_seconds: float = 0.0
    answer_failures: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON: overall, by category, the baselines, and the attribution."""
        memory = [r.memory for r in self.results]
        out: dict[str, Any] = {
            **_metrics(memory),
            "by_category": {
                str(c): {"name": name, **_metrics([r.memory for r in self._of(c)])}
                for c, name in CATEGORIES.items()
            },
            "baselines": {
                b: {
                    **_metrics([r.baselines[b] for r in self.results]),
                    "by_category": {
                        str(c): _metrics([r.baselines[b] for r in self._of(c)]) for c in CATEGORIES
                    },
                }
                for b in BASELINES
            },
            **self._spread(),
            "prompt_sections_mean": {
                name: round(fmean(r.sections.get(name, 0) for r in self.results), 1)
                for name in sorted({n for r in self.results for n in r.sections})
            },
            "conversations": self.conversations,
            "turns": self.turns,
            "budget": self.budget,
            "evidence_ids_dropped": self.dropped_evidence,
            "memory_summaries": "extractive (offline)",
            "store": self.store,
            "seconds": round(self.seconds, 2),
            "replay_seconds": round(self.replay_seconds, 2),
            "attribution": ATTRIBUTION,
        }
        if self.answered:
            out["answer_f1"] = _f1(self.results)
            out["answer_f1_by_category"] = {str(c): _f1(self._of(c)) for c in CATEGORIES}
            out["answer_failures"] = self.answer_failures
        return out

    def _of(self, category: int) -> list[QuestionResult]:
        return [r for r in self.results if r.question.category == category]

    def _spread(self) -> dict[str, Any]:
        """Each conversation's evidence recall (overall, by category, BM25's beside it) and
        the lowest and highest: an average over five conversations can hide one that fails."""
        by_conv: dict[str, list[QuestionResult]] = {}
        for r in self.results:
            by_conv.setdefault(r.sample_id, []).append(r)
        rows = {
            conv: {
                **_metrics([r.memory for r in results]),
                "by_category": {
                    str(c): _recall([r.memory for r in results if r.question.category == c])
                    for c in CATEGORIES
                },
                "bm25_evidence_recall": _recall([r.baselines["bm25"] for r in results]),
            }
            for conv, results in by_conv.items()
        }
        known = [
            row["evidence_recall"] for row in rows.values() if row["evidence_recall"] is not None
        ]
        return {
            "by_conversation": rows,
            "conversation_recall_min": min(known) if known else None,
            "conversation_recall_max": max(known) if known else None,
        }


def _metrics(scores: Sequence[Scored]) -> dict[str, Any]:
    recalls = [s.recall for s in scores if s.recall is not None]
    tokens = [s.tokens for s in scores]
    return {
        "questions": len(scores),
        "questions_with_evidence": len(recalls),
        "evidence_recall": _recall(scores),
        "answer_in_prompt": round(fmean(s.answer_in_prompt for s in scores), 4) if scores else None,
        "prompt_tokens_mean": round(fmean(tokens), 1) if tokens else None,
        "prompt_tokens_max": max(tokens) if tokens else None,
    }


def _recall(scores: Sequence[Scored]) -> float | None:
    recalls = [s.recall for s in scores if s.recall is not None]
    return round(fmean(recalls), 4) if recalls else None


def _f1(results: Sequence[QuestionResult]) -> float | None:
    values = [r.f1 for r in results if r.f1 is not None]
    return round(fmean(values), 4) if values else None


async def evaluate_locomo(
    settings: Settings,
    conversations: Sequence[Conversation],
    *,
    budget: int | None = None,
    answer: bool = False,
    progress: Progress | None = None,
) -> LocomoReport:
    """Replay each conversation into its own scope, ask its questions, score the prompts."""
    if answer and settings.llm.offline:
        raise LLMOffline("--answer needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
    run_settings, scratch = _private(settings, budget)
    tick = progress or (lambda _stage: None)
    started = time.perf_counter()
    clock = ManualClock()
    answer_llm: LLM | None = None
    core: Core | None = None
    report = LocomoReport(
        results=[],
        conversations=len(conversations),
        turns=sum(len(c.turns) for c in conversations),
        budget=run_settings.memory.budget_tokens,
        dropped_evidence=sum(c.dropped_evidence for c in conversations),
        store="",
        answered=answer,
    )
    try:
        if answer:
            answer_llm = build_llm(settings.llm)
        # Memory is built offline even when a model is configured: extractive summaries
        # make runs deterministic and free, and the same with and without --answer.
        core = await build_core(run_settings, clock=clock, llm=OfflineLLM(), background=False)
        report.store = (
            "embedded store (a temporary copy, private to this run)"
            if scratch is not None
            else core.store.description
        )
        for index, conv in enumerate(conversations):
            scope = f"console:locomo-{index + 1}-{re.sub(r'[^A-Za-z0-9_.-]', '-', conv.sample_id)}"
            replay_started = time.perf_counter()
            await _replay(core, clock, scope, conv, tick)
            if core.recall is not None:  # as the background would have, by now
                await core.recall.embed_backlog(scope)
            report.replay_seconds += time.perf_counter() - replay_started
            results, prompts = await _ask(core, clock, scope, conv, tick)
            if answer_llm is not None:
                report.answer_failures += await _answer(answer_llm, results, prompts, tick)
            report.results.extend(results)
    finally:
        if core is not None:
            await core.discard()
        if answer_llm is not None:
            await answer_llm.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _private(settings: Settings, budget: int | None) -> tuple[Settings, Path | None]:
    """Settings for a run that cannot touch real memory: a private key prefix and, on the
    embedded store, a throwaway data directory (the real store is neither read nor written)."""
    memory = settings.memory
    if budget is not None:
        try:
            memory = MemorySettings.model_validate({**memory.model_dump(), "budget_tokens": budget})
        except ValueError as exc:
            raise InputError(f"--budget {budget}: must be between 500 and 200000 tokens") from exc
    store_update: dict[str, Any] = {"key_prefix": f"mbeval{secrets.token_hex(4)}"}
    scratch = None
    if settings.store.redis_url is None:
        scratch = Path(tempfile.mkdtemp(prefix="memorybot-eval-"))
        store_update["data_dir"] = scratch
    store = settings.store.model_copy(update=store_update)
    return settings.model_copy(update={"memory": memory, "store": store}), scratch


async def _replay(
    core: Core, clock: ManualClock, scope: str, conv: Conversation, tick: Progress
) -> None:
    for turn in conv.turns:
        clock.set(turn.ts)  # maintenance (rollovers, compaction) runs at the turn's time
        await core.intake.accept(
            IncomingMessage(
                scope=scope,
                text=turn.stored,
                author=turn.speaker,
                author_id=turn.speaker,
                ts=turn.ts,
                platform_id=turn.dia_id,
            )
        )
        tick("turn")


async def _ask(
    core: Core, clock: ManualClock, scope: str, conv: Conversation, tick: Progress
) -> tuple[list[QuestionResult], list[Prompt]]:
    tz = core.settings.memory.timezone
    budget = core.settings.memory.budget_tokens
    baselines = Baselines(conv, core.counter, tz)
    texts = {t.dia_id: t.text or t.stored for t in conv.turns}
    when = conv.turns[-1].ts + QUESTION_DELAY
    clock.set(when)
    results: list[QuestionResult] = []
    prompts: list[Prompt] = []
    for q in conv.questions:
        msg = IncomingMessage(scope=scope, text=q.text, author=ASKER, author_id=ASKER, ts=when)
        prompt = await core.replier.build_prompt(msg)  # a dry run: nothing is stored
        shown = memory_text(prompt)
        memory = Scored(
            recall=evidence_share([texts[e] for e in q.evidence], shown),
            answer_in_prompt=answer_in(q.answer, shown),
            tokens=prompt.tokens,
        )
        others = baselines.score(q, fixed_cost(prompt, core.counter), budget)
        results.append(QuestionResult(conv.sample_id, q, memory, others, dict(prompt.sections)))
        prompts.append(prompt)
        tick("question")
    return results, prompts


async def _answer(
    llm: LLM, results: Sequence[QuestionResult], prompts: Sequence[Prompt], tick: Progress
) -> int:
    """Ask the model with each assembled prompt (concurrently: the client has its own limit);
    returns how many calls failed (they score 0)."""
    failures = 0

    async def one(result: QuestionResult, prompt: Prompt) -> None:
        nonlocal failures
        messages = [dict(m) for m in prompt.messages]
        messages[-1]["content"] += ANSWER_HINT
        try:
            reply = await llm.complete(messages, purpose="reply", max_tokens=ANSWER_MAX_TOKENS)
            result.prediction = reply.text.strip()
        except (LLMUnavailable, LLMBadOutput):
            failures += 1
            result.prediction = ""
        result.f1 = answer_f1(result.prediction, result.question.answer, result.question.category)
        tick("answer")

    await asyncio.gather(*(one(r, p) for r, p in zip(results, prompts, strict=True)))
    return failures
