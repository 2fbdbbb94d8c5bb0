"""A Slack workspace export (the .zip an admin downloads) as sources of a channel's past.

The zip holds ``channels.json`` (public channels), ``groups.json`` (private channels),
``dms.json`` and ``mpims.json`` (DMs and group DMs), ``users.json`` (``org_users.json`` on
Enterprise Grid), and a folder per conversation (a channel's by its name, a DM's by its
id, a group DM's by its name) with one ``YYYY-MM-DD.json`` a day, each a list of messages
as the Web API gives them. Each conversation is one :class:`SlackExportSource` whose
messages are read, and meant, as the live door reads a ``message`` event
(:func:`bots.slack.text.parse_message`): the same scopes (a thread's replies in the
thread's scope, its parent in the channel), the same text (mentions by name), the same
files, the same subtypes left out (bots, joins, topic changes...).

Only public channels are read unless the caller asks for private ones too: a private
channel, a DM or a group DM is then learned into its own scope, never into a channel's.
"""

from __future__ import annotations

import asyncio
import json
import re
import zipfile
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from bots.learn.paging import Entries, bad_file, paged, parse_json
from bots.slack.text import (
    HUMAN_SUBTYPES,
    channel_scope,
    message_files,
    message_scope,
    parse_message,
    plain_text,
)
from bots.slack.users import display_name
from memory_core.models import Attachment, Role
from memory_core.scopes import Audience
from memory_core.service.past import LearnRefused, PastMessage, PastPage, PastSource

NAME = "slack-export"
DELETED_USER = "deleted user"  # the name of an author users.json does not know
# A day file or list over this is not an export's (Slack writes a day at a time).
MAX_MEMBER_BYTES = 256 * 1024 * 1024

_SLACK_ID = re.compile(r"[A-Z0-9]{1,40}")
_SLACK_TS = re.compile(r"(\d{1,12})\.(\d{1,9})")
_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.json")


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation the export lists."""

    id: str
    kind: str  # "channel", "private channel", "group DM", "DM"
    name: str  # as listed ("" for a DM); a channel's folder is named after it
    audience: Audience
    members: tuple[str, ...] = ()

    @property
    def folder_names(self) -> tuple[str, ...]:
        """Where Slack writes its messages: by name, else (a DM) by id."""
        return tuple(n for n in (self.name, self.id) if n)


@dataclass(frozen=True, slots=True)
class Workspace:
    """What every conversation of one export shares."""

    archive: Path
    team: str
    names: Mapping[str, str]  # user id -> the name people see
    bot_user_id: str = ""
    bot_name: str = ""

    @property
    def bot_label(self) -> str:
        """The bot's name: as the caller says, else as users.json has it."""
        return self.bot_name or self.names.get(self.bot_user_id, "")


