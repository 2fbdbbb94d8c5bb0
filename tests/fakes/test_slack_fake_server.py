"""Proves that tests/fakes/slack/ is a Slack the real Bolt ``AsyncApp`` can talk to.

The app here is a throwaway: an ``app_mention`` echo in thread, a ``/memory`` command that
answers ephemerally through response_url (or exports a JSON file), a button handler, a
message shortcut answered through its response_url, and a Home tab published when opened
and republished when its button is clicked.
It is served both in HTTP mode (signed requests to Bolt's aiohttp server) and in Socket Mode
(Bolt's ``AsyncSocketModeHandler`` connected to the fake's WebSocket).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond, AsyncSay
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from tests.fakes.slack import (
    FakeSlack,
    RecordedMessage,
    event_body,
    interactive_form_body,
    send_signed,
    serve_web_app,
    signed_headers,
    slash_command_form_body,
)

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-1-test-app-token"
SIGNING_SECRET = "test-signing-secret"
TEAM_ID = "T1"
BOT_USER_ID = "UBOT"
ALICE = "U1"
CHANNEL = "C1"
LISTENER_TIMEOUT = 10.0


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice", real_name="Alice Liddell", is_admin=True)
    server.add_channel(CHANNEL, "general", members=[ALICE])


pytestmark = pytest.mark.fake(
    "slack",
    bot_token=BOT_TOKEN,
    app_token=APP_TOKEN,
    team_id=TEAM_ID,
    bot_user_id=BOT_USER_ID,
    setup=workspace,
)


@dataclass
class ThrowawayApp:
    """A Bolt app plus what its listeners saw, and events to await their completion."""

    app: AsyncApp
    mentions: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    shortcuts: list[dict[str, Any]] = field(default_factory=list)
    homes: list[dict[str, Any]] = field(default_factory=list)
    listener_errors: list[BaseException] = field(default_factory=list)
    # Bolt runs listeners in background tasks after acking, so tests wait on these before
    # asserting and before tearing down (no task left half-way when the loop closes).
    mention_done: asyncio.Event = field(default_factory=asyncio.Event)
    command_done: asyncio.Event = field(default_factory=asyncio.Event)
    action_done: asyncio.Event = field(default_factory=asyncio.Event)
    shortcut_done: asyncio.Event = field(default_factory=asyncio.Event)
    home_done: asyncio.Event = field(default_factory=asyncio.Event)


def home_view(text: str) -> dict[str, Any]:
    """A Home tab: a line of text and a button."""
    button = {
        "type": "button",
        "action_id": "home_forget",
        "text": {"type": "plain_text", "text": "Forget"},
        "value": "all",
    }
    return {
        "type": "home",
        "blocks": [section(text), {"type": "actions", "elements": [button]}],
    }


def build_app(
    fake: FakeSlack, *, token: str = BOT_TOKEN, retry_on_429: bool = False
) -> ThrowawayApp:
    retry_handlers: list[AsyncRetryHandler] = [AsyncConnectionErrorRetryHandler()]
    if retry_on_429:
        retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))
    # Bolt copies base_url/retry handlers of this client into the per-request client it gives
    # listeners (context.client, say), and the Socket Mode handler uses it for
    # apps.connections.open, so this one client points everything at the fake.
    client = AsyncWebClient(token=token, base_url=fake.api_url, retry_handlers=retry_handlers)
    app = AsyncApp(client=client, signing_secret=SIGNING_SECRET)
    state = ThrowawayApp(app=app)

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], say: AsyncSay) -> None:
        try:
            state.mentions.append(event)
            await say(
                text=f"echo: {event['text']}", thread_ts=event.get("thread_ts") or event["ts"]
            )
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.mention_done.set()

    @app.command("/memory")
    async def on_memory(
        ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        try:
            state.commands.append(command)
            if command["text"] == "export":
                export = {"channel": command["channel_id"], "facts": ["likes tea"]}
                await client.files_upload_v2(
                    channel=command["channel_id"],
                    filename="memory.json",
                    content=json.dumps(export).encode("utf-8"),
                    title="Memory export",
                    initial_comment="Here is what I remember.",
                )
            else:
                await respond(text=f"memory: {command['text']}", response_type="ephemeral")
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.command_done.set()

    @app.action("forget_button")
    async def on_forget(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        try:
            state.actions.append(body)
            await respond(text="Forgotten.", replace_original=True)
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.action_done.set()

    @app.message_shortcut("remember_this")
    async def on_remember(ack: AsyncAck, shortcut: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        try:
            state.shortcuts.append(shortcut)
            text = shortcut["message"].get("text", "")
            await respond(text=f"remembered: {text}", response_type="ephemeral")
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.shortcut_done.set()

    @app.event("app_home_opened")
    async def on_home(event: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            state.homes.append(event)
            if event.get("tab") == "home":
                await client.views_publish(user_id=event["user"], view=home_view("Remembered."))
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.home_done.set()

    @app.action("home_forget")
    async def on_home_forget(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        try:
            state.actions.append(body)
            # The view's hash guards against publishing over a newer tab.
            await client.views_publish(
                user_id=body["user"]["id"], view=home_view("Forgotten."), hash=body["view"]["hash"]
            )
        except BaseException as exc:
            state.listener_errors.append(exc)
            raise
        finally:
            state.action_done.set()

    return state


@pytest.fixture
async def bolt_http_url(fake: FakeSlack) -> AsyncIterator[tuple[ThrowawayApp, str]]:
    state = build_app(fake)
    async with serve_web_app(state.app.web_app(path="/slack/events")) as base:
        yield state, f"{base}/slack/events"


@pytest.fixture
async def bolt_socket(fake: FakeSlack) -> AsyncIterator[ThrowawayApp]:
    state = build_app(fake)
    handler = AsyncSocketModeHandler(state.app, APP_TOKEN)
    await handler.connect_async()
    try:
        yield state
    finally:
        # Close the client before the fake stops: a socket closed by the server would make
        # slack_sdk reconnect against a server that is going away.
        await handler.close_async()


async def wait(event: asyncio.Event) -> None:
    """Wait for a listener to finish (bounded, so a broken listener fails fast)."""
    async with asyncio.timeout(LISTENER_TIMEOUT):
        await event.wait()


# ------------------------------------------------------------------------------- (a) HTTP mode


async def test_http_mode_mention_gets_a_threaded_reply(
    fake: FakeSlack, bolt_http_url: tuple[ThrowawayApp, str]
) -> None:
    state, url = bolt_http_url
    event = fake.app_mention_event(text="remember tea", user_id=ALICE, channel_id=CHANNEL)
    delivery = await send_signed(
        url, signing_secret=SIGNING_SECRET, body=event_body(fake.event_payload(event=event))
    )
    assert delivery.status == 200

    [reply] = await fake.wait_for_messages(count=1)
    await wait(state.mention_done)
    assert state.listener_errors == []
    assert reply.channel == CHANNEL
    assert reply.thread_ts == event["ts"]
    assert reply.text == f"echo: <@{BOT_USER_ID}> remember tea"
    post = fake.calls_of("chat.postMessage")[0]
    assert post.token == BOT_TOKEN
    # Bolt resolves the bot identity lazily with auth.test on the first request.
    assert [c.method for c in fake.calls] == ["auth.test", "chat.postMessage"]


async def test_http_mode_rejects_bad_signature_and_stale_timestamp(
    fake: FakeSlack, bolt_http_url: tuple[ThrowawayApp, str]
) -> None:
    state, url = bolt_http_url
    body = event_body(
        fake.event_payload(
            event=fake.app_mention_event(text="hi", user_id=ALICE, channel_id=CHANNEL)
        )
    )

    wrong = await send_signed(url, signing_secret="not-the-secret", body=body)
    assert wrong.status == 401

    # Signed correctly but six minutes old: Bolt allows five minutes of clock skew.
    stale = await send_signed(
        url, signing_secret=SIGNING_SECRET, body=body, timestamp=int(time.time()) - 6 * 60
    )
    assert stale.status == 401

    # Request verification runs before authorization: nothing reached the fake or a listener.
    assert fake.calls == []
    assert state.mentions == []

    # A valid request afterwards is handled, and it is the only one that ever was.
    ok = await send_signed(url, signing_secret=SIGNING_SECRET, body=body)
    assert ok.status == 200
    await fake.wait_for_messages(count=1)
    await wait(state.mention_done)
    assert len(state.mentions) == 1


def test_signed_headers_match_the_sdk_verifier() -> None:
    body = slash_command_form_body({"command": "/memory", "text": "show"})
    headers = signed_headers(SIGNING_SECRET, body)
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert SignatureVerifier(SIGNING_SECRET).is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    old = signed_headers(SIGNING_SECRET, body, timestamp=int(time.time()) - 600)
    assert not SignatureVerifier(SIGNING_SECRET).is_valid_request(body, old)


# ----------------------------------------------------------------------------- (b) Socket Mode


async def test_socket_mode_mention_is_acked_and_answered(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    event = fake.app_mention_event(
        text="what do you know?", user_id=ALICE, channel_id=CHANNEL, thread_ts="1700000000.000100"
    )
    ack = await fake.socket_send_event(event=event)

    assert ack.payload is None  # events are acked with the envelope_id only
    [envelope] = fake.socket_envelopes
    assert ack.envelope_id == envelope.envelope_id
    assert envelope.type == "events_api"
    [reply] = await fake.wait_for_messages(count=1)
    await wait(bolt_socket.mention_done)
    assert reply.thread_ts == "1700000000.000100"  # stays in the existing thread
    assert reply.channel == CHANNEL
    assert fake.calls_of("apps.connections.open")[0].token == APP_TOKEN
    assert fake.open_socket_count == 1


async def test_socket_mode_survives_a_server_requested_reconnect(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    await fake.socket_request_reconnect()
    # slack_sdk asked for a fresh URL and closed the old socket before opening the new one.
    assert len(fake.calls_of("apps.connections.open")) == 2

    await fake.socket_send_event(
        event=fake.app_mention_event(text="still there?", user_id=ALICE, channel_id=CHANNEL)
    )
    await fake.wait_for_messages(count=1)
    await wait(bolt_socket.mention_done)


async def test_bolt_reports_a_revoked_token_in_the_ack(fake: FakeSlack) -> None:
    fake.invalidate_token("xoxb-revoked")
    state = build_app(fake, token="xoxb-revoked")
    handler = AsyncSocketModeHandler(state.app, APP_TOKEN)
    await handler.connect_async()
    try:
        event = fake.app_mention_event(text="hi", user_id=ALICE, channel_id=CHANNEL)
        ack = await fake.socket_send_event(event=event)
        # Bolt's authorization middleware turns invalid_auth into a user-facing text ack and
        # never runs the listener.
        assert ack.payload is not None
        assert "no longer available" in ack.payload["text"]
        assert state.mentions == []
        [auth] = fake.calls_of("auth.test")
        assert auth.error == "invalid_auth"
    finally:
        await handler.close_async()


async def test_bolt_calls_auth_test_once_and_caches_it(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    for n in range(2):
        bolt_socket.mention_done.clear()
        fake.age_rate_windows(1.0)  # a second apart: one answer a second in a channel
        await fake.socket_send_event(
            event=fake.app_mention_event(text=f"ping {n}", user_id=ALICE, channel_id=CHANNEL)
        )
        await fake.wait_for_messages(count=n + 1)
        await wait(bolt_socket.mention_done)
    # Nothing at construction time: the first request triggers auth.test, later ones reuse it.
    assert len(fake.calls_of("auth.test")) == 1


async def test_message_events_from_the_bot_itself_are_ignored(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    app = AsyncApp(client=client)
    seen: list[str] = []
    done = asyncio.Event()

    @app.event("message")
    async def on_message(event: dict[str, Any], say: AsyncSay) -> None:
        seen.append(event["text"])
        await say(text="noted", thread_ts=event["ts"])
        done.set()

    handler = AsyncSocketModeHandler(app, APP_TOKEN)
    await handler.connect_async()
    try:
        own = fake.message_event(
            text="I said this", user_id=BOT_USER_ID, channel_id=CHANNEL, bot_id="BBOT"
        )
        await fake.socket_send_event(event=own)
        human = fake.message_event(text="remember: tea", user_id=ALICE, channel_id=CHANNEL)
        await fake.socket_send_event(event=human)
        [reply] = await fake.wait_for_messages(count=1)
        await wait(done)
    finally:
        await handler.close_async()
    # Bolt dropped the bot's own message in its middleware (it knows UBOT from auth.test).
    assert seen == ["remember: tea"]
    assert reply.thread_ts == human["ts"]


async def test_edits_and_tombstones_reach_bolts_message_listener(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    app = AsyncApp(client=client)
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @app.event("message")
    async def on_message(event: dict[str, Any], say: AsyncSay) -> None:
        await seen.put(event)
        if "subtype" not in event:
            await say(text="noted", thread_ts=event["ts"])

    handler = AsyncSocketModeHandler(app, APP_TOKEN)
    await handler.connect_async()
    try:
        said = fake.message_event(text="my pin is 1234", user_id=ALICE, channel_id=CHANNEL)
        with pytest.raises(ValueError, match="message_deleted"):
            fake.tombstone_event(parent=said)  # no replies yet: Slack would delete it
        await fake.socket_send_event(event=said)
        await asyncio.wait_for(seen.get(), 5)
        await fake.wait_for_messages(count=1)
        for event in (
            fake.message_changed_event(original=said, text="my pin is secret"),
            fake.tombstone_event(parent=said),
        ):
            await fake.socket_send_event(event=event)
        edit, tombstone = [await asyncio.wait_for(seen.get(), 5) for _ in range(2)]
    finally:
        await handler.close_async()
    assert (edit["subtype"], edit["hidden"], edit["channel"]) == ("message_changed", True, CHANNEL)
    assert edit["message"]["ts"] == said["ts"] != edit["ts"]
    assert edit["message"]["edited"] == {"user": ALICE, "ts": edit["ts"]}
    assert (edit["message"]["text"], edit["previous_message"]["text"]) == (
        "my pin is secret",
        "my pin is 1234",
    )
    gone = tombstone["message"]
    assert (gone["subtype"], gone["user"], gone["ts"], gone["thread_ts"]) == (
        "tombstone",
        "USLACKBOT",
        said["ts"],
        said["ts"],
    )
    assert gone["reply_count"] == 1 and tombstone["previous_message"]["text"] == "my pin is 1234"


# ---------------------------------------------------------------------- (c) /memory + respond


async def test_slash_command_over_http_responds_ephemerally(
    fake: FakeSlack, bolt_http_url: tuple[ThrowawayApp, str]
) -> None:
    state, url = bolt_http_url
    fields = fake.slash_command_payload(
        command="/memory", text="show", user_id=ALICE, channel_id=CHANNEL
    )
    delivery = await send_signed(
        url, signing_secret=SIGNING_SECRET, body=slash_command_form_body(fields)
    )
    assert delivery.status == 200
    assert delivery.text == ""  # ack() without arguments: an empty 200

    [response] = await fake.wait_for_responses(count=1)
    await wait(state.command_done)
    assert response.response_type == "ephemeral"
    assert response.text == "memory: show"
    assert fields["response_url"].endswith(f"/response/{response.response_id}")
    # respond() goes to the response_url, not to the Web API.
    assert fake.calls_of("chat.postEphemeral") == []
    assert state.commands[0]["user_name"] == "alice"


async def test_slash_command_over_socket_mode_responds_ephemerally(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    fields = fake.slash_command_payload(
        command="/memory", text="show", user_id=ALICE, channel_id=CHANNEL, team_id=TEAM_ID
    )
    ack = await fake.socket_send_slash_command(payload=fields)
    assert ack.payload is None
    [envelope] = fake.socket_envelopes
    assert envelope.accepts_response_payload is True

    [response] = await fake.wait_for_responses(count=1)
    await wait(bolt_socket.command_done)
    assert response.response_type == "ephemeral"
    assert response.text == "memory: show"


# --------------------------------------------------------------------- (d) files_upload_v2


async def test_files_upload_v2_records_the_json_file(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    fields = fake.slash_command_payload(text="export", user_id=ALICE, channel_id=CHANNEL)
    await fake.socket_send_slash_command(payload=fields)

    [upload] = await fake.wait_for_uploads(count=1)
    await wait(bolt_socket.command_done)
    assert bolt_socket.listener_errors == []
    assert upload.filename == "memory.json"
    assert upload.title == "Memory export"
    assert upload.channel_id == CHANNEL
    assert upload.initial_comment == "Here is what I remember."
    assert upload.content is not None
    assert upload.declared_length == len(upload.content)
    assert json.loads(upload.content) == {"channel": CHANNEL, "facts": ["likes tea"]}
    assert [c.method for c in fake.calls if c.method.startswith("files.")] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


# ------------------------------------------------------------------------------ (e) rate limits


async def test_rate_limited_post_is_retried_and_recorded_once(fake: FakeSlack) -> None:
    state = build_app(fake, retry_on_429=True)
    handler = AsyncSocketModeHandler(state.app, APP_TOKEN)
    await handler.connect_async()
    try:
        fake.rate_limit_next(method="chat.postMessage", count=1, retry_after=1)
        started = time.monotonic()
        await fake.socket_send_event(
            event=fake.app_mention_event(text="busy?", user_id=ALICE, channel_id=CHANNEL)
        )
        [message] = await fake.wait_for_messages(count=1, timeout=10)
        elapsed = time.monotonic() - started
        await wait(state.mention_done)
    finally:
        await handler.close_async()

    assert state.listener_errors == []
    attempts = fake.calls_of("chat.postMessage")
    assert [(c.status, c.error) for c in attempts] == [(429, "ratelimited"), (200, None)]
    assert len(fake.posted_messages) == 1
    assert message.text == f"echo: <@{BOT_USER_ID}> busy?"
    assert elapsed >= 1.0  # the handler honoured Retry-After


async def test_rate_limit_without_retry_handler_raises(fake: FakeSlack) -> None:
    fake.rate_limit_next(method="chat.postMessage", retry_after=7)
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=CHANNEL, text="hello")
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert caught.value.response.headers["Retry-After"] == "7"
    assert fake.posted_messages == []


# --------------------------------------------------------------------------- (f) auth.test


async def test_auth_test_with_a_bad_token_raises_invalid_auth(fake: FakeSlack) -> None:
    fake.invalidate_token("xoxb-revoked")
    for token in ("xoxb-revoked", "xoxb-never-issued"):
        client = AsyncWebClient(token=token, base_url=fake.api_url)
        with pytest.raises(SlackApiError) as caught:
            await client.auth_test()
        assert caught.value.response["error"] == "invalid_auth"

    good = await AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url).auth_test()
    assert (good["team_id"], good["user_id"], good["bot_id"]) == (TEAM_ID, BOT_USER_ID, "BBOT")
    assert good["url"].startswith("https://")


# ------------------------------------------------------------------------ (g) block_actions


async def test_button_click_over_socket_mode_reaches_the_action_handler(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    payload = fake.block_action_payload(
        action_id="forget_button", value="memory-42", user_id=ALICE, channel_id=CHANNEL
    )
    ack = await fake.socket_send_interactive(payload=payload)
    assert ack.payload is None

    [response] = await fake.wait_for_responses(count=1)
    await wait(bolt_socket.action_done)
    assert bolt_socket.actions[0]["actions"][0]["value"] == "memory-42"
    assert bolt_socket.actions[0]["user"]["id"] == ALICE
    assert response.replace_original is True
    assert response.text == "Forgotten."


async def test_button_click_over_http_reaches_the_action_handler(
    fake: FakeSlack, bolt_http_url: tuple[ThrowawayApp, str]
) -> None:
    state, url = bolt_http_url
    payload = fake.block_action_payload(
        action_id="forget_button", value="memory-7", user_id=ALICE, channel_id=CHANNEL
    )
    delivery = await send_signed(
        url, signing_secret=SIGNING_SECRET, body=interactive_form_body(payload)
    )
    assert delivery.status == 200

    await fake.wait_for_responses(count=1)
    await wait(state.action_done)
    assert state.actions[0]["actions"][0]["value"] == "memory-7"


# ------------------------------------------------------------------- the rest of the Web API


@pytest.mark.calls_unknown_routes  # it checks how the fake answers an unknown method
async def test_web_api_methods_behave_like_slack(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)

    user = (await client.users_info(user=ALICE))["user"]
    assert (user["name"], user["real_name"], user["profile"]["display_name"]) == (
        "alice",
        "Alice Liddell",
        "alice",
    )
    assert (user["is_admin"], user["is_owner"], user["is_bot"]) == (True, False, False)
    with pytest.raises(SlackApiError, match="user_not_found"):
        await client.users_info(user="UNOBODY")

    channel = (await client.conversations_info(channel=CHANNEL))["channel"]
    assert (channel["name"], channel["is_im"]) == ("general", False)
    dm = (await client.conversations_open(users=ALICE))["channel"]["id"]
    again = await client.conversations_open(users=[ALICE])
    assert again["channel"]["id"] == dm
    assert again["already_open"] is True
    dm_info = (await client.conversations_info(channel=dm))["channel"]
    assert (dm_info["is_im"], dm_info["user"]) == (True, ALICE)

    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*saved*"}}]
    posted = await client.chat_postMessage(channel=dm, text="saved", blocks=blocks)
    await client.chat_update(channel=dm, ts=posted["ts"], text="saved (edited)")
    with pytest.raises(SlackApiError, match="message_not_found"):
        await client.chat_update(channel=dm, ts="1.000000", text="nope")
    await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="only you", blocks=blocks)
    assert fake.posted_messages[0].blocks == blocks
    assert fake.updates[0].ts == posted["ts"]
    assert fake.updates[0].text == "saved (edited)"
    assert (fake.ephemerals[0].user, fake.ephemerals[0].blocks) == (ALICE, blocks)

    opened = await client.views_open(
        trigger_id="123.456.abc",
        view={"type": "modal", "title": {"type": "plain_text", "text": "M"}},
    )
    assert opened["view"]["type"] == "modal"

    with pytest.raises(SlackApiError, match="unknown_method"):
        await client.api_call("reactions.add", params={"name": "eyes"})
    assert [c.method for c in fake.unknown_methods] == ["reactions.add"]

    # Bot methods refuse the app-level token, and vice versa.
    with pytest.raises(SlackApiError, match="not_allowed_token_type"):
        await AsyncWebClient(token=APP_TOKEN, base_url=fake.api_url).auth_test()
    with pytest.raises(SlackApiError, match="not_allowed_token_type"):
        await client.apps_connections_open(app_token=BOT_TOKEN)


async def test_fail_next_and_custom_methods(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    fake.fail_next(method="chat.postMessage", error="not_in_channel")
    with pytest.raises(SlackApiError, match="not_in_channel"):
        await client.chat_postMessage(channel=CHANNEL, text="first")
    await client.chat_postMessage(channel=CHANNEL, text="second")
    assert [m.text for m in fake.posted_messages] == ["second"]

    fake.register_method("reactions.add", lambda params, token: {"ok": True})
    await client.reactions_add(channel=CHANNEL, name="eyes", timestamp=fake.posted_messages[0].ts)
    assert fake.calls_of("reactions.add", ok_only=True)[0].params["name"] == "eyes"


async def test_response_urls_are_single_purpose(fake: FakeSlack) -> None:
    url = fake.new_response_url()
    for attempt in range(5):
        sent = await AsyncWebhookClient(url).send(text=f"try {attempt}")
        assert sent.status_code == 200
    exhausted = await AsyncWebhookClient(url).send(text="sixth")
    assert exhausted.status_code == 404
    unknown = await AsyncWebhookClient(f"{fake.base_url}/response/nope").send(text="x")
    assert unknown.status_code == 404
    assert [r.text for r in fake.responses] == [f"try {n}" for n in range(5)]


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"text": "x", "blocks": [section("")]}, "invalid_blocks"),
        ({"text": "x", "blocks": [section("a" * 3001)]}, "invalid_blocks"),
        ({"text": "x", "blocks": [section("a")] * 51}, "invalid_blocks"),
        (
            {"text": "x", "blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}]},
            "invalid_blocks",
        ),
        ({"text": "x", "blocks": [{"type": "no-such-block"}]}, "invalid_blocks"),
        ({"text": "a" * 40_001}, "msg_too_long"),
        ({"text": ""}, "no_text"),
    ],
)
async def test_response_urls_refuse_what_slack_refuses_with_http_400(
    fake: FakeSlack, message: dict[str, Any], error: str
) -> None:
    # slack_sdk's webhook client does not raise on 4xx: the status is the only sign.
    refused = await AsyncWebhookClient(fake.new_response_url()).send_dict(message)
    assert (refused.status_code, refused.body) == (400, error)
    assert fake.responses == []
    assert [e for _, e in fake.rejected_responses] == [error]


async def test_response_urls_accept_blocks_within_the_limits(fake: FakeSlack) -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
        *[section("a" * 3000)] * 48,
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "more"}]},
    ]
    sent = await AsyncWebhookClient(fake.new_response_url()).send(text="x", blocks=blocks)
    assert sent.status_code == 200
    assert len(fake.responses) == 1


async def test_response_urls_expire_after_thirty_minutes(fake: FakeSlack) -> None:
    url = fake.new_response_url()
    fake.age_response_urls(29 * 60)
    assert (await AsyncWebhookClient(url).send(text="in time")).status_code == 200
    fake.age_response_urls(2 * 60)
    late = await AsyncWebhookClient(url).send(text="too late")
    assert (late.status_code, late.body) == (404, "expired_url")
    assert [r.text for r in fake.responses] == ["in time"]


async def test_a_response_can_be_refused_on_purpose(fake: FakeSlack) -> None:
    fake.reject_next_response(error="invalid_blocks")
    url = fake.new_response_url()
    refused = await AsyncWebhookClient(url).send(text="valid")
    assert (refused.status_code, refused.body) == (400, "invalid_blocks")
    assert (await AsyncWebhookClient(url).send(text="valid")).status_code == 200


async def test_waiters_time_out_with_a_helpful_message(fake: FakeSlack) -> None:
    with pytest.raises(TimeoutError, match=r"chat\.postMessage"):
        await fake.wait_for_calls("chat.postMessage", timeout=0.05)


async def test_socket_protocol_hello_and_stop_with_a_client_still_connected() -> None:
    fake = FakeSlack(app_token=APP_TOKEN)
    await fake.start()
    try:
        opened = await AsyncWebClient(base_url=fake.api_url).apps_connections_open(
            app_token=APP_TOKEN
        )
        url = str(opened["url"])
        assert url.startswith(f"ws://127.0.0.1:{fake.base_url.rsplit(':', 1)[1]}/socket-mode/")
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(url)
            hello = await ws.receive_json(timeout=5)
            assert hello["type"] == "hello"
            assert hello["connection_info"]["app_id"] == fake.api_app_id
            # A ticket is single-use, like Slack's.
            with pytest.raises(aiohttp.WSServerHandshakeError):
                await session.ws_connect(url)
            # Stopping the fake must not hang on the open socket; the client sees a close.
            await fake.stop()
            closing = await ws.receive(timeout=5)
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            await ws.close()
    finally:
        await fake.stop()


# ---------------------------------------------------------------------- (h) message shortcuts


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_message_shortcut_on_a_thread_reply_reaches_bolt_and_its_response_url(
    fake: FakeSlack, mode: str
) -> None:
    parent = fake.message_event(text="the plan is ready", user_id=ALICE, channel_id=CHANNEL)
    reply = fake.message_event(
        text="ship it friday", user_id=ALICE, channel_id=CHANNEL, thread_ts=parent["ts"]
    )
    for said in (parent, reply):
        fake.event_payload(event=said)  # the messages exist in Slack
    payload = fake.message_action_payload(
        callback_id="remember_this", user_id=ALICE, channel_id=CHANNEL, message=reply
    )
    state = build_app(fake)
    if mode == "http":
        async with serve_web_app(state.app.web_app(path="/slack/events")) as base:
            delivery = await send_signed(
                f"{base}/slack/events",
                signing_secret=SIGNING_SECRET,
                body=interactive_form_body(payload),
            )
            assert (delivery.status, delivery.text) == (200, "")
            [response] = await fake.wait_for_responses(count=1)
            await wait(state.shortcut_done)
    else:
        handler = AsyncSocketModeHandler(state.app, APP_TOKEN)
        await handler.connect_async()
        try:
            ack = await fake.socket_send_interactive(payload=payload)
            assert ack.payload is None
            assert fake.socket_envelopes[-1].type == "interactive"
            [response] = await fake.wait_for_responses(count=1)
            await wait(state.shortcut_done)
        finally:
            await handler.close_async()

    assert state.listener_errors == []
    [shortcut] = state.shortcuts
    assert (shortcut["type"], shortcut["callback_id"]) == ("message_action", "remember_this")
    assert shortcut["channel"] == {"id": CHANNEL, "name": "general"}
    assert (shortcut["user"]["id"], shortcut["team"]["id"]) == (ALICE, TEAM_ID)
    assert shortcut["message_ts"] == reply["ts"]
    message = shortcut["message"]
    assert (message["type"], message["text"], message["ts"]) == (
        "message",
        "ship it friday",
        reply["ts"],
    )
    assert (message["thread_ts"], message["parent_user_id"]) == (parent["ts"], ALICE)
    assert "channel" not in message and "event_ts" not in message
    assert shortcut["trigger_id"] and shortcut["action_ts"]
    assert payload["response_url"].endswith(f"/response/{response.response_id}")
    assert (response.response_type, response.text) == ("ephemeral", "remembered: ship it friday")


async def test_a_message_shortcut_on_the_bots_own_message_carries_its_bot_id(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    await client.chat_postMessage(channel=CHANNEL, text="I remember: tea")
    [posted] = fake.posted_messages
    assert isinstance(posted, RecordedMessage)
    payload = fake.message_action_payload(
        callback_id="remember_this", user_id=ALICE, channel_id=CHANNEL, message=posted
    )
    await fake.socket_send_interactive(payload=payload)
    await fake.wait_for_responses(count=1)
    await wait(bolt_socket.shortcut_done)
    message = bolt_socket.shortcuts[0]["message"]
    assert (message["bot_id"], message["user"], message["text"]) == (
        "BBOT",
        BOT_USER_ID,
        "I remember: tea",
    )


# ---------------------------------------------------------------------------- (i) App Home


async def test_the_home_tab_is_published_when_opened_and_republished_on_a_click(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    first = fake.app_home_opened_event(user_id=ALICE)
    assert "view" not in first  # nothing was ever published for Alice
    await fake.socket_send_event(event=first)
    await wait(bolt_socket.home_done)
    published = await fake.wait_for_home(ALICE)
    assert published["blocks"][0]["text"]["text"] == "Remembered."
    assert (published["type"], published["team_id"], published["bot_id"]) == (
        "home",
        TEAM_ID,
        "BBOT",
    )
    assert published["id"].startswith("V") and published["hash"]
    # The channel of app_home_opened is the app's DM with the user.
    dm = await AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url).conversations_open(
        users=ALICE
    )
    assert bolt_socket.homes[0]["channel"] == dm["channel"]["id"]

    bolt_socket.home_done.clear()
    again = fake.app_home_opened_event(user_id=ALICE)
    assert again["view"] == published  # the tab as it was last published
    await fake.socket_send_event(event=again)
    await wait(bolt_socket.home_done)

    click = fake.home_block_action_payload(user_id=ALICE, action_id="home_forget")
    await fake.socket_send_interactive(payload=click)
    await wait(bolt_socket.action_done)
    forgotten = await fake.wait_for_home(
        ALICE, lambda view: view["blocks"][0]["text"]["text"] == "Forgotten."
    )
    assert bolt_socket.listener_errors == []
    body = bolt_socket.actions[0]
    assert body["container"] == {"type": "view", "view_id": published["id"]}
    assert body["view"]["hash"] == fake.calls_of("views.publish")[-1].params["hash"]
    assert body["actions"][0]["value"] == "all"
    assert forgotten["id"] == published["id"] and forgotten["hash"] != published["hash"]


# ------------------------------------------------------------------ (j) places and app gone


async def test_uninstall_events_reach_bolt_and_the_bot_token_stops_working(
    fake: FakeSlack,
) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    app = AsyncApp(client=client)
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @app.event("tokens_revoked")
    async def on_revoked(event: dict[str, Any]) -> None:
        await seen.put(event)

    @app.event("app_uninstalled")
    async def on_uninstalled(event: dict[str, Any]) -> None:
        await seen.put(event)

    handler = AsyncSocketModeHandler(app, APP_TOKEN)
    await handler.connect_async()
    try:
        for payload in fake.uninstall():
            await fake.socket_send_event(event=payload)
        received = [await asyncio.wait_for(seen.get(), 5) for _ in range(2)]
    finally:
        await handler.close_async()
    assert received == [
        {"type": "tokens_revoked", "tokens": {"bot": [BOT_USER_ID]}},
        {"type": "app_uninstalled"},
    ]
    # Bolt does not call auth.test for these two: the token is already gone.
    assert fake.calls_of("auth.test") == []
    for call in (client.auth_test(), client.chat_postMessage(channel=CHANNEL, text="hi")):
        with pytest.raises(SlackApiError) as caught:
            await call
        assert caught.value.response["error"] == "account_inactive"


async def test_channel_deleted_reaches_bolt_and_the_channel_is_gone(
    fake: FakeSlack, bolt_socket: ThrowawayApp
) -> None:
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt_socket.app.event("channel_deleted")
    async def on_deleted(event: dict[str, Any]) -> None:
        await seen.put(event)

    deleted = fake.channel_deleted_event(channel_id=CHANNEL, user_id=ALICE)
    await fake.socket_send_event(event=deleted)
    assert await asyncio.wait_for(seen.get(), 5) == {"type": "channel_deleted", "channel": CHANNEL}
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=CHANNEL, text="still there?")
    assert caught.value.response["error"] == "channel_not_found"


# ------------------------------------------------------------------------ (k) reading history


async def test_slack_sdk_pages_through_history_with_the_cursor(fake: FakeSlack) -> None:
    fake.add_history(
        CHANNEL,
        [
            fake.message_event(
                text=f"old {n}", user_id=ALICE, channel_id=CHANNEL, ts=f"1600000000.{n:06d}"
            )
            for n in range(1, 8)
        ],
    )
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    texts, more, cursors = [], [], []
    # slack_sdk's iteration reuses one response object: read each page as it comes.
    async for page in await client.conversations_history(channel=CHANNEL, limit=3):
        texts.append([m["text"] for m in page["messages"]])
        more.append(page["has_more"])
        cursors.append(page["response_metadata"]["next_cursor"])
    assert texts == [["old 7", "old 6", "old 5"], ["old 4", "old 3", "old 2"], ["old 1"]]
    assert more == [True, True, False]
    assert cursors[-1] == "" and all(cursors[:-1])
    assert [c.params.get("cursor") for c in fake.calls_of("conversations.history")] == [
        None,
        *cursors[:-1],
    ]
