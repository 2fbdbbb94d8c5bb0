"""A Slack channel's past (or a DM's), read for learning: a
:class:`~memory_core.service.past.PastSource`.

It reads ``conversations.history`` from ``since`` on, page by page (newest first, as Slack
gives it), and after each history page the threads that page holds (``conversations.replies``
of every parent with replies), then the next history page. Each answer of Slack is one
:class:`PastPage`; its cursor (JSON) says where the reading is: Slack's history cursor, the
parents of the last history page whose threads are still to read, Slack's cursor inside the
first of them. So a cursor stays small (one history page's parents at most), and reading on
from any page's cursor yields the rest once.

A message becomes a :class:`PastMessage` as the live door turns a message event into an
``IncomingMessage`` (:mod:`bots.slack.bot`): the same scope (a reply: its thread's; a parent:
the channel's), its ts as platform id, the same text rendering and author names
(:class:`~bots.slack.users.SlackDirectory`), files and audience. What the door does not keep
(other bots, joins, topic changes and the like, a deleted parent's tombstone) is counted in
``skipped``; the bot's own messages are kept as the assistant's. A reply also sent to the
channel (``thread_broadcast``) is in both the history and its thread: it is taken once, from
the history.

Requests are paced per method (``requests_per_minute``: 50 is Slack's Tier 3, the limit of
internal and Marketplace apps; 1 for apps commercially distributed outside the Marketplace)
and an HTTP 429's ``Retry-After`` is waited out, each wait at most ``max_wait_s``. The door's
client retries 429s itself (up to its own, shorter cap); the source reads through a twin of
that client without that retry, so its pacing and ``max_wait_s`` alone decide
(:mod:`bots.learn.slack_pacing`). The same reads serve the door's two other looks at the
past: a thread's first message that memory lacks (:class:`SlackThreadStarts`), and the
catch-up after an absence (:meth:`SlackHistory.within`, :mod:`bots.learn.slack_catch_up`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bots.learn.slack_pacing import (
    AUTH_ERRORS,
    MAX_WAIT_S,
    NETWORK_ERRORS,
    RESTRICTED_PER_MINUTE,
    TIER3_PER_MINUTE,
    Clock,
    Pacer,
    SlackRefused,
    Sleep,
    without_rate_retries,
)
from bots.slack.connect import error_code
from bots.slack.files import SlackFiles
from bots.slack.text import SlackMessage, channel_scope, message_scope, parse_message, slack_time
from bots.slack.users import SlackDirectory
from memory_core.bootstrap import Core
from memory_core.errors import ContextUnavailable, InputError
from memory_core.models import StarterSource, ThreadStarter
from memory_core.scopes import Audience, Scope
from memory_core.service.past import LearnRefused, PastMessage, PastPage


class SlackDoor(Protocol):
    """What the source takes from the running Slack door (:class:`bots.slack.bot.SlackBot`,
    which builds on this module): its core, its names and its files."""

    core: Core
    directory: SlackDirectory
    files: SlackFiles


#: Messages asked for a page: Slack's advice for paginated methods (history allows 999,
#: replies 1000); a restricted app gets 15 whatever it asks.
PAGE_SIZE = 200
RESTRICTED_PAGE_SIZE = 15

# The bot's own posts: its answers (plain, in a thread or a DM), and files it shared.
_OWN_SUBTYPES = frozenset({None, "bot_message", "thread_broadcast", "file_share", "me_message"})
#: The longest a reply waits for a thread's first message (pace and rate limits included).
READ_WAIT_S = 10.0


def slack_ts(when: datetime) -> str:
    """A time as Slack's ``oldest``/``latest`` (``"1700000000.000100"``); naive is UTC."""
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return f"{aware.timestamp():.6f}"


def is_thread_parent(message: Mapping[str, Any]) -> bool:
    """A message that starts a thread with replies (a deleted one's tombstone too: its
    replies are still there)."""
    count = message.get("reply_count")
    has_replies = isinstance(count, int) and not isinstance(count, bool) and count > 0
    return has_replies and message.get("thread_ts") == message.get("ts")


