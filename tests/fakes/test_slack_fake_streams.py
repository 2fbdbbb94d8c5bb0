"""Streamed messages in the fake Slack, as chat.startStream / appendStream / stopStream
document them: a stream is a reply in a thread of the conversation, names its recipient
outside a DM, grows with each append and with its stop, and takes nothing more once stopped
or timed out (then chat.update changes it like any message of the app). A workspace that
does not allow streaming refuses the start. Each check goes through slack_sdk's client.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE = "U1"
CHANNEL, DM, ARCHIVED = "C1", "D1", "CARCH"


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice")
    server.add_channel(CHANNEL, "general", members=[ALICE])
    server.add_channel(DM, DM, is_im=True, user_id=ALICE)
    server.add_channel(ARCHIVED, "old", members=[ALICE]).is_archived = True


pytestmark = pytest.mark.fake("slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace)


def asked(fake: FakeSlack, channel: str = CHANNEL) -> str:
    """A member's question in ``channel`` (the fake delivers it: the message exists)."""
    event = fake.message_event(text="a question", user_id=ALICE, channel_id=channel)
    fake.event_payload(event=event)
    fake.age_rate_windows(1.0)  # each stream a second after the last message
    return str(event["ts"])


def to_alice(**extra: Any) -> dict[str, Any]:
    return {"recipient_user_id": ALICE, "recipient_team_id": "T1", **extra}


async def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_a_stream_starts_grows_and_stops_in_its_thread(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    thread = asked(fake)
    started = await web_client.chat_startStream(
        channel=CHANNEL, thread_ts=thread, markdown_text="Hello", **to_alice()
    )
    ts = str(started["ts"])
    await web_client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text=", **world**")
    stopped = await web_client.chat_stopStream(channel=CHANNEL, ts=ts, markdown_text=".")
    assert stopped["message"]["text"] == "Hello, **world**."
    [stream] = fake.streams
    assert (stream.thread_ts, stream.text, stream.appends, stream.state) == (
        thread,
        "Hello, **world**.",
        1,
        "stopped",
    )
    assert (stream.recipient_user_id, stream.recipient_team_id) == (ALICE, "T1")
    replies = await web_client.conversations_replies(channel=CHANNEL, ts=thread)
    assert [m["text"] for m in replies["messages"]] == ["a question", "Hello, **world**."]
    # stopped: it takes no more, but the app may update it like any of its messages
    more = web_client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="!")
    assert await _error(more) == "message_not_in_streaming_state"
    await web_client.chat_update(channel=CHANNEL, ts=ts, markdown_text="Replaced.")
    assert fake.streams[0].text == "Replaced."


async def test_a_stream_is_a_reply_to_a_message_of_the_conversation(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    no_thread = web_client.chat_startStream(channel=CHANNEL, thread_ts="", **to_alice())
    assert await _error(no_thread) == "invalid_thread_ts"
    unknown = web_client.chat_startStream(channel=CHANNEL, thread_ts="1.000001", **to_alice())
    assert await _error(unknown) == "invalid_thread_ts"
    archived = web_client.chat_startStream(channel=ARCHIVED, thread_ts="1.1", **to_alice())
    assert await _error(archived) == "is_archived"
    assert fake.streams == []


async def test_outside_a_dm_a_stream_names_its_recipient(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    thread = asked(fake)
    nobody = web_client.chat_startStream(channel=CHANNEL, thread_ts=thread, markdown_text="x")
    assert await _error(nobody) == "missing_recipient_user_id"
    no_team = web_client.chat_startStream(
        channel=CHANNEL, thread_ts=thread, recipient_user_id=ALICE
    )
    assert await _error(no_team) == "missing_recipient_team_id"
    stranger = web_client.chat_startStream(
        channel=CHANNEL, thread_ts=thread, recipient_user_id="U404", recipient_team_id="T1"
    )
    assert await _error(stranger) == "user_not_found"
    in_dm = await web_client.chat_startStream(channel=DM, thread_ts=asked(fake, DM))
    assert in_dm["ok"] is True  # a DM's recipient is the DM's member


async def test_appends_need_text_within_12000_characters_and_a_stream_that_exists(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    thread = asked(fake)
    started = await web_client.chat_startStream(channel=CHANNEL, thread_ts=thread, **to_alice())
    ts = str(started["ts"])
    assert await _error(web_client.chat_appendStream(channel=CHANNEL, ts=ts)) == "no_text"
    too_long = web_client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="x" * 12_001)
    assert await _error(too_long) == "msg_too_long"
    await web_client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="x" * 12_000)
    chunked = [{"type": "markdown_text", "text": "!"}]
    await web_client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=chunked)
    assert fake.streams[0].text == "x" * 12_000 + "!"
    nowhere = web_client.chat_appendStream(channel=CHANNEL, ts="1.000002", markdown_text="x")
    assert await _error(nowhere) == "message_not_found"
    fake.age_rate_windows(1.0)  # a second after the stream started
    posted = await web_client.chat_postMessage(channel=CHANNEL, text="not a stream")
    plain = web_client.chat_stopStream(channel=CHANNEL, ts=str(posted["ts"]))
    assert await _error(plain) == "message_not_in_streaming_state"


async def test_a_stream_slack_ended_takes_no_more(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    thread = asked(fake)
    started = await web_client.chat_startStream(
        channel=CHANNEL, thread_ts=thread, markdown_text="Half", **to_alice()
    )
    fake.time_out_stream(str(started["ts"]))
    stop = web_client.chat_stopStream(channel=CHANNEL, ts=str(started["ts"]), markdown_text="!")
    assert await _error(stop) == "message_not_in_streaming_state"
    [stream] = fake.streams
    assert (stream.text, stream.state, stream.timed_out) == ("Half", "stopped", True)


@pytest.mark.fake(
    "slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace, stream_refusal="not_allowed"
)
async def test_a_workspace_that_does_not_allow_streams_refuses_the_start(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    thread = asked(fake)
    start = web_client.chat_startStream(channel=CHANNEL, thread_ts=thread, **to_alice())
    assert await _error(start) == "not_allowed"
    assert fake.streams == []
    await web_client.chat_postMessage(channel=CHANNEL, thread_ts=thread, markdown_text="**ok**")
    assert [m.text for m in fake.posted_messages] == ["**ok**"]  # posting still works
