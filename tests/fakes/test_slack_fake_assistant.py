"""The fake Slack's assistant panel answers as Slack documents it: the two assistant events
with their documented shape (and none for an app without the assistant view), the thread's
root message, ``assistant.threads.setStatus / setSuggestedPrompts / setTitle`` with their
arguments, errors and scopes, message metadata shown only to ``include_all_metadata``
(where Bolt's default thread-context store keeps a thread's context: checked with Bolt's own
store), and ``conversations.members``.

Each check is made through slack_sdk's real client, as the bot makes its calls.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_bolt.context.assistant.thread_context_store.default_async_store import (
    DefaultAsyncAssistantThreadContextStore,
)
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB, BOT = "U1", "U2", "UBOT"
GENERAL, PRIVATE = "C1", "GPRIV"
PROMPT = {"title": "Catch up", "message": "What happened today?"}


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice")
    server.add_user(BOB, "bob")
    server.add_channel(GENERAL, "general", members=[ALICE, BOB])
    server.add_channel(PRIVATE, "plans", is_private=True, members=[ALICE])
    server.limit_channel_posts(per_second=100)  # (posts back to back in one DM)


pytestmark = pytest.mark.fake("slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace)


async def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


def _thread(event: dict[str, Any]) -> tuple[str, str]:
    thread = event["assistant_thread"]
    return str(thread["channel_id"]), str(thread["thread_ts"])


async def test_a_thread_starts_in_the_members_dm_as_slack_documents_it(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    started = fake.assistant_thread_started_event(user_id=ALICE, viewing=GENERAL)
    assert set(started) == {"type", "assistant_thread", "event_ts"}
    thread = started["assistant_thread"]
    assert set(thread) == {"user_id", "context", "channel_id", "thread_ts"}
    assert thread["user_id"] == ALICE
    assert thread["context"] == {"channel_id": GENERAL, "team_id": "T1", "enterprise_id": None}
    dm = fake.channels[thread["channel_id"]]
    assert (dm.is_im, dm.user) == (True, ALICE)
    payload = fake.event_payload(event=started)
    assert payload["event"]["type"] == "assistant_thread_started"
    # The thread's root: the member's, subtype assistant_app_thread.
    replies = await web_client.conversations_replies(channel=dm.id, ts=thread["thread_ts"])
    [root] = replies["messages"]
    assert (root["subtype"], root["user"], root["ts"]) == (
        "assistant_app_thread",
        ALICE,
        thread["thread_ts"],
    )
    changed = fake.assistant_thread_context_changed_event(started=started, viewing=PRIVATE)
    assert changed["type"] == "assistant_thread_context_changed"
    assert changed["assistant_thread"]["context"]["channel_id"] == PRIVATE
    nowhere = fake.assistant_thread_started_event(user_id=BOB)
    assert nowhere["assistant_thread"]["context"] == {}


async def test_no_panel_opens_for_an_app_without_the_assistant_view() -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, assistant_view=False) as fake:
        fake.add_user(ALICE, "alice")
        with pytest.raises(ValueError, match="assistant view"):
            fake.assistant_thread_started_event(user_id=ALICE)


async def test_set_status_shows_until_cleared_or_the_app_answers(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
    await web_client.assistant_threads_setStatus(channel_id=dm, thread_ts=ts, status="is thinking…")
    thread = fake.assistant_thread(dm, ts)
    assert thread is not None and thread.status == "is thinking…"
    await web_client.chat_postMessage(channel=dm, thread_ts=ts, text="the answer")
    assert thread.status == ""  # Slack clears it when the app answers
    await web_client.assistant_threads_setStatus(channel_id=dm, thread_ts=ts, status="again")
    await web_client.assistant_threads_setStatus(channel_id=dm, thread_ts=ts, status="")
    assert thread.statuses == ["is thinking…", "again", ""]


async def test_set_status_refuses_what_slack_refuses(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
    client = web_client
    assert await _error(client.api_call("assistant.threads.setStatus", json={})) == (
        "invalid_arguments"
    )
    missing = client.api_call(
        "assistant.threads.setStatus", json={"channel_id": dm, "thread_ts": ts}
    )
    assert await _error(missing) == "invalid_arguments"  # no status
    assert await _error(
        client.assistant_threads_setStatus(channel_id="DNOPE", thread_ts=ts, status="x")
    ) == ("channel_not_found")
    assert await _error(
        client.assistant_threads_setStatus(channel_id=dm, thread_ts="1.000001", status="x")
    ) == ("invalid_thread_ts")
    too_many = [f"step {n}" for n in range(11)]
    assert await _error(
        client.assistant_threads_setStatus(
            channel_id=dm, thread_ts=ts, status="x", loading_messages=too_many
        )
    ) == ("invalid_arguments")


async def test_suggested_prompts_are_one_to_four_with_a_title_and_a_message(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
    client = web_client
    await client.assistant_threads_setSuggestedPrompts(
        channel_id=dm, thread_ts=ts, title="Try", prompts=[PROMPT]
    )
    thread = fake.assistant_thread(dm, ts)
    assert thread is not None and (thread.prompts, thread.prompts_title) == ([PROMPT], "Try")
    five = client.assistant_threads_setSuggestedPrompts(
        channel_id=dm, thread_ts=ts, prompts=[PROMPT] * 5
    )
    assert await _error(five) == "invalid_arguments"
    untitled = client.assistant_threads_setSuggestedPrompts(
        channel_id=dm, thread_ts=ts, prompts=[{"message": "hi"}]
    )
    assert await _error(untitled) == "invalid_arguments"
    none = client.assistant_threads_setSuggestedPrompts(channel_id=dm, thread_ts=ts, prompts=[])
    assert await _error(none) == "invalid_arguments"
    # A thread of a channel is no assistant thread.
    posted = await client.chat_postMessage(channel=GENERAL, text="a thread here")
    elsewhere = client.assistant_threads_setSuggestedPrompts(
        channel_id=GENERAL, thread_ts=str(posted["ts"]), prompts=[PROMPT]
    )
    assert await _error(elsewhere) == "invalid_thread_ts"


async def test_set_title_renames_the_threads_root(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
    await web_client.assistant_threads_setTitle(channel_id=dm, thread_ts=ts, title="Launch plan")
    [root] = (await web_client.conversations_replies(channel=dm, ts=ts))["messages"]
    assert root["assistant_app_thread"]["title"] == "Launch plan"
    thread = fake.assistant_thread(dm, ts)
    assert thread is not None and thread.title == "Launch plan"
    untitled = web_client.assistant_threads_setTitle(channel_id=dm, thread_ts=ts, title="")
    assert await _error(untitled) == "invalid_arguments"
    unknown = web_client.assistant_threads_setTitle(channel_id=dm, thread_ts="2.000001", title="x")
    assert await _error(unknown) == "invalid_thread_ts"


async def test_the_assistant_methods_need_their_scopes() -> None:
    scopes = ["im:history", "chat:write"]  # no assistant:write
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=scopes) as fake:
        fake.add_user(ALICE, "alice")
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
        await client.assistant_threads_setStatus(channel_id=dm, thread_ts=ts, status="busy")
        prompts = client.assistant_threads_setSuggestedPrompts(
            channel_id=dm, thread_ts=ts, prompts=[PROMPT]
        )
        assert await _error(prompts) == "missing_scope"
        title = client.assistant_threads_setTitle(channel_id=dm, thread_ts=ts, title="x")
        assert await _error(title) == "missing_scope"
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=["assistant:write"]) as fake:
        fake.add_user(ALICE, "alice")
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
        # "accepts either the assistant:write or chat:write scope for the time being"
        await client.assistant_threads_setStatus(channel_id=dm, thread_ts=ts, status="busy")


async def test_metadata_is_shown_only_to_include_all_metadata(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE))
    metadata = {"event_type": "assistant_thread_context", "event_payload": {"channel_id": "C1"}}
    await web_client.chat_postMessage(channel=dm, thread_ts=ts, text="hi", metadata=metadata)
    plain = (await web_client.conversations_replies(channel=dm, ts=ts))["messages"]
    assert all("metadata" not in m for m in plain)
    full = await web_client.conversations_replies(channel=dm, ts=ts, include_all_metadata=True)
    assert full["messages"][1]["metadata"] == metadata
    bad = web_client.chat_postMessage(
        channel=dm, text="hi", metadata={"event_type": "x", "event_payload": "not an object"}
    )
    assert await _error(bad) == "invalid_metadata_format"


async def test_bolts_default_thread_context_store_keeps_a_context_here(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    dm, ts = _thread(fake.assistant_thread_started_event(user_id=ALICE, viewing=GENERAL))
    context = AsyncBoltContext(client=web_client, bot_user_id=BOT)
    store = DefaultAsyncAssistantThreadContextStore(context)
    assert await store.find(channel_id=dm, thread_ts=ts) is None
    first = {"type": "section", "text": {"type": "mrkdwn", "text": "Hi!"}}
    metadata = {"event_type": "assistant_thread_context", "event_payload": {"channel_id": "C1"}}
    await web_client.chat_postMessage(
        channel=dm, thread_ts=ts, text="Hi!", blocks=[first], metadata=metadata
    )
    found = await store.find(channel_id=dm, thread_ts=ts)
    assert found is not None and found.channel_id == GENERAL
    await store.save(channel_id=dm, thread_ts=ts, context={"channel_id": PRIVATE})
    found = await store.find(channel_id=dm, thread_ts=ts)
    assert found is not None and found.channel_id == PRIVATE


async def test_conversations_members_lists_who_is_in_a_channel(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    general = await web_client.conversations_members(channel=GENERAL)
    assert sorted(general["members"]) == [ALICE, BOB, BOT]
    first = await web_client.conversations_members(channel=GENERAL, limit=2)
    assert len(first["members"]) == 2
    rest = await web_client.conversations_members(
        channel=GENERAL, cursor=first["response_metadata"]["next_cursor"]
    )
    assert sorted(first["members"] + rest["members"]) == [ALICE, BOB, BOT]
    assert rest["response_metadata"]["next_cursor"] == ""
    assert (await web_client.conversations_members(channel=PRIVATE))["members"] == [ALICE, BOT]
    fake.channels[PRIVATE].bot_is_member = False  # a private channel the app is not in
    assert await _error(web_client.conversations_members(channel=PRIVATE)) == "channel_not_found"
    assert await _error(web_client.conversations_members(channel="CNOPE")) == "channel_not_found"
    assert await _error(web_client.conversations_members(channel=GENERAL, limit=0)) == (
        "invalid_limit"
    )
    bad_cursor = web_client.conversations_members(channel=GENERAL, cursor="nope")
    assert await _error(bad_cursor) == "invalid_cursor"


async def test_conversations_members_needs_the_read_scope_of_the_channel() -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=["channels:read"]) as fake:
        fake.add_channel(PRIVATE, "plans", is_private=True, members=[ALICE])
        fake.add_channel(GENERAL, "general", members=[ALICE])
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        await client.conversations_members(channel=GENERAL)
        with pytest.raises(SlackApiError) as caught:
            await client.conversations_members(channel=PRIVATE)
        assert caught.value.response["error"] == "missing_scope"
        assert caught.value.response["needed"] == "groups:read"
