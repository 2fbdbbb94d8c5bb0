"""Links to Slack messages, for ``/memory why`` and source lines: ``chat.getPermalink``
(no scope needed; a thread reply's permalink carries ``thread_ts`` and ``cid``). A lookup
that fails (a deleted message, a channel the bot lost) is logged and gives no link: a link
is decoration and never fails the command or the answer."""

from __future__ import annotations

import logging

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bots.why import Linker

log = logging.getLogger(__name__)

LOOKUP_ERRORS = (SlackClientError, ClientError, TimeoutError, OSError)


async def permalink(client: AsyncWebClient, *, channel: str, ts: str) -> str:
    """The message's permalink, "" when Slack has none for it."""
    if not ts:
        return ""
    try:
        response = await client.chat_getPermalink(channel=channel, message_ts=ts)
    except LOOKUP_ERRORS as exc:
        code = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
        log.warning("no permalink for a message in %s: %s", channel, code)
        return ""
    url = response.get("permalink")
    return url if isinstance(url, str) and url.startswith("https://") else ""


def permalinks(client: AsyncWebClient, channel: str) -> Linker:
    """The :data:`~bots.why.Linker` of a channel: its messages' permalinks by ts."""

    async def link(ts: str, in_parent: bool) -> str:  # a thread's messages are its channel's
        return await permalink(client, channel=channel, ts=ts)

    return link
