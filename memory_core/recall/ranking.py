"""Ranking a scope's documents against a query: BM25 over message terms
(:mod:`memory_core.recall.textsearch`), a boost for messages by a person the query names and
for those of a day it names, the blend with meaning when vectors are known, and neighbouring
turns added where they carry the context (the question before a short answer, the answer
after a question). Pure: it reads the index, never Redis.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import numpy as np

from memory_core.calendar import zone
from memory_core.recall.documents import DAY_RECORD, Doc, Hit, ScopeIndex, same_exchange
from memory_core.recall.textsearch import terms

SHORT_TURN = 10  # terms: a turn this short rarely stands on its own
FLOOR = 0.1  # a hit must reach this share of what the query's terms could score
SPEAKER_BOOST = 1.15  # messages by a person the query names
NAME_WEIGHT = 0.3  # a name is a filter more than a topic: it weighs less than other words
DATE_BOOST = 0.3  # of the best score, for messages from a day the query names
# Pseudo-relevance feedback: the top documents' most telling words, added with a low
# weight, find the messages that answer a question in other words ("pets" -> "cat").
PRF_DOCS = 3
PRF_TERMS = 20
PRF_WEIGHT = 0.2

# Cosine below this is not a match by meaning alone. (0.25 and 0.3 score alike on LoCoMo's
# development set; 0.25 keeps short Japanese messages, whose "speaker: " prefix weighs more.)
VECTOR_MIN = 0.25
# Fusion, tuned on LoCoMo's five development conversations only: with messages embedded in
# context (embedding_text), 0.3 / 0.6 / 0.8 / 1.0 / 1.5 gave 84.2% / 85.5% / 85.9% / 85.8% /
# 86.2% evidence recall at 3,000 tokens (bare text: 0.0 / 0.3 / 0.6 / 1.0 gave 81.3% / 83.4% /
# 83.2% / 82.3%); 1.0 sits in the middle of the plateau.
SEM_WEIGHT = 1.0
SEM_BASE = 0.2  # cosine at or below this adds nothing (unrelated sentences score ~0.1-0.2)


def _named_authors(index: ScopeIndex, query: str) -> set[str]:
    words = set(re.findall(r"[\w']+", query.lower()))
    return {name for low, name in index.authors.items() if low in words}


_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH_ABBR = [m[:3] for m in _MONTHS]
_MONTH = "(" + "|".join(_MONTH_ABBR) + ")"
_DATE_PATTERNS = (
    # October 13, 2023 / Oct 13 2023 / October 13
    re.compile(r"\b" + _MONTH + r"[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?", re.I),
    # 13 October 2023 / 13 Oct
    re.compile(
        r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"[a-z]*\.?(?:,?\s+(\d{4}))?", re.I
    ),
    # 2023-10-13
    re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    # 2023年10月13日 / 10月13日
    re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日"),
)


def query_days(query: str) -> set[tuple[int, int]]:
    """(month, day) pairs a query names: "on October 13, 2023", "13 May", "10月13日"."""
    found: set[tuple[int, int]] = set()
    for n, pattern in enumerate(_DATE_PATTERNS):
        for m in pattern.finditer(query):
            try:
                if n == 0:
                    month, day = _MONTH_ABBR.index(m.group(1).lower()[:3]) + 1, int(m.group(2))
                elif n == 1:
                    month, day = _MONTH_ABBR.index(m.group(2).lower()[:3]) + 1, int(m.group(1))
                elif n == 2:
                    month, day = int(m.group(2)), int(m.group(3))
                else:
                    month, day = int(m.group(2)), int(m.group(3))
            except ValueError:
                continue
            if 1 <= month <= 12 and 1 <= day <= 31:
                found.add((month, day))
    return found


def rank(
    index: ScopeIndex,
    query: str,
    *,
    exclude_ids: set[str],
    limit: int,
    tz: str = "UTC",
    similarity: np.ndarray | None = None,
) -> list[Hit]:
    """Score every document against ``query`` and group the best with their context."""
    q_terms = terms(query)
    if (not q_terms and similarity is None) or not index.docs:
        return []
    named = _named_authors(index, query)
    weights = {t: NAME_WEIGHT for t in (n.lower() for n in named)}
    bm25 = index.bm25
    scores = bm25.score_array(q_terms, weights=weights)
    _drop_retired(index, scores)
    if not scores.any() and (similarity is None or float(similarity.max()) < VECTOR_MIN):
        return []
    _expand(index, scores, q_terms, weights)
    best = float(scores.max())
    days = query_days(query)
    if days:
        # A question about a day is about the messages of that day, matching words or not.
        on_day = _on_days(index, days, tz)
        scores[on_day] += DATE_BOOST * best
    # A day record stands in for messages that have expired; while a day's own messages are
    # still here, they are the better memory and the record would only take their room.
    speakers = np.frombuffer(index.speaker, dtype=np.int32)
    times = np.frombuffer(index.ms, dtype=np.int64)
    records = speakers == DAY_RECORD
    if (~records).any():
        oldest = int(times[~records].min())
        scores[records & (times >= oldest - 86_400_000)] = 0.0
    _drop_retired(index, scores)  # (again: the expansion and the date boost may score them)
    if named:
        ids = [index.speaker_ids[n] for n in named if n in index.speaker_ids]
        by_named = np.isin(np.frombuffer(index.speaker, dtype=np.int32), ids)
        scores[by_named] *= SPEAKER_BOOST
    reachable = sum(bm25.idf(t) * weights.get(t, 1.0) for t in set(q_terms))
    floor = max(FLOOR * reachable, 0.5)
    candidates = np.nonzero(scores >= floor)[0]
    # Best first; among equals the newer message first.
    order = candidates[np.lexsort((-candidates, -scores[candidates]))]
    if similarity is not None:
        order, scores = _fuse(scores, floor, similarity, records)
    docs = index.docs
    hits: list[Hit] = []
    used: set[int] = set()
    for doc_i in order.tolist():
        if len(hits) >= limit:
            break
        if doc_i in used or docs[doc_i].id in exclude_ids:
            continue
        group = [g for g in _with_neighbours(docs, doc_i, exclude_ids) if g not in used]
        if not group:
            continue
        used.update(group)
        hits.append(Hit(docs=tuple(docs[g] for g in sorted(group)), score=float(scores[doc_i])))
    return hits


def _drop_retired(index: ScopeIndex, scores: np.ndarray) -> None:
    """Day records trimmed off the records list are recalled no more."""
    if index.retired:
        scores[index.retired] = 0.0


def _fuse(
    scores: np.ndarray, floor: float, similarity: np.ndarray, records: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The word score (its boosts for dates and names included) as a share of the best, plus
    SEM_WEIGHT times how far the meaning is above SEM_BASE: a message found either way can
    be recalled; found both ways, it comes first. (Reciprocal rank fusion threw the word
    score's boosts away: 78.8% against 81.3% for words alone on the development set.)"""
    best = float(scores.max()) or 1.0
    lexical = np.where(scores >= floor, scores / best, 0.0)
    sims = similarity.copy()
    sims[records[: len(sims)]] = 0.0  # day records are ranked by words only
    meaning = np.clip((sims - SEM_BASE) / (1 - SEM_BASE), 0.0, None)
    fused = (lexical + SEM_WEIGHT * meaning).astype(np.float32)
    fused[(lexical == 0) & (sims < VECTOR_MIN)] = 0.0
    candidates = np.nonzero(fused)[0]
    return candidates[np.lexsort((-candidates, -fused[candidates]))], fused


