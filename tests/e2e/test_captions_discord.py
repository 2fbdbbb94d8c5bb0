"""Image captions through the Discord front door: the real discord.py client against the fake
Discord (which serves the attachment's bytes at its url), a real Core on the private Redis,
and the fake OpenAI server (strict about the vision content shape; it "sees" the words
written in an image's bytes).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from config.prompts import load_prompts
from memory_core.text.attachments import human_size
from tests.captions_data import CAPTION, IMAGE, VISION, assert_no_file_bytes, stored_values
from tests.discord_world import World, chatter, copies_of, last_prompt, say, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.helpers import CoreFactory

pytestmark = pytest.mark.fake("discord")

SIZE = human_size(len(IMAGE))


async def test_an_image_only_message_is_captioned_once_and_recalled_by_its_caption(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    # A window of a few messages: the question finds the image by recall, by its caption.
    memory = {"window_tokens": 60, "window_min_tokens": 0}
    core = await make_core(llm=VISION, memory=memory, background=True)
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        shared = await say(fake, bot, world.general, world.alice, "", attachments={"p.png": IMAGE})
        await core.drain()
        await chatter(fake, bot, world, 6)  # no more caption calls: no image in them
        await say(
            fake, bot, world.general, world.bob, "who was asleep on the sofa?", mentions_bot=True
        )
        await fake.wait_for_messages(world.general.id, 1)
        await core.drain()
    [call] = fake_llm.of("caption")
    assert call.model == "fake-vision" and call.images == [IMAGE]
    [part] = [p for p in call.messages[0]["content"] if p["type"] == "image_url"]
    assert part["image_url"]["url"].startswith("data:image/png;base64,")
    [(text, author)] = await copies_of(core, scope, shared)
    url = shared["attachments"][0]["url"]
    assert text == f'[file: p.png, PNG image, {SIZE} caption: "{CAPTION}" <{url}>]'
    assert author == str(world.alice.user.id)
    prompt = last_prompt(fake_llm)
    recalled = prompt.split(load_prompts("en").headings["recall"], 1)[1].split("</memory>")[0]
    assert text in recalled
    assert core.llm.stats.of("caption").calls == 1
    assert_no_file_bytes(await stored_values(core))


async def test_vision_is_off_by_default(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(background=True)
    async with serving(fake, core) as bot:
        shared = await say(fake, bot, world.general, world.alice, "", attachments={"p.png": IMAGE})
        await core.drain()
    assert fake_llm.of("caption") == []
    [(text, _)] = await copies_of(core, world.scope(world.general), shared)
    assert "caption" not in text and text.startswith("[file: p.png, PNG image")


async def test_a_failing_caption_call_keeps_the_message_as_it_was(
    fake: FakeDiscord,
    world: World,
    make_core: CoreFactory,
    fake_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = await make_core(llm={**VISION, "max_retries": 1}, background=True)
    fake_llm.fail_next(2, status=500, purposes=("caption",))
    async with serving(fake, core) as bot:
        with caplog.at_level(logging.WARNING, logger="memory_core.service.captions"):
            shared = await say(
                fake, bot, world.general, world.alice, "look", attachments={"p.png": IMAGE}
            )
            await core.drain()
    assert len(fake_llm.of("caption")) == 2  # one retry, then given up
    [(text, _)] = await copies_of(core, world.scope(world.general), shared)
    assert text == f"look\n[file: p.png, PNG image, {SIZE} <{shared['attachments'][0]['url']}>]"
    assert any("no caption for 'p.png'" in r.getMessage() for r in caplog.records)


async def test_a_message_deleted_before_its_caption_arrives_stays_forgotten(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    asked, release = asyncio.Event(), asyncio.Event()

    async def slow_caption(request: RecordedRequest) -> str | None:
        if request.purpose != "caption":
            return None
        asked.set()
        await release.wait()
        return "A secret whiteboard plan."

    fake_llm.responder = slow_caption
    core = await make_core(llm=VISION, background=True)
    scope = world.scope(world.general)
    where = {"channel_id": str(world.general.id), "guild_id": str(world.guild.id)}
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.bob, "before")
        shared = await say(fake, bot, world.general, world.alice, "", attachments={"p.png": IMAGE})
        await asyncio.wait_for(asked.wait(), 5)
        await fake.dispatch(
            "MESSAGE_DELETE", {"id": shared["id"], **where}, guild_id=world.guild.id
        )
        await bot.deleted(shared)
        release.set()
        await core.drain()
    assert await copies_of(core, scope, shared) == []
    values = await stored_values(core)
    assert not any("whiteboard" in v or "p.png" in v for v in values)
    assert_no_file_bytes(values)


async def test_an_edit_that_keeps_the_image_keeps_its_caption(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(llm=VISION, background=True)
    async with serving(fake, core) as bot:
        shared = await say(fake, bot, world.general, world.alice, "a", attachments={"p.png": IMAGE})
        await core.drain()
        await fake.edit_user_message(shared, content="our cat")
        await bot.edited(shared)
        await core.drain()
    assert len(fake_llm.of("caption")) == 1
    [(text, _)] = await copies_of(core, world.scope(world.general), shared)
    assert text.startswith(f'our cat\n[file: p.png, PNG image, {SIZE} caption: "{CAPTION}" <')
