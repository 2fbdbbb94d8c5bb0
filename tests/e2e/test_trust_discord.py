"""Privacy and forgetting where Discord members meet the bot: the real discord.py client
against the fake Discord, a real Core on the private Redis, a fake model that summarises
like an LLM (one sentence per message, naming the speaker)."""

from __future__ import annotations

import json

import pytest

from tests.discord_world import World, command, embed_text, say, serving, texts_in
from tests.fakes.discord import FakeDiscord, Permission, PermissionOverwrite
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, all_keys, key_values, sentence_summaries, telling_facts

pytestmark = pytest.mark.fake("discord")

SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0}


async def test_forget_me_by_a_member_whose_name_is_inside_another_name(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """ "al" runs /memory forget me after a day in which Alice said "Alice likes hojicha tea
    very much": al's messages and what repeats them go; Alice's stay, in the log and in the
    summary."""
    fake_llm.responder = sentence_summaries()
    core = await make_core(memory=SMALL)
    al = fake.add_member(world.guild.id, name="al")
    scope = world.scope(world.general)
    lines = [
        (world.alice, "Alice likes hojicha tea very much"),
        (al, "my phone number is 555 0100 call me tonight"),
        (world.bob, "the standup moves to ten tomorrow morning"),
    ]
    async with serving(fake, core) as bot:
        for member, text in lines * 4:
            await say(fake, bot, world.general, member, text)
        await core.drain()  # the summaries are written in the background
        before = (await core.repo.reads.state(scope)).short
        assert "hojicha" in before and "555 0100" in before  # the summary quotes both
        _, forgot = await command(fake, "memory forget me", world.general, al)
    assert forgot.ephemeral and "Forgot you (al)" in (forgot.content or "")
    texts = await texts_in(core, scope)
    assert texts.count("Alice likes hojicha tea very much") == 4
    assert texts.count("the standup moves to ten tomorrow morning") == 4
    assert not any("555 0100" in t for t in texts)
    after = await core.repo.reads.state(scope)
    assert "hojicha" in after.short and "standup" in after.short
    assert "555 0100" not in after.short
    values = [v for key in await all_keys(core) for v in await key_values(core, key)]
    assert not any("555 0100" in v for v in values)


async def test_a_fact_said_in_a_private_channel_is_in_no_other_channels_prompt(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Alice tells a private channel (``@everyone`` may not view it) that she is pregnant,
    and #general that she likes green tea: asked in #general or a public thread, the bot's
    prompt knows the tea, never the pregnancy; asked in the private channel, it knows both."""
    fake_llm.responder = sentence_summaries(telling_facts)
    core = await make_core(memory=SMALL)
    private = fake.add_text_channel(
        world.guild.id,
        "close-friends",
        overwrites=[
            PermissionOverwrite(id=world.guild.id, type="role", deny=Permission.VIEW_CHANNEL),
            PermissionOverwrite(
                id=world.alice.user.id, type="member", allow=Permission.VIEW_CHANNEL
            ),
            PermissionOverwrite(
                id=fake.bot_user.id,
                type="member",
                allow=Permission.VIEW_CHANNEL | Permission.SEND_MESSAGES,
            ),
        ],
    )
    async with serving(fake, core) as bot:
        for _ in range(5):
            await say(fake, bot, private, world.alice, "between us: I am pregnant, due in May " * 3)
        for _ in range(5):
            await say(
                fake,
                bot,
                world.general,
                world.alice,
                "I drink green tea every morning before work " * 3,
            )
        await core.drain()  # the facts are learned in the background
        person = await core.repo.reads.facts(f"discord:{world.guild.id}:user:{world.alice.user.id}")
        assert [f.text for f in person] == ["alice likes green tea"]  # before anyone asks
        for channel in (world.general, world.thread, world.random, private):
            await say(
                fake, bot, channel, world.alice, "what do you know about me?", mentions_bot=True
            )
            await fake.wait_for_messages(channel.id, 1)
    *public_prompts, private_prompt = (r.prompt_text for r in fake_llm.of("reply"))
    assert len(public_prompts) == 3
    assert "pregnant" in private_prompt and "green tea" in private_prompt
    for prompt in public_prompts:
        assert "pregnant" not in prompt
        assert "green tea" in prompt  # said in public: it follows her
    person = await core.repo.reads.facts(f"discord:{world.guild.id}:user:{world.alice.user.id}")
    assert [f.text for f in person] == ["alice likes green tea"]
    assert not any("pregnant" in json.dumps(f.to_json()) for f in person)


async def test_remember_me_follows_the_member_and_show_facts_shows_it_to_them(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        _, pinned = await command(
            fake,
            "memory remember",
            world.general,
            world.alice,
            text="I am vegetarian",
            about_me=True,
        )
        await say(fake, bot, world.random, world.alice, "lunch ideas?", mentions_bot=True)
        await fake.wait_for_messages(world.random.id, 1)
        await say(fake, bot, world.random, world.bob, "lunch ideas?", mentions_bot=True)
        await fake.wait_for_messages(world.random.id, 2)
        _, shown = await command(fake, "memory show", world.random, world.alice, section="facts")
        _, others = await command(fake, "memory show", world.random, world.bob, section="facts")
    assert pinned.ephemeral and "me:f1" in (pinned.content or "")
    alice_prompt, bob_prompt = (r.prompt_text for r in fake_llm.of("reply"))
    assert "I am vegetarian" in alice_prompt and "vegetarian" not in bob_prompt
    assert "I am vegetarian" in embed_text(shown)
    assert "vegetarian" not in embed_text(others)


async def test_without_read_message_history_the_answer_is_posted_not_refused(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Discord refuses a reply (a message reference) from a bot that may not read the
    channel's history: the answer is posted as a plain message instead of a 403 for an
    answer already paid for, and only a delivered answer is remembered."""
    no_history = fake.add_text_channel(
        world.guild.id,
        "help-desk",
        overwrites=[
            PermissionOverwrite(
                id=world.guild.bot_role_id, type="role", deny=Permission.READ_MESSAGE_HISTORY
            )
        ],
    )
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, no_history, world.alice, "where is the wiki?", mentions_bot=True)
        [answer] = await fake.wait_for_messages(no_history.id, 1)
    assert answer.message_reference is None
    assert (answer.content or "").startswith("ACK:")
    assert [r.status for r in fake.requests if r.status >= 400] == []
    log = await core.repo.reads.all_entries(world.scope(no_history))
    assert [e.role for e in log] == ["user", "assistant"]