# -- where the reading is ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Place:
    """Where a reading of one conversation is, between two pages (the cursor)."""

    channel: str
    oldest: str  # the ``oldest`` the reading asks Slack for (its cursors belong to it)
    history: str = ""  # Slack's cursor to the next history page ("" = the first)
    history_done: bool = False
    threads: tuple[str, ...] = ()  # parents whose threads are still to read, first first
    replies: str = ""  # Slack's cursor inside the first of them ("" = its beginning)

    @property
    def finished(self) -> bool:
        return self.history_done and not self.threads

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, cursor: str, *, channel: str) -> Place:
        """The place a cursor of this source says; LearnRefused for one that is not (another
        channel's, damaged)."""
        try:
            data = json.loads(cursor)
            place = cls(
                channel=_text(data["channel"]),
                oldest=_text(data["oldest"]),
                history=_text(data["history"]),
                history_done=data["history_done"] is True,
                threads=tuple(_text(ts) for ts in data["threads"]),
                replies=_text(data["replies"]),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise LearnRefused(
                "the saved place of this learn is not one Slack's history reader wrote; "
                "learn the channel again from the start"
            ) from exc
        if place.channel != channel:
            raise LearnRefused(
                f"the saved place is of channel {place.channel}, not {channel}; learn "
                f"{channel} from the start"
            )
        return place


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


# -- the source -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Read:
    messages: list[PastMessage]
    skipped: int


class SlackHistory:
    """The past of one Slack conversation (a channel, private channel, group DM or DM) and
    its threads (see the module's text)."""

    name = "slack"

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        team_id: str,
        channel_id: str,
        bot_user_id: str,
        bot_id: str,
        bot_name: str,
        directory: SlackDirectory,
        files: SlackFiles,
        requests_per_minute: float = TIER3_PER_MINUTE,
        max_wait_s: float = MAX_WAIT_S,
        page_size: int = PAGE_SIZE,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        pacer: Pacer | None = None,
    ) -> None:
        self.place = channel_scope(team_id, channel_id)  # InvalidScope for ids Slack never gives
        self.team_id = team_id
        self.channel_id = channel_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.page_size = page_size
        self._client = client  # names, the channel's audience: as the door looks them up
        self._reader = without_rate_retries(client)
        self._directory = directory
        self._files = files
        self._pacer = pacer or Pacer(
            requests_per_minute=requests_per_minute, max_wait_s=max_wait_s, sleep=sleep, clock=clock
        )

    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        """The pages from ``cursor`` ("" = the beginning) on, messages at or after ``since``
        (a cursor goes on from the ``since`` it was read with: Slack's cursors belong to it)."""
        if cursor:
            place = Place.decode(cursor, channel=self.channel_id)
        else:
            place = Place(channel=self.channel_id, oldest=slack_ts(since))
        audience = await self._audience()
        while not place.finished:
            if place.threads:
                read, place = await self._replies_page(place, audience)
            else:
                read, place = await self._history_page(place, audience)
            yield PastPage(
                messages=read.messages,
                cursor="" if place.finished else place.encode(),
                skipped=read.skipped,
            )

    async def thread_start(self, thread_ts: str) -> PastMessage | None:
        """The first message of the thread ``thread_ts`` as memory would keep it (for a
        thread whose first message memory lacks: posted before the bot was there); None when
        Slack shows no such thread, or a message memory does not keep (another bot's, a
        join, a deleted one's tombstone). One ``conversations.replies`` request, paced;
        LearnRefused as for a page."""
        try:
            response = await self._page(thread_ts=thread_ts, limit=1)
        except _ThreadGone:
            return None
        first = next((m for m in messages_of(response) if m.get("ts") == thread_ts), None)
        # (who can read it is the thread's, which the door knows: not asked here)
        return None if first is None else await self._past(first, Audience.PRIVATE)

    async def within(
        self, thread_ts: str | None, *, oldest: str, latest: str
    ) -> dict[str, dict[str, Any]]:
        """What Slack shows of the conversation (``thread_ts``: of that thread) from
        ``oldest`` to ``latest``, by ts, all its pages; a thread Slack no longer finds (its
        parent and every reply deleted) shows nothing. SlackRefused, LearnRefused as for a
        page."""
        seen: dict[str, dict[str, Any]] = {}
        cursor = ""
        while True:
            try:
                response = await self._page(
                    thread_ts=thread_ts, cursor=cursor, oldest=oldest, latest=latest
                )
            except _ThreadGone:
                return {}
            seen |= {str(m["ts"]): m for m in messages_of(response)}
            cursor = next_cursor(response)
            if not cursor:
                return seen

    async def _page(
        self,
        *,
        thread_ts: str | None = None,
        cursor: str = "",
        oldest: str | None = None,
        latest: str | None = None,
        limit: int | None = None,
    ) -> AsyncSlackResponse:
        """One page of the history (``thread_ts`` None) or of a thread, paced."""
        if thread_ts is None:
            method, read = "conversations.history", self._reader.conversations_history
        else:
            method = "conversations.replies"
            read = partial(self._reader.conversations_replies, ts=thread_ts)
        request = partial(
            read,
            channel=self.channel_id,
            cursor=cursor or None,
            oldest=oldest,
            latest=latest,
            inclusive=True,
            limit=limit or self.page_size,
        )
        return await self._call(method, request)

    async def _history_page(self, place: Place, audience: Audience) -> tuple[_Read, Place]:
        response = await self._page(cursor=place.history, oldest=place.oldest)
        messages = messages_of(response)
        following = next_cursor(response)
        after = replace(
            place,
            history=following,
            history_done=not following,
            threads=tuple(str(m["ts"]) for m in messages if is_thread_parent(m)),
            replies="",
        )
        return await self._read(messages, audience), after

    async def _replies_page(self, place: Place, audience: Audience) -> tuple[_Read, Place]:
        parent, *rest = place.threads
        try:
            response = await self._page(thread_ts=parent, cursor=place.replies, oldest=place.oldest)
        except _ThreadGone:  # deleted since its parent was read: nothing left to learn
            return _Read([], 0), replace(place, threads=tuple(rest), replies="")
        # The parent is the channel's (read with the history), a reply also sent to the
        # channel was read there too.
        replies = [
            m
            for m in messages_of(response)
            if m.get("ts") != parent and m.get("subtype") != "thread_broadcast"
        ]
        following = next_cursor(response)
        if following:
            after = replace(place, replies=following)
        else:
            after = replace(place, threads=tuple(rest), replies="")
        return await self._read(replies, audience), after

    async def _call(
        self, method: str, request: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> AsyncSlackResponse:
        try:
            return await self._pacer.call(method, request)
        except SlackApiError as exc:
            code = error_code(exc)
            if method == "conversations.replies" and code == "thread_not_found":
                raise _ThreadGone from exc
            raise self._refusal(method, code, exc.response.get("needed")) from exc
        except NETWORK_ERRORS as exc:
            raise LearnRefused(
                f"could not reach Slack for {method} ({exc!r}); run learn again: it goes on "
                "where it stopped"
            ) from exc

    def _refusal(self, method: str, code: str, needed: object) -> SlackRefused:
        refused = partial(SlackRefused, code=code)
        where = f"conversation {self.channel_id}"
        if code == "missing_scope":
            scope = needed if isinstance(needed, str) and needed else self._history_scope()
            return refused(
                f"Slack will not show the history of {where}: the app lacks the {scope} "
                "scope. Add it to the bot token scopes (OAuth & Permissions, or "
                "slack-manifest.yaml), reinstall the app to the workspace, then run learn again"
            )
        if code == "not_in_channel":
            return refused(
                f"memorybot is not in {where}: invite it (/invite @{self.bot_name}), then run "
                "learn again"
            )
        if code == "channel_not_found":
            return refused(
                f"Slack shows memorybot no {where}: it was deleted, or it is private and the "
                f"bot is not in it (invite it: /invite @{self.bot_name}), then run learn again"
            )
        if code == "invalid_cursor":
            return refused(
                "Slack no longer accepts where this learn stopped (its cursor expired); "
                "learn the channel again from the start: what is already learned is recognised"
            )
        if code in AUTH_ERRORS:
            return refused(
                f"Slack refused the bot token ({code}): check SLACK_BOT_TOKEN or reinstall "
                "the app to the workspace (docs/slack.md), then run learn again"
            )
        return refused(
            f"Slack refused {method} for {where} ({code}); run learn again: it goes on "
            "where it stopped"
        )

    def _history_scope(self) -> str:
        if Scope.of(self.place).is_dm:
            return "im:history"
        return (
            "channels:history (groups:history for a private channel, mpim:history for a group DM)"
        )

    async def _audience(self) -> Audience:
        """Who can read the conversation, as the door decides it: a DM is the person's; a
        channel as ``conversations.info`` says (public, private, or shared with another
        organisation)."""
        if Scope.of(self.place).is_dm:
            return Audience.DM
        return await self._directory.audience(self._client, self.team_id, self.channel_id)

    async def _read(self, messages: list[dict[str, Any]], audience: Audience) -> _Read:
        kept: list[PastMessage] = []
        for message in messages:
            past = await self._past(message, audience)
            if past is not None:
                kept.append(past)
        return _Read(kept, len(messages) - len(kept))

    async def _past(self, message: Mapping[str, Any], audience: Audience) -> PastMessage | None:
        """A message as memory keeps it, None for what it does not keep."""
        if self._is_own(message):
            return await self._own(message, audience)
        event = {**message, "channel": self.channel_id}
        shared = audience is Audience.SHARED
        msg = parse_message(
            event, team_id=self.team_id, bot_user_id=self.bot_user_id, shared=shared
        )
        when = slack_time(msg.ts) if msg is not None else None
        if msg is None or when is None:
            return None
        text = await self.text(msg.raw_text)
        attachments = self._files.with_images(msg.files, msg.downloads)
        if not text and not attachments:
            return None  # nothing the door would store either
        return PastMessage(
            scope=msg.scope,
            platform_id=msg.ts,
            ts=when,
            text=text,
            author=await self._directory.name(self._client, self.team_id, msg.user_id),
            author_id=msg.user_id,
            audience=Audience.DM if msg.direct else (msg.audience or audience),
            attachments=attachments,
        )

    def _is_own(self, message: Mapping[str, Any]) -> bool:
        mine = message.get("user") == self.bot_user_id or (
            bool(self.bot_id) and message.get("bot_id") == self.bot_id
        )
        return mine and message.get("subtype") in _OWN_SUBTYPES

    async def _own(self, message: Mapping[str, Any], audience: Audience) -> PastMessage | None:
        """The bot's own answer, as the door stores it after posting: the assistant's,
        under the bot's name."""
        ts, thread_ts = message.get("ts"), message.get("thread_ts")
        raw = message.get("text")
        when = slack_time(ts) if isinstance(ts, str) else None
        if when is None or not isinstance(ts, str) or not isinstance(raw, str):
            return None
        try:
            scope = message_scope(
                self.team_id, self.channel_id, ts, thread_ts if isinstance(thread_ts, str) else None
            )
        except InputError:
            return None
        text = await self.text(raw)
        if not text:
            return None
        return PastMessage(
            scope=scope,
            platform_id=ts,
            ts=when,
            text=text,
            author=self.bot_name,
            author_id="bot",
            role="assistant",
            audience=audience,
        )

    async def text(self, raw: str) -> str:
        return await self._directory.memory_text(
            self._client, self.team_id, raw, bot_user_id=self.bot_user_id, bot_name=self.bot_name
        )


class _ThreadGone(Exception):
    """conversations.replies found no such thread any more."""


def messages_of(response: AsyncSlackResponse) -> list[dict[str, Any]]:
    messages = response.get("messages")
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, dict) and isinstance(m.get("ts"), str)]


