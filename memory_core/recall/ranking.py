"""Ranking a scope's documents against a query: BM25 over message terms
(:mod:`memory_core.recall.textsearch`), a boost for messages by a person the query names and
for those of a day or month it names, the blend with meaning when vectors are known, a lift
from the rest of each message's day (its best message, its day record), and neighbouring
turns added where they carry the context (the question before a short answer, the answer
after a question). Pure: it reads the index, never Redis.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from memory_core.calendar import day_end_ms, day_start, to_ms, zone
from memory_core.recall.documents import DAY_RECORD, Doc, Hit, ScopeIndex, same_exchange
from memory_core.recall.textsearch import terms
from memory_core.text.normalise import normalise

DAY_MS = 86_400_000
SHORT_TURN = 6  # terms: a turn this short rarely stands on its own (see _with_neighbours)
FLOOR = 0.1  # a hit must reach this share of what the query's terms could score
SPEAKER_BOOST = 1.15  # messages by a person the query names
NAME_WEIGHT = 0.3  # a name is a filter more than a topic: it weighs less than other words
# A candidate with no meaning to go by (a day record; any without vectors) that uses the
# query's words in the query's own form rises by up to this share (_prefer_exact_forms).
# Checked among the EXACT_POOL best only. `eval year`: "What is Ben training for?" found
# its day's record 60th among records of "the train was late", 14th with 0.3 (in the
# prompt). Applied to messages too, it moved LoCoMo dev by -1.1 / +0.3 points at 1,500 /
# 3,000 tokens (0.15: -0.8 / +0.7): their meaning tells the senses apart already.
EXACT_BONUS = 0.3
EXACT_POOL = 400
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
# 83.2% / 82.3%). With the speaker boost and the day context below, 1.0 / 1.5 / 2.0 gave
# 87.7% / 88.0% / 88.0%: 1.5.
SEM_WEIGHT = 1.5
# The blend of a message by a person the question names, multiplied (91% of the evidence
# turns missed at 3,000 tokens were said by the person the question names; on the
# development set 1.0 / 1.3 / 1.6 gave 86.2% / 86.3% / 86.5%).
FUSED_SPEAKER_BOOST = 1.6
# The rest of a message's day (see _with_day_context). The best message of the day, times
# DAY_CONTEXT: 0.2 / 0.4 gave 87.7% / 87.6%. The day record's word score as a share, times
# DAY_KEY: 0.3 gave 87.5% alone, 87.7% with DAY_CONTEXT. (Spreading recall over days the
# other way, fewer hits per day, lost 4-8 points: a topic's turns come together.)
# With everything as set here (88.1%), DAY_CONTEXT 0.3 gives 88.1% and FUSED_SPEAKER_BOOST
# 2.0 gives 88.0%: a plateau, not a peak.
DAY_CONTEXT = 0.2
DAY_KEY = 0.3
MONTH_BOOST = 0.15  # of the best score, for messages of a month the query names (88.0 -> 88.1%)
SEM_BASE = 0.2  # cosine at or below this adds nothing (unrelated sentences score ~0.1-0.2)
# A message's meaning is lifted by LENGTH_PRIOR * ln(1 + its terms): a message that says
# something ("we moved to Lisbon in May for my new job") answers a question more often than
# one that matches it as well in a few words ("nice!", "me too, Lisbon"), whose vector is
# mostly its speaker and the turn before. Whether a message is close enough in meaning to
# be recalled at all (VECTOR_MIN) does not change: length never recalls an unrelated
# message. On the development set at 3,000 tokens: 88.1% without, 88.9% with 0.06 (every
# conversation at or above; 1,500 tokens: 77.1% -> 77.8%). (A semantic-only experiment
# there: 0.04-0.06 lifted evidence in the top 30 by meaning from 63.6% to 69-71%.)
LENGTH_PRIOR = 0.06
# An index this small has each document's share of the query's words worked out before
# the vector comes (one pass per word over its postings), not after it for the hits found:
# a reply waits for what runs after the vector (a tiny scope's ranking, ~0.1 ms of it).
SHARES_AHEAD_MAX = 4096


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
    # (not "June 2022": the year's first digits are no day)
    re.compile(
        r"\b" + _MONTH + r"[a-z]*\.?\s+(\d{1,2})(?!\d)(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?", re.I
    ),
    # 13 October 2023 / 13 Oct
    re.compile(
        r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"[a-z]*\.?(?:,?\s+(\d{4}))?", re.I
    ),
    # 2023-10-13
    re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    # 2023年10月13日 / 10月13日
    re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日"),
)


# "in June 2022", "March, 2023": a month of a year, named without a day.
_MONTH_YEAR = re.compile(r"\b" + _MONTH + r"[a-z]*\.?,?\s+(\d{4})\b", re.I)
_DAY_BEFORE = re.compile(r"\d(?:st|nd|rd|th)?\s+(?:of\s+)?$", re.I)


def query_months(query: str) -> set[tuple[int, int]]:
    """(year, month) pairs a query names without a day: "in June 2022", "March, 2023"
    ("13 June 2022" and "June 13, 2022" name a day: see query_days)."""
    found: set[tuple[int, int]] = set()
    for m in _MONTH_YEAR.finditer(query):
        if _DAY_BEFORE.search(query[: m.start()]):
            continue
        found.add((int(m.group(2)), _MONTH_ABBR.index(m.group(1).lower()[:3]) + 1))
    return found


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


@dataclass(slots=True)
class Words:
    """What a query scores by its words alone (its boosts for names, days and months
    included): worked out while the query's vector is on its way (:func:`rank_words`),
    blended with it after (:func:`ranked`)."""

    q_terms: list[str]
    found: bool  # any document matched a word, before the expansion
    scores: np.ndarray
    telling: dict[str, float]  # the query's own words, by what each weighs in an answer
    record_scores: np.ndarray
    times: np.ndarray
    records: np.ndarray
    by_named: np.ndarray | None
    floor: float
    forms: dict[str, float]  # the query's words its stems changed, by their stem's weight
    shares: np.ndarray | None  # every document's share of ``telling`` (a small index), else None


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
    words = rank_words(index, query, tz=tz)
    return ranked(index, words, exclude_ids=exclude_ids, limit=limit, tz=tz, similarity=similarity)


def rank_words(index: ScopeIndex, query: str, *, tz: str = "UTC") -> Words | None:
    """The first half of :func:`rank`, which needs no vector; None: nothing to rank."""
    if not index.docs:
        return None
    q_terms = terms(query)
    named = _named_authors(index, query)
    weights = {t: NAME_WEIGHT for t in (n.lower() for n in named)}
    bm25 = index.bm25
    scores = bm25.score_array(q_terms, weights=weights)
    _drop_retired(index, scores)
    found = bool(scores.any())
    _expand(index, scores, q_terms, weights)
    best = float(scores.max())
    days = query_days(query)
    if days:
        # A question about a day is about the messages of that day, matching words or not.
        on_day = _on_days(index, days, tz)
        scores[on_day] += DATE_BOOST * best
    months = query_months(query)
    if months:
        # A month is a looser hint than a day: its messages are preferred, less strongly.
        scores[_in_months(index, months, tz)] += MONTH_BOOST * best
    # A day record stands in for messages that have expired; while a day's own messages are
    # all still here, they are the better memory and the record would only take their room.
    speakers = np.frombuffer(index.speaker, dtype=np.int32)
    times = np.frombuffer(index.ms, dtype=np.int64)
    records = speakers == DAY_RECORD
    # (Kept before that: a record is also a key to its day's messages; see _with_day_context.)
    record_scores = np.where(records, scores, 0.0)
    _drop_retired(index, record_scores)
    scores[_whole_days(index, times, records, tz)] = 0.0
    _drop_retired(index, scores)  # (again: the expansion and the date boost may score them)
    by_named = None
    if named:
        ids = [index.speaker_ids[n] for n in named if n in index.speaker_ids]
        by_named = np.isin(speakers, ids)
        scores[by_named] *= SPEAKER_BOOST
    reachable = sum(bm25.idf(t) * weights.get(t, 1.0) for t in set(q_terms))
    telling = {t: bm25.answer_weight(t) * weights.get(t, 1.0) for t in set(q_terms)}
    shares = _all_shares(index, telling) if len(index.docs) <= SHARES_AHEAD_MAX else None
    return Words(
        q_terms=q_terms,
        found=found,
        scores=scores,
        telling=telling,
        record_scores=record_scores,
        times=times,
        records=records,
        by_named=by_named,
        floor=max(FLOOR * reachable, 0.5),
        forms=_forms(index, query, named),
        shares=shares,
    )


def ranked(
    index: ScopeIndex,
    words: Words | None,
    *,
    exclude_ids: set[str],
    limit: int,
    tz: str = "UTC",
    similarity: np.ndarray | None = None,
) -> list[Hit]:
    """The second half of :func:`rank`: the words' scores blended with the meaning's
    (``similarity``, None without vectors), and the best grouped with their context."""
    if words is None or (not words.q_terms and similarity is None):
        return []
    if not words.found and (similarity is None or float(similarity.max()) < VECTOR_MIN):
        return []
    scores, floor, records = words.scores, words.floor, words.records
    if similarity is not None:
        scores = _fuse(scores, floor, similarity, records, words.by_named, index.bm25.log_lengths())
    else:
        scores = np.where(scores >= floor, scores, 0.0).astype(np.float32)
    unit = 1.0 if similarity is not None else float(scores.max())
    scores = _with_day_context(scores, words.record_scores, words.times, records, unit=unit, tz=tz)
    _prefer_exact_forms(index, words.forms, scores, similarity)
    candidates = np.nonzero(scores)[0]
    # Best first; among equals the newer message first.
    order = candidates[np.lexsort((-candidates, -scores[candidates]))]
    docs = index.docs
    picked: list[tuple[list[int], int]] = []  # (the group, its hit), best first
    used: set[int] = set()
    for doc_i in order.tolist():
        if len(picked) >= limit:
            break
        if doc_i in used or docs[doc_i].id in exclude_ids:
            continue
        group = [g for g in _with_neighbours(docs, doc_i, exclude_ids) if g not in used]
        if not group:
            continue
        used.update(group)
        group.sort()
        picked.append((group, doc_i))
    found = np.fromiter((doc_i for _, doc_i in picked), dtype=np.int64, count=len(picked))
    if words.shares is not None:
        shares = words.shares[found]
    else:
        shares = _shares(index, words.telling, found)
    return [
        Hit(
            docs=tuple(docs[g] for g in group),
            score=float(scores[doc_i]),
            words=float(share),
            meaning=_cosine(similarity, doc_i),
            at=group.index(doc_i),
        )
        for (group, doc_i), share in zip(picked, shares.tolist(), strict=True)
    ]


_FORM = re.compile(r"[^\W_]+(?:'[^\W_]+)?")  # a word as written (Japanese runs stem to bigrams)


def _forms(index: ScopeIndex, query: str, named: set[str]) -> dict[str, float]:
    """The query's own word forms that its stems lose ("training" is "train"), each weighed
    by its stem's idf."""
    names = {name.lower() for name in named}
    forms: dict[str, float] = {}
    for word in _FORM.findall(normalise(query)):
        if word in names or word in forms:
            continue
        stems = terms(word)
        if len(stems) == 1 and stems[0] != word:
            forms[word] = index.bm25.idf(stems[0])
    return forms


