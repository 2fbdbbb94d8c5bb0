"""The core's small value types. Platform payload shapes never reach this module."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from memory_core.calendar import from_ms
from memory_core.scopes import Audience
from memory_core.text.repair import repair

Role = Literal["user", "assistant"]
FactKind = Literal["preference", "decision", "profile", "question", "note"]
FACT_KINDS: tuple[str, ...] = ("preference", "decision", "profile", "question", "note")
ReplyKind = Literal["llm", "offline", "apology", "budget"]  # budget: a limit is reached
MODES = ("mention", "all", "off")  # when the bot answers in a scope
LANGUAGE_SETTINGS = ("auto", "en", "ja")
TIER_FIELDS = ("short", "mid", "long", "overview")
MAX_FACT_CHARS = 500


def stored_text(text: str, cap: int, attachments: Sequence[Attachment] = ()) -> tuple[str, bool]:
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


@dataclass(frozen=True, slots=True)
class ImageSource:
    """How a front door lets the core read an image's bytes for its caption, without the
    core knowing the platform: ``fetch(limit)`` returns at most ``limit`` bytes or raises
    :class:`~memory_core.errors.AttachmentUnavailable`. The bytes are used for one model
    call and dropped; memory never stores them."""

    mime: str  # the image's MIME type, as the platform gave it ("image/png")
    fetch: Callable[[int], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file shared with a message, as memory remembers it: what it is and where it is on
    the platform, never its content. Every field is what a person or their client chose
    (Discord: filename, content type, alt text; Slack: name, type, title) and is rendered
    as data by :func:`render_attachments`."""

    name: str
    kind: str = ""  # a MIME type ("application/pdf") or a label ("PDF"); "" = unknown
    size: int | None = None  # bytes
    description: str = ""  # alt text, title or description
    url: str = ""  # the platform's link to the file (Discord: url; Slack: permalink)
    # A vision model's short description of an image, made once in the background and
    # stored in the message's text (rendered as data, like the fields above).
    caption: str = ""
    # Set by the front door for an image it can fetch; never stored, never compared.
    image: ImageSource | None = field(default=None, compare=False, repr=False)


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


def render_attachments(attachments: Sequence[Attachment], *, limit: int | None = None) -> str:
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


def _render_attachment(attachment: Attachment) -> str:
    head, tail = _line_ends(attachment)
    if caption := _as_data(attachment.caption, CAPTION_CHARS):
        head += f'{_CAPTION_OPEN}{caption}"'
    return head + tail


def _line_ends(attachment: Attachment) -> tuple[str, str]:
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


def caption_in(text: str, attachment: Attachment) -> str | None:
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


def with_captions(text: str, attachments: Sequence[Attachment], cap: int) -> str:
    """``text`` (a stored message) with the captions of ``attachments`` put into their
    lines, each only while the text stays within ``cap`` characters; lines that already
    hold a caption, or are not there, are left as they are."""
    lines = text.split("\n")
    for attachment in attachments:
        plain = _render_attachment(replace(attachment, caption=""))
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


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message as a front door hands it to the core."""

    scope: str
    text: str
    author: str
    author_id: str = ""
    ts: datetime | None = None  # None: the clock's now
    role: Role = "user"
    platform_id: str = ""  # the platform's message id, for deletes and provenance
    addressed: bool = False  # mentioned or replied to: the bot is asked
    direct: bool = False  # a DM or the console: always answered, whatever the reply mode
    place_name: str = ""  # a human name for the place ("#general (My Server)"), if known
    # Who can read the place, as the front door knows when the message arrives (Discord:
    # @everyone may view the channel; Slack: a public channel, or one shared with another
    # organisation). Only where the whole server can may what is learned about a person
    # follow them to other places. Unknown: private.
    audience: Audience = Audience.PRIVATE
    reply_to: str = ""  # the bot's answer: the user id of the person it answers
    answers: str = ""  # the bot's answer: the platform id of the message it answers
    # Files shared with the message: rendered into its stored text (a message may be only
    # files; its text is then the rendering).
    attachments: tuple[Attachment, ...] = ()

    @property
    def public(self) -> bool:
        """Said where the whole guild or workspace can see it."""
        return self.audience.lets_facts_out


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One raw message as stored in the scope's Stream."""

    id: str
    ts: datetime
    role: Role
    author: str
    author_id: str
    text: str
    tokens: int
    platform_id: str = ""
    public: bool = False  # said where the whole guild or workspace could see it
    reply_to: str = ""  # the bot's answer: the user id of the person it answered
    answers: str = ""  # the bot's answer: the platform id of the message it answered

    @property
    def ms(self) -> int:
        """The stream id's time part: monotonic per scope, what day maths uses."""
        return int(self.id.split("-", 1)[0])

    @classmethod
    def from_stream(cls, entry_id: str, fields: Mapping[str, str]) -> LogEntry:
        role = fields.get("r", "user")
        return cls(
            id=entry_id,
            ts=from_ms(int(fields.get("ts") or entry_id.split("-", 1)[0])),
            role="assistant" if role == "assistant" else "user",
            author=fields.get("a", ""),
            author_id=fields.get("u", ""),
            text=fields.get("t", ""),
            tokens=int(fields.get("k") or 0),
            platform_id=fields.get("p", ""),
            public=fields.get("v") == "1",
            reply_to=fields.get("o", ""),
            answers=fields.get("q", ""),
        )


