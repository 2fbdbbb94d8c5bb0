"""Posting one answer into a Slack thread: :class:`ThreadReply` is the core's ``ReplySink``
(its messages in the thread, the streamed draft edited with ``chat.update``); splitting
under the message limit and streaming are decided in :mod:`memory_core.service.conversation`.

Rate limits are not handled here: the client's retry handler waits ``ratelimited`` out.
A Slack failure is logged with the scope (never the text) and ends this answer; it never
reaches the event handler.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, nullcontext

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.links import permalink
from bots.slack.text import to_mrkdwn

log = logging.getLogger(__name__)

# Slack accepts 40,000 characters but shows long messages folded; ~3,500 reads well.
MESSAGE_CHARS = 3500

SEND_ERRORS = (SlackClientError, ClientError, TimeoutError, OSError)


class ThreadReply:
    """One answer in one thread (``thread_ts`` None: top level, as in a DM): the core's
    ``ReplySink``, posting with ``chat.postMessage`` and editing with ``chat.update``."""

    message_chars = MESSAGE_CHARS

    def __init__(
        self, client: AsyncWebClient, *, channel: str, thread_ts: str | None, scope: str
    ) -> None:
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.scope = scope
        self.posted: list[str] = []  # ts of every message of this answer

    def can_send(self) -> bool:
        return True  # Slack says no only when posting; the post logs it

    def typing(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()  # a bot has no typing indicator in the Web API

    def markup(self, text: str) -> str:
        return to_mrkdwn(text)

    async def post(self, *, text: str) -> str | None:
        try:
            response = await self.client.chat_postMessage(
                channel=self.channel, thread_ts=self.thread_ts, text=text
            )
        except SEND_ERRORS as exc:
            self._fail("post", exc)
            return None
        ts = str(response.get("ts", ""))
        self.posted.append(ts)
        return ts

    def message_id(self, handle: str) -> str:
        return handle  # its ts

    async def edit(self, *, handle: str, text: str) -> bool:
        try:
            await self.client.chat_update(channel=self.channel, ts=handle, text=text)
        except SEND_ERRORS as exc:
            self._fail("update", exc)
            return False
        return True

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        """A small italic link to the recalled message (``markup`` makes it ``<url|label>``)."""
        url = await permalink(self.client, channel=self.channel, ts=platform_id)
        return f"_[{label}]({url})_" if url else ""

    def _fail(self, what: str, exc: Exception) -> None:
        code = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
        log.warning("could not %s the reply in %s: %s", what, self.scope, code)
