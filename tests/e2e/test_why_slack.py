"""``/memory why`` and source lines through the Slack front door: the real Bolt app (signed
HTTP requests) against the fake Slack, a real Core on the private Redis, the fake OpenAI
server. Links are ``chat.getPermalink``'s, proven by resolving them in the fake's own state;
and the fake's chat.getPermalink refuses what Slack refuses."""

from __future__ import annotations

import re
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack
from tests.slack_harness import ALICE, BOB, BOT_TOKEN, C1, SCOPE, Harness, block_texts

pytestmark = pytest.mark.fake("slack")

OLD = "the launch code word is papaya, agreed with the tangerine squad"
ANSWER = "The code word is papaya, agreed with the tangerine squad."
PERMALINK = re.compile(r"https://fake-team\.slack\.com/archives/\S+?(?=[>|\s]|$)")


async def ask(slack: Harness) -> dict[str, Any]:
    """An old message, chatter past the working window, then alice asks the bot."""
    slack.llm.responder = lambda request: ANSWER if request.purpose == "reply" else None
    old = await slack.say(OLD, user=BOB)
    for i in range(10):
        await slack.say(f"unrelated chatter number {i} about lunch", user=BOB)
    await slack.mention("what is the launch code word?")
    await slack.replies(1)
    return old


async def test_memory_why_lists_the_recalled_message_with_a_permalink_that_resolves(
    small_window: Harness,
) -> None:
    slack = small_window
    await slack.core.admin.remember_me(SCOPE, "I am vegetarian", user_id=ALICE, name="Alice")
    old = await ask(slack)
    mine = await slack.command("why")
    theirs = await slack.command("why", user=BOB)
    assert mine.response_type == "ephemeral" and theirs.response_type == "ephemeral"
    text = block_texts(mine)
    [line] = [x for x in text.splitlines() if "Bob Builder: the launch code word is papaya" in x]
    [url] = PERMALINK.findall(line)
    target = slack.fake.resolve_permalink(url)
    assert target is not None and (target["ts"], target["text"]) == (old["ts"], OLD)
    looked_up = slack.fake.calls_of("chat.getPermalink", ok_only=True)
    assert (C1, old["ts"]) in [(c.params["channel"], c.params["message_ts"]) for c in looked_up]
    assert "I am vegetarian" in text
    other = block_texts(theirs)
    assert url in other and "vegetarian" not in other
    assert "facts about Alice, shown only to them: 1" in other


async def test_a_failed_permalink_lookup_lists_the_message_without_a_link(
    small_window: Harness,
) -> None:
    slack = small_window
    await ask(slack)
    slack.fake.fail_next(method="chat.getPermalink", error="message_not_found")
    shown = block_texts(await slack.command("why"))
    [line] = [x for x in shown.splitlines() if "the launch code word is papaya" in x]
    assert "slack.com" not in line


async def test_source_line_is_the_permalink_and_memory_keeps_the_plain_answer(
    small_window: Harness,
) -> None:
    slack = small_window
    configured = await slack.command("config sources on")
    assert "sources=on" in block_texts(configured)
    old = await ask(slack)
    [reply] = [m for m in slack.fake.posted_messages if m.channel == C1]
    assert reply.text is not None
    answer, source = reply.text.split("\n")
    assert answer == ANSWER
    match = re.fullmatch(r"_<(\S+)\|from (\d{4}-\d\d-\d\d)>_", source)
    assert match, source
    target = slack.fake.resolve_permalink(match.group(1))
    assert target is not None and target["ts"] == old["ts"]
    stored = await slack.core.repo.reads.all_entries(SCOPE)
    assert stored[-1].role == "assistant" and stored[-1].text == ANSWER


async def test_a_message_deleted_on_slack_takes_the_record_away(small_window: Harness) -> None:
    slack = small_window
    old = await ask(slack)
    key = slack.core.store.keys.scope(SCOPE).why
    assert await slack.core.store.client.exists(key)
    await slack.deliver(
        {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "channel": C1,
            "channel_type": "channel",
            "ts": slack.fake.next_ts(),
            "deleted_ts": old["ts"],
            "previous_message": {"type": "message", "user": BOB, "text": OLD, "ts": old["ts"]},
        }
    )
    await slack.settle()
    assert not await slack.core.store.client.exists(key)
    assert "No answer to explain yet" in block_texts(await slack.command("why"))
    assert (
        slack.fake.resolve_permalink(
            f"https://fake-team.slack.com/archives/{C1}/p{old['ts'].replace('.', '')}"
        )
        is None
    )  # deleted in the fake too


# ----------------------------------------------------------- the fake's chat.getPermalink


@pytest.fixture
async def permalink_fake() -> Any:
    async with FakeSlack(bot_token=BOT_TOKEN, team_id="T1") as server:
        server.add_channel(C1, "general", members=[ALICE])
        yield server


async def test_the_fakes_get_permalink_is_as_strict_as_slack(permalink_fake: FakeSlack) -> None:
    fake = permalink_fake
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    top = fake.message_event(text="top", user_id=ALICE, channel_id=C1)
    reply = fake.message_event(text="in thread", user_id=ALICE, channel_id=C1, thread_ts=top["ts"])
    for event in (top, reply):
        fake.event_payload(event=event)  # the fake now knows these messages exist
    found = await client.chat_getPermalink(channel=C1, message_ts=top["ts"])
    assert found.data == {
        "ok": True,
        "channel": C1,
        "permalink": f"https://fake-team.slack.com/archives/{C1}/p{top['ts'].replace('.', '')}",
    }
    threaded = await client.chat_getPermalink(channel=C1, message_ts=reply["ts"])
    assert str(threaded["permalink"]).endswith(f"?thread_ts={top['ts']}&cid={C1}")
    assert fake.resolve_permalink(str(threaded["permalink"]))["text"] == "in thread"  # type: ignore[index]
    for kwargs, error in (
        ({"channel": "CNEVER", "message_ts": top["ts"]}, "channel_not_found"),
        ({"channel": C1, "message_ts": "1.000001"}, "message_not_found"),
        ({"channel": C1, "message_ts": ""}, "invalid_arguments"),
    ):
        with pytest.raises(SlackApiError) as refused:
            await client.chat_getPermalink(**kwargs)
        assert refused.value.response["error"] == error
