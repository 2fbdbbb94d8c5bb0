"""Text as a person reads it, for matching (forget, redaction, facts, recall's terms).

A forget must find what a reader sees, whatever code points spell it: ``ZEBRA\\u200bFALCON``
(a zero-width space inside), ``soft\\u00adware`` (a soft hyphen), ``İSTANBUL`` against
"istanbul", ｆｕｌｌ-width letters. So matching compares :func:`normalise` of both sides:

1. NFKC: compatibility forms as their plain ones (full-width and half-width forms,
   ligatures, circled digits);
2. format characters (Unicode category Cf: zero-width spaces and joiners, soft hyphens,
   bidirectional marks, the BOM, tag characters) removed: they are invisible;
3. casefold (ß as ss), and the combining dot above that casefold leaves after an i (the
   Turkish capital İ folds to i + U+0307) removed, so İstanbul matches istanbul.

Accents stay (café is not cafe) and so do Japanese voiced marks (が is not か).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache

_DOT_AFTER_I = re.compile("(?<=[ij])\u0307")
# Where Cf characters live (the Basic Multilingual Plane, the Supplementary Multilingual
# and Ideographic Planes, the tags plane): scanned once, with this Python's Unicode data.
_PLANES = ((0, 0x2FFFF), (0xE0000, 0xE0FFF))


@cache
def _without_format() -> dict[int, None]:
    """A ``str.translate`` table deleting every format character."""
    return {
        cp: None
        for low, high in _PLANES
        for cp in range(low, min(high, sys.maxunicode) + 1)
        if unicodedata.category(chr(cp)) == "Cf"
    }


def normalise(text: str) -> str:
    """``text`` for matching, as a reader sees it (see the module docstring)."""
    if text.isascii():
        return text.lower()  # NFKC and casefold change no ASCII character but case
    folded = unicodedata.normalize("NFKC", text).translate(_without_format()).casefold()
    return _DOT_AFTER_I.sub("", folded) if "\u0307" in folded else folded
