"""Slack payloads to core values and back: scopes, message events, text. No I/O here.

Slack events are dicts; this module decides what a ``message`` / ``app_mention`` event means
for memory (a message to store, an edit, a deletion, or nothing), which scope it belongs to, and how
Slack's markup becomes plain text for memory (``<@U123>`` -> ``@Alice``) and how an answer
becomes Slack ``mrkdwn`` (escaped, so a model can never ping ``<!channel>``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from memory_core.models import Attachment
from memory_core.scopes import Audience, Scope

# Message subtypes that are a person saying something. Everything else (joins, topic changes,
# bot_message...) is not conversation and is ignored; edits and deletions have parsers below.
HUMAN_SUBTYPES = frozenset({"thread_broadcast", "file_share", "me_message"})

# What Slack's ids and timestamps look like. Anything else did not come from Slack and must
# not name a scope or a Redis key (a channel "C1:C2" would read as a thread of C1).
_SLACK_ID = re.compile(r"[A-Z0-9]{1,40}")
_SLACK_TS = re.compile(r"\d{1,12}\.\d{1,9}")
_MARKUP = re.compile(r"<([^<>\n]+)>")
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^<>]*)?>")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")


def channel_scope(team_id: str, channel_id: str) -> str:
    """``slack:{team}:{channel}``; a DM is its ``D...`` channel."""
    return Scope.channel_of("slack", team_id, channel_id).key


def message_scope(team_id: str, channel_id: str, ts: str, thread_ts: str | None) -> str:
    """A thread reply lives in ``slack:{team}:{channel}:{thread_ts}``, under its channel; a
    thread's parent message is the channel's."""
    channel = Scope.channel_of("slack", team_id, channel_id)
    if thread_ts and thread_ts != ts:
        return channel.thread_scope(thread_ts).key
    return channel.key


def is_direct(event: Mapping[str, Any], team_id: str) -> bool:
    """A 1:1 DM with the bot (always answered). app_mention events carry no channel_type."""
    channel_type = event.get("channel_type")
    if channel_type is not None:
        return bool(channel_type == "im")
    return Scope.channel_of("slack", team_id, str(event.get("channel", ""))).is_dm


def event_audience(event: Mapping[str, Any], *, team_id: str, shared: bool) -> Audience | None:
    """Who can read the place of a message event: a channel shared with another
    organisation (the envelope's ``is_ext_shared_channel``, or an author of another team:
    ``user_team``), a public channel ("channel"), a private one ("group"), a group DM
    ("mpim"), a DM ("im"); None when the event does not say (app_mention: looked up)."""
    if shared or is_external(event, team_id=team_id):
        return Audience.SHARED
    match event.get("channel_type"):
        case "channel":
            return Audience.SERVER
        case "im":
            return Audience.DM
        case "group" | "mpim":
            return Audience.PRIVATE
    return None


def is_external(event: Mapping[str, Any], *, team_id: str) -> bool:
    """Whether the author belongs to another organisation (Slack Connect): nothing about
    them is kept under this workspace's people."""
    author_team = event.get("user_team")
    return isinstance(author_team, str) and bool(author_team) and author_team != team_id


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A person's message, as far as memory is concerned."""

    team_id: str
    channel_id: str
    user_id: str
    ts: str
    thread_ts: str | None
    raw_text: str  # Slack markup; see plain_text
    addressed: bool
    direct: bool
    # Who can read the place, from the event (see event_audience); None when the event
    # does not say (app_mention): the front door looks it up.
    audience: Audience | None = None
    external: bool = False  # the author is of another organisation (Slack Connect)
    files: tuple[Attachment, ...] = ()  # shared with the message (subtype file_share)
    # Each file's MIME type and url_private, in the order of ``files`` (image captions)
    downloads: tuple[tuple[str, str], ...] = ()

    @property
    def scope(self) -> str:
        return message_scope(self.team_id, self.channel_id, self.ts, self.thread_ts)

    @property
    def reply_thread_ts(self) -> str | None:
        """Where the answer goes: the message's thread in a channel (a new thread under it if
        it was top level). In a DM the answer stays where the message was, so a DM reads
        like a chat instead of a thread per message."""
        if self.direct:
            return self.thread_ts
        return self.thread_ts or self.ts