def next_cursor(response: AsyncSlackResponse) -> str:
    """Slack's cursor to the next page, "" after the last (``has_more`` false)."""
    metadata = response.get("response_metadata")
    following = metadata.get("next_cursor") if isinstance(metadata, Mapping) else None
    if response.get("has_more") is not True or not isinstance(following, str):
        return ""
    return following


def slack_past(
    bot: SlackDoor,
    client: AsyncWebClient,
    *,
    team_id: str,
    channel_id: str,
    bot_user_id: str,
    bot_id: str,
    restricted: bool = False,
    requests_per_minute: float | None = None,
    max_wait_s: float = MAX_WAIT_S,
    sleep: Sleep = asyncio.sleep,
    clock: Clock = time.monotonic,
    pacer: Pacer | None = None,
) -> SlackHistory:
    """The past of ``channel_id`` as the running door reads it (its client, names, files and
    bot name). ``restricted``: the app is commercially distributed outside the Marketplace
    (one history request a minute, 15 messages a page); ``requests_per_minute`` overrides
    the pace that follows from it. ``sleep``/``clock``: how waits are made and timed;
    ``pacer``: one shared with other reads (then it alone paces and waits)."""
    per_minute = requests_per_minute or (RESTRICTED_PER_MINUTE if restricted else TIER3_PER_MINUTE)
    return SlackHistory(
        client,
        team_id=team_id,
        channel_id=channel_id,
        bot_user_id=bot_user_id,
        bot_id=bot_id,
        bot_name=bot.core.settings.bot.name,
        directory=bot.directory,
        files=bot.files,
        requests_per_minute=per_minute,
        max_wait_s=max_wait_s,
        page_size=RESTRICTED_PAGE_SIZE if restricted else PAGE_SIZE,
        sleep=sleep,
        clock=clock,
        pacer=pacer,
    )


