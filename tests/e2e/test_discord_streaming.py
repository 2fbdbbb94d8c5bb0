"""Answers streamed on Discord, end to end (the real discord.py client against the fake
Discord, whose per-route limits hold by default: five messages, and five edits, per five
seconds in a channel): answers written at once in one channel edit their drafts at the
channel's pace, so Discord never answers 429, and each answer reads whole, once.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.discord_world import World, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, answer_to, answering

pytestmark = pytest.mark.fake("discord")


async def test_five_answers_streamed_at_once_in_a_channel_keep_its_route_limits(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = answering
    fake_llm.stream_piece_delay = 0.05
    core = await make_core(
        discord={"stream_replies": True, "stream_interval_s": 0.2}, llm={"concurrency": 8}
    )
    members = (world.alice, world.bob, world.admin)
    async with serving(fake, core) as bot:
        asked = await asyncio.gather(
            *(
                fake.send_message(
                    channel_id=world.general.id,
                    author_id=members[n % 3].user.id,
                    content=f"question {n}?",
                    mentions_bot=True,
                )
                for n in range(5)
            )
        )

        def complete() -> bool:
            shown = sorted(fake.messages[m.id]["content"] or "" for m in fake.sent_messages)
            return shown == sorted(answer_to(n) for n in range(5))

        await fake.wait_for(complete, timeout=30, what="every answer complete")
        await bot.handled(*asked)
        contents = {
            m.message_reference["message_id"] if m.message_reference else None: m.id
            for m in fake.sent_messages
        }
        final = [fake.messages[m.id]["content"] for m in fake.sent_messages]
    assert [r for r in fake.requests if r.status == 429] == []
    # each answer once, whole, as the reply to its question
    assert sorted(final) == sorted(answer_to(n) for n in range(5))
    assert sorted(str(k) for k in contents) == sorted(str(q["id"]) for q in asked)
    assert fake.edits, "nothing was streamed"
    assert all(
        not (fake.messages[m.id]["content"] or "").endswith(" …") for m in fake.sent_messages
    )
