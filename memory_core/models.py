"""The core's small value types. Platform payload shapes never reach this module."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from memory_core.calendar import from_ms
from memory_core.scopes import Audience

# How files become lines of a message's stored text is memory_core.text.attachments'.

Role = Literal["user", "assistant"]
FactKind = Literal["preference", "decision", "profile", "question", "note"]
FACT_KINDS: tuple[str, ...] = ("preference", "decision", "profile", "question", "note")
ReplyKind = Literal["llm", "offline", "apology", "budget"]  # budget: a limit is reached
MODES = ("mention", "all", "off")  # when the bot answers in a scope
LANGUAGE_SETTINGS = ("auto", "en", "ja")
TIER_FIELDS = ("short", "mid", "long", "overview")
MAX_FACT_CHARS = 500


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
    as data by :func:`memory_core.text.attachments.render_attachments`."""

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


@dataclass(frozen=True, slots=True)
class ThreadStarter:
    """The first message of a thread as its platform shows it, for a thread whose start
    memory lacks (it was posted before the bot was there): context for the thread's
    prompts, never stored as said (see :mod:`memory_core.store.thread_starters`)."""

    platform_id: str
    ts: datetime
    text: str  # as memory would keep a message: mentions by name (files: ``attachments``)
    author: str
    author_id: str = ""
    role: Role = "user"  # "assistant": the bot's own
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class StarterSource:
    """How a front door lets the core read a thread's first message from the platform when
    memory lacks it, without the core knowing the platform: ``fetch()`` returns it, None
    when the platform shows none that memory would keep (no such message, another bot's,
    a join), or raises :class:`~memory_core.errors.ContextUnavailable` when it cannot tell
    now. The core calls it at most once a thread and keeps what it got for a while."""

    fetch: Callable[[], Awaitable[ThreadStarter | None]]


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
    also_ids: tuple[str, ...] = ()  # the bot's answer: its other posted parts' platform ids
    # Files shared with the message: rendered into its stored text (a message may be only
    # files; its text is then the rendering).
    attachments: tuple[Attachment, ...] = ()
    # Another place of the same server whose memory the answer may read, never write
    # (Slack's assistant panel: the channel the member is looking at). The door sets it only
    # once the platform said the person asking can read that place; "" none. Never stored.
    also_reads: str = ""
    # A message in a thread: how to read the thread's first message from the platform when
    # memory lacks it (posted before the bot was there), for the prompt. Never stored.
    thread_starter: StarterSource | None = field(default=None, compare=False, repr=False)

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
    parts: tuple[str, ...] = ()  # the bot's answer: its other posted parts' platform ids

    @property
    def platform_ids(self) -> tuple[str, ...]:
        """Every platform id the message was posted under (an answer split over posts)."""
        return tuple(p for p in (self.platform_id, *self.parts) if p)

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
            parts=tuple(fields.get("x", "").split()),
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
            decisions=tuple(str(line) for line in data.get("decisions", [])),
            follow_ups=tuple(str(line) for line in data.get("follow_ups", [])),
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
    source: str = ""  # "remember", "summary" (the model) or "rules" (tiers/stated, no model)
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
            message_ids=[str(entry_id) for entry_id in data.get("message_ids", [])],
            pinned=bool(data.get("pinned", False)),
            history=[str(text) for text in data.get("history", [])],
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
    # line whose day is closed already); "forgotten": not stored, the erasure ledger says it
    # was forgotten (its id, its author, a text in it, or its whole place)
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
