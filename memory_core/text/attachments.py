"""A message's files as lines of its stored text: what a file looks like to memory (one
bounded line per file, ``[file: report.pdf, PDF, 1.2 MB: "Q3 numbers" <https://...>]``),
the stored text made of a message and its files under a cap, and a caption put into, or
read back from, a file's line. Nothing a person names a file can break out of its line or
the prompt's fence.

The files are :class:`memory_core.models.Attachment` values; this module reads them by
their fields (:class:`SharedFile`), as the text layer imports nothing above it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from memory_core.text.repair import repair


class SharedFile(Protocol):
    """What a file's line is made of (every field is what a person or their client chose,
    rendered as data)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...  # a MIME type ("application/pdf") or a label ("PDF")
    @property
    def size(self) -> int | None: ...  # bytes
    @property
    def description(self) -> str: ...  # alt text, title or description
    @property
    def url(self) -> str: ...  # the platform's link to the file
    @property
    def caption(self) -> str: ...  # a vision model's short description of an image


# An attachment line is data in the stored text: bounded, one line, and nothing in it can
# close or open the prompt's tags or our brackets (the prompt's fence covers "</" anyway;
# this also keeps the line readable for recall, summaries and exports).
MAX_ATTACHMENTS = 10  # Discord's own limit per message; more are counted, not listed
_NAME_CHARS = 120
_KIND_CHARS = 40
_DESCRIPTION_CHARS = 200
CAPTION_CHARS = 200
_CAPTION_OPEN = ' caption: "'
_URL_CHARS = 500
_MORE_CHARS = 20  # room kept for the "[N more files]" line
_DATA_CHARS = str.maketrans({"<": "‹", ">": "›", "[": "(", "]": ")", '"': "'", "`": "'"})
_SPACES = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_URL = re.compile(r"https?://[^\s<>\"`\[\]]+")
_KIND_LABELS = {
    "application/pdf": "PDF",
    "application/zip": "ZIP",
    "application/json": "JSON",
    "text/plain": "text",
    "text/csv": "CSV",
    "text/markdown": "Markdown",
}
_SIZE_UNITS = ("KB", "MB", "GB", "TB")


def render_attachments(attachments: Sequence[SharedFile], *, limit: int | None = None) -> str:
    """The attachments of a message as lines of its stored text, one per file:
    ``[file: report.pdf, PDF, 1.2 MB: "Q3 numbers" <https://...>]``. The text is what
    the budget counts, recall finds by the file's name, summaries read, and forget and
    export handle with the message. At most ``MAX_ATTACHMENTS`` lines, and ``limit``
    characters in all: the files past either are counted, not listed."""
    lines: list[str] = []
    used = _MORE_CHARS
    for attachment in attachments[:MAX_ATTACHMENTS]:
        line = _render_attachment(attachment)
        if limit is not None and used + len(line) + 1 > limit:
            break
        lines.append(line)
        used += len(line) + 1
    unlisted = len(attachments) - len(lines)
    if unlisted and (limit is None or limit >= _MORE_CHARS):
        lines.append(f"[{unlisted} more file{'s' if unlisted != 1 else ''}]")
    return "\n".join(lines)


def _render_attachment(attachment: SharedFile) -> str:
    head, tail = _line_ends(attachment)
    if caption := _as_data(attachment.caption, CAPTION_CHARS):
        head += f'{_CAPTION_OPEN}{caption}"'
    return head + tail


def _line_ends(attachment: SharedFile) -> tuple[str, str]:
    """An attachment's line without its caption, as the part before where a caption goes
    and the part after it."""
    parts = [f"file: {_as_data(attachment.name, _NAME_CHARS) or 'unnamed'}"]
    if kind := _kind_label(attachment.kind):
        parts.append(kind)
    if attachment.size is not None and attachment.size >= 0:
        parts.append(human_size(attachment.size))
    head = "[" + ", ".join(parts)
    if description := _as_data(attachment.description, _DESCRIPTION_CHARS):
        head += f': "{description}"'
    url, tail = attachment.url.strip(), "]"
    if len(url) <= _URL_CHARS and _URL.fullmatch(url):
        tail = f" <{url}>]"
    return head, tail


def caption_in(text: str, attachment: SharedFile) -> str | None:
    """What a stored text says about ``attachment``'s caption: the caption its line holds,
    "" when its line is there without one, None when the file has no line in it (an edit
    took it away, or the budget left it unlisted). Captions are data (no double quote
    survives :func:`_as_data`), so the line reads back unambiguously."""
    head, tail = _line_ends(attachment)
    start, end = head + _CAPTION_OPEN, '"' + tail
    for line in text.split("\n"):
        if line == head + tail:
            return ""
        if len(line) > len(start) + len(end) and line.startswith(start) and line.endswith(end):
            inner = line[len(start) : len(line) - len(end)]
            if '"' not in inner:
                return inner
    return None


def with_captions(text: str, attachments: Sequence[SharedFile], cap: int) -> str:
    """``text`` (a stored message) with the captions of ``attachments`` put into their
    lines, each only while the text stays within ``cap`` characters; lines that already
    hold a caption, or are not there, are left as they are."""
    lines = text.split("\n")
    for attachment in attachments:
        plain = "".join(_line_ends(attachment))  # its line without a caption
        captioned = _render_attachment(attachment)
        if captioned == plain or plain not in lines:
            continue
        if len(text) + len(captioned) - len(plain) > cap:
            break
        lines[lines.index(plain)] = captioned
        text = "\n".join(lines)
    return text


def _as_data(value: str, limit: int) -> str:
    """User-chosen text as one bounded line that cannot pass for markup."""
    value = _SPACES.sub(" ", _CONTROL.sub(" ", value)).strip().translate(_DATA_CHARS)
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def _kind_label(kind: str) -> str:
    """``application/pdf`` -> ``PDF``, ``image/png`` -> ``PNG image``; a label as given."""
    kind = _as_data(kind.split(";", 1)[0], _KIND_CHARS)
    main, slash, sub = kind.lower().partition("/")
    if not slash:
        return kind
    if label := _KIND_LABELS.get(kind.lower()):
        return label
    sub = sub.removeprefix("x-").removeprefix("vnd.")
    if main in ("image", "video", "audio") and sub:
        return f"{sub.upper()} {main}"
    return kind


def human_size(size: int) -> str:
    """Bytes as people read them (1024-based, as Discord and Slack show sizes)."""
    if size < 1024:
        return f"{size} bytes" if size != 1 else "1 byte"
    value, unit = size / 1024, 0
    while value >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    digits = 0 if value >= 100 else 1
    return f"{value:.{digits}f} {_SIZE_UNITS[unit]}"


def stored_text(text: str, cap: int, attachments: Sequence[SharedFile] = ()) -> tuple[str, bool]:
    """A message's text as memory stores it: trimmed, with a line per attachment after it,
    cut at ``cap`` characters (files included) with a note of how much was cut; and whether
    it was cut. (New messages and edits alike.) The files take at most half of ``cap`` and
    the cut falls in the text, so a long message keeps its files, and a stored text is never
    longer than ``cap`` and the note (what imports of exports allow)."""
    text = text.strip()
    files = render_attachments(attachments, limit=cap // 2)
    room = cap - len(files) - 1 if files else cap
    truncated = len(text) > room
    if truncated:
        text = f"{text[:room]} … [truncated: {len(text) - room} more characters]"
    return repair("\n".join(part for part in (text, files) if part)), truncated
