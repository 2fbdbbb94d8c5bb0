"""``memorybot eval locomo``: does memory put the right past turns into the prompt?

Each LoCoMo conversation is replayed into its own scope, its session dates driving the clock
(so days roll over and summaries form as in real use), then every question of categories 1-4
is asked as a reply would be: ``pipeline.build_prompt`` with the question as the new message.
Whatever prompt assembly produces (window, summaries, recall) is what gets measured, so the
numbers follow the product as it changes. Three baselines are computed on the same questions
in the same run: the newest turns that fit the same budget (``recent``), the whole
conversation (``full_history``), and plain BM25 over single turns (``bm25``).

The run uses a private key prefix (and, on the embedded store, a private temporary data
directory) and deletes its keys afterwards: it never touches real memory. Memory is always
built offline (extractive summaries), so runs are deterministic and comparable; ``answer``
only adds the model's answers to the prompts, scored with LoCoMo's token F1.

LoCoMo is CC BY-NC 4.0: :data:`ATTRIBUTION` goes wherever its results are shown.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import shutil
import string
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

from config.settings import MemorySettings, Settings
from memory_core.bootstrap import Core, build_core
from memory_core.calendar import zone
from memory_core.clock import ManualClock
from memory_core.errors import InputError, LLMBadOutput, LLMOffline, LLMUnavailable
from memory_core.llm.client import LLM, OfflineLLM, build_llm
from memory_core.models import IncomingMessage
from memory_core.prompt.assembly import Prompt
from memory_core.text.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter

ATTRIBUTION = (
    "LoCoMo: Maharana et al., 'Evaluating Very Long-Term Conversational Memory of LLM Agents' "
    "(ACL 2024), github.com/snap-research/LoCoMo. License CC BY-NC 4.0; used for evaluation only."
)
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BASELINES = ("recent", "bm25", "full_history")
ASKER = "Questioner"
TURN_GAP = timedelta(seconds=30)  # a session's turns, spaced like a live chat
QUESTION_DELAY = timedelta(minutes=10)  # questions come a little after the last session
ANSWER_HINT = "\n(Answer with a short phrase; use the exact words from memory where possible.)"
ANSWER_MAX_TOKENS = 64

Progress = Callable[[str], None]  # called with "turn", "question" or "answer" per item done


# -- the data --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # as in the data: what evidence recall looks for
    stored: str  # what memorybot is given: the text plus the photo caption, if any
    ts: datetime


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # normalised dia ids, each a turn of the conversation


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int = 0  # evidence ids that name no turn, even after normalising


_SESSION_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*$",
    re.I,
)
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
# Full names and the usual abbreviations ("Sep", "Sept").
_MONTHS = {
    name: number
    for number, full in enumerate(_MONTH_NAMES, start=1)
    for name in (full, full[:3], full[:4])
}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.I)


def parse_session_time(text: str, tz: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware datetime in ``tz`` (12 am is midnight)."""
    match = _SESSION_TIME.match(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise InputError(f"session time {text!r} is not like '1:56 pm on 8 May, 2023'")
    hour, minute = int(match.group(1)), int(match.group(2))
    if not 1 <= hour <= 12 or minute > 59:
        raise InputError(f"session time {text!r} has no such hour")
    hour = hour % 12 + (12 if match.group(3).lower() == "p" else 0)
    try:
        return datetime(int(match.group(6)), month, int(match.group(4)), hour, minute).replace(
            tzinfo=zone(tz)
        )
    except ValueError as exc:
        raise InputError(f"session time {text!r}: {exc}") from exc


def normalize_evidence(raw: str) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``: ``"D8:6; D9:17"`` is two ids, ``"D:11:26"``
    is ``D11:26``, ``"D30:05"`` is ``D30:5``; text with no id in it (``"D"``) gives none."""
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE.findall(raw)]


def _turn_id(raw: str) -> str:
    ids = normalize_evidence(raw)
    return ids[0] if len(ids) == 1 else raw.strip()


def parse_locomo(
    data: Any,
    *,
    tz: str = "UTC",
    conversations: int | None = None,
    questions_per_conversation: int | None = None,
) -> list[Conversation]:
    """LoCoMo's JSON (a list of samples) as conversations with timed turns and the questions
    of categories 1-4 (5, adversarial, has no answer to find)."""
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise InputError("a LoCoMo file is a JSON list of samples with 'conversation' and 'qa'")
    result: list[Conversation] = []
    for index, sample in enumerate(data[:conversations]):
        name = str(sample.get("sample_id") or f"sample-{index + 1}")
        conv = sample.get("conversation")
        qa = sample.get("qa", [])
        if not isinstance(conv, dict) or not isinstance(qa, list):
            raise InputError(f"{name}: 'conversation' must be an object and 'qa' a list")
        turns = _turns(name, conv, tz)
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        dropped = 0
        for item in qa:
            if not isinstance(item, dict) or item.get("category") not in CATEGORIES:
                continue
            if item.get("answer") is None or not str(item.get("question", "")).strip():
                continue
            ids: list[str] = []
            for raw in item.get("evidence") or []:
                for dia_id in normalize_evidence(str(raw)) or [str(raw)]:
                    if dia_id not in known:
                        dropped += 1
                    elif dia_id not in ids:
                        ids.append(dia_id)
            questions.append(
                Question(
                    text=str(item["question"]).strip(),
                    answer=str(item["answer"]),
                    category=int(item["category"]),
                    evidence=tuple(ids),
                )
            )
        result.append(
            Conversation(name, tuple(turns), tuple(questions[:questions_per_conversation]), dropped)
        )
    return result


def _turns(name: str, conv: dict[str, Any], tz: str) -> list[Turn]:
    sessions = sorted(
        (int(key.split("_")[1]), value)
        for key, value in conv.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    turns: list[Turn] = []
    for number, session in sessions:
        raw_time = conv.get(f"session_{number}_date_time")
        if not isinstance(raw_time, str):
            raise InputError(f"{name}: session_{number} has no session_{number}_date_time")
        start = parse_session_time(raw_time, tz)
        for i, turn in enumerate(session):
            text = " ".join(str(turn.get("text") or "").split())
            caption = " ".join(str(turn.get("blip_caption") or "").split())
            stored = f"{text} [shares a photo: {caption}]".strip() if caption else text
            if not stored or not turn.get("dia_id"):
                continue  # nothing was said: nothing to remember or to find
            ts = start + i * TURN_GAP
            if turns and ts <= turns[-1].ts:
                ts = turns[-1].ts + timedelta(seconds=1)  # time never runs backwards
            speaker = str(turn.get("speaker") or "someone")
            turns.append(Turn(_turn_id(str(turn["dia_id"])), speaker, text, stored, ts))
    if not turns:
        raise InputError(f"{name}: the conversation has no turns (session_1, session_2, ...)")
    return turns


def load_locomo(
    path: Path,
    *,
    tz: str = "UTC",
    conversations: int | None = None,
    questions_per_conversation: int | None = None,
) -> list[Conversation]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from exc
    return parse_locomo(
        data,
        tz=tz,
        conversations=conversations,
        questions_per_conversation=questions_per_conversation,
    )


# -- metrics ---------------------------------------------------------------------------
def squash(text: str) -> str:
    return " ".join(text.split())


def evidence_share(evidence: Sequence[str], messages: Sequence[str]) -> float | None:
    """The share of evidence texts found whole (whitespace normalised) in one of the
    messages; None when the question has no evidence to look for."""
    if not evidence:
        return None
    haystack = [squash(m) for m in messages]
    found = sum(1 for text in evidence if any(squash(text) in m for m in haystack))
    return found / len(evidence)


def answer_in(answer: str, messages: Iterable[str]) -> bool:
    """The gold answer (case and whitespace normalised) in the text, as whole words: "2" is
    not found in "2023"."""
    needle = squash(answer).lower()
    if not needle:
        return False
    pattern = re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")
    return any(pattern.search(squash(m).lower()) for m in messages)


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def answer_tokens(text: str) -> list[str]:
    """LoCoMo's answer normalisation: lower case, no commas or punctuation, no a/an/the/and.
    (LoCoMo also Porter-stems; without nltk we do not, which is slightly stricter.)"""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return _ARTICLES.sub(" ", text).split()


def token_f1(prediction: str, gold: str) -> float:
    pred, truth = answer_tokens(prediction), answer_tokens(gold)
    same = sum((Counter(pred) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def answer_f1(prediction: str, gold: str, category: int) -> float:
    """LoCoMo's scoring by category: multi-hop answers are comma-separated lists (each gold
    part scores its best predicted part); open-domain keeps the gold's first ';' part."""
    if category == 1:
        preds = [p.strip() for p in prediction.split(",")]
        return fmean(max(token_f1(p, g.strip()) for p in preds) for g in gold.split(","))
    if category == 3:
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


