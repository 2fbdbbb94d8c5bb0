"""A thread's first message read from Slack, for the core, when memory lacks it.

A channel message posted before the bot joined the channel (or while it was paused, or
another app's) is not in memory; a thread under it is answered all the same, and its prompt
gives how the thread began. So each message in a channel thread carries a
:class:`~memory_core.models.StarterSource`: the core calls it only when memory lacks the
thread's first message and nothing is kept of it yet (it keeps what it got for a day, and
never stores it as said: :mod:`memory_core.service.thread_starters`).

One ``conversations.replies`` request (``limit`` 1: the parent comes first), with the
history scope the live messages already need (``channels:history``, ``groups:history``...),
paced with the door's other reads of this kind at ``learn.slack_requests_per_minute`` (Slack's
Tier 3, 50 a minute) through one :class:`~bots.slack.pacing.Pacer`, and bounded: a read that
would wait longer than :data:`READ_WAIT_S` (a rate limit, Slack slow to answer) gives up, the
prompt goes without it and the next reply there asks again. The message becomes what memory
would keep of it as a learn reads one (:meth:`bots.slack.history.SlackHistory.thread_start`:
names for mentions, files as their lines; none for another bot's message or a join).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.history import SlackDoor, slack_past
from bots.slack.pacing import Clock, Pacer, Sleep
from bots.slack.text import SlackMessage
from memory_core.errors import ContextUnavailable
from memory_core.models import StarterSource, ThreadStarter
from memory_core.service.past import LearnRefused

#: The longest a reply waits for a thread's first message (pace and rate limits included).
READ_WAIT_S = 10.0


class SlackThreadStarts:
    """The door's reads of threads' first messages, paced together."""

    def __init__(
        self,
        door: SlackDoor,
        *,
        requests_per_minute: float,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        self.door = door
        self.pacer = Pacer(
            requests_per_minute=requests_per_minute,
            max_wait_s=READ_WAIT_S,
            sleep=sleep,
            clock=clock,
        )

    def source(
        self, client: AsyncWebClient, msg: SlackMessage, *, bot_user_id: str
    ) -> StarterSource | None:
        """How the core reads the first message of ``msg``'s thread; None for a message in
        no thread, a thread's first message itself, and a DM (the bot was always in it)."""
        if msg.direct or msg.thread_ts is None or msg.thread_ts == msg.ts:
            return None
        read = partial(
            self._read,
            client,
            team_id=msg.team_id,
            channel_id=msg.channel_id,
            thread_ts=msg.thread_ts,
            bot_user_id=bot_user_id,
        )
        return StarterSource(fetch=read)

    async def _read(
        self,
        client: AsyncWebClient,
        *,
        team_id: str,
        channel_id: str,
        thread_ts: str,
        bot_user_id: str,
    ) -> ThreadStarter | None:
        history = slack_past(
            self.door,
            client,
            team_id=team_id,
            channel_id=channel_id,
            bot_user_id=bot_user_id,
            bot_id="",
            pacer=self.pacer,
        )
        try:
            async with asyncio.timeout(READ_WAIT_S):
                past = await history.thread_start(thread_ts)
        except (LearnRefused, TimeoutError) as exc:
            raise ContextUnavailable(
                f"Slack did not show thread {thread_ts} of {channel_id}: {exc or 'too slow'}"
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
