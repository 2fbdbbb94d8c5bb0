"""A Discord thread started from a message shares that message's id: a follow-up in the
thread sees the message and the bot's answer to it. The unmodified discord.py client
against the fake Discord, the fake OpenAI server."""

from __future__ import annotations

import pytest

from tests.discord_world import World, last_prompt, say, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory

pytestmark = pytest.mark.fake("discord")


async def test_a_thread_from_a_message_sees_the_message_and_the_answer_to_it(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.bob, "lunch is at noon", mentions_bot=False)
        asked = await say(
            fake,
            bot,
            world.general,
            world.alice,
            "note: the lab door code is 4417-B",
            mentions_bot=True,
        )
        [answer] = await fake.wait_for_messages(world.general.id, 1)
        thread = fake.add_thread(world.general.id, "door", thread_id=int(asked["id"]))
        await say(
            fake, bot, thread, world.alice, "what was the door code again?", mentions_bot=True
        )
        await fake.wait_for_messages(thread.id, 1)
    began = last_prompt(fake_llm).split("How this thread began", 1)[1].split("##", 1)[0]
    assert "4417-B" in began and "lunch is at noon" in began
    assert (answer.content or "")[:30] in began
