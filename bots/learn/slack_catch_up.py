"""Deletes and edits made while the bot was away, on Slack.

Slack does not replay the events an app missed while it was down (nor, past its few retries,
those of a Socket Mode connection that was lost), so a message deleted or edited meanwhile
would stay in memory as it was. After a start, and after each Socket Mode reconnection, the
bot reads again the recent history of the places with memory and brings memory in line, as
the live events would have: what is no longer there (or is a deleted thread parent's
``tombstone``) is forgotten, what was edited takes its new text, and a channel Slack no
longer shows the bot loses its memory as on ``channel_deleted`` or ``channel_left``: not found
(``channel_not_found``: deleted, or for a private one also the bot removed from it: Slack
answers both alike) or not a member any more (``not_in_channel``: the bot was removed).

Bounded: the ``bot.catch_up_places`` most recently active places of this workspace (channels,
threads and DMs) within the last ``bot.catch_up_hours`` (0: off), and in each only what was
said within that window: ``conversations.history`` of a channel (or DM), ``conversations.replies``
of a thread, ``oldest`` the window's start and ``latest`` the catch-up's, read as a learn
reads them (:meth:`bots.learn.slack_history.SlackHistory.within`). What is stored after
that (live messages, meanwhile) is not compared. Requests go one after the other through a
:class:`~bots.learn.slack_pacing.Pacer` at the pace of ``learn.slack_requests_per_minute`` (Slack's
Tier 3 for both methods), in a background task: live events are handled all the while. A
change is applied in its scope's queue, as a live edit or delete is; an edit is skipped when
memory changed in that scope since its history was read (a live edit may have come in
between: it is newer than what was read).

Not compared: the bot's own answers in a channel (they live in the thread under the question,
which the channel's history does not show), messages older than the window, places beyond
the bound, and events other than messages (reactions, pins, renames...).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from bots.learn.slack_history import SlackDoor, SlackHistory, slack_past, slack_ts
from bots.learn.slack_pacing import AUTH_ERRORS, Clock, Pacer, SlackRefused, Sleep
from bots.slack.connect import SlackIdentity
from bots.slack.listening import Listening
from bots.slack.text import parse_message, slack_time
from memory_core.errors import MemorybotError
from memory_core.models import Attachment, LogEntry
from memory_core.scopes import Scope
from memory_core.service.past import LearnRefused

log = logging.getLogger(__name__)

SCAN = 2_000  # the most recently active scopes looked at (every platform's)
STORED_CHUNK = 500  # stored entries read at a time

_TS = re.compile(r"\d{1,12}\.\d{1,9}")


@dataclass(frozen=True, slots=True)
class Window:
    """The time a catch-up compares: from ``oldest`` to ``latest`` (Slack ts, both included)."""

    oldest: str
    latest: str

    @classmethod
    def of(cls, start: datetime, end: datetime) -> Window:
        return cls(oldest=slack_ts(start), latest=slack_ts(end))

    @property
    def oldest_ms(self) -> int:
        return int(Decimal(self.oldest) * 1000)

    def holds(self, ts: str) -> bool:
        """Whether ``ts`` is a Slack ts within the window."""
        return bool(_TS.fullmatch(ts)) and Decimal(self.oldest) <= Decimal(ts) <= Decimal(
            self.latest
        )


@dataclass(slots=True)
class CatchUpReport:
    """What one catch-up did."""

    places: int = 0  # places whose history was read
    forgotten: int = 0  # stored messages forgotten (deleted while away)
    edited: int = 0  # stored messages that took their new text
    purged: list[str] = field(default_factory=list)  # channels gone: their memory went
    not_read: list[str] = field(default_factory=list)  # places Slack would not show
    stale_edits: int = 0  # edits not applied: memory changed there meanwhile
    stopped: str = ""  # why it ended before the last place ("" = it did not)

    @property
    def changed(self) -> int:
        return self.forgotten + self.edited


@dataclass(frozen=True, slots=True)
class _Change:
    """A stored message to forget (``text`` None) or to give its new text."""

    entry: LogEntry
    text: str | None = None
    files: tuple[Attachment, ...] = ()

    @property
    def ts(self) -> str:
        return self.entry.platform_id


class _Stop(Exception):
    """Nothing more can be read (the token refused, Slack unreachable, rate limited for
    long, shutdown): the catch-up ends here."""


class SlackCatchUp:
    """Catch-ups of one running door, one at a time in a background task.

    :meth:`start` begins one (a start asked for while one runs makes it run once more after:
    a reconnection during a catch-up may have missed events after its ``latest``);
    :meth:`follow` starts one after each Socket Mode reconnection; :meth:`close` stops, letting
    a change being applied finish. ``on_done``: called with each finished catch-up's report.
    """

    def __init__(
        self,
        door: SlackDoor,
        client: AsyncWebClient,
        *,
        identity: SlackIdentity,
        queue: Listening,
        on_done: Callable[[CatchUpReport], object] | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        self.core = door.core
        self.door = door
        self.identity = identity
        self.queue = queue
        self.on_done = on_done
        self._client = client
        learn = self.core.settings.learn
        self._pacer = Pacer(  # one for every place's reads (the pacer alone waits out 429s)
            requests_per_minute=learn.slack_requests_per_minute,
            max_wait_s=learn.max_wait_s,
            sleep=sleep,
            clock=clock,
        )
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._applying = False  # a change is being applied: shutdown lets it finish
        self._stopping = False

    # -- the task ------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.core.settings.bot.catch_up_hours > 0

    def start(self) -> None:
        """Catch up in the background (once more after the one running, if one is)."""
        if not self.enabled or self._stopping:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.create_task(self._runs(), name="slack catch-up")
        self._task.add_done_callback(_log_failure)

    def follow(self, socket_client: AsyncBaseSocketModeClient) -> None:
        """Catch up after each reconnection of ``socket_client``: Slack greets every new
        connection with ``hello``; one from the connection already open is no reconnection.
        (The last connection is held, so a new one cannot be taken for it.)"""
        last = [getattr(socket_client, "current_session", None)]

        async def on_message(
            client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
        ) -> None:
            session = getattr(client, "current_session", None)
            if message.get("type") != "hello" or session is None or session is last[0]:
                return
            last[0] = session
            log.info("Slack: reconnected; catching up on what the connection missed")
            self.start()

        socket_client.message_listeners.append(on_message)

    async def close(self) -> None:
        """Stop: at once while waiting on Slack, after the change being applied otherwise."""
        self._stopping = True
        task = self._task
        if task is None or task.done():
            return
        if not self._applying:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _runs(self) -> None:
        while True:
            self._again = False
            report = await self.run()
            if self.on_done is not None and not self._stopping:
                self.on_done(report)
            if not self._again or self._stopping:
                return

    # -- one catch-up ----------------------------------------------------------------------
    async def run(self) -> CatchUpReport:
        """Read the recent places again and apply what changed; what it did."""
        report = CatchUpReport()
        now = self.core.clock.now()
        window = Window.of(now - timedelta(hours=self.core.settings.bot.catch_up_hours), now)
        try:
            places = await self._places(window)
        except MemorybotError as exc:  # Redis away: the next start or reconnection tries again
            log.warning("Slack: could not catch up after being away: %s", exc)
            report.stopped = str(exc)
            return report
        gone: set[str] = set()  # channels not to read again: deleted, or the bot not in them
        try:
            for scope in places:
                place = Scope.of(scope)
                if place.channel in gone:
                    continue
                try:
                    if not await self._catch_up(place, window, report):
                        gone.add(place.channel)
                except MemorybotError as exc:
                    log.warning("Slack: could not catch up %s: %s", scope, exc)
        except _Stop as stop:
            report.stopped = str(stop)
        self._log(report, len(places))
        return report

    async def _places(self, window: Window) -> list[str]:
        """This workspace's places with memory active within the window, most recent first,
        at most ``bot.catch_up_places``."""
        active = await self.core.repo.reads.scopes(offset=0, limit=SCAN)
        team = self.identity.team_id
        ours = [s for s, last in active if last >= window.oldest_ms and _of_team(s, team)]
        return ours[: self.core.settings.bot.catch_up_places]

    async def _catch_up(self, place: Scope, window: Window, report: CatchUpReport) -> bool:
        """One place; False when its conversation is not to be read again (gone, or the bot
        not in it)."""
        scope = place.key
        epoch = (await self.core.repo.reads.state(scope)).epoch  # before what Slack shows is read
        history = slack_past(
            self.door,
            self._client,
            team_id=self.identity.team_id,
            channel_id=place.channel,
            bot_user_id=self.identity.user_id,
            bot_id=self.identity.bot_id,
            restricted=self.core.settings.learn.slack_requests_per_minute <= 1,
            pacer=self._pacer,
        )
        try:
            seen = await history.within(
                place.thread or None, oldest=window.oldest, latest=window.latest
            )
        except SlackRefused as exc:
            return await self._refused(place, exc.code, report)
        except LearnRefused as exc:  # rate limited for longer than learn.max_wait_s, offline
            raise _Stop(str(exc)) from exc
        report.places += 1
        deleted: list[LogEntry] = []
        edited: list[tuple[LogEntry, dict[str, Any]]] = []
        for entry in _unique(await self._stored(scope, window)):
            message = seen.get(entry.platform_id)
            if message is None:
                if _readable(place, entry):
                    deleted.append(entry)
            elif message.get("subtype") == "tombstone":  # a thread parent deleted
                deleted.append(entry)
            elif entry.role == "user" and isinstance(message.get("edited"), dict):
                edited.append((entry, message))
        await self._apply(history, place, epoch, deleted, edited, report)
        return True

    async def _stored(self, scope: str, window: Window) -> list[LogEntry]:
        """The stored messages said within the window (a message's entry is never older than
        its send time, so the log is read from the window's start)."""
        found: list[LogEntry] = []
        entries = await self.core.repo.reads.entries_from(
            scope, window.oldest_ms, limit=STORED_CHUNK
        )
        while entries:
            found += [e for e in entries if window.holds(e.platform_id)]
            if len(entries) < STORED_CHUNK:
                break
            entries = await self.core.repo.reads.entries_after(
                scope, entries[-1].id, limit=STORED_CHUNK
            )
        return found

    async def _refused(self, place: Scope, code: str, report: CatchUpReport) -> bool:
        """Slack would not show the place: do what the live events would have done. A
        channel not found was deleted (``channel_deleted``) or, a private one, the bot was
        removed from it (Slack answers both alike; ``group_left``); one the bot is not in
        (``not_in_channel``) it was removed from (``channel_left``): live, each forgets the
        channel, so its memory and its threads' go. A DM Slack does not find, or an archived
        channel, keeps its memory. True when the conversation's other places may still be
        read."""
        report.not_read.append(place.key)
        if code in AUTH_ERRORS:
            raise _Stop(f"Slack refused the bot token ({code})")
        if code in ("channel_not_found", "not_in_channel") and not place.is_dm:
            await self._purge(place.root.key, code, report)
            return False
        if code in ("channel_not_found", "is_archived"):
            log.info("Slack: %s not caught up (%s): its memory stays", place.key, code)
            return False
        log.warning("Slack: %s not caught up: Slack answered %s", place.key, code)
        return True

    async def _purge(self, root: str, code: str, report: CatchUpReport) -> None:
        """As ``on_channel_deleted`` and ``on_channel_left``: the channel's memory and its
        threads' go."""
        self._applying = True
        try:
            await self.core.admin.place.forget_all(root, keep_settings=False)
        finally:
            self._applying = False
        report.purged.append(root)
        log.info(
            "Slack: %s was deleted or the bot removed from it while it was away (%s): its "
            "memory is forgotten",
            root,
            code,
        )
        self._check_stop()

    async def _apply(
        self,
        history: SlackHistory,
        place: Scope,
        epoch: int,
        deleted: list[LogEntry],
        edited: list[tuple[LogEntry, dict[str, Any]]],
        report: CatchUpReport,
    ) -> None:
        """Forget what was deleted, apply what was edited: each in the scope's queue, as the
        live events are. An edit is applied only while memory there is as it was when the
        history was read (a live edit in between is newer than what was read)."""
        scope = place.key
        changes = [_Change(entry) for entry in deleted]
        for entry, message in edited:
            msg = parse_message(
                {**message, "channel": place.channel},
                team_id=self.identity.team_id,
                bot_user_id=self.identity.user_id,
            )
            if msg is None or msg.scope != scope:
                continue
            text = await history.text(msg.raw_text)
            changes.append(_Change(entry, text, msg.files))
        changes.sort(key=lambda change: Decimal(change.ts))
        expected: int | None = epoch
        for change in changes:
            async with self.queue.hold(scope):
                if (
                    expected is not None
                    and (await self.core.repo.reads.state(scope)).epoch != expected
                ):
                    expected = None  # changed meanwhile: no edit from what was read
                if change.text is not None and expected is None:
                    report.stale_edits += 1
                    continue
                self._applying = True
                try:
                    await self._change(scope, change, report)
                    if expected is not None:
                        expected = (await self.core.repo.reads.state(scope)).epoch
                finally:
                    self._applying = False
            self._check_stop()

    async def _change(self, scope: str, change: _Change, report: CatchUpReport) -> None:
        """As the live ``message_deleted`` (or tombstone) and ``message_changed`` do."""
        when = slack_time(change.ts)
        if change.text is None:
            report.forgotten += await self.core.conversation.delete(scope, [(change.ts, when)])
        elif await self.core.conversation.edit(
            scope, change.ts, change.text, when=when, attachments=change.files
        ):
            report.edited += 1

    def _check_stop(self) -> None:
        if self._stopping:
            raise _Stop("the bot is stopping")

    def _log(self, report: CatchUpReport, places: int) -> None:
        hours = self.core.settings.bot.catch_up_hours
        line = (
            f"Slack: caught up {report.places} of {places} places active in the last {hours} h: "
            f"{report.forgotten} messages forgotten, {report.edited} edited"
        )
        if report.purged:
            line += f", {len(report.purged)} channels gone"
        if report.stale_edits:
            line += f"; {report.stale_edits} edits left to the next catch-up (memory changed)"
        if report.stopped:
            log.warning("%s; stopped: %s", line, report.stopped)
        elif report.changed or report.purged:
            log.warning(line)
        else:
            log.info(line)


def _log_failure(task: asyncio.Task[None]) -> None:
    """A catch-up that failed is said (the next start or reconnection tries again)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("Slack: the catch-up failed: %r", exc, exc_info=exc)


def _of_team(scope: str, team_id: str) -> bool:
    """A channel, thread or DM of this workspace (not a person's scope)."""
    try:
        place = Scope.of(scope)
    except MemorybotError:
        return False
    return place.platform == "slack" and place.server == team_id and bool(place.channel)


def _readable(place: Scope, entry: LogEntry) -> bool:
    """Whether the place's history would show the entry's message: not the bot's answer in a
    channel (posted in the thread under the question, kept with the question)."""
    return not (entry.role == "assistant" and place.kind == "channel")


def _unique(entries: list[LogEntry]) -> list[LogEntry]:
    """One entry per message (an interrupted edit can leave two)."""
    by_id: dict[str, LogEntry] = {}
    for entry in entries:
        by_id.setdefault(entry.platform_id, entry)
    return list(by_id.values())