def _on_days(index: ScopeIndex, days: set[tuple[int, int]], tz: str) -> np.ndarray:
    """Which documents were written on one of ``days`` (month, day) in ``tz``, any year."""
    ms = np.frombuffer(index.ms, dtype=np.int64)
    mask = np.zeros(len(ms), dtype=bool)
    first = datetime.fromtimestamp(int(ms.min()) / 1000, tz=zone(tz)).year
    last = datetime.fromtimestamp(int(ms.max()) / 1000, tz=zone(tz)).year
    for year in range(first, last + 1):
        for month, day in days:
            try:
                start = datetime(year, month, day, tzinfo=zone(tz))
            except ValueError:
                continue  # February 30th
            begin = int(start.timestamp() * 1000)
            end = int((start + timedelta(days=1)).timestamp() * 1000)
            mask |= (ms >= begin) & (ms < end)
    return mask


def _expand(
    index: ScopeIndex, scores: np.ndarray, q_terms: list[str], weights: dict[str, float]
) -> None:
    """Pseudo-relevance feedback: add the top documents' rarest words to the query."""
    bm25 = index.bm25
    top = np.argsort(-scores, kind="stable")[:PRF_DOCS]
    pool: dict[str, float] = {}
    for d in top.tolist():
        if scores[d] <= 0:
            break
        for t in terms(index.docs[d].text):
            if t not in weights and t not in q_terms:
                pool[t] = pool.get(t, 0.0) + bm25.idf(t)
    expansion = sorted(pool, key=lambda t: (-pool[t], t))[:PRF_TERMS]
    if expansion:
        scores += bm25.score_array(expansion, weights=dict.fromkeys(expansion, PRF_WEIGHT))


def _with_neighbours(docs: list[Doc], i: int, exclude: set[str]) -> list[int]:
    """The hit, plus the turn before it when the hit is a short answer, and the turn after
    it when the hit is a question or that next turn is short (an answer)."""
    group = [i]
    hit = docs[i]
    if hit.kind != "message":
        return group
    prev_i, next_i = i - 1, i + 1
    if prev_i >= 0 and same_exchange(docs[prev_i], hit):
        prev = docs[prev_i]
        if hit.n_terms < SHORT_TURN or prev.text.rstrip().endswith("?"):
            group.insert(0, prev_i)
    if next_i < len(docs) and same_exchange(hit, docs[next_i]):
        nxt = docs[next_i]
        if hit.text.rstrip().endswith("?") or nxt.n_terms < SHORT_TURN:
            group.append(next_i)
    return [g for g in group if docs[g].id not in exclude or g == i]