def _prefer_exact_forms(
    index: ScopeIndex, forms: dict[str, float], scores: np.ndarray, similarity: np.ndarray | None
) -> None:
    """Of the best candidates with no meaning to tell the sense of a stem by (day records,
    messages with no vector yet, any without vectors), those that use the query's words in
    the very form the query does rise: the stem "train" is "training" and "the train", and
    the form the asker chose is the likelier sense. (A message's meaning tells the senses
    apart better: "what is Ben training for" is far from "the train was late".)"""
    total = sum(forms.values())
    if not total:
        return
    for doc_i in _top(scores, EXACT_POOL).tolist():
        text = index.docs[doc_i].text
        if not text or _cosine(similarity, doc_i) != 0.0:
            continue
        found = set(_FORM.findall(normalise(text)))
        share = sum(weight for form, weight in forms.items() if form in found) / total
        if share:
            scores[doc_i] *= 1 + EXACT_BONUS * share


def _shares(index: ScopeIndex, telling: dict[str, float], found: np.ndarray) -> np.ndarray:
    """How much of the query's own words (by weight) each of the documents ``found`` has:
    one membership test per word over them all (per hit and word, 200 hits cost a reply
    several milliseconds)."""
    total = sum(telling.values())
    shares = np.zeros(len(found), dtype=np.float64)
    if not total or not len(found):
        return shares
    for term, weight in telling.items():
        postings = index.bm25.postings_of(term)
        if postings is not None:
            shares += weight * _members(found, postings)
    shares /= total
    return shares


