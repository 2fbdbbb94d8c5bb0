"""DiscordChatExporter's JSON files as sources of a channel's past.

DiscordChatExporter (DCE) writes one file per channel (or several: ``--partition``), an
object with ``guild`` {id, name}, ``channel`` {id, type, categoryId, category, name, topic}
and ``messages`` [{id, type, timestamp, timestampEdited, content, author {id, name,
nickname, isBot}, attachments, mentions, reference, forwardedMessage...}]. Each channel of
the files given is one :class:`DiscordExportSource`, whose messages land where the live
door stores them:

* a channel in ``discord:{guild}:{channel}``;
* a thread (``GuildPublicThread``, ``GuildPrivateThread``, ``GuildNewsThread``) in
  ``discord:{guild}:{parent}:{thread}``: DCE writes a thread's parent channel as its
  ``categoryId`` (its schema calls a thread's parent a category); a thread without one is
  refused, since memory keeps a thread only under its channel;
* a DM in ``discord:dm:{user}``, keyed by the person as the live door keys it. Only the
  bot's own DMs have such a place: a DM is learned when ``bot_user_id`` is given and one
  person besides the bot wrote in it; a DM between other people, or a group DM (a bot
  is never in one), is refused.

Kept: messages of type ``Default`` and ``Reply``, the text as DCE wrote it (edited text as
edited; mentions as names), files by name, size and link. Left out and counted: system
messages (joins, pins, thread created, calls...), other bots' messages; the bot's own are
kept as ``role="assistant"``.

Who could read the channel is not in the file: its messages are kept as
``Audience.PRIVATE`` (what is learned there stays there) unless the caller says the
channel was visible to the whole server (``public=True``). A private thread is private
whatever the caller says, a DM is a DM.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bots.discord.events import forward_note, readable_text
from bots.learn.paging import Entries, bad_file, paged, parse_json
from memory_core.models import Attachment
from memory_core.scopes import Audience, Scope
from memory_core.service.past import LearnRefused, PastMessage, PastPage, PastSource

NAME = "discord-export"
KEPT_TYPES = frozenset({"Default", "Reply"})
THREAD_TYPES = frozenset({"GuildPublicThread", "GuildPrivateThread", "GuildNewsThread"})
DM_TYPES = frozenset({"DirectTextChat", "DirectGroupTextChat"})
DM_GUILD = "0"  # DCE's pseudo-guild "Direct Messages"
# Past this, a file is not one DCE wrote for a channel's history within reason.
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ExportFile:
    """One file, read and checked whole."""

    path: Path
    guild_id: str
    guild_name: str
    channel_id: str
    channel_type: str
    parent_id: str  # a thread's parent channel ("" for a channel)
    channel_name: str
    messages: list[Mapping[str, Any]]

    @property
    def is_dm(self) -> bool:
        return self.guild_id == DM_GUILD or self.channel_type in DM_TYPES


@dataclass(frozen=True, slots=True)
class Reading:
    """How the caller wants the files read."""

    bot_user_id: str = ""
    bot_name: str = ""
    public: bool = False


@dataclass(slots=True)
class DiscordExportSource:
    """The past of one channel, thread or DM: its files, in the order of their paths."""

    place: str
    audience: Audience
    place_name: str
    files: list[Path]
    reading: Reading = field(default_factory=Reading)
    name: str = NAME
    notes: tuple[str, ...] = ()

    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        """The pages of each file in turn; a file is read and checked whole before its
        first page."""
        by_key = {_key(path): path for path in self.files}

        async def read(key: str) -> Entries:
            export = await asyncio.to_thread(read_file, by_key[key])
            if _place(export, self.reading) != self.place:
                raise LearnRefused(f"{export.path}: no longer a file of {self.place}")
            people = {m["author"]["id"]: _author_name(m["author"]) for m in export.messages}
            return [self._entry(raw, people) for raw in export.messages]

        async for page in paged(
            list(by_key), read, since=since, cursor=cursor, place=self.place, notes=self.notes
        ):
            yield page

    def _entry(self, raw: Mapping[str, Any], people: Mapping[str, str]) -> PastMessage | None:
        """A checked message: kept, or None (left out)."""
        author = raw["author"]
        own = bool(self.reading.bot_user_id) and author["id"] == self.reading.bot_user_id
        if raw["type"] not in KEPT_TYPES or (author["isBot"] and not own):
            return None
        text, attachments = _text(raw, self.reading, people), _attachments(raw)
        if not text and not attachments:
            return None  # stickers only: the live door keeps nothing either
        return PastMessage(
            scope=self.place,
            platform_id=raw["id"],
            ts=datetime.fromisoformat(raw["timestamp"]),
            text=text,
            author=_author_name(author),
            author_id=author["id"],
            role="assistant" if own else "user",
            audience=self.audience,
            place_name=self.place_name,
            attachments=attachments,
        )


def discord_export_sources(
    paths: Sequence[Path | str],
    *,
    bot_user_id: str = "",
    bot_name: str = "",
    public: bool = False,
) -> list[PastSource]:
    """One source per channel (thread, DM) of the DCE JSON files at ``paths``; the files of
    one channel (DCE's partitions, or exports of several periods) make one source. Every
    file is read and checked here, so a bad one refuses (naming the file, the field and
    what is wrong) before anything is learned. ``bot_user_id``: the bot's messages are its
    own (``role="assistant"``) and its DMs can be learned; ``bot_name``: how its mention
    reads; ``public``: the channels were visible to the whole server (see the module)."""
    reading = Reading(bot_user_id=bot_user_id, bot_name=bot_name, public=public)
    places: dict[str, DiscordExportSource] = {}
    for path in sorted({Path(p).resolve() for p in paths}, key=_key):
        export = read_file(path)
        place = _place(export, reading)
        if place in places:
            places[place].files.append(path)
            continue
        audience = _audience(export, reading)
        places[place] = DiscordExportSource(
            place=place,
            audience=audience,
            place_name=_place_name(export),
            files=[path],
            reading=reading,
            notes=_notes(export, audience, reading),
        )
    return list(places.values())


def read_file(path: Path) -> ExportFile:
    """A DCE JSON file, checked whole: a refusal names the file, the field, the fault."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise bad_file(where, "", f"over {MAX_FILE_BYTES} bytes: export it in partitions")
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise LearnRefused(f"{where}: no such file") from exc
    except OSError as exc:
        raise LearnRefused(f"{where}: cannot be read: {exc.strerror or exc}") from exc
    root = parse_json(data, where)
    if not isinstance(root, Mapping):
        raise bad_file(where, "", "not a DiscordChatExporter JSON export (an object)")
    check = _Checker(where)
    guild, channel = check.mapping(root, "guild"), check.mapping(root, "channel")
    messages = root.get("messages")
    if not isinstance(messages, list):
        raise bad_file(where, "messages", "missing, or not a list")
    for i, message in enumerate(messages):
        check.message(message, f"messages[{i}]")
    channel_type = check.text(channel, "channel.type")
    parent = channel.get("categoryId")
    if channel_type in THREAD_TYPES:
        if parent is None or parent == "":
            raise bad_file(
                where,
                "channel.categoryId",
                f"empty: a thread ({channel_type}) whose parent channel the file does not "
                "name; memory keeps a thread under its channel",
            )
        check.snowflake(channel, "channel.categoryId")
    return ExportFile(
        path=path,
        guild_id=check.snowflake(guild, "guild.id"),
        guild_name=check.text(guild, "guild.name"),
        channel_id=check.snowflake(channel, "channel.id"),
        channel_type=channel_type,
        parent_id=str(parent) if channel_type in THREAD_TYPES else "",
        channel_name=check.text(channel, "channel.name"),
        messages=messages,
    )


class _Checker:
    """The fields read from a file, each checked, a refusal naming it."""

    def __init__(self, where: str) -> None:
        self.where = where

    def mapping(self, parent: Mapping[str, Any], field: str) -> Mapping[str, Any]:
        value = parent.get(field.rsplit(".", 1)[-1])
        if not isinstance(value, Mapping):
            raise bad_file(self.where, field, "missing, or not an object")
        return value

    def text(self, parent: Mapping[str, Any], field: str, *, empty: bool = True) -> str:
        value = parent.get(field.rsplit(".", 1)[-1])
        if not isinstance(value, str) or (not empty and not value):
            raise bad_file(self.where, field, "missing, or not text")
        return value

    def snowflake(self, parent: Mapping[str, Any], field: str) -> str:
        value = parent.get(field.rsplit(".", 1)[-1])
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise bad_file(self.where, field, "not a Discord id (digits)")
        return value

    def message(self, raw: object, at: str) -> None:
        if not isinstance(raw, Mapping):
            raise bad_file(self.where, at, "not a message (an object)")
        self.snowflake(raw, f"{at}.id")
        self.text(raw, f"{at}.type", empty=False)
        stamp = raw.get("timestamp")
        if not (isinstance(stamp, str) and _is_dated(stamp)):
            raise bad_file(self.where, f"{at}.timestamp", "not an ISO date with an offset")
        self.text(raw, f"{at}.content")
        author = self.mapping(raw, f"{at}.author")
        self.snowflake(author, f"{at}.author.id")
        self.text(author, f"{at}.author.name")
        if author.get("nickname") is not None:
            self.text(author, f"{at}.author.nickname")
        if not isinstance(author.get("isBot"), bool):
            raise bad_file(self.where, f"{at}.author.isBot", "missing, or not true or false")
        self.attachments(raw, at)
        for i, mention in enumerate(self.listed(raw, f"{at}.mentions")):
            if not isinstance(mention, Mapping):
                raise bad_file(self.where, f"{at}.mentions[{i}]", "not an object")
            self.snowflake(mention, f"{at}.mentions[{i}].id")
        forwarded = raw.get("forwardedMessage")
        if forwarded is not None:
            inner = self.mapping(raw, f"{at}.forwardedMessage")
            self.text(inner, f"{at}.forwardedMessage.content")
            self.attachments(inner, f"{at}.forwardedMessage")

    def attachments(self, raw: Mapping[str, Any], at: str) -> None:
        for i, item in enumerate(self.listed(raw, f"{at}.attachments")):
            where = f"{at}.attachments[{i}]"
            if not isinstance(item, Mapping):
                raise bad_file(self.where, where, "not an object")
            self.text(item, f"{where}.fileName", empty=False)
            self.text(item, f"{where}.url")
            size = item.get("fileSizeBytes")
            if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
                raise bad_file(self.where, f"{where}.fileSizeBytes", "not a whole number")

    def listed(self, raw: Mapping[str, Any], field: str) -> list[Any]:
        value = raw.get(field.rsplit(".", 1)[-1])
        if value is None:
            return []
        if not isinstance(value, list):
            raise bad_file(self.where, field, "not a list")
        return value


def _is_dated(stamp: str) -> bool:
    try:
        return datetime.fromisoformat(stamp).tzinfo is not None
    except ValueError:
        return False


def _place(export: ExportFile, reading: Reading) -> str:
    """The scope the file's messages belong in (see the module)."""
    where = str(export.path)
    if export.channel_type == "DirectGroupTextChat":
        raise bad_file(
            where, "channel.type", "a group DM: no bot is in one, so memory has no place for it"
        )
    if export.is_dm:
        if not reading.bot_user_id:
            raise bad_file(
                where,
                "channel",
                "a DM: memory learns a DM only as the bot's with one person; give the "
                "bot's user id (bot_user_id) to learn the bot's DMs",
            )
        people = {m["author"]["id"] for m in export.messages} - {reading.bot_user_id}
        if len(people) != 1:
            found = f"{len(people)} people" if people else "no one"
            raise bad_file(
                where,
                "messages",
                f"a DM where {found} besides the bot ({reading.bot_user_id}) wrote: "
                "memory learns a DM only as the bot's with one person",
            )
        return Scope.discord_dm(people.pop()).key
    if export.parent_id:
        return Scope.thread_of("discord", export.guild_id, export.parent_id, export.channel_id).key
    return Scope.channel_of("discord", export.guild_id, export.channel_id).key


def _audience(export: ExportFile, reading: Reading) -> Audience:
    if export.is_dm:
        return Audience.DM
    if export.channel_type == "GuildPrivateThread" or not reading.public:
        return Audience.PRIVATE
    return Audience.SERVER


def _notes(export: ExportFile, audience: Audience, reading: Reading) -> tuple[str, ...]:
    if audience is Audience.PRIVATE and not reading.public and not export.is_dm:
        return (
            f"#{export.channel_name}: the export does not say who could read it, so it is "
            "kept as private; learn it again with public=True if the whole server could",
        )
    return ()


def _place_name(export: ExportFile) -> str:
    if export.is_dm:
        return f"DM: {export.channel_name}"
    return f"#{export.channel_name} ({export.guild_name})"


def _author_name(author: Mapping[str, Any]) -> str:
    """What people saw: the server nickname (DCE's ``nickname``), else the user name."""
    nickname = author.get("nickname")
    return nickname if isinstance(nickname, str) and nickname.strip() else str(author["name"])


def _text(raw: Mapping[str, Any], reading: Reading, people: Mapping[str, str]) -> str:
    """The message's words as memory keeps them: DCE writes mentions as names already
    (unless exported with ``--markdown false``: then ``<@id>`` become names here, from the
    message's ``mentions`` or the file's authors); a forwarded message reads as the live
    door writes one."""
    mentions = {int(ident): name for ident, name in people.items()}
    for m in raw.get("mentions") or ():
        named = {"nickname": m.get("nickname"), "name": m.get("name") or m["id"]}
        mentions[int(m["id"])] = _author_name(named)
    bot_id = int(reading.bot_user_id) if reading.bot_user_id.isdigit() else 0
    bot_name = reading.bot_name or mentions.get(bot_id, "")

    def readable(content: str) -> str:
        return readable_text(
            content, bot_id=bot_id, bot_name=bot_name, users=mentions, roles={}, channels={}
        )

    said = readable(raw["content"])
    forwarded = raw.get("forwardedMessage")
    if isinstance(forwarded, Mapping):
        inner = readable(forwarded["content"])
        note = f"{forward_note()} {inner}".rstrip()  # (the file says no origin)
        said = f"{note}\n{said}".strip()
    return said


def _attachments(raw: Mapping[str, Any]) -> tuple[Attachment, ...]:
    forwarded = raw.get("forwardedMessage")
    inner = forwarded.get("attachments") or [] if isinstance(forwarded, Mapping) else []
    return tuple(
        Attachment(name=item["fileName"], size=item.get("fileSizeBytes"), url=item["url"])
        for item in (*(raw.get("attachments") or ()), *inner)
    )


def _key(path: Path) -> str:
    """A file's name in a cursor: its full path."""
    return path.as_posix()
