"""Lexical search that works offline and for Japanese: terms and a BM25 index.

English (and other space-separated text): lowercase words, a small stop list, and the
Snowball English stemmer with irregular forms mapped first, so "went camping" finds "go
camp". Japanese (no spaces): character bigrams of kana/kanji runs, plus the runs of katakana
as whole words (names, loanwords). Numbers stay.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import snowballstemmer

from memory_core.text.cjk import CJK_CHARACTER, CJK_CHARACTERS
from memory_core.text.normalise import normalise

_WORD = re.compile(rf"[a-z0-9]+(?:'[a-z]+)?|[{CJK_CHARACTERS}]+")
_KATAKANA_RUN = re.compile(r"[\u30a0-\u30ff]{2,}")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she
    she'd she'll she's should shouldn't so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's
    when when's where where's which while who who's whom why why's with won't would wouldn't
    you you'd you'll you're you've your yours yourself yourselves yeah yes oh ok okay hey hi
    hello thanks thank really just also got get like know think well much lot lots so sure
    one will would could should did does do going gonna wanna really very""".split()
)


# Common irregular forms, so "we went hiking" is found by "go hiking" and vice versa.
_IRREGULAR = {
    "went": "go",
    "gone": "go",
    "goes": "go",
    "ran": "run",
    "saw": "see",
    "seen": "see",
    "took": "take",
    "taken": "take",
    "made": "make",
    "felt": "feel",
    "bought": "buy",
    "brought": "bring",
    "began": "begin",
    "begun": "begin",
    "came": "come",
    "did": "do",
    "done": "do",
    "drove": "drive",
    "driven": "drive",
    "ate": "eat",
    "eaten": "eat",
    "fell": "fall",
    "found": "find",
    "flew": "fly",
    "flown": "fly",
    "gave": "give",
    "given": "give",
    "grew": "grow",
    "grown": "grow",
    "heard": "hear",
    "held": "hold",
    "kept": "keep",
    "knew": "know",
    "known": "know",
    "left": "leave",
    "lost": "lose",
    "met": "meet",
    "paid": "pay",
    "read": "read",
    "rode": "ride",
    "sang": "sing",
    "sung": "sing",
    "sat": "sit",
    "slept": "sleep",
    "spent": "spend",
    "spoke": "speak",
    "spoken": "speak",
    "stood": "stand",
    "swam": "swim",
    "taught": "teach",
    "told": "tell",
    "thought": "think",
    "threw": "throw",
    "understood": "understand",
    "woke": "wake",
    "won": "win",
    "wore": "wear",
    "worn": "wear",
    "wrote": "write",
    "written": "write",
    "built": "build",
    "caught": "catch",
    "chose": "choose",
    "drew": "draw",
    "drawn": "draw",
    "fought": "fight",
    "forgot": "forget",
    "hid": "hide",
    "led": "lead",
    "meant": "mean",
    "sent": "send",
    "shot": "shoot",
    "sold": "sell",
    "struck": "strike",
    "tore": "tear",
    "children": "child",
    "kids": "kid",
    "people": "person",
    "men": "man",
    "women": "woman",
    "mice": "mouse",
    "feet": "foot",
    "teeth": "tooth",
}


# One stemmer per thread: a snowball stemmer keeps its working state on the object, and
# indexes are built in worker threads while queries run on the event loop.
_stemmers = threading.local()


def _snowball(word: str) -> str:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    stem: str = stemmer.stemWord(word)
    return stem


@lru_cache(maxsize=1 << 16)  # chat repeats its words; stemming is the slow part of terms()
def _stem(word: str) -> str:
    """The English (Porter2) stem, after mapping irregular forms to their base."""
    if word.endswith("'s"):
        word = word[:-2]
    return _snowball(_IRREGULAR.get(word, word))


