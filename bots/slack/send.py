"""Posting one answer into a Slack thread: split under the message limit, and optionally
streamed (one message edited with ``chat.update`` at most once per interval while the model
writes, then completed, with any overflow posted as further messages in the thread).

Rate limits are not handled here: the client's retry handler waits ``ratelimited`` out.
A Slack failure is logged with the scope (never the text) and ends this answer; it never
reaches the event handler.
"""

from __future__ import annotations

import logging

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bots.frontdoor import Throttle, split_message
from bots.slack.text import to_mrkdwn

log = logging.getLogger(__name__)

# Slack accepts 40,000 characters but shows long messages folded; ~3,500 reads well.
MESSAGE_CHARS = 3500
STREAMING_MARK = " …"

SEND_ERRORS = (SlackClientError, ClientError, TimeoutError, OSError)


def chunks_of(text: str) -> list[str]:
    """The messages an answer becomes, each within MESSAGE_CHARS."""
    return split_message(to_mrkdwn(text), MESSAGE_CHARS)


class ThreadReply:
    """One answer in one thread (``thread_ts`` None: top level, as in a DM)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str | None,
        scope: str,
        stream_interval_s: float | None = None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.scope = scope
        self.posted: list[str] = []  # ts of every message of this answer
        self._throttle = Throttle(stream_interval_s) if stream_interval_s else None
        self._shown = ""  # what the first message shows now
        self._failed = False

    async def progress(self, text_so_far: str) -> None:
        """The pipeline's on_progress: show the answer growing, throttled."""
        if self._throttle is None or self._failed or not self._throttle.ready():
            return
        chunks = chunks_of(text_so_far)
        if not chunks:
            return
        # The first message only; what overflows is posted when the answer is complete.
        shown = chunks[0] + STREAMING_MARK
        await (self._update(shown) if self.posted else self._post(shown))

    async def finish(self, text: str) -> bool:
        """Post (or complete) the answer. Returns whether all of it was posted."""
        chunks = chunks_of(text)
        if not chunks:
            return False
        rest = chunks
        if self.posted and (chunks[0] == self._shown or await self._update(chunks[0])):
            rest = chunks[1:]
        # else: nothing streamed, or the last edit failed: the whole answer as new messages.
        for chunk in rest:
            if not await self._post(chunk):
                return False
        return True

    async def _update(self, text: str) -> bool:
        try:
            await self.client.chat_update(channel=self.channel, ts=self.posted[0], text=text)
        except SEND_ERRORS as exc:
            self._fail("update", exc)
            return False
        self._shown = text
        return True

    async def _post(self, text: str) -> bool:
        try:
            response = await self.client.chat_postMessage(
                channel=self.channel, thread_ts=self.thread_ts, text=text
            )
        except SEND_ERRORS as exc:
            self._fail("post", exc)
            return False
        self.posted.append(str(response.get("ts", "")))
        if len(self.posted) == 1:
            self._shown = text
        return True

    def _fail(self, what: str, exc: Exception) -> None:
        self._failed = True
        code = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
        log.warning("could not %s the reply in %s: %s", what, self.scope, code)