@dataclass(slots=True)
class ScopeState:
    """The scope's state hash, decoded. Field names match the hash fields."""

    day: str = ""  # the local day that 'short' covers
    short: str = ""
    short_upto: str = ""  # stream id up to which the log is summarised ("" = nothing yet)
    mid: str = ""
    long: str = ""
    overview: str = ""
    tiers_at: str = ""  # ISO time of the last tier refresh
    unsum_tokens: int = 0
    unsum_count: int = 0
    msg_count: int = 0
    last_ms: int = 0
    created_ms: int = 0
    paused: bool = False
    mode: str = ""  # "" = the default reply mode
    tz: str = ""  # "" = the default timezone
    lang: str = ""  # "" = the default language
    aud: str = ""  # the place's audience as its front door last said (scopes.Audience)
    refresh_pending: bool = False
    refresh_seq: int = 0
    week_pending: str = ""
    failures: int = 0
    retry_at: int = 0  # ms; LLM summary work waits until then
    last_rollover: str = ""
    day_msgs: int = 0  # messages of 'day' summarised so far
    epoch: int = 0  # moves on every forget: in-flight summaries of forgotten text are dropped
    fact_seq: int = 0  # facts ever made in the scope (0: no need to read the facts hash)
    short_at: str = ""
    name: str = ""  # the place's human name, as the platform last gave it
    trimmed_ms: int = 0  # retention: raw messages before this were trimmed
    forgets_pending: bool = False  # a forget was interrupted: maintenance finishes it
    daily_tokens: str = ""  # budget override: "" = settings' default, "off", or a number
    user_daily_tokens: str = ""  # the same, for each member here
    sources: bool = False  # answers that used a recalled message end with a "from <date>" line
    # The settings this scope sets itself (a thread takes the others from its channel).
    own: frozenset[str] = frozenset()

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> ScopeState:
        state = cls()
        for name, kind in _STATE_FIELDS:
            value = raw.get(name)
            if value is None:
                continue
            if kind is bool:
                setattr(state, name, value == "1")
            elif kind is int:
                # A hand-edited counter that is not a number keeps its default.
                with contextlib.suppress(ValueError):
                    setattr(state, name, int(value))
            else:
                setattr(state, name, value)
        state.own = frozenset(name for name in SETTINGS if raw.get(name, "") != "")
        return state

    def inherit(self, parent: ScopeState | None) -> ScopeState:
        """This scope's state with the settings it does not set itself taken from its
        channel's (a thread: ``/memory config`` in a channel holds in its threads)."""
        if parent is None:
            return self
        merged = replace(self)
        for name in SETTINGS:
            if name not in self.own and name in parent.own:
                setattr(merged, name, getattr(parent, name))
        merged.own = self.own
        return merged


# What a thread takes from its channel unless it sets it: /memory config and pause.
SETTINGS = ("mode", "tz", "lang", "paused", "daily_tokens", "user_daily_tokens", "sources")

