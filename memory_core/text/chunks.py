"""Cutting a long text into messages a platform takes: at paragraph breaks, then lines, then
spaces, with code fences closed at the cut and reopened in the next chunk. Pure text, used by
the streaming writer and by the front doors' rich answers (Discord embeds, Slack blocks)."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")


def _marker(opening: str | None) -> str:
    """The fence character of an opening fence line ("`" or "~")."""
    return opening.lstrip()[0] if opening else "`"


def _hard_split(line: str, limit: int) -> list[str]:
    """A single line longer than ``limit``: cut at the last space that fits, else anywhere."""
    pieces: list[str] = []
    while len(line) > limit:
        cut = line.rfind(" ", 0, limit + 1)
        if cut <= limit // 2:
            cut = limit
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    pieces.append(line)
    return pieces


def split_message(text: str, limit: int) -> list[str]:
    """Cut ``text`` into chunks of at most ``limit`` characters.

    Prefers paragraph breaks (a blank line or the end of a code block), then line breaks,
    then spaces. A chunk that ends inside a code block gets the fence closed, and the next
    chunk reopens it with the same language tag.
    """
    if limit < 40:
        raise ValueError("limit must be at least 40 characters")
    text = text.strip("\n")
    if not text.strip():
        return []
    if len(text) <= limit:
        return [text]
    lines: list[str] = []
    for raw in text.split("\n"):
        # Room for a reopened fence line and a closing fence around any single line.
        lines.extend(_hard_split(raw, limit - 24) if len(raw) > limit - 24 else [raw])
    # fence[i]: the opening fence line in force before lines[i] (None outside code). A block
    # opened with ``` closes only with ``` (and ~~~ with ~~~), as Markdown has it.
    fence: list[str | None] = [None]
    for line in lines:
        inside = fence[-1]
        match = _FENCE.match(line)
        if match and inside is None:
            inside = line.strip()[:16]
        elif match and _marker(inside) == match.group(1)[0] and not match.group(2).strip():
            inside = None
        fence.append(inside)
    chunks: list[str] = []
    start, n = 0, len(lines)
    while start < n:
        opening = fence[start]
        prefix: list[str] = [opening] if opening is not None else []
        length = sum(len(x) + 1 for x in prefix) - 1
        end = start
        para_end = 0
        while end < n:
            closing = 4 if fence[end + 1] is not None else 0
            if length + 1 + len(lines[end]) + closing > limit:
                break
            length += 1 + len(lines[end])
            end += 1
            closed_block = fence[end - 1] is not None and fence[end] is None
            if fence[end] is None and (not lines[end - 1].strip() or closed_block):
                para_end = end
        end = max(end, start + 1)
        # Cut at a paragraph break unless it would leave the chunk mostly empty.
        used = len("\n".join(lines[start:para_end])) if para_end > start else 0
        cut = end if end == n or used < limit // 3 else para_end
        body = "\n".join([*prefix, *lines[start:cut]]).rstrip()
        if fence[cut] is not None:
            body += "\n" + _marker(fence[cut]) * 3
        if body.strip():
            chunks.append(body)
        start = cut
        while start < n and fence[start] is None and not lines[start].strip():
            start += 1
    return chunks
