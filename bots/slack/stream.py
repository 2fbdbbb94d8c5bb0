"""An answer streamed natively into its Slack thread (chat.startStream, chat.appendStream,
chat.stopStream): the core's draft of the answer (:class:`memory_core.service.streaming.Draft`)
as Slack shows it, growing in place, with Slack's own "still writing" look.

Slack's limits (each method's reference page; "Rate limits"), per app and workspace, are
counted fleet-wide (:class:`memory_core.fleet.pacing.Pacing`), so that any number of answers
at once, from any number of processes, stay within them:

==========================  =========================  ====================================
call                        Slack's limit              memorybot's allowance
==========================  =========================  ====================================
a new message in a channel  one a second, per channel  1 a second (posts, streams started)
chat.update                 Tier 3: 50+ a minute       5 every 6 s (the same 50 a minute;
                                                       a draft's edit takes from 3 of them)
chat.startStream            Tier 2: 20+ a minute       20 a minute
chat.appendStream           Tier 4: 100+ a minute      10 every 6 s (the same 100 a minute)
chat.stopStream             Tier 2: 20+ a minute       20 a minute
==========================  =========================  ====================================

A stream's growth (appends) goes only when there is room at that moment: the next one
shows more. A stream is started only when there is room too; an answer that found none is
posted whole when complete. Its end (the stop, or the update that completes it) waits for
its turn.

A workspace or plan that does not let the app stream (chat.startStream refused:
``missing_scope``, ``channel_type_not_supported``, ``not_allowed``, ``unknown_method``...)
gets the answer in one post; where the refusal is the workspace's or the conversation's,
it is not asked again for :data:`REFUSAL_MEMORY_S`. Once a stream has
started the answer is never posted again: the stop completes it, or (the stream timed out,
or its text changed on the way) chat.update replaces its text; only if that fails too is
what it lacks posted after it (the core's :func:`~memory_core.service.streaming.continuation`).
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.connect import DOOR_MAX_WAIT_S
from memory_core.fleet.pacing import Allowance, Pacing
from memory_core.service.streaming import Call, Shown

log = logging.getLogger(__name__)

POSTS_IN_A_CHANNEL = Allowance(calls=1, window_s=1.0)
UPDATES = Allowance(calls=5, window_s=6.0)
STARTS = Allowance(calls=20, window_s=60.0)
APPENDS = Allowance(calls=10, window_s=6.0)
STOPS = Allowance(calls=20, window_s=60.0)
#: How long a workspace (or channel) that refused a stream is not asked again.
REFUSAL_MEMORY_S = 600.0
#: chat.startStream errors that say the workspace does not let the app stream at all.
WORKSPACE_REFUSALS = frozenset(
    {
        "not_allowed",
        "not_allowed_token_type",
        "missing_scope",
        "unknown_method",
        "method_deprecated",
        "access_denied",
        "enterprise_is_restricted",
        "feature_not_enabled",
    }
)
#: ... and those that say this conversation does not take streams.
CHANNEL_REFUSALS = frozenset(
    {
        "channel_type_not_supported",
        "method_not_supported_for_channel_type",
        "restricted_action",
        "restricted_action_non_threadable_channel",
        "restricted_action_read_only_channel",
        "restricted_action_thread_locked",
        "messages_tab_disabled",
    }
)
NOT_STREAMING = "message_not_in_streaming_state"


class StreamRefusals:
    """Where Slack refused to stream lately (a workspace, or one of its conversations), so
    that an answer there is posted at once instead of asking again (one process's memory)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def refused(self, team_id: str, channel: str) -> bool:
        now = time.monotonic()
        return any(self._until.get(key, 0.0) > now for key in (team_id, f"{team_id}:{channel}"))

    def note(self, team_id: str, channel: str, error: str) -> None:
        if error in WORKSPACE_REFUSALS:
            self._until[team_id] = time.monotonic() + REFUSAL_MEMORY_S
        elif error in CHANNEL_REFUSALS:
            self._until[f"{team_id}:{channel}"] = time.monotonic() + REFUSAL_MEMORY_S


class StreamSink(Protocol):
    """What a stream needs of the answer's sink (:class:`bots.slack.send.ThreadReply`)."""

    client: AsyncWebClient
    channel: str
    thread_ts: str | None
    scope: str
    team_id: str
    posted: list[str]
    send_errors: tuple[type[Exception], ...]

    async def room(self, call: Call, *, wait: bool) -> bool: ...

    async def edit(self, *, handle: str, text: str) -> bool: ...

    def fail(self, what: str, exc: Exception) -> None: ...


class NativeStream:
    """The draft of one answer as a Slack stream in the answer's thread."""

    mark = ""  # Slack shows that a stream is still coming

    def __init__(
        self,
        reply: StreamSink,
        *,
        pacing: Pacing,
        refusals: StreamRefusals,
        recipient_user_id: str,
        recipient_team_id: str,
    ) -> None:
        if reply.thread_ts is None:
            raise ValueError("a Slack stream is a reply in a thread")
        self.reply = reply
        self.thread_ts = reply.thread_ts
        self.pacing = pacing
        self.refusals = refusals
        self.recipient_user_id = recipient_user_id
        self.recipient_team_id = recipient_team_id
        self._ts: str | None = None
        self._sent = ""  # what the stream reads
        self._streaming = False  # started, and neither stopped nor timed out

    @property
    def handle(self) -> str | None:
        return self._ts

    @property
    def said(self) -> str:
        return self._sent

    def _name(self, method: str) -> str:
        return f"slack:{self.reply.team_id}:{method}"

    async def update(self, text: str) -> Shown:
        if self._ts is None:
            return await self._start(text)
        if not self._streaming:
            return Shown.NO
        if text == self._sent:
            return Shown.YES
        if not text.startswith(self._sent):
            return Shown.LATER  # its text changed on the way: the end replaces it
        if not await self.pacing.now(self._name("chat.appendStream"), APPENDS):
            return Shown.LATER
        try:
            await self.reply.client.chat_appendStream(
                channel=self.reply.channel, ts=self._ts, markdown_text=text[len(self._sent) :]
            )
        except SlackApiError as exc:
            self._failed("append to", exc)
            return Shown.NO
        except self.reply.send_errors as exc:
            self.reply.fail("append to the stream of", exc)
            return Shown.NO
        self._sent = text
        return Shown.YES

    async def _start(self, text: str) -> Shown:
        reply = self.reply
        if self.refusals.refused(reply.team_id, reply.channel):
            return Shown.NO
        if not await reply.room("post", wait=False):
            return Shown.LATER
        if not await self.pacing.now(self._name("chat.startStream"), STARTS):
            return Shown.LATER
        try:
            response = await reply.client.chat_startStream(
                channel=reply.channel,
                thread_ts=self.thread_ts,
                markdown_text=text,
                recipient_user_id=self.recipient_user_id,
                recipient_team_id=self.recipient_team_id,
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error", ""))
            self.refusals.note(reply.team_id, reply.channel, error)
            log.info(
                "Slack did not start a stream in %s (%s): the answer is posted whole",
                reply.scope,
                error,
            )
            return Shown.NO
        except reply.send_errors as exc:
            reply.fail("start the stream of", exc)
            return Shown.NO
        self._ts, self._sent, self._streaming = str(response.get("ts", "")), text, True
        reply.posted.append(self._ts)
        return Shown.YES

    async def complete(self, text: str) -> bool:
        if self._ts is None:
            return False
        if self._streaming:
            rest = text[len(self._sent) :] if text.startswith(self._sent) else ""
            await self.pacing.wait(self._name("chat.stopStream"), STOPS, max_wait_s=DOOR_MAX_WAIT_S)
            try:
                await self.reply.client.chat_stopStream(
                    channel=self.reply.channel, ts=self._ts, markdown_text=rest or None
                )
            except SlackApiError as exc:
                self._failed("stop", exc)
            except self.reply.send_errors as exc:
                self.reply.fail("stop the stream of", exc)
            else:
                self._streaming = False
                if text.startswith(self._sent):
                    self._sent = text
        if self._sent == text:
            return True
        # Stopped (or timed out) without reading ``text``: its text is replaced, as any
        # message of the app's can be.
        await self.reply.room("edit", wait=True)
        if await self.reply.edit(handle=self._ts, text=text):
            self._sent = text
            return True
        return False

    def _failed(self, what: str, exc: SlackApiError) -> None:
        if exc.response.get("error") == NOT_STREAMING:
            self._streaming = False  # Slack ended it (it had waited too long for more)
        self.reply.fail(f"{what} the stream of", exc)