def _all_shares(index: ScopeIndex, telling: dict[str, float]) -> np.ndarray:
    """:func:`_shares` of every document (the same sums, in the same order)."""
    shares = np.zeros(len(index.docs), dtype=np.float64)
    total = sum(telling.values())
    if not total:
        return shares
    for term, weight in telling.items():
        postings = index.bm25.postings_of(term)
        if postings is not None:
            shares[postings] += weight
    shares /= total
    return shares


def _members(found: np.ndarray, postings: np.ndarray) -> np.ndarray:
    """Which of ``found`` are in ``postings`` (ascending): a binary search each, 4-14x
    faster than ``np.isin`` (which sorts both; 280 µs a word of a 100,000-message scope)."""
    at = np.searchsorted(postings, found)
    np.minimum(at, len(postings) - 1, out=at)
    members: np.ndarray = postings[at] == found
    return members


def _whole_days(index: ScopeIndex, times: np.ndarray, records: np.ndarray, tz: str) -> np.ndarray:
    """The day records whose day's messages are all still in the log. Retention cuts the log
    at a time of day, so the oldest day left is mostly cut into: its record, not only its
    messages, is then the memory of what was said before the cut (a fact said that morning
    was in neither, `eval year`). A day counts as whole when the log holds as many of its
    messages as its record summarised (a record that does not say how many: when any are
    here)."""
    whole = np.zeros(len(times), dtype=bool)
    if records.all():
        return whole
    message_ms = times[~records]  # in log order: stream ids, so by time
    oldest = int(message_ms[0])
    for row in np.flatnonzero(records & (times >= oldest - DAY_MS)).tolist():
        doc = index.docs[row]
        if doc.kind != "day":
            continue  # retired
        day = doc.day
        begin, end = np.searchsorted(
            message_ms, (to_ms(day_start(day, tz)), day_end_ms(day, tz)), side="left"
        )
        held = int(end - begin)
        whole[row] = held > 0 and held >= index.day_messages.get(row, 0)
    return whole


