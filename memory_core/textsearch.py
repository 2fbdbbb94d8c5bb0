"""Lexical search that works offline and for Japanese: terms and a BM25 index.

English (and other space-separated text): lowercase words, a small stop list, and light
suffix stripping so "went camping" finds "camp". Japanese (no spaces): character bigrams of
kana/kanji runs, plus the runs of katakana as whole words (names, loanwords). Numbers stay.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
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
    "went": "go", "gone": "go", "goes": "go", "ran": "run", "saw": "see", "seen": "see",
    "took": "take", "taken": "take", "made": "make", "felt": "feel", "bought": "buy",
    "brought": "bring", "began": "begin", "begun": "begin", "came": "come", "did": "do",
    "done": "do", "drove": "drive", "driven": "drive", "ate": "eat", "eaten": "eat",
    "fell": "fall", "found": "find", "flew": "fly", "flown": "fly", "gave": "give",
    "given": "give", "grew": "grow", "grown": "grow", "heard": "hear", "held": "hold",
    "kept": "keep", "knew": "know", "known": "know", "left": "leave", "lost": "lose",
    "met": "meet", "paid": "pay", "read": "read", "rode": "ride", "sang": "sing",
    "sung": "sing", "sat": "sit", "slept": "sleep", "spent": "spend", "spoke": "speak",
    "spoken": "speak", "stood": "stand", "swam": "swim", "taught": "teach", "told": "tell",
    "thought": "think", "threw": "throw", "understood": "understand", "woke": "wake",
    "won": "win", "wore": "wear", "worn": "wear", "wrote": "write", "written": "write",
    "built": "build", "caught": "catch", "chose": "choose", "drew": "draw", "drawn": "draw",
    "fought": "fight", "forgot": "forget", "hid": "hide", "led": "lead", "meant": "mean",
    "sent": "send", "shot": "shoot", "sold": "sell", "struck": "strike", "tore": "tear",
    "children": "child", "kids": "kid", "people": "person", "men": "man", "women": "woman",
    "mice": "mouse", "feet": "foot", "teeth": "tooth",
}


def _stem(word: str) -> str:
    """Light suffix stripping: enough to match plural, past and -ing forms."""
    if word.endswith("'s"):
        word = word[:-2]
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, keep in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: len(word) - len(suffix)] + keep
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]  # running -> run, planned -> plan
            if suffix == "s" and word.endswith("ss"):
                return word
            return base
    return word


def terms(text: str) -> list[str]:
    """The search terms of ``text`` (with repeats, for term frequencies)."""
    out: list[str] = []
    for match in _WORD.finditer(text.lower()):
        token = match.group(0)
        if _CJK.match(token):
            out.extend(token[i : i + 2] for i in range(max(1, len(token) - 1)))
            out.extend(_KATAKANA_RUN.findall(token))
        elif token not in STOPWORDS:
            out.append(_stem(token))
    return out


@dataclass
class BM25:
    """An in-memory BM25 index over documents numbered 0..n-1 in insertion order."""

    k1: float = 1.2
    b: float = 0.75
    postings: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    total_length: int = 0

    def add(self, doc_terms: Sequence[str]) -> int:
        doc = len(self.lengths)
        for term, tf in Counter(doc_terms).items():
            self.postings.setdefault(term, []).append((doc, tf))
        self.lengths.append(len(doc_terms))
        self.total_length += len(doc_terms)
        return doc

    def __len__(self) -> int:
        return len(self.lengths)

    def idf(self, term: str) -> float:
        n = len(self.lengths)
        df = len(self.postings.get(term, ()))
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def scores(
        self, query: Iterable[str], *, weights: dict[str, float] | None = None
    ) -> dict[int, float]:
        """BM25 score of every document that shares a term with ``query``."""
        n = len(self.lengths)
        if not n:
            return {}
        avg = self.total_length / n or 1.0
        out: dict[int, float] = {}
        for term in set(query):
            plist = self.postings.get(term)
            if not plist:
                continue
            idf = self.idf(term) * (weights.get(term, 1.0) if weights else 1.0)
            k1, b, lengths = self.k1, self.b, self.lengths
            for doc, tf in plist:
                norm = tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[doc] / avg))
                out[doc] = out.get(doc, 0.0) + idf * norm
        return out
