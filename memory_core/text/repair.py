"""Text that UTF-8 cannot carry, repaired where it enters memory.

A Python ``str`` can hold code points that no UTF-8 encoder accepts: the surrogates
U+D800..U+DFFF. They arrive as a JSON ``"\\ud800"`` escape in a platform's event, as bytes
that were not UTF-8 read with ``surrogateescape`` (stdin, ``sys.argv``, file names), or as
half of an emoji cut in two. Redis, the model's HTTP request, the sentence encoder and the
terminal all encode text as UTF-8, and each of them fails on one (``UnicodeEncodeError``).

:func:`repair` makes any ``str`` encodable and changes nothing else: a lone surrogate
becomes U+FFFD (the replacement character, shown as �), so what is around it is kept; a
high surrogate followed by a low one (a UTF-16 pair left as two code points) becomes the
character the pair stands for. Surrogates are the only code points of a ``str`` that UTF-8
cannot encode, so that is the whole repair.

It runs on every message, so text with nothing to repair (nearly all of it) is returned as
the same object: ASCII text at once (``isascii`` reads a flag CPython keeps on the string),
other text after one UTF-8 encode in C. Only text with a surrogate meets the regex.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"

# A surrogate pair (group 1) or a surrogate on its own.
_SURROGATES = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")


def _fixed(match: re.Match[str]) -> str:
    pair = match.group(1)
    if pair is None:
        return REPLACEMENT
    high, low = ord(pair[0]), ord(pair[1])
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def repair(text: str) -> str:
    """``text`` with every surrogate pair joined into its character and every lone
    surrogate replaced with U+FFFD; ``text`` itself (the same object) when it has none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub(_fixed, text)
    return text