# (field, type) of ScopeState, computed once: from_hash runs for every maintenance step.
_STATE_FIELDS: tuple[tuple[str, type], ...] = tuple(
    (name, type(value)) for name, value in asdict(ScopeState()).items() if name != "own"
)


@dataclass(frozen=True, slots=True)
class DaySummary:
    """One finished day: its summary, and the episode record recall searches (topic,
    decisions, follow-ups), made at rollover without another LLM call."""

    day: str
    summary: str
    messages: int = 0
    degraded: bool = False  # written by the extractive stand-in, not the LLM
    topic: str = ""
    decisions: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()

    def to_json(self) -> str:
        data = asdict(self)
        data["decisions"] = list(self.decisions)
        data["follow_ups"] = list(self.follow_ups)
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> DaySummary:
        data = json.loads(raw)
        return cls(
            day=str(data.get("day", "")),
            summary=str(data.get("summary", "")),
            messages=int(data.get("messages", 0)),
            degraded=bool(data.get("degraded", False)),
            topic=str(data.get("topic", "")),
            decisions=tuple(str(x) for x in data.get("decisions", [])),
            follow_ups=tuple(str(x) for x in data.get("follow_ups", [])),
        )


@dataclass(frozen=True, slots=True)
class WeekSummary:
    week: str  # the first day of the week
    summary: str
    days: int = 0
    degraded: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> WeekSummary:
        data = json.loads(raw)
        return cls(
            week=str(data.get("week", "")),
            summary=str(data.get("summary", "")),
            days=int(data.get("days", 0)),
            degraded=bool(data.get("degraded", False)),
        )


@dataclass(slots=True)
class Fact:
    """A preference, decision, profile fact, open question or pinned note, with provenance."""

    id: str
    kind: str
    text: str
    subject: str = ""  # who it is about, by name, as shown ("" = the channel)
    source: str = ""  # "remember" or "summary"
    by: str = ""  # who pinned it, or who said it
    ts: str = ""  # ISO time it was learned
    message_ids: list[str] = field(default_factory=list)  # provenance in the raw log
    pinned: bool = False
    history: list[str] = field(default_factory=list)  # earlier texts, newest last
    origin: str = ""  # the scope it was learned in
    subject_id: str = ""  # the platform user id of the person it is about ("" = unknown)
    # It may follow its subject across the guild or workspace: learned in a place the whole
    # guild could see, or pinned by the person themself (/memory remember me).
    shared: bool = False
    seen: str = ""  # ISO time it was last said again (eviction keeps what is still confirmed)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> Fact:
        data: dict[str, Any] = json.loads(raw)
        return cls(
            id=str(data.get("id", "")),
            kind=str(data.get("kind", "note")),
            text=str(data.get("text", "")),
            subject=str(data.get("subject", "") or ""),
            source=str(data.get("source", "")),
            by=str(data.get("by", "")),
            ts=str(data.get("ts", "")),
            message_ids=[str(x) for x in data.get("message_ids", [])],
            pinned=bool(data.get("pinned", False)),
            history=[str(x) for x in data.get("history", [])],
            origin=str(data.get("origin", "")),
            subject_id=str(data.get("subject_id", "") or ""),
            shared=bool(data.get("shared", False)),
            seen=str(data.get("seen", "") or ""),
        )


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What storing one message told us, from the same round trip."""

    stored: bool  # False when the scope is paused
    id: str
    state_day: str
    tz: str
    mode: str
    lang: str
    unsum_tokens: int
    unsum_count: int
    retry_at: int
    truncated: bool = False
    buffered: bool = False  # Redis was away: held in memory, stored when it is back
    # "" stored; "older": stored, older than the scope's newest message; "duplicate": its
    # platform id was stored before, nothing written; "day_closed": not stored (a replayed
    # line whose day is closed already)
    outcome: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    kind: ReplyKind
    prompt_tokens: int = 0
    stored_id: str = ""
    # The prompt it was written from (a memory_core.prompt.assembly.Prompt, which imports
    # this module, hence ``object``): what /memory why records once the answer is delivered.
    prompt: object = field(default=None, compare=False, repr=False)
