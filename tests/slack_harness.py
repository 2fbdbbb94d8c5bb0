"""The Slack app the end-to-end tests drive: the workspace on the fake Slack, the app's settings,
and a harness that runs the real Bolt app (over signed HTTP or Socket Mode) and speaks Slack to
it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bots.learn.slack_history import SlackHistory, slack_past
from bots.slack.bot import SlackBot, build_app
from bots.slack.connect import build_client, connect_socket, serve_http
from memory_core.bootstrap import Core
from memory_core.models import LogEntry
from memory_core.service.past import PastMessage, PastPage
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.fakes.slack import (
    FakeSlack,
    ResponseUrlPost,
    event_body,
    interactive_form_body,
    send_signed,
    slash_command_form_body,
)
from tests.helpers import (
    SLACK_MANIFEST,
    slack_bot_scopes,
    slack_manifest_list,
)

BOT_TOKEN = "xoxb-test-bot-token"


APP_TOKEN = "xapp-1-test-app-token"


SECRET = "test-signing-secret"


BOT = "UBOT"


T1, T2 = "T1", "T2"


ALICE, BOB, CAROL, DAVE = "U1", "U2", "U3", "U4"  # workspace admin, member, configured admin, T2


C1, SYNC, DM = "C1", "CSYNC", "D1"


SCOPE = f"slack:{T1}:{C1}"


def slack_app_options() -> dict[str, Any]:
    """The fake Slack as the manifest installs the app: its scopes, the events it subscribes
    to, its Home tab, its assistant panel."""
    manifest = SLACK_MANIFEST.read_text(encoding="utf-8")
    return {
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "team_id": T1,
        "bot_user_id": BOT,
        "scopes": slack_bot_scopes(),
        "bot_events": slack_manifest_list("bot_events"),
        "home_tab_enabled": "home_tab_enabled: true" in manifest,
        "assistant_view": "\n  assistant_view:" in manifest,
    }


def slack_workspace(server: FakeSlack) -> None:
    """Alice (a workspace admin), Bob, Carol (an admin by configuration), Dave (in T2);
    #general, #sync and Alice's DM with the bot."""
    server.add_user(ALICE, "alice", display_name="Alice", is_admin=True)
    server.add_user(BOB, "bob", display_name="", real_name="Bob Builder")
    server.add_user(CAROL, "carol", display_name="Carol")
    server.add_user(DAVE, "dave", display_name="Dave", team_id=T2, is_owner=True)
    server.add_channel(C1, "general")
    server.add_channel(SYNC, "sync")
    server.add_channel(DM, DM, is_im=True, user_id=ALICE)


def slack_settings(fake: FakeSlack, **extra: Any) -> dict[str, Any]:
    return {
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "signing_secret": SECRET,
        "api_base_url": fake.api_url,
        "admin_user_ids": [CAROL],
        **extra,
    }