def _cosine(similarity: np.ndarray | None, doc_i: int) -> float:
    """A document's cosine with the query (0 without vectors, or none known for it)."""
    if similarity is None or doc_i >= len(similarity):
        return 0.0
    return float(similarity[doc_i])


def _drop_retired(index: ScopeIndex, scores: np.ndarray) -> None:
    """Day records trimmed off the records list are recalled no more."""
    if index.retired:
        scores[index.retired] = 0.0


def _fuse(
    scores: np.ndarray,
    floor: float,
    similarity: np.ndarray,
    records: np.ndarray,
    by_named: np.ndarray | None,
    log_lengths: np.ndarray,
) -> np.ndarray:
    """The word score (its boosts for dates and names included) as a share of the best, plus
    SEM_WEIGHT times how far the meaning is above SEM_BASE: a message found either way can
    be recalled; found both ways, it comes first. (Reciprocal rank fusion threw the word
    score's boosts away: 78.8% against 81.3% for words alone on the development set.)
    A question about a person is about what that person said, however it was found: the
    boost for their messages applies to the blend, not to the word score alone (a message
    found by meaning only would otherwise get none of it)."""
    best = float(scores.max()) or 1.0
    lexical = np.where(scores >= floor, scores / best, 0.0)
    sims = similarity.copy()
    sims[records[: len(sims)]] = 0.0  # day records are ranked by words only
    # (Not where no vector is known, nor for records: their sims are 0.)
    lifted = np.where(sims > 0, sims + LENGTH_PRIOR * log_lengths[: len(sims)], 0.0)
    meaning = np.clip((lifted - SEM_BASE) / (1 - SEM_BASE), 0.0, None)
    fused = (lexical + SEM_WEIGHT * meaning).astype(np.float32)
    fused[(lexical == 0) & (sims < VECTOR_MIN)] = 0.0
    # A day record has no vector (it is ranked by words): found by words, it counts as found
    # both ways. Scored by words alone it lost to any recent turn close in meaning ("good
    # question" is close to every question naming its speaker): a year's channel, raw
    # messages kept 30 days, reached 20 of its 25 old facts, 23 with this (`eval year`);
    # LoCoMo's development set unchanged (its records stand in for no expired message).
    fused[records[: len(fused)]] = lexical[records[: len(fused)]] * (1 + SEM_WEIGHT)
    if by_named is not None:
        fused[by_named] *= FUSED_SPEAKER_BOOST
    return fused


