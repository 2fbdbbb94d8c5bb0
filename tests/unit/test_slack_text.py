"""The pure half of the Slack front door: scopes, event classification, text, Block Kit."""

from __future__ import annotations

from typing import Any

import pytest

from bots.commands import CommandResult
from bots.slack.blocks import MAX_BLOCKS, SECTION_CHARS, confirm_blocks, result_blocks
from bots.slack.text import (
    Deletion,
    Edit,
    mentioned_users,
    message_scope,
    parse_change,
    parse_deletion,
    parse_message,
    plain_text,
    to_mrkdwn,
)
from memory_core.scopes import Audience

BOT = "UBOT"


def event(**fields: Any) -> dict[str, Any]:
    base = {"type": "message", "user": "U1", "text": "hi", "ts": "100.1", "channel": "C1"}
    return {**base, **fields}


@pytest.mark.parametrize(
    ("channel", "ts", "thread_ts", "expected"),
    [
        ("C1", "100.1", None, "slack:T1:C1"),
        ("C1", "100.1", "100.1", "slack:T1:C1"),  # a thread's parent message
        ("C1", "200.2", "100.1", "slack:T1:C1:100.1"),
        ("D9", "200.2", None, "slack:T1:D9"),
        ("D9", "200.2", "100.1", "slack:T1:D9:100.1"),
    ],
)
def test_message_scope(channel: str, ts: str, thread_ts: str | None, expected: str) -> None:
    assert message_scope("T1", channel, ts, thread_ts) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {"bot_id": "B1"},
        {"subtype": "bot_message"},
        {"subtype": "message_changed"},
        {"subtype": "channel_join"},
        {"user": BOT},
        {"user": None},
    ],
)
def test_non_conversation_is_ignored(fields: dict[str, Any]) -> None:
    assert parse_message(event(**fields), team_id="T1", bot_user_id=BOT) is None


def test_message_fields() -> None:
    plain = parse_message(event(channel_type="channel"), team_id="T1", bot_user_id=BOT)
    assert plain is not None
    assert (plain.addressed, plain.direct, plain.reply_thread_ts) == (False, False, "100.1")
    mention = parse_message(event(text=f"<@{BOT}> hi"), team_id="T1", bot_user_id=BOT)
    assert mention is not None and mention.addressed
    app_mention = parse_message(event(type="app_mention"), team_id="T1", bot_user_id=BOT)
    assert app_mention is not None and app_mention.addressed
    dm = parse_message(event(channel="D1", channel_type="im"), team_id="T1", bot_user_id=BOT)
    assert dm is not None
    assert (dm.direct, dm.reply_thread_ts, dm.scope) == (True, None, "slack:T1:D1")
    reply = parse_message(event(ts="200.2", thread_ts="100.1"), team_id="T1", bot_user_id=BOT)
    assert reply is not None
    assert (reply.reply_thread_ts, reply.scope) == ("100.1", "slack:T1:C1:100.1")


@pytest.mark.parametrize(
    ("fields", "shared", "audience", "external"),
    [
        ({"channel_type": "channel"}, False, Audience.SERVER, False),
        ({"channel_type": "group"}, False, Audience.PRIVATE, False),
        ({"channel_type": "mpim"}, False, Audience.PRIVATE, False),
        ({"channel": "D1", "channel_type": "im"}, False, Audience.DM, False),
        ({}, False, None, False),  # app_mention: the door looks it up
        # Slack Connect: the envelope says the channel is shared, or the author is of
        # another organisation (user_team).
        ({"channel_type": "channel"}, True, Audience.SHARED, False),
        ({"channel_type": "channel", "user_team": "T9"}, False, Audience.SHARED, True),
        ({"channel_type": "channel", "user_team": "T1"}, False, Audience.SERVER, False),
    ],
)
def test_who_can_read_the_place(
    fields: dict[str, Any], shared: bool, audience: Audience | None, external: bool
) -> None:
    msg = parse_message(event(**fields), team_id="T1", bot_user_id=BOT, shared=shared)
    assert msg is not None
    assert (msg.audience, msg.external) == (audience, external)