class SlackThreadStarts:
    """A thread's first message read from Slack for the core when memory lacks it (posted
    before the bot was in the channel, or another app's): each message in a channel thread
    carries a :class:`~memory_core.models.StarterSource` that the core calls only then
    (:mod:`memory_core.service.thread_starters`). One ``conversations.replies`` request
    (:meth:`SlackHistory.thread_start`), the door's reads of this kind paced together at
    ``learn.slack_requests_per_minute``, and bounded: a read that would wait longer than
    :data:`READ_WAIT_S` gives up, the prompt goes without it and the next reply asks again."""

    def __init__(self, door: SlackDoor, *, requests_per_minute: float) -> None:
        self.door = door
        self.pacer = Pacer(requests_per_minute=requests_per_minute, max_wait_s=READ_WAIT_S)

    def source(
        self, client: AsyncWebClient, msg: SlackMessage, *, bot_user_id: str
    ) -> StarterSource | None:
        """How the core reads the first message of ``msg``'s thread; None for a message in
        no thread, a thread's first message itself, and a DM (the bot was always in it)."""
        if msg.direct or msg.thread_ts is None or msg.thread_ts == msg.ts:
            return None
        return StarterSource(fetch=partial(self._read, client, msg, msg.thread_ts, bot_user_id))

    async def _read(
        self, client: AsyncWebClient, msg: SlackMessage, thread_ts: str, bot_user_id: str
    ) -> ThreadStarter | None:
        history = slack_past(
            self.door,
            client,
            team_id=msg.team_id,
            channel_id=msg.channel_id,
            bot_user_id=bot_user_id,
            bot_id="",
            pacer=self.pacer,
        )
        try:
            async with asyncio.timeout(READ_WAIT_S):
                past = await history.thread_start(thread_ts)
        except (LearnRefused, TimeoutError) as exc:
            raise ContextUnavailable(
                f"Slack did not show thread {thread_ts} of {msg.channel_id}: {exc or 'too slow'}"
            ) from exc
        if past is None:
            return None
        return ThreadStarter(
            platform_id=past.platform_id,
            ts=past.ts,
            text=past.text,
            author=past.author,
            author_id=past.author_id,
            role=past.role,
            attachments=past.attachments,
        )
