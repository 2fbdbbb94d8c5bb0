"""Removing text from summaries: whole sentences go, so no paraphrase around it survives.

Used by forget: a summary sentence that mentions the forgotten text (or the forgotten
person) is dropped; anything left that still matches is blanked out as a last resort.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_SENTENCES = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+|\n|$)")
REDACTED = "[forgotten]"


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def contains(text: str, needle: str) -> bool:
    return bool(needle) and _norm(needle) in _norm(text)


def redact(text: str, needles: Sequence[str]) -> str:
    """``text`` without the sentences that mention any of ``needles``."""
    needles = [n for n in needles if n.strip()]
    if not text or not needles or not any(contains(text, n) for n in needles):
        return text
    kept = [s for s in _SENTENCES.findall(text) if s and not any(contains(s, n) for n in needles)]
    result = re.sub(r"[ \t]+", " ", "".join(kept)).strip()
    for needle in needles:  # a match spanning sentences: blank it out
        result = re.sub(re.escape(needle), REDACTED, result, flags=re.I)
    return result


# A sentence "quotes" a message when it repeats a run of this many of its words (or, in
# Japanese and Chinese, which have no spaces, this many characters). Shorter runs are too
# common ("I think that the") to say where a sentence came from.
QUOTE_WORDS = 4
QUOTE_CHARS = 6
_WORD = re.compile(r"\w+", re.U)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _quote_grams(text: str) -> set[tuple[str, ...]]:
    """The runs of words (and of CJK characters) by which a sentence could quote ``text``."""
    norm = _norm(text)
    grams: set[tuple[str, ...]] = set()
    for run in _CJK.findall(norm):
        grams.update(tuple(run[i : i + QUOTE_CHARS]) for i in range(len(run) - QUOTE_CHARS + 1))
    words = _WORD.findall(_CJK.sub(" ", norm))
    for i in range(len(words) - QUOTE_WORDS + 1):
        gram = tuple(words[i : i + QUOTE_WORDS])
        if sum(len(w) >= 4 for w in gram) >= 2:  # not a run of small words only
            grams.add(gram)
    return grams


def quotes_any(sentence: str, sources: Sequence[str]) -> bool:
    """Whether ``sentence`` repeats one of ``sources`` (whole, if it is short but specific,
    or a run of its words)."""
    grams = _quote_grams(sentence)
    for source in sources:
        if len(source.strip()) >= 12 and contains(sentence, source.strip()):
            return True
        if grams & _quote_grams(source):
            return True
    return False


def redact_quotes(text: str, sources: Sequence[str]) -> str:
    """``text`` without the sentences that quote any of ``sources`` (removed messages).

    This is how forgetting a person or a message reaches summaries: by what was said, never
    by a name found inside the text (a member called "al" is not in "Alice")."""
    sources = [s for s in sources if s.strip()]
    if not text or not sources:
        return text
    kept = [s for s in _SENTENCES.findall(text) if s and not quotes_any(s, sources)]
    return re.sub(r"[ \t]+", " ", "".join(kept)).strip()