def terms(text: str) -> list[str]:
    """The search terms of ``text`` (with repeats, for term frequencies)."""
    out: list[str] = []
    for match in _WORD.finditer(normalise(text)):
        token = match.group(0)
        if CJK_CHARACTER.match(token):
            out.extend(token[i : i + 2] for i in range(max(1, len(token) - 1)))
            out.extend(_KATAKANA_RUN.findall(token))
        elif token not in STOPWORDS:
            out.append(_stem(token))
    return out


COMPACT_MIN = 256  # postings added since the last compaction before one is worth it
_COPY_RUN = 1 << 20  # postings copied per numpy call while compacting


def _copy_runs(
    docs: np.ndarray, tfs: np.ndarray, at: int, old_docs: np.ndarray, old_tfs: np.ndarray
) -> None:
    """``old_docs``/``old_tfs`` into ``docs``/``tfs`` from ``at``, a run at a time, letting
    other threads run between runs."""
    for start in range(0, len(old_docs), _COPY_RUN):
        end = min(len(old_docs), start + _COPY_RUN)
        docs[at + start : at + end] = old_docs[start:end]
        tfs[at + start : at + end] = old_tfs[start:end]
        if end < len(old_docs):
            time.sleep(0)


_TERM_OVERHEAD = 120  # a vocabulary entry beside its string: dict slot, id int, tail arrays