@dataclass(slots=True)
class SlackExportSource:
    """The past of one conversation of a Slack export: its day files, oldest first."""

    workspace: Workspace
    conversation: Conversation
    day_files: list[str]  # the zip's members, "general/2024-01-31.json"
    notes: tuple[str, ...] = ()  # with the first page
    name: str = NAME
    place: str = field(init=False)

    def __post_init__(self) -> None:
        self.place = channel_scope(self.workspace.team, self.conversation.id)

    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        """The conversation's pages; every day file is read and checked before the first
        page, so a bad one refuses before anything is handed over."""
        entries = await asyncio.to_thread(self._read_all)

        async def read(member: str) -> Entries:
            return entries[member]

        async for page in paged(
            self.day_files, read, since=since, cursor=cursor, place=self.place, notes=self.notes
        ):
            yield page

    def _read_all(self) -> dict[str, Entries]:
        with _open_zip(self.workspace.archive) as archive:
            return {
                member: self._entries(_read_list(archive, self.workspace.archive, member), member)
                for member in self.day_files
            }

    def _entries(self, messages: list[Any], member: str) -> Entries:
        where = f"{self.workspace.archive}, {member}"
        return [self._message(raw, f"[{i}]", where) for i, raw in enumerate(messages)]

    def _message(self, raw: object, at: str, where: str) -> PastMessage | None:
        """One message of a day file: kept, None (left out), or a refusal naming the field."""
        if not isinstance(raw, Mapping):
            raise bad_file(where, at, "not a message (a JSON object)")
        ts, thread_ts = raw.get("ts"), raw.get("thread_ts")
        if not isinstance(ts, str) or not _SLACK_TS.fullmatch(ts):
            raise bad_file(where, f"{at}.ts", 'not a Slack timestamp ("1700000000.000100")')
        if thread_ts is not None and not (
            isinstance(thread_ts, str) and _SLACK_TS.fullmatch(thread_ts)
        ):
            raise bad_file(where, f"{at}.thread_ts", "not a Slack timestamp")
        for key, kind, label in (("text", str, "text"), ("files", list, "a list")):
            if raw.get(key) is not None and not isinstance(raw.get(key), kind):
                raise bad_file(where, f"{at}.{key}", f"not {label}")
        user = raw.get("user")
        if user is not None and not (isinstance(user, str) and _SLACK_ID.fullmatch(user)):
            raise bad_file(where, f"{at}.user", "not a Slack user id")
        workspace = self.workspace
        if workspace.bot_user_id and user == workspace.bot_user_id:
            subtype = raw.get("subtype")
            return self._own(raw, ts, thread_ts) if subtype in (None, *HUMAN_SUBTYPES) else None
        said = parse_message(
            {**raw, "channel": self.conversation.id},
            team_id=workspace.team,
            bot_user_id=workspace.bot_user_id,
        )
        if said is None:
            return None
        return self._past(
            scope=said.scope,
            ts=ts,
            text=said.raw_text,
            author=self._author(said.user_id, raw),
            author_id=said.user_id,
            attachments=said.files,
        )

    def _own(self, raw: Mapping[str, Any], ts: str, thread_ts: str | None) -> PastMessage | None:
        """The bot's own message: kept as the assistant's."""
        workspace = self.workspace
        return self._past(
            scope=message_scope(workspace.team, self.conversation.id, ts, thread_ts),
            ts=ts,
            text=str(raw.get("text") or ""),
            author=workspace.bot_label,
            author_id=workspace.bot_user_id,
            attachments=message_files(raw),
            role="assistant",
        )

    def _past(
        self,
        *,
        scope: str,
        ts: str,
        text: str,
        author: str,
        author_id: str,
        attachments: tuple[Attachment, ...],
        role: Role = "user",
    ) -> PastMessage | None:
        """None for a message of neither words nor files (only legacy attachments): the
        live door does not keep one either."""
        workspace = self.workspace
        if not text.strip() and not attachments:
            return None
        return PastMessage(
            scope=scope,
            platform_id=ts,
            ts=slack_time(ts),
            text=plain_text(
                text,
                bot_user_id=workspace.bot_user_id,
                bot_name=workspace.bot_label,
                names=workspace.names,
            ),
            author=author,
            author_id=author_id,
            role=role,
            audience=self.conversation.audience,
            place_name=place_name(self.conversation, workspace.names),
            attachments=attachments,
        )

    def _author(self, user_id: str, raw: Mapping[str, Any]) -> str:
        """users.json's name; else the profile Slack wrote into the message (a person of
        another organisation in a shared channel); else a deleted user's."""
        known = self.workspace.names.get(user_id)
        if known:
            return known
        profile = raw.get("user_profile")
        if isinstance(profile, Mapping):
            named = display_name({"profile": profile, "name": profile.get("name")})
            if named != "someone":
                return named
        return DELETED_USER


def slack_export_sources(
    path: Path | str,
    team: str,
    include_private: bool = False,
    *,
    bot_user_id: str = "",
    bot_name: str = "",
) -> list[PastSource]:
    """One source per conversation of the export at ``path`` (a workspace's ``T...`` id is
    ``team``): its public channels, and with ``include_private`` its private channels, DMs
    and group DMs too. ``bot_user_id``: the bot's messages are kept as its own
    (``role="assistant"``) and its mention reads ``@bot_name``. The lists and users.json are
    read and checked here (a bad one refuses, naming the member and the field); the
    conversations' day files when their source is read."""
    archive = Path(path)
    if not _SLACK_ID.fullmatch(team):
        raise LearnRefused(f"{team!r} is not a Slack team id (T...): see the export's team")
    with _open_zip(archive) as zipped:
        members = set(zipped.namelist())
        names = _user_names(zipped, archive, members)
        conversations = _listed(zipped, archive, members, include_private)
        left_out = () if include_private else _private_left_out(zipped, members)
    workspace = Workspace(archive, team, names, bot_user_id=bot_user_id, bot_name=bot_name)
    days = _day_files(members)
    sources: list[PastSource] = []
    for conversation in conversations:
        folder = next((n for n in conversation.folder_names if n in days), "")
        notes = left_out if not sources else ()  # said once, with the first source
        sources.append(
            SlackExportSource(workspace, conversation, sorted(days.get(folder, ())), notes)
        )
    return sources


# The lists of conversations: (member, kind, who reads it, read only with include_private)
_LISTS = (
    ("channels.json", "channel", Audience.SERVER, False),
    ("groups.json", "private channel", Audience.PRIVATE, True),
    ("mpims.json", "group DM", Audience.PRIVATE, True),
    ("dms.json", "DM", Audience.DM, True),
)


def _listed(
    zipped: zipfile.ZipFile, archive: Path, members: set[str], include_private: bool
) -> list[Conversation]:
    found: list[Conversation] = []
    for member, kind, audience, private in _LISTS:
        if member not in members or (private and not include_private):
            continue
        where = f"{archive}, {member}"
        for i, raw in enumerate(_read_list(zipped, archive, member)):
            found.append(_conversation(raw, f"[{i}]", where, kind=kind, audience=audience))
    return found


