"""Image captions through the Slack front door: the real Bolt app against the fake Slack
(which serves a shared file's ``url_private`` only to the bot token with ``files:read``), a
real Core on the private Redis, and the fake OpenAI server (strict about the vision content
shape; it "sees" the words written in an image's bytes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memory_core.text.attachments import human_size
from tests.captions_data import CAPTION, IMAGE, VISION, assert_no_file_bytes, stored_values
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.fakes.slack import FakeSlack
from tests.helpers import CoreFactory, slack_bot_scopes
from tests.slack_harness import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT,
    BOT_TOKEN,
    C1,
    CAROL,
    DAVE,
    DM,
    SYNC,
    T1,
    T2,
    Harness,
    entries,
    slack_settings,
    start_harness,
)

SIZE = human_size(len(IMAGE))


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice", display_name="Alice", is_admin=True)
    server.add_user(BOB, "bob", display_name="Bob")
    server.add_user(CAROL, "carol", display_name="Carol")
    server.add_user(DAVE, "dave", display_name="Dave", team_id=T2)
    server.add_channel(C1, "general")
    server.add_channel(SYNC, "sync")
    server.add_channel(DM, DM, is_im=True, user_id=ALICE)


# An install of the manifest plus files:read, as docs/slack.md says to add for vision.
pytestmark = pytest.mark.fake(
    "slack",
    bot_token=BOT_TOKEN,
    app_token=APP_TOKEN,
    team_id=T1,
    bot_user_id=BOT,
    scopes=[*slack_bot_scopes(), "files:read"],
    setup=workspace,
)


async def harness(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI, **overrides: Any
) -> AsyncIterator[Harness]:
    core = await make_core(slack=slack_settings(fake), background=True, **overrides)
    async for running in start_harness("http", fake, core, fake_llm):
        yield running


@pytest.fixture
async def vision(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    memory = {"window_tokens": 60, "window_min_tokens": 0}  # recall, not the window
    async for running in harness(fake, make_core, fake_llm, llm=VISION, memory=memory):
        yield running


async def share_image(slack: Harness, text: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    image = slack.fake.file_object(
        name="p.png",
        mimetype="image/png",
        filetype="png",
        pretty_type="PNG",
        user_id=ALICE,
        data=IMAGE,
    )
    shared = slack.fake.message_event(text=text, user_id=ALICE, channel_id=C1, files=[image])
    await slack.deliver(shared)
    await slack.settle()
    return shared, image


async def copies(slack: Harness, message: dict[str, Any]) -> list[str]:
    return [e.text for e in await entries(slack.core) if e.platform_id == message["ts"]]


async def test_an_image_only_share_is_captioned_once_and_recalled_by_its_caption(
    vision: Harness,
) -> None:
    slack = vision
    shared, image = await share_image(slack)
    await slack.core.drain()
    for i in range(6):
        await slack.say(f"bob {i} talks about the weather and the trains", user=BOB)
    await slack.mention("who was asleep on the sofa?", user=BOB)
    await slack.replies(1)
    await slack.core.drain()
    [call] = slack.llm.of("caption")
    assert call.images == [IMAGE]
    line = f'[file: p.png, PNG, {SIZE} caption: "{CAPTION}" <{image["permalink"]}>]'
    assert await copies(slack, shared) == [line]
    recalled = slack.llm.of("reply")[-1].prompt_text.split("Recalled from earlier", 1)[1]
    assert line in recalled.split("</memory>")[0]
    file_id = image["id"]
    assert slack.fake.file_downloads == [(file_id, True)]  # with the bot token and files:read
    assert_no_file_bytes(await stored_values(slack.core))


async def test_vision_off_by_default_downloads_nothing(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    async for slack in harness(fake, make_core, fake_llm):
        shared, image = await share_image(slack)
        await slack.core.drain()
        assert slack.llm.of("caption") == [] and slack.fake.file_downloads == []
        assert await copies(slack, shared) == [f"[file: p.png, PNG, {SIZE} <{image['permalink']}>]"]


async def test_without_files_read_there_is_no_caption_and_the_log_says_why(
    make_core: CoreFactory, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeSlack(
        bot_token=BOT_TOKEN,
        app_token=APP_TOKEN,
        team_id=T1,
        bot_user_id=BOT,
        scopes=slack_bot_scopes(),
    ) as manifest_only:
        workspace(manifest_only)
        async for slack in harness(manifest_only, make_core, fake_llm, llm=VISION):
            with caplog.at_level(logging.WARNING, logger="memory_core.service.captions"):
                shared, image = await share_image(slack, "our cat")
                await slack.core.drain()
            assert slack.fake.file_downloads == [(image["id"], False)]
            assert slack.llm.of("caption") == []
            assert await copies(slack, shared) == [
                f"our cat\n[file: p.png, PNG, {SIZE} <{image['permalink']}>]"
            ]
    assert any("files:read" in r.getMessage() for r in caplog.records)


async def test_a_failing_caption_call_keeps_the_share_as_it_was(vision: Harness) -> None:
    slack = vision
    slack.llm.fail_next(1, status=503, purposes=("caption",))
    shared, image = await share_image(slack, "look")
    await slack.core.drain()
    assert len(slack.llm.of("caption")) == 1
    assert await copies(slack, shared) == [
        f"look\n[file: p.png, PNG, {SIZE} <{image['permalink']}>]"
    ]


async def test_a_share_deleted_before_its_caption_arrives_stays_forgotten(
    vision: Harness,
) -> None:
    slack = vision
    asked, release = asyncio.Event(), asyncio.Event()

    async def slow_caption(request: RecordedRequest) -> str | None:
        if request.purpose != "caption":
            return None
        asked.set()
        await release.wait()
        return "A secret whiteboard plan."

    slack.llm.responder = slow_caption
    shared, _ = await share_image(slack)
    await asyncio.wait_for(asked.wait(), 5)
    await slack.deliver(
        {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "channel": C1,
            "channel_type": "channel",
            "ts": slack.fake.next_ts(),
            "deleted_ts": shared["ts"],
            "previous_message": {"type": "message", "user": ALICE, "text": ""}
            | {"ts": shared["ts"]},
        }
    )
    await slack.settle()
    release.set()
    await slack.core.drain()
    assert await copies(slack, shared) == []
    values = await stored_values(slack.core)
    assert not any("whiteboard" in v or "p.png" in v for v in values)
    assert_no_file_bytes(values)


async def test_an_edit_of_a_captioned_share_keeps_its_caption(vision: Harness) -> None:
    slack = vision
    shared, image = await share_image(slack, "a")
    await slack.core.drain()
    await slack.deliver(slack.fake.message_changed_event(original=shared, text="our cat"))
    await slack.settle()
    await slack.core.drain()
    assert len(slack.llm.of("caption")) == 1
    assert await copies(slack, shared) == [
        f'our cat\n[file: p.png, PNG, {SIZE} caption: "{CAPTION}" <{image["permalink"]}>]'
    ]