@dataclass
class Harness:
    """The running app plus helpers that speak Slack to it, over HTTP or Socket Mode."""

    mode: str
    fake: FakeSlack
    core: Core
    bot: SlackBot
    llm: FakeOpenAI
    url: str = ""

    async def deliver(
        self, event: dict[str, Any], *, team_id: str = T1, event_id: str | None = None
    ) -> None:
        payload = self.fake.event_payload(event=event, team_id=team_id, event_id=event_id)
        if self.mode == "http":
            sent = await send_signed(self.url, signing_secret=SECRET, body=event_body(payload))
            assert sent.status == 200
        else:
            await self.fake.socket_send_event(event=payload)

    async def say(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = C1,
        team_id: str = T1,
        thread_ts: str | None = None,
        channel_type: str = "channel",
    ) -> dict[str, Any]:
        event = self.fake.message_event(
            text=text,
            user_id=user,
            channel_id=channel,
            thread_ts=thread_ts,
            channel_type=channel_type,  # type: ignore[arg-type]
            team_id=team_id,
        )
        await self.deliver(event, team_id=team_id)
        return event

    async def mention(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = C1,
        team_id: str = T1,
        thread_ts: str | None = None,
        app_mention_first: bool = True,
    ) -> dict[str, Any]:
        """What Slack sends for an @mention in a channel: app_mention AND message, same ts."""
        mention = self.fake.app_mention_event(
            text=f"<@{BOT}> {text}",
            user_id=user,
            channel_id=channel,
            thread_ts=thread_ts,
            team_id=team_id,
        )
        message = self.fake.message_event(
            text=mention["text"],
            user_id=user,
            channel_id=channel,
            ts=mention["ts"],
            thread_ts=thread_ts,
            team_id=team_id,
        )
        for event in (mention, message) if app_mention_first else (message, mention):
            await self.deliver(event, team_id=team_id)
        return message

    async def command(
        self, text: str, *, user: str = ALICE, channel: str = C1, team_id: str = T1
    ) -> ResponseUrlPost:
        fields = self.fake.slash_command_payload(
            text=text, user_id=user, channel_id=channel, team_id=team_id
        )
        await self.send_command(fields)
        return await self.response_to(fields["response_url"])

    async def send_command(self, fields: dict[str, str]) -> None:
        """Deliver a slash command's form fields as Slack does (acked at once)."""
        if self.mode == "http":
            started = time.monotonic()
            sent = await send_signed(
                self.url, signing_secret=SECRET, body=slash_command_form_body(fields)
            )
            # Acked at once (an empty 200), well within Slack's 3 seconds; work comes after.
            assert (sent.status, sent.text) == (200, "")
            assert time.monotonic() - started < 3.0
        else:
            ack = await self.fake.socket_send_slash_command(payload=fields)
            assert ack.payload is None

    async def click(
        self, action_id: str, value: str, *, user: str = ALICE, channel: str = C1
    ) -> ResponseUrlPost:
        # The forget-all buttons are in an ephemeral /memory answer: Slack's ephemeral shape.
        payload = self.fake.block_action_payload(
            action_id=action_id, value=value, user_id=user, channel_id=channel, ephemeral=True
        )
        await self.send_click(payload)
        return await self.response_to(payload["response_url"])

    async def send_click(self, payload: dict[str, Any]) -> None:
        """Deliver a ``block_actions`` payload as Slack does."""
        if self.mode == "http":
            body = interactive_form_body(payload)
            sent = await send_signed(self.url, signing_secret=SECRET, body=body)
            assert sent.status == 200
        else:
            await self.fake.socket_send_interactive(payload=payload)

    async def response_to(self, response_url: str) -> ResponseUrlPost:
        response_id = response_url.rsplit("/", 1)[1]

        def found() -> ResponseUrlPost | None:
            return next((r for r in self.fake.responses if r.response_id == response_id), None)

        return await self.fake.wait_for(found, description=f"a response to {response_id}")

    async def settle(self) -> None:
        """Everything sent so far has been handled (see the module docstring)."""
        await self.command("help", channel=SYNC)
        await self.bot.drain()

    async def replies(self, count: int) -> list[Any]:
        """Wait until ``count`` messages were posted in all (the app posts a new message in
        a channel at most once a second, as Slack asks: answers at once come a second apart)."""
        messages = await self.fake.wait_for_messages(count=count, timeout=5.0 + 1.5 * count)
        await self.bot.drain()
        return messages


async def start_harness(
    mode: str, fake: FakeSlack, core: Core, llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    bot = SlackBot(core)
    app = build_app(core, bot=bot)
    if mode == "http":
        async with serve_http(app, host="127.0.0.1", port=0) as url:
            yield Harness(mode, fake, core, bot, llm, url)
            await bot.drain()
    else:
        handler = await connect_socket(app, APP_TOKEN)
        try:
            yield Harness(mode, fake, core, bot, llm)
            await bot.drain()
        finally:
            # Before the fake stops: a socket the server closes would reconnect.
            await handler.close_async()  # type: ignore[no-untyped-call]


async def entries(core: Core, scope: str = SCOPE) -> list[LogEntry]:
    return await core.repo.reads.all_entries(scope)


def user_texts(log: list[LogEntry]) -> list[str]:
    return [e.text for e in log if e.role == "user"]


def block_texts(response: ResponseUrlPost) -> str:
    parts = []
    for block in response.blocks or []:
        text = block.get("text")
        if isinstance(text, dict):
            parts.append(str(text.get("text", "")))
    return "\n".join(parts)


PHONE = "555-0142"


SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 4, "compact_keep_tokens": 20}


def quiet_replies(answer: Callable[[RecordedRequest], str]) -> Callable[[RecordedRequest], str]:
    """Summaries and facts that quote everything; answers that quote nothing (an answer is
    the bot's own words: deleting the question does not delete it)."""
    return lambda request: "Noted." if request.purpose == "reply" else answer(request)


