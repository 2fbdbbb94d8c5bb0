"""Posting one answer into a Slack thread: :class:`ThreadReply` is the core's ``ReplySink``
(its messages in the thread; the answer streamed natively where Slack allows it,
:mod:`bots.slack.stream`, else its draft edited with ``chat.update``); splitting under the
message limit, streaming and never posting an answer twice are decided in
:mod:`memory_core.service.streaming`. :class:`SlackReplies` builds the sink of each answer.

Slack's rate limits are kept fleet-wide before each call (``room``, and the table in
:mod:`bots.slack.stream`): a new message in a channel at most once a second, chat.update
within its tier per workspace. A ``ratelimited`` answer that still comes is waited out by
the client's retry handler. A Slack failure is logged with the scope (never the text) and
ends this answer; it never reaches the event handler. Links to messages, for ``/memory
why`` and source lines, are their ``chat.getPermalink`` (a thread reply's carries
``thread_ts`` and ``cid``); one Slack does not give is logged and left out.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.connect import SLACK_ERRORS, error_code
from bots.slack.stream import (
    POSTS_IN_A_CHANNEL,
    UPDATES,
    NativeStream,
    StreamRefusals,
)
from bots.slack.text import SlackMessage, escape, to_mrkdwn
from bots.why import Linker
from memory_core.fleet.pacing import Pacing
from memory_core.service.streaming import Call, Draft, EditedDraft

log = logging.getLogger(__name__)

# Slack accepts 40,000 characters but shows long messages folded; ~3,500 reads well.
MESSAGE_CHARS = 3500


@dataclass(frozen=True, slots=True)
class Streaming:
    """An answer streamed natively: to whom (Slack wants the recipient outside a DM), and
    where Slack refused lately."""

    refusals: StreamRefusals
    user_id: str
    team_id: str


class ThreadReply:
    """One answer in one thread (``thread_ts`` None: top level, as in a DM): the core's
    ``ReplySink``, posting with ``chat.postMessage``; its draft a native stream
    (``streaming``, in a thread), else edited with ``chat.update``. With ``pacing``, every
    call keeps Slack's limits fleet-wide (``room``)."""

    message_chars = MESSAGE_CHARS
    send_errors: tuple[type[Exception], ...] = SLACK_ERRORS

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str | None,
        scope: str,
        pacing: Pacing | None = None,
        streaming: Streaming | None = None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.scope = scope
        self.team_id = scope.split(":")[1] if scope.count(":") >= 2 else ""
        self.pacing = pacing
        # A native stream is a reply in a thread (a top-level DM answer is edited instead).
        self.streaming = streaming if thread_ts is not None and pacing is not None else None
        self.posted: list[str] = []  # ts of every message of this answer

    def can_send(self) -> bool:
        return True  # Slack says no only when posting; the post logs it

    def typing(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()  # a bot has no typing indicator in the Web API

    def markup(self, text: str) -> str:
        # A stream's text is Markdown (markdown_text): so is the rest of that answer.
        return escape(text) if self.streaming is not None else to_mrkdwn(text)

    async def post(self, *, text: str) -> str | None:
        markdown = self.streaming is not None
        try:
            response = await self.client.chat_postMessage(
                channel=self.channel,
                thread_ts=self.thread_ts,
                text=None if markdown else text,
                markdown_text=text if markdown else None,
            )
        except SLACK_ERRORS as exc:
            self.fail("post", exc)
            return None
        ts = str(response.get("ts", ""))
        self.posted.append(ts)
        return ts

    def message_id(self, handle: str) -> str:
        return handle  # its ts

    async def edit(self, *, handle: str, text: str) -> bool:
        try:
            markdown = self.streaming is not None
            await self.client.chat_update(
                channel=self.channel,
                ts=handle,
                text=None if markdown else text,
                markdown_text=text if markdown else None,
            )
        except SLACK_ERRORS as exc:
            self.fail("update", exc)
            return False
        return True

    async def room(self, call: Call, *, wait: bool) -> bool:
        """Slack's limit for one more ``call``: a new message in this channel (once a
        second), or a chat.update in this workspace (Tier 3), fleet-wide."""
        if self.pacing is None:
            return True
        if call == "post":
            name, allowance = f"slack:{self.team_id}:post:{self.channel}", POSTS_IN_A_CHANNEL
        else:
            name, allowance = f"slack:{self.team_id}:chat.update", UPDATES
        return await self.pacing.room(name, allowance, wait=wait)

    def draft(self) -> Draft[str]:
        streaming = self.streaming
        if streaming is None or self.pacing is None:
            return EditedDraft(self)
        return NativeStream(
            self,
            pacing=self.pacing,
            refusals=streaming.refusals,
            recipient_user_id=streaming.user_id,
            recipient_team_id=streaming.team_id,
        )

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        """A small italic link to the recalled message (``markup`` makes it ``<url|label>``)."""
        url = await permalink(self.client, channel=self.channel, ts=platform_id)
        return f"_[{label}]({url})_" if url else ""

    def fail(self, what: str, exc: Exception) -> None:
        """Log a call Slack refused (or that failed on the way), with Slack's reason."""
        log.warning("could not %s the reply in %s: %s", what, self.scope, error_code(exc))


async def permalink(client: AsyncWebClient, *, channel: str, ts: str) -> str:
    """The message's permalink, "" when Slack has none for it."""
    if not ts:
        return ""
    try:
        response = await client.chat_getPermalink(channel=channel, message_ts=ts)
    except SLACK_ERRORS as exc:  # a link is decoration: never fails the command or answer
        log.warning("no permalink for a message in %s: %s", channel, error_code(exc))
        return ""
    url = response.get("permalink")
    return url if isinstance(url, str) and url.startswith("https://") else ""


def permalinks(client: AsyncWebClient, channel: str) -> Linker:
    """The :data:`~bots.why.Linker` of a channel: its messages' permalinks by ts."""

    async def link(ts: str, in_parent: bool) -> str:  # a thread's messages are its channel's
        return await permalink(client, channel=channel, ts=ts)

    return link


class SlackReplies:
    """How the door answers: each answer's sink, paced fleet-wide, streamed natively where
    ``slack.stream_replies`` asks for it and Slack allows it."""

    def __init__(self, pacing: Pacing, *, stream: bool) -> None:
        self.pacing = pacing
        self.stream = stream
        self.refusals = StreamRefusals()

    def streaming(self, msg: SlackMessage) -> Streaming | None:
        """A native stream for the answer to ``msg`` (None: not streamed natively). Slack
        wants the recipient's team, which an event from another organisation's member does
        not give: that answer's draft is edited instead."""
        if not self.stream or msg.external:
            return None
        return Streaming(self.refusals, user_id=msg.user_id, team_id=msg.team_id)

    def sink(self, client: AsyncWebClient, msg: SlackMessage) -> ThreadReply:
        return ThreadReply(
            client,
            channel=msg.channel_id,
            thread_ts=msg.reply_thread_ts,
            scope=msg.scope,
            pacing=self.pacing,
            streaming=self.streaming(msg),
        )