class BM25:
    """An in-memory BM25 index over documents numbered 0..n-1 in insertion order.

    Postings live in flat numpy arrays, grouped by term (one int32 document and one uint8
    term frequency each, capped at 255 where BM25 has long saturated), so a query over
    100k messages is a handful of vector operations over views, and a posting costs 5
    bytes. New postings are appended per term to small typed arrays (cheap while messages
    arrive) and merged into the flat ones by :meth:`compact` once there are enough of them
    (the sync does it, in a worker thread for a big index).
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        # The vocabulary: a term's id is its row in _starts. Compacted terms are kept as their
        # hashes only (sorted, with their ids: 12 bytes a term, not a string and a dict entry
        # of ~180; two terms of one scope sharing a 64-bit hash is a 1e-9 chance at 100k
        # terms); the terms met since, by their strings.
        self._hashes: np.ndarray = np.zeros(0, dtype=np.int64)
        self._hash_ids: np.ndarray = np.zeros(0, dtype=np.int32)
        self._term_ids: dict[str, int] = {}
        self._terms = 0
        self._vocabulary_bytes = 0
        # Compacted: term t's postings are _docs[_starts[t]:_starts[t + 1]].
        self._starts: np.ndarray = np.zeros(1, dtype=np.int64)
        self._docs: np.ndarray = np.zeros(0, dtype=np.int32)
        self._tfs: np.ndarray = np.zeros(0, dtype=np.uint8)
        # Added since: term id -> (documents, frequencies), all after the compacted ones.
        self._tail: dict[int, tuple[array[int], array[int]]] = {}
        self._tail_postings = 0
        self._lengths: array[int] = array("i")
        self.total_length = 0
        self._lengths_np: np.ndarray = np.zeros(0, dtype=np.float32)
        self._log_lengths: np.ndarray = np.zeros(0, dtype=np.float32)

    def add(self, doc_terms: Sequence[str]) -> int:
        doc = len(self._lengths)
        counts = Counter(doc_terms)
        for term, tf in counts.items():
            term_id = self._term_id(term)
            if term_id is None:
                term_id = self._term_ids[term] = self._terms
                self._terms += 1
                self._vocabulary_bytes += sys.getsizeof(term) + _TERM_OVERHEAD
            tail = self._tail.get(term_id)
            if tail is None:
                tail = self._tail[term_id] = (array("i"), array("B"))
            tail[0].append(doc)
            tail[1].append(min(tf, 255))
        self._tail_postings += len(counts)
        self._lengths.append(len(doc_terms))
        self.total_length += len(doc_terms)
        return doc

    def __len__(self) -> int:
        return len(self._lengths)

    def _term_id(self, term: str) -> int | None:
        term_id = self._term_ids.get(term)
        if term_id is not None or not len(self._hashes):
            return term_id
        key = hash(term)
        at = int(np.searchsorted(self._hashes, key))
        if at < len(self._hashes) and self._hashes[at] == key:
            return int(self._hash_ids[at])
        return None

    def needs_compaction(self) -> bool:
        return self._tail_postings > max(COMPACT_MIN, len(self._docs) // 8)

    def pending_postings(self) -> int:
        """Postings added since the last compaction."""
        return self._tail_postings

    def compact(self) -> None:
        """Merge the postings added since the last compaction into the flat arrays. (Every
        new posting's document is after every compacted one, so each term's new postings go
        at the end of its run: the old arrays are copied in runs between the terms that
        grew.) Seconds at a million messages: a big index does this in a worker thread,
        under the scope's lock, copying at most _COPY_RUN postings per numpy call so the
        event loop gets the interpreter back between them (one np.insert held it 300 ms)."""
        if not self._tail:
            return
        terms_now = self._terms
        compacted = len(self._starts) - 1
        old_docs, old_tfs, old_starts = self._docs, self._tfs, self._starts
        docs = np.empty(len(old_docs) + self._tail_postings, dtype=np.int32)
        tfs = np.empty(len(docs), dtype=np.uint8)
        counts = np.zeros(terms_now, dtype=np.int64)
        counts[:compacted] = np.diff(old_starts)
        read = written = 0
        for term_id in sorted(self._tail):
            end = int(old_starts[term_id + 1]) if term_id < compacted else len(old_docs)
            _copy_runs(docs, tfs, written, old_docs[read:end], old_tfs[read:end])
            written += end - read
            read = end
            new_docs, new_tfs = self._tail[term_id]
            added = len(new_docs)
            docs[written : written + added] = np.frombuffer(new_docs, dtype=np.int32)
            tfs[written : written + added] = np.frombuffer(new_tfs, dtype=np.uint8)
            written += added
            counts[term_id] += added
        _copy_runs(docs, tfs, written, old_docs[read:], old_tfs[read:])
        starts = np.zeros(terms_now + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        self._docs, self._tfs, self._starts = docs, tfs, starts
        self._tail = {}
        self._tail_postings = 0
        if self._term_ids:
            hashes = np.concatenate(
                [
                    self._hashes,
                    np.fromiter(map(hash, self._term_ids), np.int64, len(self._term_ids)),
                ]
            )
            ids = np.concatenate(
                [
                    self._hash_ids,
                    np.fromiter(self._term_ids.values(), np.int32, len(self._term_ids)),
                ]
            )
            order = np.argsort(hashes, kind="stable")
            self._hashes, self._hash_ids = hashes[order], ids[order]
            self._term_ids = {}
            self._vocabulary_bytes = 0

    def nbytes(self) -> int:
        """Its bytes: the arrays as allocated, the vocabulary and the new postings' typed
        arrays estimated (a string and a dict entry per term, 5 bytes a posting)."""
        flat = self._starts.nbytes + self._docs.nbytes + self._tfs.nbytes
        cached = self._lengths_np.nbytes + self._log_lengths.nbytes + sys.getsizeof(self._lengths)
        tail = sys.getsizeof(self._tail) + len(self._tail) * 160 + self._tail_postings * 6
        vocabulary = self._hashes.nbytes + self._hash_ids.nbytes + sys.getsizeof(self._term_ids)
        return flat + cached + tail + vocabulary + self._vocabulary_bytes

    def df(self, term: str) -> int:
        term_id = self._term_id(term)
        if term_id is None:
            return 0
        df = 0
        if term_id < len(self._starts) - 1:
            df = int(self._starts[term_id + 1] - self._starts[term_id])
        tail = self._tail.get(term_id)
        return df + (len(tail[0]) if tail is not None else 0)

    def idf(self, term: str) -> float:
        n = len(self._lengths)
        df = self.df(term)
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def answer_weight(self, term: str) -> float:
        """What a question's word weighs when judging whether a message answers it: its idf
        among the messages other than the question (indexed itself, it would make the
        words it shares with an answer look common and its own words rare), so a word
        nothing else says weighs as one said once."""
        n = max(len(self._lengths) - 1, 1)
        df = max(self.df(term) - 1, 1)
        return math.log(1 + max(n - df + 0.5, 0.5) / (df + 0.5))

    def postings_of(self, term: str) -> np.ndarray | None:
        """The documents that have ``term`` (ascending; do not modify), or None."""
        arrays = self._arrays(term, frequencies=False)
        return arrays[0] if arrays is not None else None

    def _arrays(
        self, term: str, *, frequencies: bool = True
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The term's documents (int32, a view when nothing was added since the last
        compaction) and, with ``frequencies``, their term frequencies (float32)."""
        term_id = self._term_id(term)
        if term_id is None:
            return None
        docs = tfs = self._docs[:0]
        if term_id < len(self._starts) - 1:
            start, end = int(self._starts[term_id]), int(self._starts[term_id + 1])
            docs, tfs = self._docs[start:end], self._tfs[start:end]
        tail = self._tail.get(term_id)
        if tail is not None:
            docs = np.concatenate([docs, np.frombuffer(tail[0], dtype=np.int32)])
            if frequencies:
                tfs = np.concatenate([tfs, np.frombuffer(tail[1], dtype=np.uint8)])
        if not len(docs):
            return None
        return docs, (tfs.astype(np.float32) if frequencies else tfs)

    def lengths(self) -> np.ndarray:
        """Every document's length in terms (float32; do not modify)."""
        if len(self._lengths_np) != len(self._lengths):
            self._lengths_np = np.frombuffer(self._lengths, dtype=np.int32).astype(np.float32)
        return self._lengths_np

    def log_lengths(self) -> np.ndarray:
        """``ln(1 + length)`` of every document, kept between queries (do not modify)."""
        if len(self._log_lengths) != len(self._lengths):
            self._log_lengths = np.log1p(self.lengths())
        return self._log_lengths

    def score_array(
        self, query: Iterable[str], *, weights: dict[str, float] | None = None
    ) -> np.ndarray:
        """BM25 scores of all documents (zeros where no query term occurs). Every term's
        postings are scored together, in a few vector operations whatever the number of
        terms (per term, they cost a reply 10-20 µs each on a small index), summed in float64."""
        n = len(self._lengths)
        if not n:
            return np.zeros(0, dtype=np.float32)
        lengths = self.lengths()
        avg = self.total_length / n or 1.0
        k1, b = self.k1, self.b
        docs_of: list[np.ndarray] = []
        tfs_of: list[np.ndarray] = []
        idfs: list[float] = []
        for term in set(query):
            arrays = self._arrays(term)
            if arrays is None:
                continue
            docs_of.append(arrays[0])
            tfs_of.append(arrays[1])
            idfs.append(self.idf(term) * (weights.get(term, 1.0) if weights else 1.0))
        if not docs_of:
            return np.zeros(n, dtype=np.float32)
        docs = np.concatenate(docs_of)
        tfs = np.concatenate(tfs_of)
        idf = np.repeat(np.asarray(idfs, dtype=np.float32), [len(d) for d in docs_of])
        norm = tfs * (k1 + 1) / (tfs + k1 * (1 - b + b * lengths[docs] / avg))
        return np.bincount(docs, weights=idf * norm, minlength=n).astype(np.float32)

    def scores(
        self, query: Iterable[str], *, weights: dict[str, float] | None = None
    ) -> dict[int, float]:
        """BM25 score of every document that shares a term with ``query``."""
        arr = self.score_array(query, weights=weights)
        hit = np.nonzero(arr)[0]
        return {int(d): float(arr[d]) for d in hit}