def test_deletion_finds_the_thread_scope() -> None:
    deleted = {
        "type": "message",
        "subtype": "message_deleted",
        "channel": "C1",
        "ts": "300.3",
        "deleted_ts": "200.2",
        "previous_message": {"user": "U1", "ts": "200.2", "thread_ts": "100.1"},
    }
    found = parse_deletion(deleted, team_id="T1")
    assert found is not None
    assert (found.scope, found.ts) == ("slack:T1:C1:100.1", "200.2")
    assert parse_deletion(event(), team_id="T1") is None


def changed(message: dict[str, Any], previous_text: str = "old") -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": "C1",
        "ts": "300.3",
        "event_ts": "300.3",
        "message": {"type": "message", "user": "U1", "ts": "200.2", **message},
        "previous_message": {"type": "message", "user": "U1", "ts": "200.2", "text": previous_text},
    }


def test_a_change_is_an_edit_a_tombstone_or_nothing() -> None:
    def parse(e: dict[str, Any]) -> Edit | None:
        return parse_change(e, team_id="T1", bot_user_id=BOT)

    assert parse(changed({"text": "new <@U2>"})) == Edit("slack:T1:C1", "200.2", "U1", "new <@U2>")
    in_thread = parse(changed({"text": "new", "thread_ts": "100.1"}))
    assert isinstance(in_thread, Edit) and in_thread.scope == "slack:T1:C1:100.1"
    tombstone = changed(
        {"subtype": "tombstone", "user": "USLACKBOT", "thread_ts": "200.2", "text": "deleted"}
    )
    assert parse(tombstone) is None
    assert parse_deletion(tombstone, team_id="T1") == Deletion("slack:T1:C1", "200.2")
    for ignored in (
        changed({"text": "old", "attachments": [{"title": "preview"}]}),  # an unfurl
        changed({"text": "new", "bot_id": "B1"}),
        changed({"text": "new", "user": BOT}),
        changed({"text": "new", "subtype": "channel_join"}),
        changed({"text": "new", "ts": "../.."}),
        changed({"text": 5}),
        {**changed({"text": "new"}), "message": "garbage"},
        event(),
    ):
        assert parse(ignored) is None, ignored


def test_plain_text_turns_markup_into_words() -> None:
    text = (
        f"<@{BOT}> ask <@U2> and <@U3|carol> in <#C9|ops>, <!here>: see "
        "<https://example.com|the doc> or <https://x.io> &lt;3 &amp; more"
    )
    assert mentioned_users(text, exclude=BOT) == ["U2", "U3"]
    assert plain_text(text, bot_user_id=BOT, bot_name="memorybot", names={"U2": "Bob"}) == (
        "@memorybot ask @Bob and @carol in #ops, @here: see the doc (https://example.com) "
        "or https://x.io <3 & more"
    )


def test_to_mrkdwn_escapes_and_translates_outside_code() -> None:
    text = "# Plan\n**bold** and [docs](https://d.io?a=1&b=2) <!channel>\n```\n**raw** <x>\n```"
    assert to_mrkdwn(text) == (
        "*Plan*\n*bold* and <https://d.io?a=1&amp;b=2|docs> &lt;!channel&gt;\n"
        "```\n**raw** &lt;x&gt;\n```"
    )


def test_result_blocks_stay_within_slack_limits() -> None:
    huge = CommandResult(
        title="Memory of slack:T1:C1",
        sections=[(f"Section {n}", "word " * 1500) for n in range(40)],
    )
    blocks = result_blocks(huge)
    assert len(blocks) == MAX_BLOCKS
    assert blocks[0]["type"] == "header"
    assert blocks[-1]["type"] == "context"  # where to find the rest
    sections = [b for b in blocks if b["type"] == "section"]
    assert all(len(b["text"]["text"]) <= SECTION_CHARS for b in sections)
    long_title = result_blocks(CommandResult(title="x" * 200))
    assert long_title[0]["type"] == "section"


def test_confirm_blocks_carry_the_scope() -> None:
    blocks = confirm_blocks(CommandResult(title="Sure?", needs_confirm=True), "slack:T1:C1")
    actions = blocks[-1]["elements"]
    assert [(a["action_id"], a["value"]) for a in actions] == [
        ("memory_forget_all_confirm", "slack:T1:C1"),
        ("memory_forget_all_cancel", "slack:T1:C1"),
    ]
    assert actions[0]["style"] == "danger"
