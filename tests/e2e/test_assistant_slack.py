"""The Slack assistant panel end to end: memorybot's real Bolt app against the fake Slack's
assistant events and ``assistant.threads.*`` methods, a real Core, the fake OpenAI server
(which records every prompt it is sent).

A member opens the panel (``assistant_thread_started``) in their DM with the app, maybe
while looking at a channel; they may look at another one (``assistant_thread_context_changed``)
and ask. Their thread is ``slack:T1:D...:thread_ts``: its own memory, under their DM's. The
channel they look at is read too, if and only if Slack says they may read it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.slack import AssistantThread
from tests.slack_harness import ALICE, BOB, C1, DM, SCOPE, T1, Harness, block_texts

pytestmark = pytest.mark.fake("slack")

PRIVATE = "GPLANS"  # a private channel: Alice and the bot are in it, Bob is not
PRIVATE_SCOPE = f"slack:{T1}:{PRIVATE}"
SECRET = "Bluefin"  # what only the private channel knows
SAID = f"we picked the codename {SECRET} for the project"
QUESTION = "what codename did we pick for the project?"


async def open_panel(slack: Harness, *, user: str = ALICE, viewing: str | None = None) -> Any:
    """``user`` opens the assistant panel; its thread once the app has greeted and
    suggested (the fake's record of it)."""
    started = slack.fake.assistant_thread_started_event(user_id=user, viewing=viewing)
    suggested = len(slack.fake.calls_of("assistant.threads.setSuggestedPrompts", ok_only=True))
    await slack.deliver(started)
    await slack.fake.wait_for_calls(
        "assistant.threads.setSuggestedPrompts", count=suggested + 1, ok_only=True
    )
    await slack.bot.drain()
    return started


def record(slack: Harness, started: dict[str, Any]) -> AssistantThread:
    thread = started["assistant_thread"]
    found = slack.fake.assistant_thread(thread["channel_id"], thread["thread_ts"])
    assert found is not None
    return found


def thread_scope(started: dict[str, Any]) -> str:
    thread = started["assistant_thread"]
    return f"slack:{T1}:{thread['channel_id']}:{thread['thread_ts']}"


async def ask(slack: Harness, started: dict[str, Any], text: str) -> str:
    """The thread's member asks; the answer's text, once it is posted and remembered."""
    return (await asked(slack, started, text))[1]


async def asked(slack: Harness, started: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    """The question's event and the answer's text."""
    thread = started["assistant_thread"]
    before = len(slack.fake.posted_messages)
    question = await slack.say(
        text,
        user=thread["user_id"],
        channel=thread["channel_id"],
        thread_ts=thread["thread_ts"],
        channel_type="im",
    )
    *_, answer = await slack.replies(before + 1)
    assert (answer.channel, answer.thread_ts) == (thread["channel_id"], thread["thread_ts"])
    return question, answer.text or ""


async def private_channel(slack: Harness) -> None:
    """#plans, private: Alice and the bot are in it, and what Alice said there is stored."""
    slack.fake.add_channel(PRIVATE, "plans", is_private=True, members=[ALICE])
    await slack.say(SAID, user=ALICE, channel=PRIVATE, channel_type="group")


async def test_a_thread_starts_with_a_greeting_and_prompts_from_memory(slack: Harness) -> None:
    await slack.core.admin.remember(SCOPE, "The launch checklist lives in the wiki", by="Alice")
    await slack.core.admin.remember(f"slack:{T1}:{DM}", "Renew the Osprey domain", by="Alice")
    started = await open_panel(slack, viewing=C1)

    [greeting] = slack.fake.posted_messages
    assert greeting.thread_ts == started["assistant_thread"]["thread_ts"]
    # The greeting keeps the thread's context, where Bolt's default store looks for it.
    assert greeting.params["metadata"] == {
        "event_type": "assistant_thread_context",
        "event_payload": started["assistant_thread"]["context"],
    }
    thread = record(slack, started)
    assert [p["message"] for p in thread.prompts] == [
        "What has been going on in #general?",
        "Tell me more about: The launch checklist lives in the wiki",
        "Tell me more about: Renew the Osprey domain",
        "What did we talk about last time?",
    ]
    assert thread.prompts_title == "Try asking"
    assert slack.llm.of("reply") == []  # no model call to open a thread


async def test_a_question_is_answered_thinking_first_and_titles_the_thread(
    slack: Harness,
) -> None:
    started = await open_panel(slack)
    answer = await ask(slack, started, "what should I pack for the offsite?")
    assert answer.startswith("ACK: ") and "pack for the offsite" in answer
    thread = record(slack, started)
    assert thread.statuses == ["is thinking…", ""]  # set while the answer was written
    calls = [c.method for c in slack.fake.calls if c.ok]
    thinking = calls.index("assistant.threads.setStatus")
    assert thinking < len(calls) - 1 - calls[::-1].index("chat.postMessage")
    assert thread.title == "what should I pack for the offsite?"
    # Its own scope, under the member's DM.
    entries = await slack.core.repo.reads.all_entries(thread_scope(started))
    assert [(e.role, e.text) for e in entries] == [
        ("user", "what should I pack for the offsite?"),
        ("assistant", answer),
    ]
    await ask(slack, started, "and for the flight?")
    assert len(slack.fake.calls_of("assistant.threads.setTitle")) == 1  # the first question
    assert record(slack, started).title == "what should I pack for the offsite?"
    # The second question's prompt holds the first exchange (the thread's own memory).
    assert "pack for the offsite" in slack.llm.of("reply")[-1].prompt_text


async def test_the_public_channel_the_member_views_is_read(http: Harness) -> None:
    slack = http
    await slack.core.admin.edit_tier(SCOPE, "overview", "The team chose PostgreSQL for billing.")
    await slack.say("the zebrafalcon rollout starts on Monday", user=BOB)
    started = await open_panel(slack)  # looking at no channel yet
    await ask(slack, started, "when does the zebrafalcon rollout start?")
    first = slack.llm.of("reply")[-1].prompt_text
    assert "PostgreSQL" not in first and "starts on Monday" not in first

    changed = slack.fake.assistant_thread_context_changed_event(started=started, viewing=C1)
    await slack.deliver(changed)
    prompts = len(slack.fake.calls_of("assistant.threads.setSuggestedPrompts", ok_only=True))
    await slack.fake.wait_for_calls("assistant.threads.setSuggestedPrompts", count=prompts + 1)
    await slack.bot.drain()
    assert record(slack, started).prompts[0]["message"] == "What has been going on in #general?"
    await ask(slack, started, "when does the zebrafalcon rollout start?")
    prompt = slack.llm.of("reply")[-1].prompt_text
    viewed = prompt.split("## From the channel the person asking is looking at", 1)[1]
    assert "PostgreSQL" in viewed  # its summary
    assert "the zebrafalcon rollout starts on Monday" in prompt  # recalled from it
    # /memory why of the thread names what it read there.
    why = await slack.core.admin.why(thread_scope(started))
    assert why is not None and why.sections.get("also_read")
    assert any("starts on Monday" in m.snippet for m in why.recalled)
    # Read, never written: the channel holds only what was said there.
    assert [e.text for e in await slack.core.repo.reads.all_entries(SCOPE)] == [
        "the zebrafalcon rollout starts on Monday"
    ]


async def test_a_private_channel_the_member_is_in_is_read(http: Harness) -> None:
    slack = http
    await private_channel(slack)
    started = await open_panel(slack, viewing=PRIVATE)
    assert record(slack, started).prompts[0]["message"] == "What has been going on in #plans?"
    await ask(slack, started, QUESTION)
    assert SAID in slack.llm.of("reply")[-1].prompt_text
    members = slack.fake.calls_of("conversations.members", ok_only=True)
    assert members[-1].params["channel"] == PRIVATE  # asked of Slack at the question


async def test_a_private_channel_the_member_is_not_in_contributes_nothing(
    http: Harness,
) -> None:
    slack = http
    await private_channel(slack)
    await slack.core.admin.edit_tier(PRIVATE_SCOPE, "overview", f"Project {SECRET} ships in June.")
    await slack.core.admin.remember(PRIVATE_SCOPE, f"The {SECRET} launch is secret", by="Alice")
    # Bob looks at the private channel (the event's context says so): he is not in it.
    started = await open_panel(slack, user=BOB, viewing=PRIVATE)
    for prompt in record(slack, started).prompts:
        assert SECRET not in prompt["message"] and "plans" not in prompt["message"]
    answer = await ask(slack, started, QUESTION)
    assert SECRET not in answer
    assert all(SECRET not in r.prompt_text for r in slack.llm.requests)

    # Bob joins: from his next question on, the channel is read...
    slack.fake.add_member(PRIVATE, BOB)
    await ask(slack, started, QUESTION)
    assert SAID in slack.llm.of("reply")[-1].prompt_text
    # ... and once he has left, no longer (the thread's context still names the channel:
    # Slack is asked again at each question).
    slack.fake.remove_member(PRIVATE, BOB)
    await ask(slack, started, QUESTION)
    assert SECRET not in slack.llm.of("reply")[-1].prompt_text


async def test_forget_and_export_reach_the_assistant_thread(http: Harness) -> None:
    slack = http
    started = await open_panel(slack)
    scope = thread_scope(started)
    answer = await ask(slack, started, "my locker code is 4417")
    exported = await slack.core.admin.export(scope)
    assert [e["text"] for e in exported["log"]] == ["my locker code is 4417", answer]

    # /memory in the DM reaches its threads, the assistant's among them.
    forgot = await slack.command("forget 4417", channel=DM)
    assert "Forgot" in (forgot.text or block_texts(forgot))
    assert all("4417" not in e.text for e in await slack.core.repo.reads.all_entries(scope))
    await ask(slack, started, "what is my locker code?")
    assert "4417" not in slack.llm.of("reply")[-1].prompt_text


async def test_an_edit_and_a_delete_in_the_assistant_thread_reach_its_memory(
    http: Harness,
) -> None:
    # (Bolt's AsyncAssistant middleware would drop both: the door does not use it.)
    slack = http
    started = await open_panel(slack)
    scope = thread_scope(started)
    question, _ = await asked(slack, started, "my locker code is 4417")
    await slack.deliver(slack.fake.message_changed_event(original=question, text="my locker is 12"))
    await slack.settle()
    assert [e.text for e in await slack.core.repo.reads.all_entries(scope) if e.role == "user"] == [
        "my locker is 12"
    ]
    second, _ = await asked(slack, started, "also my bike lock is 9090")
    await slack.deliver(slack.fake.message_deleted_event(original=second))
    await slack.settle()
    assert "also my bike lock is 9090" not in [
        e.text for e in await slack.core.repo.reads.all_entries(scope)
    ]


async def test_a_japanese_speaking_members_prompts_are_in_japanese(http: Harness) -> None:
    slack = http
    await slack.say("こんにちは、よろしくお願いします", channel=DM, channel_type="im")
    await slack.replies(1)
    started = await open_panel(slack)
    messages = [p["message"] for p in record(slack, started).prompts]
    assert messages[0] == "前回は何を話しましたか？"
    _, answer = await asked(slack, started, "明日の予定は何ですか？")
    assert record(slack, started).statuses[0] == "が考えています…"
    assert answer.startswith("ACK: ")