# -- a channel's past (bots/learn/slack_history.py) --------------------------------------------
PAST_START = 1_600_000_000  # the first past message's second; one message every 10 s after it
SINCE = datetime.fromtimestamp(PAST_START, tz=UTC)


@dataclass
class VirtualTime:
    """The source's clock and sleep, without sleeping: a wait moves this clock and the fake
    Slack's rate windows (``age_rate_windows``) by as much, and is recorded."""

    fake: FakeSlack
    now: float = 0.0
    waits: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        self.fake.age_rate_windows(seconds)
        await asyncio.sleep(0)


def past_ts(index: int, reply: int = 0) -> str:
    """The ts of the ``index``-th past message of the channel, or of its ``reply``-th reply."""
    return f"{PAST_START + index * 10}.{reply:06d}"


def seed_past(
    fake: FakeSlack,
    *,
    channel: str = C1,
    messages: int = 2_000,
    threads: dict[int, int] | None = None,
) -> list[tuple[str, str, str, str]]:
    """Fill ``channel``'s past: ``messages`` said by Alice, Bob and Carol in turn (every
    seventh one mentions Bob), ``threads`` (the index of a parent -> its number of replies).
    Returns what memory should learn of it: (scope, platform id, text, author)."""
    names = {ALICE: "Alice", BOB: "Bob Builder", CAROL: "Carol"}
    authors = list(names)
    said: list[dict[str, Any]] = []
    expected: list[tuple[str, str, str, str]] = []
    channel_scope = f"slack:{T1}:{channel}"
    for index in range(messages):
        author = authors[index % 3]
        mention = index % 7 == 0
        text = f"message {index}" + (f" for <@{BOB}>" if mention else "")
        ts = past_ts(index)
        said.append(fake.message_event(text=text, user_id=author, channel_id=channel, ts=ts))
        shown = f"message {index}" + (" for @Bob Builder" if mention else "")
        expected.append((channel_scope, ts, shown, names[author]))
        for reply in range(1, (threads or {}).get(index, 0) + 1):
            replier = authors[(index + reply) % 3]
            reply_ts = past_ts(index, reply)
            said.append(
                fake.message_event(
                    text=f"reply {reply} to {index}",
                    user_id=replier,
                    channel_id=channel,
                    ts=reply_ts,
                    thread_ts=ts,
                )
            )
            expected.append(
                (f"{channel_scope}:{ts}", reply_ts, f"reply {reply} to {index}", names[replier])
            )
    fake.add_history(channel, said)
    return expected


def past_source(
    bot: SlackBot,
    time_: VirtualTime,
    *,
    channel: str = C1,
    restricted: bool = False,
    **options: Any,
) -> SlackHistory:
    """The door's source of ``channel``'s past, with the door's own client (which retries
    429s itself), on virtual time."""
    return slack_past(
        bot,
        build_client(bot.settings),
        team_id=T1,
        channel_id=channel,
        bot_user_id=BOT,
        bot_id="BBOT",
        restricted=restricted,
        sleep=time_.sleep,
        clock=time_.clock,
        **options,
    )


async def read_past(
    source: SlackHistory, *, cursor: str = "", since: datetime = SINCE
) -> list[PastPage]:
    return [page async for page in source.pages(since, cursor)]


def learned(pages: list[PastPage]) -> list[tuple[str, str, str, str]]:
    return [(m.scope, m.platform_id, m.text, m.author) for m in past_messages(pages)]


def past_messages(pages: list[PastPage]) -> list[PastMessage]:
    return [message for page in pages for message in page.messages]


async def said(slack: Harness, response_id: str, start: str) -> str:
    """The answer to one command that starts with ``start`` (its answer is replaced as the
    learn goes)."""

    def found() -> str | None:
        return next(
            (
                r.text
                for r in slack.fake.responses
                if r.response_id == response_id and (r.text or "").startswith(start)
            ),
            None,
        )

    return await slack.fake.wait_for(found, timeout=20, description=f"an answer {start!r}")


async def learn(slack: Harness, words: str, start: str, *, user: str = ALICE) -> str:
    """``/memory ...`` by ``user`` in C1 (``learn 30``, ``learn confirm``); its answer that
    starts with ``start``."""
    fields = slack.fake.slash_command_payload(
        text=words, user_id=user, channel_id="C1", team_id="T1"
    )
    await slack.send_command(fields)
    return await said(slack, fields["response_url"].rsplit("/", 1)[1], start)
