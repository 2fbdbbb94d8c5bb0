"""What the model said, made into what the bot says: configured secrets masked out, the
length capped, and a marker where an answer was cut.

A model can repeat a secret: a proxy that puts the API key in an error the model then
quotes, a token pasted into the channel, a prompt injection that asks for it. Whatever the
reason, a reply that contains a configured secret (``Settings.secret_values``) shows
:data:`MASK` instead, in the final text (sent and stored) and in every streamed edit. A
streamed edit also holds back a tail that the next piece could turn into a secret, so a
chunk boundary never shows a secret's first half.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable

MASK = "[secret hidden]"
# Values shorter than this are not searched for: a short password such as "redis" or
# "admin" would mask ordinary words in every answer, and says little about the secret.
MIN_SECRET_CHARS = 8


class SecretMask:
    """Masks the configured secret values in text (exact matches, longest first)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        needles = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self._needles = tuple(sorted(needles, key=len, reverse=True))
        self._longest = len(self._needles[0]) if self._needles else 0
        self._pattern = (
            re.compile("|".join(re.escape(n) for n in self._needles)) if self._needles else None
        )

    def mask(self, text: str) -> str:
        """A finished text (nothing more will follow) with every secret masked, and also
        a long enough tail that begins a secret (an answer cut off in the middle of one)."""
        shown, cut = self._split(text)
        tail = text[cut:]
        return shown + (MASK if len(tail) >= MIN_SECRET_CHARS else tail)

    def settled(self, text: str) -> str:
        """A text that is still growing (an answer streaming in), masked, without the tail
        that the next piece could turn into a secret: what may be shown now. What it
        returns is always the beginning of what the finished text will show."""
        return self._split(text)[0]

    def _split(self, text: str) -> tuple[str, int]:
        """The masked text before the open tail, and where the open tail starts in
        ``text`` (``len(text)``: none)."""
        if self._pattern is None:
            return text, len(text)
        cut = self._open_start(text, 0)
        out: list[str] = []
        at = 0
        for match in self._pattern.finditer(text):
            begin, end = match.span()
            if begin >= cut:
                break
            out += [text[at:begin], MASK]
            at = end
            if end > cut:  # a whole secret crosses the open tail: masked, and look again after
                cut = self._open_start(text, end)
        out.append(text[at:cut])
        return "".join(out), cut

    def _open_start(self, text: str, begin: int) -> int:
        """The first position at or after ``begin`` from which the rest of ``text`` is the
        beginning of a secret but not yet the whole of it."""
        for start in range(max(begin, len(text) - self._longest + 1), len(text)):
            tail = text[start:]
            if any(len(n) > len(tail) and n.startswith(tail) for n in self._needles):
                return start
        return len(text)


def with_marker(text: str, marker: str, max_chars: int) -> str:
    """``text`` ended by ``marker`` (it was cut there), all within ``max_chars``."""
    room = max(0, max_chars - len(marker) - 1)
    return f"{text[:room].rstrip()} {marker}".lstrip()


def capped(text: str, max_chars: int, marker: str) -> str:
    """``text`` if it fits in ``max_chars``; otherwise its beginning and ``marker``."""
    return text if len(text) <= max_chars else with_marker(text, marker, max_chars)


class StreamedAnswer:
    """An answer as it streams in: the pieces so far, and the masked text they settle to."""

    def __init__(self, mask: SecretMask, *, max_chars: int) -> None:
        self._mask = mask
        self._parts: list[str] = []
        self.max_chars = max_chars
        self.shown = ""  # what the last streamed edit may show

    def add(self, piece: str) -> None:
        self._parts.append(piece)
        self.shown = self._mask.settled("".join(self._parts))

    @property
    def too_long(self) -> bool:
        """Past the length cap: there is no point reading more."""
        return len(self.shown) > self.max_chars

    def finished(self) -> str:
        """The whole answer, masked (the model ended it)."""
        return self._mask.mask("".join(self._parts)).strip()


async def read_stream(
    pieces: AsyncGenerator[str, None],
    answer: StreamedAnswer,
    on_progress: Callable[[str], Awaitable[None]],
) -> str:
    """Stream the model's ``pieces`` into ``answer``, showing only what is settled (secrets
    masked, no secret's first half at a piece boundary); stop reading once past the length
    cap (the caller caps; the rest is not read)."""
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            answer.add(piece)
            if answer.too_long:
                return answer.shown
            if answer.shown.strip():
                await on_progress(answer.shown)
    return answer.finished()