@dataclass(frozen=True, slots=True)
class Deletion:
    scope: str
    ts: str  # the deleted message's ts: the platform_id it was stored with


def _is_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _SLACK_ID.fullmatch(value) is not None


def _is_ts(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _SLACK_TS.fullmatch(value) is not None


def parse_message(
    event: Mapping[str, Any], *, team_id: str, bot_user_id: str, shared: bool = False
) -> SlackMessage | None:
    """A ``message`` or ``app_mention`` event -> the message to remember, or None to ignore
    it (bots, the bot itself, edits, joins and other non-conversation subtypes)."""
    subtype = event.get("subtype")
    if subtype is not None and (not isinstance(subtype, str) or subtype not in HUMAN_SUBTYPES):
        return None
    if event.get("bot_id") or event.get("bot_profile"):
        return None
    user, channel, ts, thread_ts = (event.get(k) for k in ("user", "channel", "ts", "thread_ts"))
    if not _is_id(user) or user == bot_user_id or not _scope(team_id, channel, ts, thread_ts):
        return None
    text = str(event.get("text") or "")
    return SlackMessage(
        team_id=team_id,
        channel_id=str(channel),
        user_id=user,
        ts=str(ts),
        thread_ts=thread_ts if isinstance(thread_ts, str) and thread_ts else None,
        raw_text=text,
        addressed=event.get("type") == "app_mention" or f"<@{bot_user_id}" in text,
        direct=is_direct(event, team_id),
        audience=event_audience(event, team_id=team_id, shared=shared),
        external=is_external(event, team_id=team_id),
        files=message_files(event),
        downloads=file_downloads(event),
    )


@dataclass(frozen=True, slots=True)
class Edit:
    scope: str
    ts: str  # the edited message's ts: the platform_id it was stored with
    user_id: str
    raw_text: str  # the new text, Slack markup; see plain_text
    files: tuple[Attachment, ...] = ()  # the message's files, which an edit keeps


def parse_deletion(event: Mapping[str, Any], *, team_id: str) -> Deletion | None:
    """Which stored message goes: a ``message_deleted`` event's, or that of a
    ``message_changed`` to a ``tombstone`` (a deleted message that has thread replies, as
    every message the bot answered has, stays as one)."""
    previous = _mapping(event.get("previous_message"))
    if event.get("subtype") == "message_changed":
        message = _mapping(event.get("message"))
        ts, thread_ts = message.get("ts"), message.get("thread_ts")
    else:
        ts = event.get("deleted_ts") or previous.get("ts")
        thread_ts = previous.get("thread_ts") or event.get("thread_ts")
    scope = _scope(team_id, event.get("channel"), ts, thread_ts)
    return Deletion(scope=scope, ts=ts) if scope is not None and _is_ts(ts) else None


def parse_change(event: Mapping[str, Any], *, team_id: str, bot_user_id: str) -> Edit | None:
    """A ``message_changed`` event -> a person's edit; None for everything else: bots' and
    the bot's own messages, non-conversation subtypes, and changes that leave the text as
    it was (link previews, files, language metadata)."""
    message, previous = _mapping(event.get("message")), _mapping(event.get("previous_message"))
    ts, subtype, user, text = (message.get(k) for k in ("ts", "subtype", "user", "text"))
    scope = _scope(team_id, event.get("channel"), ts, message.get("thread_ts"))
    if scope is None or not _is_ts(ts) or (subtype is not None and subtype not in HUMAN_SUBTYPES):
        return None
    if message.get("bot_id") or message.get("bot_profile") or not isinstance(text, str):
        return None
    if not _is_id(user) or user == bot_user_id or previous.get("text") == text:
        return None
    return Edit(scope=scope, ts=ts, user_id=user, raw_text=text, files=message_files(message))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _scope(team_id: str, channel: object, ts: object, thread_ts: object) -> str | None:
    """The scope of the message ``ts`` (a thread's reply: the thread's), None for ids or
    timestamps Slack never sends."""
    if not (_is_id(team_id) and _is_id(channel) and _is_ts(ts)):
        return None
    if thread_ts and not _is_ts(thread_ts):
        return None
    return message_scope(team_id, channel, ts, thread_ts if _is_ts(thread_ts) else None)


def message_files(message: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """The ``files`` of a message event as memory remembers them: name, type, size, title
    and permalink; never the file. A file Slack hides (``hidden_by_limit``, a deleted file's
    ``tombstone``, ``check_file_info`` in shared channels) carries no name and is skipped:
    reading it would take ``files.info`` and the ``files:read`` scope."""
    files = message.get("files")
    if not isinstance(files, list):
        return ()
    return tuple(
        attachment
        for item in files
        if isinstance(item, Mapping) and (attachment := _file(item)) is not None
    )


def file_downloads(message: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(MIME type, ``url_private``) of each file :func:`message_files` keeps, in its order:
    where the bytes of an image are, for its caption (reading them takes ``files:read``)."""
    files = message.get("files")
    if not isinstance(files, list):
        return ()
    return tuple(
        (_text_field(item, "mimetype").lower(), _text_field(item, "url_private"))
        for item in files
        if isinstance(item, Mapping) and _file(item) is not None
    )


def _file(item: Mapping[str, Any]) -> Attachment | None:
    name = _text_field(item, "name") or _text_field(item, "title")
    if not name or item.get("mode") in ("tombstone", "hidden_by_limit"):
        return None
    title, size = _text_field(item, "title"), item.get("size")
    return Attachment(
        name=name,
        kind=_text_field(item, "pretty_type")
        or _text_field(item, "mimetype")
        or _text_field(item, "filetype"),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        description=title if title != name else "",
        url=_text_field(item, "permalink"),
    )


def _text_field(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    return value if isinstance(value, str) else ""


def mentioned_users(text: str, *, exclude: str = "") -> list[str]:
    """User ids mentioned in ``text`` (first appearance order), without ``exclude``."""
    seen: dict[str, None] = {}
    for match in _USER_MENTION.finditer(text):
        if match.group(1) != exclude:
            seen.setdefault(match.group(1), None)
    return list(seen)


def plain_text(
    text: str, *, bot_user_id: str, bot_name: str, names: Mapping[str, str] | None = None
) -> str:
    """Slack markup -> the plain text memory keeps: mentions become ``@name`` (the bot's own
    ``@memorybot``), channels ``#name``, links ``label (url)``; entities are unescaped."""
    names = names or {}

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            user = target[1:]
            if user == bot_user_id:
                return f"@{bot_name}"
            return "@" + (names.get(user) or label or user)
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            if special in ("here", "channel", "everyone"):
                return f"@{special}"
            return label or special
        if label and label != target and label != target.removeprefix("mailto:"):
            return f"{label} ({target})"
        return target.removeprefix("mailto:")

    return unescape(_MARKUP.sub(replace, text)).strip()


def unescape(text: str) -> str:
    """Slack sends ``&``, ``<`` and ``>`` as entities in message and command text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def escape(text: str) -> str:
    """The three characters Slack's markup reserves. Escaped, ``<!channel>`` from a model or
    from memory is shown, never acted on."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(text: str) -> str:
    """An answer in (model-flavoured) Markdown -> Slack mrkdwn: escaped; ``**bold**``,
    ``# headings`` and ``[label](url)`` translated outside code blocks."""
    lines: list[str] = []
    in_code = False
    for line in escape(text).split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            lines.append(line)
            continue
        if not in_code:
            line = _HEADING.sub(r"*\1*", line)
            line = _BOLD.sub(r"*\1*", line)
            line = _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1)}>", line)
        lines.append(line)
    return "\n".join(lines)


def slack_time(ts: str) -> datetime | None:
    """A Slack ts ("1700000000.000100") as a time; it is when the message was said."""
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC)
    except (ValueError, OverflowError):
        return None
