"""Scoring one LoCoMo question: evidence recall and answer presence in a prompt, LoCoMo's
answer F1, and the three baselines (the newest turns, plain BM25 over turns, the whole
conversation) measured at the product's own fixed cost."""

from __future__ import annotations

import math
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean

from memory_core.calendar import zone
from memory_core.prompt.assembly import Prompt
from memory_core.text.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter
from memorybot_bench.locomo_data import Conversation, Question


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
            "recent": self._take(q, fixed, fill_turns(newest, self.costs, room, contiguous=True)),
            "bm25": self._take(
                q,
                fixed,
                fill_turns(self.index.rank(words(q.text)), self.costs, room, contiguous=False),
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


def fill_turns(
    order: Iterable[int], costs: Sequence[int], room: int, *, contiguous: bool
) -> list[int]:
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