# -- the BM25 baseline -------------------------------------------------------------------
def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class BM25:
    """Okapi BM25 over single turns: a baseline to beat, not the product's recall."""

    def __init__(self, docs: Sequence[Sequence[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.lengths = [len(d) for d in docs]
        self.avg = fmean(self.lengths) if docs and any(self.lengths) else 1.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for index, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                self.postings[term].append((index, tf))
        n = len(docs)
        self.idf = {
            t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()
        }

    def rank(self, query: Sequence[str]) -> list[int]:
        """Indices of the documents sharing a term with the query, best first (ties: newer)."""
        scores: dict[int, float] = defaultdict(float)
        for term in set(query):
            idf = self.idf.get(term, 0.0)
            for index, tf in self.postings.get(term, ()):
                norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / self.avg)
                scores[index] += idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores, key=lambda i: (-scores[i], -i))


# -- one question, scored --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Scored:
    recall: float | None  # evidence-turn recall; None: the question has no evidence
    answer_in_prompt: bool
    tokens: int


@dataclass(slots=True)
class QuestionResult:
    sample_id: str
    question: Question
    memory: Scored
    baselines: dict[str, Scored]
    sections: dict[str, int] = field(default_factory=dict)
    prediction: str | None = None
    f1: float | None = None


def memory_text(prompt: Prompt) -> list[str]:
    """The prompt's messages minus the question and the fixed persona/rules text, which
    would otherwise "contain" answers such as "today"; memory starts at the <memory> tag."""
    system, *rest = prompt.messages[:-1] or [{"content": ""}]
    content = system.get("content", "")
    at = content.find("<memory>")
    return ([content[at:]] if at >= 0 else []) + [m.get("content", "") for m in rest]


class Baselines:
    """The three baselines over one conversation, at the product's own fixed cost."""

    def __init__(self, conv: Conversation, counter: TokenCounter, tz: str) -> None:
        self.turns = conv.turns
        self.lines = [
            f"[{t.ts.astimezone(zone(tz)):%Y-%m-%d %H:%M}] {t.speaker}: {t.stored}"
            for t in conv.turns
        ]
        self.costs = [MESSAGE_OVERHEAD + counter.count(line) for line in self.lines]
        self.index = BM25([words(t.stored) for t in conv.turns])

    def score(self, q: Question, fixed: int, budget: int) -> dict[str, Scored]:
        room = budget - fixed
        newest = range(len(self.turns) - 1, -1, -1)
        return {
            "recent": self._take(q, fixed, _fill(newest, self.costs, room, contiguous=True)),
            "bm25": self._take(
                q, fixed, _fill(self.index.rank(words(q.text)), self.costs, room, contiguous=False)
            ),
            "full_history": self._take(q, fixed, list(range(len(self.turns)))),
        }

    def _take(self, q: Question, fixed: int, chosen: list[int]) -> Scored:
        ids = {self.turns[i].dia_id for i in chosen}
        recall = sum(e in ids for e in q.evidence) / len(q.evidence) if q.evidence else None
        return Scored(
            recall=recall,
            answer_in_prompt=answer_in(q.answer, (self.lines[i] for i in chosen)),
            tokens=fixed + sum(self.costs[i] for i in chosen),
        )


def _fill(order: Iterable[int], costs: Sequence[int], room: int, *, contiguous: bool) -> list[int]:
    """Turns in ``order`` while they fit ``room``; a contiguous fill (the newest turns) stops
    at the first that does not, a ranked one skips it and tries the next."""
    chosen: list[int] = []
    for i in order:
        if costs[i] > room:
            if contiguous:
                break
            continue
        chosen.append(i)
        room -= costs[i]
    return chosen


def fixed_cost(prompt: Prompt, counter: TokenCounter) -> int:
    """What every baseline pays like the product: priming, the persona and rules (the system
    message up to its memory), the question."""
    system = prompt.messages[0].get("content", "") if len(prompt.messages) > 1 else ""
    at = system.find("<memory>")
    header = (system[:at] if at >= 0 else system).rstrip("\n")
    question = prompt.messages[-1].get("content", "")
    return REPLY_PRIMING + 2 * MESSAGE_OVERHEAD + counter.count(header) + counter.count(question)


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


def _metrics(scores: Sequence[Scored]) -> dict[str, Any]:
    recalls = [s.recall for s in scores if s.recall is not None]
    tokens = [s.tokens for s in scores]
    return {
        "questions": len(scores),
        "questions_with_evidence": len(recalls),
        "evidence_recall": round(fmean(recalls), 4) if recalls else None,
        "answer_in_prompt": round(fmean(s.answer_in_prompt for s in scores), 4) if scores else None,
        "prompt_tokens_mean": round(fmean(tokens), 1) if tokens else None,
        "prompt_tokens_max": max(tokens) if tokens else None,
    }


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
            if core.pipeline.recall is not None:  # as the background would have, by now
                await core.pipeline.recall.embed_backlog(scope)
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
        await core.pipeline.ingest(
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
        prompt = await core.pipeline.build_prompt(msg)  # a dry run: nothing is stored
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