def _private_left_out(zipped: zipfile.ZipFile, members: set[str]) -> tuple[str, ...]:
    """What the admin should know was not read: "2 private channels, 5 DMs in the export
    were not read (include_private)". Only counted: a list not read is not checked."""
    counts = []
    for member, kind, _, private in _LISTS:
        if not private or member not in members:
            continue
        try:
            listed = json.loads(zipped.read(member))
        except (ValueError, zipfile.BadZipFile, OSError):
            continue
        if isinstance(listed, list) and listed:
            counts.append(f"{len(listed)} {kind}{'s' if len(listed) != 1 else ''}")
    if not counts:
        return ()
    return (
        f"{', '.join(counts)} in the export were not read: only public channels are "
        "learned unless private ones are asked for (include_private)",
    )


def _conversation(
    raw: object, at: str, where: str, *, kind: str, audience: Audience
) -> Conversation:
    if not isinstance(raw, Mapping):
        raise bad_file(where, at, "not a conversation (a JSON object)")
    ident, name, members = raw.get("id"), raw.get("name"), raw.get("members")
    if not isinstance(ident, str) or not _SLACK_ID.fullmatch(ident):
        raise bad_file(where, f"{at}.id", "not a Slack channel id")
    if kind != "DM" and not (isinstance(name, str) and name and "/" not in name):
        raise bad_file(where, f"{at}.name", "not a channel name")
    if members is not None and not (
        isinstance(members, list) and all(isinstance(m, str) for m in members)
    ):
        raise bad_file(where, f"{at}.members", "not a list of user ids")
    shared = raw.get("is_ext_shared") is True or raw.get("is_pending_ext_shared") is True
    return Conversation(
        id=ident,
        kind=kind,
        name=name if isinstance(name, str) and kind != "DM" else "",
        audience=Audience.SHARED if shared and audience is not Audience.DM else audience,
        members=tuple(members or ()),
    )


def _user_names(zipped: zipfile.ZipFile, archive: Path, members: set[str]) -> dict[str, str]:
    member = next((m for m in ("users.json", "org_users.json") if m in members), None)
    if member is None:
        raise LearnRefused(
            f"{archive}: no users.json (nor org_users.json): not a Slack workspace export"
        )
    where, names = f"{archive}, {member}", {}
    for i, user in enumerate(_read_list(zipped, archive, member)):
        ident = user.get("id") if isinstance(user, Mapping) else None
        if not isinstance(ident, str) or not _SLACK_ID.fullmatch(ident):
            raise bad_file(where, f"[{i}].id", "not a Slack user id")
        names[ident] = display_name(user)
    return names


def place_name(conversation: Conversation, names: Mapping[str, str]) -> str:
    """What the dashboard shows for the place: "#general", "DM: Alice, Bob"."""
    if conversation.kind == "DM":
        people = ", ".join(names.get(m, DELETED_USER) for m in conversation.members)
        return f"DM: {people}" if people else "DM"
    if conversation.kind == "group DM":
        return f"group DM: {conversation.name}"
    return f"#{conversation.name}"


def slack_time(ts: str) -> datetime:
    """A Slack ts ("1700000000.000100", checked) as the time it was said, to the
    microsecond (a float would round it)."""
    seconds, fraction = ts.split(".")
    micros = int(fraction[:6].ljust(6, "0"))
    return datetime.fromtimestamp(int(seconds), tz=UTC) + timedelta(microseconds=micros)


def _open_zip(archive: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except FileNotFoundError as exc:
        raise LearnRefused(f"{archive}: no such file") from exc
    except zipfile.BadZipFile as exc:
        raise LearnRefused(f"{archive}: not a zip file (a Slack export is one)") from exc
    except OSError as exc:
        raise LearnRefused(f"{archive}: cannot be read: {exc.strerror or exc}") from exc


def _read_list(zipped: zipfile.ZipFile, archive: Path, member: str) -> list[Any]:
    where = f"{archive}, {member}"
    if zipped.getinfo(member).file_size > MAX_MEMBER_BYTES:
        raise bad_file(where, "", f"over {MAX_MEMBER_BYTES} bytes: not an export's file")
    try:
        data = zipped.read(member)
    except (zipfile.BadZipFile, OSError) as exc:  # a damaged member (bad CRC, truncated)
        raise bad_file(where, "", f"cannot be read from the zip: {exc}") from exc
    value = parse_json(data, where)
    if not isinstance(value, list):
        raise bad_file(where, "", "not a JSON list")
    return value


def _day_files(members: set[str]) -> dict[str, list[str]]:
    """The zip's day files by folder: {"general": ["general/2024-01-31.json", ...]}."""
    folders: dict[str, list[str]] = defaultdict(list)
    for member in members:
        path = PurePosixPath(member)
        if len(path.parts) == 2 and _DAY_FILE.fullmatch(path.name):
            folders[path.parts[0]].append(member)
    return folders