def _with_day_context(
    scores: np.ndarray,
    record_scores: np.ndarray,
    times: np.ndarray,
    records: np.ndarray,
    *,
    unit: float,
    tz: str,
) -> np.ndarray:
    """Scores raised by what the rest of their day says about the query. A day's talk is
    mostly about a few things: a message of the day whose best message matches well is more
    likely on topic than an equally scored one alone in its day (DAY_CONTEXT times that best
    score), and the day's record, a summary of the day, is a key for every message of the
    day (DAY_KEY times its word score as a share of the best record's). Only messages that
    match the query themselves are raised: the day lifts, it does not recall. ``unit``: what
    a full share is worth in ``scores``."""
    messages = ~records & (scores > 0)
    if not messages.any():
        return scores
    # Records are stamped at midday UTC of their (local) day; messages are placed in the
    # scope's local day, so both land on the same day number.
    try:
        offset = datetime.fromtimestamp(int(times.max()) / 1000, tz=zone(tz)).utcoffset()
    except (ValueError, OverflowError, OSError):  # a time past what datetime knows
        offset = None
    local = times + (int(offset.total_seconds() * 1000) if offset else 0)
    days = np.where(records, times, local) // DAY_MS
    days -= int(days.min())
    n_days = int(days.max()) + 1
    lift = np.zeros(n_days, dtype=np.float32)
    np.maximum.at(lift, days[messages], scores[messages])
    lift *= DAY_CONTEXT
    if record_scores.any():
        keys = np.zeros(n_days, dtype=np.float32)
        np.maximum.at(keys, days[records], record_scores[records])
        lift += DAY_KEY * unit * keys / float(keys.max())
    out = scores.copy()
    out[messages] += lift[days[messages]]
    return out


def _in_months(index: ScopeIndex, months: set[tuple[int, int]], tz: str) -> np.ndarray:
    """Which documents were written in one of ``months`` (year, month) in ``tz``."""
    ms = np.frombuffer(index.ms, dtype=np.int64)
    mask = np.zeros(len(ms), dtype=bool)
    for year, month in months:
        try:
            start = datetime(year, month, 1, tzinfo=zone(tz))
            end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=zone(tz))
        except ValueError:
            continue  # "June 0000"
        mask |= (ms >= int(start.timestamp() * 1000)) & (ms < int(end.timestamp() * 1000))
    return mask


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
    top = _top(scores, PRF_DOCS)
    pool: dict[str, float] = {}
    for d in top.tolist():
        for t in terms(index.docs[d].text):
            if t not in weights and t not in q_terms:
                pool[t] = pool.get(t, 0.0) + bm25.idf(t)
    expansion = sorted(pool, key=lambda t: (-pool[t], t))[:PRF_TERMS]
    if expansion:
        scores += bm25.score_array(expansion, weights=dict.fromkeys(expansion, PRF_WEIGHT))


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` best positive scores, best first, ties by index: what a
    stable argsort of the whole array starts with, up to its first score of 0 or less,
    without sorting 100,000 scores (word scores are mostly 0)."""
    positive = np.flatnonzero(scores > 0)
    if len(positive) > k:
        kth = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
        positive = positive[scores[positive] >= kth]  # every tie at the k-th score too
    return positive[np.argsort(-scores[positive], kind="stable")][:k]


def _with_neighbours(docs: Sequence[Doc], i: int, exclude: set[str]) -> list[int]:
    """The hit, plus the turn before it when the hit is a short answer ("yes, in May!" says
    little without the question), and the turn after it when the hit is a question (its
    answer) or when that turn has no words of its own ("Yes!", "sure": a yes or a no to the
    hit, for a few tokens). A turn that says something stands on its own: the question
    before a long answer and a reaction after a statement ("wow, congrats on the new job!")
    would take the room of another hit. (On LoCoMo's development set at 3,000 tokens, with
    the question before a long answer and a reply of under 10 terms after a statement,
    SHORT_TURN 10: 88.3%; with neither, 89.1%; SHORT_TURN 8 / 6 / 4: 89.8% / 90.1% / 90.2%;
    replies of under 3 terms after a hit too: -0.4. At 1,500 tokens 82.4% before, 82.8-83.3%
    after.)"""
    group = [i]
    hit = docs[i]
    if hit.kind != "message":
        return group
    read = {i: hit}  # each document read once (an index in columns makes it on each read)
    prev_i, next_i = i - 1, i + 1
    if prev_i >= 0 and hit.n_terms < SHORT_TURN:
        prev = read[prev_i] = docs[prev_i]
        if same_exchange(prev, hit):
            group.insert(0, prev_i)
    if next_i < len(docs):
        nxt = read[next_i] = docs[next_i]
        if same_exchange(hit, nxt) and (hit.text.rstrip().endswith("?") or nxt.n_terms == 0):
            group.append(next_i)
    return [g for g in group if read[g].id not in exclude or g == i]
