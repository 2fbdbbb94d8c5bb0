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
