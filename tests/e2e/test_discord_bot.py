"""memorybot's Discord front door end to end: the real discord.py client from
``bots.discord.bot`` against the local fake Discord, a real Core on the private Redis, and the
fake OpenAI server.

Nothing sleeps blindly: tests wait for what the fake recorded (``wait_for_*``) or for the bot
to finish handling a message (:class:`ObservedBot`, a subclass that only signals).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from aiohttp import web
from discord.http import Route

from bots.discord import commands as discord_commands
from bots.discord.bot import MemoryBot, run_discord
from bots.discord.commands import sync_command_tree
from config.prompts import load_prompts
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.errors import ConfigError
from memory_core.scopes import Scope
from memorybot_testkit.redis_servers import LocalRedis
from tests.discord_world import (
    World,
    chatter,
    command,
    copies_of,
    custom_id,
    embed_text,
    last_prompt,
    say,
    serving,
    texts_in,
)
from tests.fakes.discord import (
    JSON,
    FakeDiscord,
    FakeMember,
    Permission,
    PermissionOverwrite,
)
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.helpers import START, CoreFactory, forgotten, make_settings, quoting_facts, scope_values

pytestmark = pytest.mark.fake("discord")

# -------------------------------------------------------------------------- messages


async def test_mention_gets_a_reply_that_uses_channel_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "The deploy freeze starts on Friday")
        assert fake.sent_messages == []  # mode "mention": stored, not answered
        assert fake_llm.of("reply") == []
        trigger = await say(
            fake, bot, world.general, world.bob, "when does the freeze start?", mentions_bot=True
        )
        [reply] = await fake.wait_for_messages(world.general.id, 1)
        assert fake.typing and fake.typing[0].channel_id == world.general.id
    assert reply.message_reference is not None
    assert reply.message_reference["message_id"] == trigger["id"]
    assert reply.content is not None and reply.content.startswith("ACK:")
    prompt = last_prompt(fake_llm)
    assert "The deploy freeze starts on Friday" in prompt
    assert "alice" in prompt
    assert f"<@{fake.bot_user.id}>" not in prompt
    stored = await core.admin.show(world.scope(world.general))
    assert [(e.author, e.author_id, e.role) for e in stored.recent] == [
        ("alice", str(world.alice.user.id), "user"),
        ("bob", str(world.bob.user.id), "user"),
        ("memorybot", "bot", "assistant"),
    ]
    assert stored.recent[1].text == "@memorybot when does the freeze start?"
    assert stored.recent[1].platform_id == trigger["id"]


async def test_a_message_from_a_guild_the_client_has_not_cached_keeps_its_guild_scope(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    # discord.py puts a message of an uncached guild on a PartialMessageable with
    # message.guild None; it is still that guild's channel, not the author's DM.
    fake.withhold_guild(world.guild.id)
    core = await make_core()
    async with serving(fake, core) as bot:
        assert bot.get_guild(world.guild.id) is None
        await say(fake, bot, world.general, world.alice, "the build server is in rack 4")
        assert fake.sent_messages == []  # mode "mention": stored, not answered
        await say(
            fake, bot, world.general, world.bob, "where is the build server?", mentions_bot=True
        )
        [reply] = await fake.wait_for_messages(world.general.id, 1)
    assert await texts_in(core, world.scope(world.general)) == [
        "the build server is in rack 4",
        "@memorybot where is the build server?",
        reply.content,
    ]
    assert await texts_in(core, f"discord:dm:{world.alice.user.id}") == []
    assert await texts_in(core, f"discord:dm:{world.bob.user.id}") == []


async def test_a_reply_to_the_bot_is_answered_without_a_mention(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "hello there", mentions_bot=True)
        [first] = await fake.wait_for_messages(world.general.id, 1)
        await bot.handled(first)  # its echo, ignored
        followup = await say(
            fake, bot, world.general, world.alice, "and what about lunch?", reply_to=first
        )
        _, second = await fake.wait_for_messages(world.general.id, 2)
    assert second.message_reference is not None
    assert second.message_reference["message_id"] == followup["id"]
    assert len(fake_llm.of("reply")) == 2


async def test_mode_off_remembers_but_never_answers(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        _, response = await command(
            fake, "memory config mode", world.general, world.admin, value="off"
        )
        assert response.ephemeral
        assert "mode=off" in (response.content or "")
        await say(fake, bot, world.general, world.alice, "are you there?", mentions_bot=True)
        await say(fake, bot, world.general, world.alice, "just notes")
    assert fake.sent_messages == []
    assert fake_llm.of("reply") == []
    assert await texts_in(core, world.scope(world.general)) == [
        "@memorybot are you there?",
        "just notes",
    ]


async def test_config_mode_all_answers_unaddressed_messages(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        _, refused = await command(
            fake, "memory config mode", world.general, world.alice, value="all"
        )
        assert refused.ephemeral
        assert "Only admins" in (refused.content or "")
        await say(fake, bot, world.general, world.alice, "nobody asked you")
        assert fake.sent_messages == []
        await command(fake, "memory config mode", world.general, world.admin, value="all")
        trigger = await say(fake, bot, world.general, world.alice, "what do you think?")
        [reply] = await fake.wait_for_messages(world.general.id, 1)
    assert reply.message_reference is not None
    assert reply.message_reference["message_id"] == trigger["id"]


async def test_channels_and_guilds_never_see_each_others_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "general-secret: the code is 4711")
        await say(fake, bot, world.random, world.alice, "random-note: pizza on Thursday")
        await say(fake, bot, world.other_channel, world.carol, "elsewhere-note: lake trip")

        await say(fake, bot, world.random, world.bob, "what is planned?", mentions_bot=True)
        await fake.wait_for_messages(world.random.id, 1)
        random_prompt = last_prompt(fake_llm)
        await say(fake, bot, world.other_channel, world.carol, "anything?", mentions_bot=True)
        await fake.wait_for_messages(world.other_channel.id, 1)
        other_prompt = last_prompt(fake_llm)

        _, shown = await command(fake, "memory show", world.random, world.bob)
    assert "random-note" in random_prompt
    assert "general-secret" not in random_prompt and "elsewhere-note" not in random_prompt
    assert "elsewhere-note" in other_prompt
    assert "general-secret" not in other_prompt and "random-note" not in other_prompt
    text = embed_text(shown)
    assert "random-note" in text
    assert "general-secret" not in text and "elsewhere-note" not in text


async def test_a_dm_stays_in_its_own_scope_and_is_always_answered(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    dm_channel = fake.dm_channel_id(world.alice.user.id)
    async with serving(fake, core) as bot:
        sent = await fake.send_dm(user_id=world.alice.user.id, content="my dm secret is 99")
        await bot.handled(sent)
        [reply] = await fake.wait_for_messages(dm_channel, 1)
        await say(fake, bot, world.general, world.alice, "hi all", mentions_bot=True)
        await fake.wait_for_messages(world.general.id, 1)
    assert reply.guild_id is None
    assert reply.message_reference is not None
    assert await texts_in(core, f"discord:dm:{world.alice.user.id}") == [
        "my dm secret is 99",
        reply.content,
    ]
    assert "my dm secret" not in last_prompt(fake_llm)
    assert "my dm secret is 99" not in await texts_in(core, world.scope(world.general))


@pytest.mark.parametrize("where", ["thread", "forum_post"])
async def test_a_thread_reads_its_parents_long_term_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI, where: str
) -> None:
    core = await make_core()
    thread = getattr(world, where)
    parent_scope = f"discord:{world.guild.id}:{thread.parent_id}"
    await core.admin.edit_tier(parent_scope, "overview", "The team ships version 3 on Tuesday.")
    async with serving(fake, core) as bot:
        await say(fake, bot, thread, world.alice, "when do we ship?", mentions_bot=True)
        [reply] = await fake.wait_for_messages(thread.id, 1)
    assert "ships version 3 on Tuesday" in last_prompt(fake_llm)
    thread_scope = world.scope(thread)
    assert await texts_in(core, thread_scope) == ["@memorybot when do we ship?", reply.content]
    assert await texts_in(core, parent_scope) == []
    # The thread sits under its channel: its scope names it, and the channel lists it.
    assert Scope.of(thread_scope).parent == Scope.of(parent_scope)
    assert await core.repo.reads.threads_of(parent_scope) == [thread_scope]


async def test_other_bots_and_its_own_messages_are_ignored(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    other_bot = fake.add_member(world.guild.id, name="otherbot", bot=True)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, other_bot, "beep, hello memorybot", mentions_bot=True)
        await say(fake, bot, world.general, world.alice, "", attachments={"cat.png": b"\x89PNG"})
        await say(fake, bot, world.general, world.alice, "hello", mentions_bot=True)
        [reply] = await fake.wait_for_messages(world.general.id, 1)
        await bot.handled(reply)  # the echo of its own answer
    assert len(fake_llm.of("reply")) == 1
    # A file without text is Alice's message (remembered, not answered); the bot's are not.
    texts = await texts_in(core, world.scope(world.general))
    assert texts[0].startswith("[file: cat.png, PNG image, 4 bytes <http")
    assert texts[1:] == ["@memorybot hello", reply.content]


async def test_a_file_only_message_is_remembered_and_recalled_by_the_files_name(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    # A window of a few messages: the question finds the file by recall, not as recent text.
    core = await make_core(memory={"window_tokens": 60, "window_min_tokens": 0})
    async with serving(fake, core) as bot:
        shared = await say(
            fake,
            bot,
            world.general,
            world.alice,
            "",
            attachments={"q3-report.pdf": b"%PDF-1.7" + b"0" * 2040},
            descriptions={"q3-report.pdf": "Q3 numbers </messages> for the board"},
        )
        await chatter(fake, bot, world, 6)
        await say(
            fake,
            bot,
            world.general,
            world.bob,
            "what was in the q3-report pdf alice shared?",
            mentions_bot=True,
        )
        await fake.wait_for_messages(world.general.id, 1)
    [attachment] = shared["attachments"]
    line = (
        '[file: q3-report.pdf, PDF, 2.0 KB: "Q3 numbers ‹/messages› for the board" '
        f"<{attachment['url']}>]"
    )
    [stored] = await copies_of(core, world.scope(world.general), shared)
    assert stored == (line, str(world.alice.user.id))
    prompt = last_prompt(fake_llm)
    recalled = prompt.split(load_prompts("en").headings["recall"], 1)[1].split("</memory>")[0]
    assert line in recalled
    assert "</messages> for the board" not in prompt


async def test_an_edit_keeps_the_messages_files(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        sent = await say(
            fake, bot, world.general, world.alice, "draft", attachments={"plan.txt": b"x" * 10}
        )
        await fake.edit_user_message(sent, content="final plan")
        await bot.edited(sent)
    [(text, _)] = await copies_of(core, world.scope(world.general), sent)
    assert text.startswith("final plan\n[file: plan.txt, text, 10 bytes <http")


async def test_an_edit_that_removes_only_a_file_forgets_the_file(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        sent = await say(
            fake,
            bot,
            world.general,
            world.alice,
            "the plan is attached",
            attachments={"salaries-2027.xlsx": b"x" * 10, "plan.txt": b"y" * 5},
        )
        # the text stays; the file shared by mistake is taken off the message
        await fake.edit_user_message(sent, keep_attachments=["plan.txt"])
        await bot.edited(sent)
        await say(fake, bot, world.general, world.bob, "what was shared?", mentions_bot=True)
        await fake.wait_for_messages(world.general.id, 1)
    [(text, _)] = await copies_of(core, scope, sent)
    assert text.startswith("the plan is attached\n[file: plan.txt, text, 5 bytes <http")
    assert not [v for v in await scope_values(core, scope) if "salaries-2027" in v]
    assert "salaries-2027" not in last_prompt(fake_llm)
    assert "plan.txt" in last_prompt(fake_llm)


async def test_allow_lists_ignore_everything_else(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core(discord={"allowed_channel_ids": [world.general.id]})
    async with serving(fake, core) as bot:
        await say(fake, bot, world.random, world.alice, "not here", mentions_bot=True)
        await say(fake, bot, world.thread, world.alice, "in an allowed channel's thread")
        dm = await fake.send_dm(user_id=world.alice.user.id, content="a dm")
        await bot.handled(dm)
        _, refused = await command(fake, "memory show", world.random, world.alice)
    assert fake.sent_messages == []
    assert await texts_in(core, world.scope(world.random)) == []
    assert await texts_in(core, world.scope(world.thread)) == ["in an allowed channel's thread"]
    assert await texts_in(core, f"discord:dm:{world.alice.user.id}") == []
    assert refused.ephemeral and "not enabled" in (refused.content or "")


async def test_messages_deleted_on_discord_are_forgotten(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    scope = world.scope(world.general)
    where = {"channel_id": str(world.general.id), "guild_id": str(world.guild.id)}
    async with serving(fake, core) as bot:
        keep = await say(fake, bot, world.general, world.alice, "this one stays")
        gone = await say(fake, bot, world.general, world.alice, "oops, my password is hunter2")
        spam = [
            await say(fake, bot, world.general, world.bob, f"buy cheap stuff {i}") for i in range(3)
        ]
        dm = await fake.send_dm(user_id=world.alice.user.id, content="dm typo to delete")
        await bot.handled(dm)
        await fake.wait_for_messages(fake.dm_channel_id(world.alice.user.id), 1)

        await fake.dispatch("MESSAGE_DELETE", {"id": gone["id"], **where}, guild_id=world.guild.id)
        await fake.dispatch(
            "MESSAGE_DELETE_BULK",
            {"ids": [m["id"] for m in spam], **where},
            guild_id=world.guild.id,
        )
        await fake.dispatch(
            "MESSAGE_DELETE", {"id": dm["id"], "channel_id": dm["channel_id"]}, guild_id=None
        )
        await bot.deleted(gone, dm, *spam)
    assert await texts_in(core, scope) == [keep["content"]]
    assert not any("hunter2" in v for v in await scope_values(core, scope))
    dm_texts = await texts_in(core, f"discord:dm:{world.alice.user.id}")
    assert len(dm_texts) == 1 and dm_texts[0].startswith("ACK:")  # only the bot's answer


# -------------------------------------------------------------------------- edits

PHONE = "555-0142"
DOOR_CODE = "4417-B"
# Compaction after a handful of messages, so today's short tier holds the text too.
SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 4, "compact_keep_tokens": 20}


def person_scope(world: World, member: FakeMember) -> str:
    return f"discord:{world.guild.id}:user:{member.user.id}"


async def test_an_edit_removes_the_text_from_every_tier_day_week_and_fact(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = quoting_facts(PHONE)
    clock = ManualClock(datetime.now(UTC))  # Discord's snowflakes carry the real time
    core = await make_core(clock=clock, memory=SMALL)
    scope, person = world.scope(world.general), person_scope(world, world.alice)
    async with serving(fake, core) as bot:
        pasted = await say(
            fake, bot, world.general, world.alice, f"my number is {PHONE}, call me after lunch"
        )
        await chatter(fake, bot, world, 8)
        assert PHONE in (await core.repo.reads.state(scope)).short
        clock.advance(timedelta(days=8))  # the day and its week close
        await core.maintenance.maintain(scope)
        state = await core.repo.reads.state(scope)
        spread = {
            "days": any(PHONE in d.summary for d in await core.repo.reads.days(scope)),
            "episodes": any(PHONE in d.summary for d in await core.repo.reads.episodes(scope)),
            "weeks": any(PHONE in w.summary for w in await core.repo.reads.weeks(scope)),
            "mid": PHONE in state.mid,
            "long": PHONE in state.long,
            "overview": PHONE in state.overview,
            "facts": any(PHONE in f.text for f in await core.repo.reads.facts(scope)),
            "person facts": any(PHONE in f.text for f in await core.repo.reads.facts(person)),
        }
        assert all(spread.values()), spread

        await fake.edit_user_message(pasted, content="call me after lunch")
        await bot.edited(pasted)

    values = await scope_values(core, scope) + await scope_values(core, person)
    assert not [v for v in values if PHONE in v]
    assert await copies_of(core, scope, pasted) == [
        ("call me after lunch", str(world.alice.user.id))
    ]
    assert await core.repo.reads.log_length(scope) == 9


async def test_an_edit_today_rewrites_the_short_tier_and_link_previews_change_nothing(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = quoting_facts(DOOR_CODE)
    core = await make_core(clock=ManualClock(datetime.now(UTC)), memory=SMALL)
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        pasted = await say(
            fake, bot, world.general, world.alice, f"the lab door code is {DOOR_CODE} today"
        )
        await chatter(fake, bot, world, 6)
        assert DOOR_CODE in (await core.repo.reads.state(scope)).short
        before = await scope_values(core, scope)
        # Discord adds a link preview, and a no-op edit (same text): memory stays as it is.
        embed = {"type": "link", "url": "https://example.com/lab", "title": "Lab"}
        await fake.unfurl_links(pasted, embeds=[embed])
        await fake.edit_user_message(pasted, content=pasted["content"])
        await bot.edited(pasted, updates=2)
        assert await scope_values(core, scope) == before

        await fake.edit_user_message(pasted, content="the lab door code is in the vault")
        await bot.edited(pasted, updates=3)
    assert not [v for v in await scope_values(core, scope) if DOOR_CODE in v]
    assert await copies_of(core, scope, pasted) == [
        ("the lab door code is in the vault", str(world.alice.user.id))
    ]
    assert DOOR_CODE not in (await core.repo.reads.state(scope)).short


async def test_edits_in_a_thread_and_a_dm_land_in_their_scopes(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    thread, dm_scope = world.scope(world.thread), f"discord:dm:{world.alice.user.id}"
    async with serving(fake, core) as bot:
        in_thread = await say(fake, bot, world.thread, world.bob, f"thread note {PHONE}")
        in_dm = await fake.send_dm(user_id=world.alice.user.id, content=f"dm note {DOOR_CODE}")
        await bot.handled(in_dm)
        await fake.wait_for_messages(fake.dm_channel_id(world.alice.user.id), 1)
        await fake.edit_user_message(in_thread, content=f"thread note <@{world.alice.user.id}>")
        await fake.edit_user_message(in_dm, content="dm note")
        await bot.edited(in_thread)
        await bot.edited(in_dm)
    assert await copies_of(core, thread, in_thread) == [
        ("thread note @alice", str(world.bob.user.id))  # mentions read as names, as when new
    ]
    assert await copies_of(core, dm_scope, in_dm) == [("dm note", str(world.alice.user.id))]


# -------------------------------------------------------------------------- answers


async def test_a_long_answer_is_split_under_2000_characters(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    paragraph = "Memory keeps the channel's history in tiers. " * 25
    code = "```python\n" + "\n".join(f"print('line {i}')" for i in range(120)) + "\n```"
    answer = "\n\n".join([paragraph, code, paragraph, paragraph])
    assert len(answer) > 5000
    fake_llm.responder = lambda request: answer if request.purpose == "reply" else None
    core = await make_core(bot={"reply_max_chars": 10_000})
    async with serving(fake, core) as bot:
        trigger = await say(fake, bot, world.general, world.alice, "explain", mentions_bot=True)
        await fake.wait_for(lambda: len(fake.sent_messages) >= 3, what="three parts")
        await fake.wait_for(
            lambda: sum(len(m.content or "") for m in fake.sent_messages) >= 5000,
            what="the whole answer",
        )
        messages = list(fake.sent_messages)
    assert all(len(m.content or "") <= 2000 for m in messages)
    assert messages[0].message_reference is not None
    assert messages[0].message_reference["message_id"] == trigger["id"]
    assert all(m.message_reference is None for m in messages[1:])
    for m in messages:
        assert (m.content or "").count("```") % 2 == 0, m.content
    joined = "".join(
        (m.content or "").replace("```python", "").replace("```", "") for m in messages
    )
    assert joined.count("print('line") == 120


@pytest.mark.parametrize("streamed", [False, True], ids=["posted", "streamed"])
async def test_a_huge_answer_is_cut_to_a_few_messages_with_a_marker(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI, streamed: bool
) -> None:
    """A 1 MB answer was once posted whole, as 527 messages: it is cut at
    bot.reply_max_chars (4,000 by default), so two or three messages, the last ending with
    the marker; memory holds the cut answer."""
    answer = "All work and no play makes memorybot a dull bot.\n" * 21_000
    assert len(answer) > 1_000_000
    fake_llm.responder = lambda request: answer if request.purpose == "reply" else None
    fake_llm.stream_piece_chars = 1000
    core = await make_core(discord={"stream_replies": streamed, "stream_interval_s": 0.2})
    marker = load_prompts("en").say("reply_cut_long")
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "say it all", mentions_bot=True)
        await fake.wait_for(
            lambda: (
                any((m.content or "").endswith(marker) for m in fake.sent_messages)
                or any((e.content or "").endswith(marker) for e in fake.edits)
            ),
            what="the marker",
        )
        messages = list(fake.sent_messages)
    assert 2 <= len(messages) <= 3, len(messages)
    contents = [fake.messages[m.id]["content"] for m in messages]  # after any edits
    assert all(len(c) <= 2000 for c in contents)
    assert contents[-1].endswith(marker)
    assert sum(len(c) for c in contents) <= 4000 + 10  # parts split on lines
    [*_, stored] = await texts_in(core, world.scope(world.general))
    assert len(stored) <= 4000 and stored.endswith(marker)


async def test_an_llm_failure_is_an_apology_and_the_message_is_remembered(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.fail_next(purposes=("reply",))
    core = await make_core()
    async with serving(fake, core) as bot:
        trigger = await say(
            fake, bot, world.general, world.alice, "remember the 7th", mentions_bot=True
        )
        [reply] = await fake.wait_for_messages(world.general.id, 1)
    assert reply.content == load_prompts("en").apology
    assert reply.message_reference is not None
    assert reply.message_reference["message_id"] == trigger["id"]
    assert await texts_in(core, world.scope(world.general)) == ["@memorybot remember the 7th"]


async def test_offline_replies_are_sent_like_normal_replies(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core(offline=True)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "budget is 300 euros")
        await say(fake, bot, world.general, world.alice, "lunch is at noon")
        await say(fake, bot, world.general, world.alice, "what is the budget?", mentions_bot=True)
        [reply] = await fake.wait_for_messages(world.general.id, 1)
    assert "] alice: budget is 300 euros" in (reply.content or "")  # related to the question
    assert "lunch" not in (reply.content or "")
    assert reply.message_reference is not None


class SlowStreamingOpenAI(FakeOpenAI):
    """The fake OpenAI, streaming its pieces with a pause in between (like a real model)."""

    piece_delay: float = 0.03

    async def _stream(
        self, request: web.Request, recorded: RecordedRequest, text: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(0, len(text), 20):
            chunk = {
                "id": "chatcmpl-slow",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": recorded.model,
                "choices": [
                    {"index": 0, "delta": {"content": text[i : i + 20]}, "finish_reason": None}
                ],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await asyncio.sleep(self.piece_delay)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def test_streaming_edits_the_reply_about_once_per_interval(
    fake: FakeDiscord, world: World, clean_redis: str
) -> None:
    interval = 0.2
    answer = " ".join(f"word{i}" for i in range(120))  # ~700 characters, 36 pieces
    async with SlowStreamingOpenAI() as slow_llm:
        slow_llm.responder = lambda request: answer if request.purpose == "reply" else None
        settings = make_settings(
            redis_url=clean_redis,
            llm_url=slow_llm.base_url,
            discord={"stream_replies": True, "stream_interval_s": interval},
        )
        core = await build_core(settings, clock=ManualClock(START), background=False)
        try:
            async with serving(fake, core) as bot:
                started = time.monotonic()
                await say(fake, bot, world.general, world.alice, "talk", mentions_bot=True)
                duration = time.monotonic() - started
                [draft] = await fake.wait_for_messages(world.general.id, 1)
                await fake.wait_for(lambda: fake.messages[draft.id]["content"] == answer)
        finally:
            await core.close()
    edits = [e for e in fake.edits if e.message_id == draft.id]
    assert len(edits) >= 2
    assert draft.message_reference is not None
    assert edits[-1].content == answer
    assert all((e.content or "").endswith(" …") for e in edits[:-1])  # still being written
    times = [draft.at] + [e.at for e in edits[:-1]]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= interval * 0.5, gaps  # throttled at the bot; allow for jitter
    assert len(edits) <= duration / interval + 2
    assert len(fake.sent_messages) == 1


async def test_a_forbidden_channel_is_logged_once_and_others_keep_working(
    fake: FakeDiscord,
    world: World,
    make_core: CoreFactory,
    fake_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    read_only = fake.add_text_channel(
        world.guild.id,
        "announcements",
        overwrites=[
            PermissionOverwrite(
                id=world.guild.bot_role_id, type="role", deny=Permission.SEND_MESSAGES
            )
        ],
    )
    fake.forbid_channel(world.general.id)  # Discord says 403 although the cache says yes
    core = await make_core()
    caplog.set_level(logging.WARNING, logger="bots")
    async with serving(fake, core) as bot:
        for i in range(2):
            await say(fake, bot, world.general, world.alice, f"hello {i}", mentions_bot=True)
            await say(fake, bot, read_only, world.alice, f"news {i}", mentions_bot=True)
        await say(fake, bot, world.random, world.alice, "still there?", mentions_bot=True)
        await fake.wait_for_messages(world.random.id, 1)
    warnings = [r.getMessage() for r in caplog.records if "missing permissions" in r.getMessage()]
    assert len([w for w in warnings if str(world.general.id) in w]) == 1
    assert len([w for w in warnings if str(read_only.id) in w]) == 1
    assert not any("hello" in r.getMessage() or "news" in r.getMessage() for r in caplog.records)
    assert [m.channel_id for m in fake.sent_messages] == [world.random.id]
    # The read-only channel costs no LLM call; the 403 channel is tried, then remembered.
    assert len(fake_llm.of("reply")) == 3
    assert await texts_in(core, world.scope(read_only)) == [
        "@memorybot news 0",
        "@memorybot news 1",
    ]
    # The questions; answers nobody saw (Discord refused them) are not remembered.
    assert len(await texts_in(core, world.scope(world.general))) == 2


async def test_a_rate_limited_post_is_waited_out_and_sent_once(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        fake.rate_limit_next("messages", count=1, retry_after=0.2)
        await say(fake, bot, world.general, world.alice, "hi", mentions_bot=True)
        [reply] = await fake.wait_for_messages(world.general.id, 1)
        await bot.handled(reply)
    posts = [r.status for r in fake.requests if r.kind == "messages"]
    assert posts == [429, 200]
    assert len(fake.sent_messages) == 1
    assert reply.content is not None and reply.content.startswith("ACK:")


async def test_a_store_outage_keeps_the_client_running_and_the_message_held(
    fake: FakeDiscord, world: World, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis goes away: the message waits in memory (not dropped), the member is told that
    memory is unavailable and the message is saved, /memory says so too."""
    server = LocalRedis()
    settings = make_settings(redis_url=server.url, llm_url=fake_llm.base_url)
    core = await build_core(settings, clock=ManualClock(START), background=False)
    try:
        async with serving(fake, core) as bot:
            server.stop()
            await say(fake, bot, world.general, world.alice, "lost?", mentions_bot=True)
            [reply] = await fake.wait_for_messages(world.general.id, 1)
            _, shown = await command(fake, "memory show", world.general, world.alice)
            assert not bot.is_closed()
            assert core.intake.held == 1
    finally:
        await core.close()
        server.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("holding messages in memory" in e for e in errors)
    assert not any("lost?" in e for e in errors)  # no message text in the logs
    assert reply.content == load_prompts("en").store_down
    assert shown.ephemeral and "unavailable" in (shown.content or "")


# -------------------------------------------------------------------------- /memory


async def test_memory_show_answers_ephemerally_with_embeds(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "we picked Postgres for billing")
        _, shown = await command(fake, "memory show", world.general, world.bob)
        _, stats = await command(fake, "memory show", world.general, world.bob, section="stats")
    assert shown.type == 4 and shown.ephemeral
    assert shown.embeds[0]["title"] == f"Memory of {world.scope(world.general)}"
    assert "alice: we picked Postgres for billing" in embed_text(shown)
    assert stats.ephemeral and "messages: 1" in embed_text(stats)


async def test_a_slow_command_is_deferred_then_answered_in_a_follow_up(
    fake: FakeDiscord, world: World, make_core: CoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discord_commands, "DEFER_AFTER_S", 0.0)  # every command is "slow"
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "we picked Postgres for billing")
        interaction, deferred = await command(fake, "memory show", world.general, world.bob)
        [followup] = await fake.wait_for_followups(interaction, 1)
    assert deferred.type == 5 and deferred.ephemeral
    assert followup.ephemeral
    assert "we picked Postgres" in "\n".join(f["value"] for f in followup.embeds[0]["fields"])


def pause_redis(redis_url: str, seconds: float) -> None:
    """Redis stops answering every client for a while: a slow command, made of real parts."""
    client = redis.Redis.from_url(redis_url)
    try:
        client.client_pause(int(seconds * 1000), all=True)
    finally:
        client.close()


async def test_a_command_that_reaches_the_bot_late_is_deferred_within_three_seconds_of_creation(
    fake: FakeDiscord, world: World, make_core: CoreFactory, clean_redis: str
) -> None:
    # The interaction was created 2.2 s before the bot's handler ran (event-loop lag): only
    # 0.8 s of Discord's 3 s are left, and Redis is slow. Counting 2 s from the handler's
    # start would answer at 4.2 s, after Discord has dropped the interaction (10062).
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "we picked Postgres for billing")
        pause_redis(clean_redis, 2.0)
        interaction = await fake.invoke_command(
            name="memory show",
            channel_id=world.general.id,
            user_id=world.bob.user.id,
            created_ago=2.2,
        )
        deferred = await fake.wait_for_response(interaction)
        [followup] = await fake.wait_for_followups(interaction, 1)
    assert deferred.type == 5 and deferred.ephemeral
    assert "we picked Postgres" in "\n".join(f["value"] for f in followup.embeds[0]["fields"])


async def test_memory_show_pages_a_large_memory_within_embed_limits(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    scope = world.scope(world.general)
    for i in range(60):
        await core.admin.remember(scope, f"note {i}: " + "details " * 40, by="root")
    async with serving(fake, core):
        interaction, shown = await command(
            fake, "memory show", world.general, world.bob, section="facts"
        )

        def pages() -> list[list[JSON]]:
            later = [f.embeds for f in fake.followups if f.interaction_id == interaction.id]
            return [shown.embeds, *later]

        def shown_text() -> str:
            return "\n".join(
                f["value"] for embeds in pages() for embed in embeds for f in embed["fields"]
            )

        await fake.wait_for(lambda: all(f"note {i}:" in shown_text() for i in range(60)))
    assert len(pages()) > 1
    assert all(f.ephemeral for f in fake.followups)
    for embeds in pages():
        assert len(embeds) <= 10
        total = 0
        for embed in embeds:
            assert len(embed.get("description") or "") <= 4096
            assert len(embed.get("fields", [])) <= 25
            for f in embed.get("fields", []):
                assert 0 < len(f["value"]) <= 1024 and len(f["name"]) <= 256
                total += len(f["name"]) + len(f["value"])
            total += len(embed.get("title") or "") + len(embed.get("description") or "")
        assert total <= 6000


@pytest.mark.parametrize("admin_kind", ["manage_guild", "admin_role", "admin_user"])
async def test_forget_all_by_an_admin_after_confirm_empties_the_scope(
    fake: FakeDiscord, world: World, make_core: CoreFactory, admin_kind: str
) -> None:
    if admin_kind == "manage_guild":
        admin, discord_settings = world.admin, {}
    elif admin_kind == "admin_role":
        role = fake.add_role(world.guild.id, "memory-keepers")
        admin = fake.add_member(world.guild.id, name="keeper", roles=[role.id])
        discord_settings = {"admin_role_ids": [role.id]}
    else:
        admin, discord_settings = world.bob, {"admin_user_ids": [world.bob.user.id]}
    core = await make_core(discord=discord_settings)
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "something to forget")
        _, asked = await command(fake, "memory forget all", world.general, admin)
        assert asked.ephemeral
        assert await texts_in(core, scope) == ["something to forget"]
        click = await fake.click_button(
            message=asked.message_id or 0,
            custom_id=custom_id(asked, "memory:forget-all:confirm"),
            user_id=admin.user.id,
        )
        acknowledged = await fake.wait_for_response(click)
        [done] = await fake.wait_for_edits(asked.message_id)
    assert acknowledged.type == 6  # acknowledged before the work, edited after it
    assert "Forgot everything" in (done.content or "")
    assert done.payload.get("components") == []
    assert (await core.admin.show(scope)).messages == 0
    assert await forgotten(core, scope)


async def test_the_forget_all_confirm_button_is_acknowledged_before_the_forgetting(
    fake: FakeDiscord, world: World, make_core: CoreFactory, clean_redis: str
) -> None:
    # Forgetting a channel may take longer than Discord's 3 s (a slow Redis here, a late
    # click): the button is acknowledged first and the message edited when done.
    core = await make_core()
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "something to forget")
        _, asked = await command(fake, "memory forget all", world.general, world.admin)
        pause_redis(clean_redis, 2.5)
        click = await fake.click_button(
            message=asked.message_id or 0,
            custom_id=custom_id(asked, "memory:forget-all:confirm"),
            user_id=world.admin.user.id,
            created_ago=1.5,
        )
        acknowledged = await fake.wait_for_response(click)
        [done] = await fake.wait_for_edits(asked.message_id)
    assert acknowledged.type == 6  # DEFERRED_UPDATE_MESSAGE
    assert done.via == "interaction" and "Forgot everything" in (done.content or "")
    assert done.payload.get("components") == []
    assert (await core.admin.show(scope)).messages == 0


async def test_forget_all_by_a_non_admin_is_refused_and_memory_stays(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "precious")
        _, refused = await command(fake, "memory forget all", world.general, world.alice)
        _, also_refused = await command(
            fake, "memory forget all", world.general, world.alice, confirm=True
        )
    for response in (refused, also_refused):
        assert response.ephemeral
        assert "Only admins" in (response.content or "")
        assert response.components == []
    assert await texts_in(core, world.scope(world.general)) == ["precious"]


async def test_forget_all_cancel_and_other_users_keep_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "keep me")
        _, asked = await command(fake, "memory forget all", world.general, world.admin)
        message_id = asked.message_id or 0
        intruder = await fake.click_button(
            message=message_id,
            custom_id=custom_id(asked, "memory:forget-all:confirm"),
            user_id=world.alice.user.id,
        )
        refused = await fake.wait_for_response(intruder)
        cancel = await fake.click_button(
            message=message_id,
            custom_id=custom_id(asked, "memory:forget-all:cancel"),
            user_id=world.admin.user.id,
        )
        cancelled = await fake.wait_for_response(cancel)
    assert refused.ephemeral and "Only the person who asked" in (refused.content or "")
    assert cancelled.type == 7 and "nothing was forgotten" in (cancelled.content or "")
    assert await texts_in(core, world.scope(world.general)) == ["keep me"]


async def test_an_unanswered_confirmation_times_out_and_forgets_nothing(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        bot.memory_commands.confirm_timeout_s = 0.2
        await say(fake, bot, world.general, world.alice, "still here")
        _, asked = await command(fake, "memory forget all", world.general, world.admin)
        [edit] = await fake.wait_for_edits(asked.message_id)
    assert edit.via == "interaction"
    assert "nothing was forgotten" in (edit.content or "")
    assert edit.payload.get("components") == []
    assert await texts_in(core, world.scope(world.general)) == ["still here"]


async def test_forget_me_removes_only_that_users_messages_and_facts(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "I am allergic to nuts")
        await say(fake, bot, world.general, world.bob, "I like hiking")
        await command(
            fake, "memory remember", world.general, world.admin, text="alice brings the cake"
        )
        await command(
            fake, "memory remember", world.general, world.admin, text="bob books the room"
        )
        _, forgot = await command(fake, "memory forget me", world.general, world.alice)
    assert forgot.ephemeral and "Forgot you (alice)" in (forgot.content or "")
    assert await texts_in(core, scope) == ["I like hiking"]
    # The admin's notes are the channel's, even the one that names alice.
    facts = [f.text for f in (await core.admin.show(scope)).facts]
    assert facts == ["alice brings the cake", "bob books the room"]


async def test_remember_then_show_facts(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core):
        _, remembered = await command(
            fake, "memory remember", world.general, world.admin, text="standup is at 10:00"
        )
        _, facts = await command(fake, "memory show", world.general, world.alice, section="facts")
    assert remembered.ephemeral and "standup is at 10:00" in (remembered.content or "")
    assert facts.ephemeral and "standup is at 10:00" in embed_text(facts)


async def test_export_is_an_ephemeral_json_file_of_the_channel(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "first thing")
        await say(fake, bot, world.random, world.alice, "elsewhere")
        await say(fake, bot, world.general, world.bob, "second thing")
        _, exported = await command(fake, "memory export", world.general, world.admin)
        _, refused = await command(fake, "memory export", world.general, world.alice)
    assert exported.ephemeral
    [upload] = exported.attachments
    assert upload.filename.endswith(".json")
    data = json.loads(upload.data)
    assert data["scope"] == world.scope(world.general)
    assert [e["text"] for e in data["log"]] == ["first thing", "second thing"]
    assert refused.ephemeral and refused.attachments == []


async def test_pause_and_resume(fake: FakeDiscord, world: World, make_core: CoreFactory) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await command(fake, "memory pause", world.general, world.admin)
        await say(fake, bot, world.general, world.alice, "off the record")
        await command(fake, "memory resume", world.general, world.admin)
        await say(fake, bot, world.general, world.alice, "on the record")
    assert await texts_in(core, world.scope(world.general)) == ["on the record"]


async def test_commands_in_a_dm_act_on_the_dm_scope(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    dm_channel = fake.dm_channel_id(world.alice.user.id)
    async with serving(fake, core) as bot:
        await bot.handled(await fake.send_dm(user_id=world.alice.user.id, content="dm note"))
        await fake.wait_for_messages(dm_channel, 1)
        _, remembered = await command(
            fake, "memory remember", dm_channel, world.alice, text="my own note"
        )
        _, forgot = await command(fake, "memory forget all", dm_channel, world.alice, confirm=True)
    assert "Remembered" in (remembered.content or "")
    assert "Forgot everything" in (forgot.content or "")
    assert await forgotten(core, f"discord:dm:{world.alice.user.id}")


# -------------------------------------------------------------------------- start-up


async def test_the_command_tree_is_synced_to_configured_guilds(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await sync_command_tree(bot.tree, [world.guild.id, world.other_guild.id])
        synced = await fake.wait_for_synced_commands(2)
    assert [s.guild_id for s in synced] == [world.guild.id, world.other_guild.id]
    [memory, *menus] = synced[0].commands
    assert memory["name"] == "memory"
    # The message context menu (type 3): no description, no options, the same contexts.
    assert [(m["name"], m["type"]) for m in menus] == [
        ("Forget this message", 3),
        ("Remember this", 3),
    ]
    assert all(m["contexts"] == [0, 1] and m["integration_types"] == [0] for m in menus)
    assert memory.get("default_member_permissions") is None  # show / forget me: everyone
    # Installed to servers only (0 = GUILD_INSTALL), usable in servers (0) and the bot's DMs
    # (1), never in group DMs or other servers through a user install (2 = PRIVATE_CHANNEL).
    assert memory["integration_types"] == [0]
    assert memory["contexts"] == [0, 1]
    options = {o["name"]: o for o in memory["options"]}
    assert sorted(options) == sorted(
        ["show", "forget", "remember", "export", "pause", "resume", "config", "why", "learn"]
    )
    assert sorted(o["name"] for o in options["forget"]["options"]) == ["all", "fact", "me", "text"]
    assert sorted(o["name"] for o in options["config"]["options"]) == [
        "daily_tokens",
        "language",
        "mode",
        "sources",
        "timezone",
        "user_daily_tokens",
    ]
    [section] = options["show"]["options"]
    assert [c["value"] for c in section["choices"]] == ["overview", "tiers", "facts", "stats"]


@pytest.fixture
async def bare_fake() -> AsyncIterator[FakeDiscord]:
    """A fake Discord that does not patch discord.py: run_discord must use the settings."""
    server = FakeDiscord()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def discord_settings(fake: FakeDiscord, **extra: Any) -> dict[str, Any]:
    return {"api_base": fake.api_base, "gateway_url": fake.gateway_url, **extra}


async def test_run_discord_syncs_serves_and_stops_cleanly_when_cancelled(
    bare_fake: FakeDiscord, make_core: CoreFactory
) -> None:
    guild = bare_fake.add_guild(name="Prod")
    channel = bare_fake.add_text_channel(guild.id, "general")
    member = bare_fake.add_member(guild.id, name="dora")
    token = bare_fake.valid_token
    core = await make_core(discord=discord_settings(bare_fake, token=token))
    default_base = Route.BASE
    task = asyncio.create_task(run_discord(core, sync_commands=True))
    try:
        [synced] = await bare_fake.wait_for_synced_commands(1)
        await bare_fake.wait_for_sessions(1)
        await bare_fake.send_message(
            channel_id=channel.id, author_id=member.user.id, content="ping", mentions_bot=True
        )
        [reply] = await bare_fake.wait_for_messages(channel.id, 1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert synced.guild_id is None
    assert synced.names == ["memory", "Forget this message", "Remember this"]
    assert reply.content is not None and reply.content.startswith("ACK:")
    assert default_base == Route.BASE  # put back for everyone else in the process


async def test_run_discord_with_a_bad_or_missing_token_is_a_config_error(
    bare_fake: FakeDiscord, make_core: CoreFactory
) -> None:
    core = await make_core(discord=discord_settings(bare_fake, token="not-the-token"))
    with pytest.raises(ConfigError, match="DISCORD_TOKEN"):
        await run_discord(core)
    assert [r.status for r in bare_fake.requests] == [401]
    missing = await make_core(discord=discord_settings(bare_fake))
    with pytest.raises(ConfigError, match="DISCORD_TOKEN is not set"):
        await run_discord(missing)


async def test_run_discord_without_the_message_content_intent_says_where_to_enable_it(
    make_core: CoreFactory,
) -> None:
    strict = FakeDiscord(enabled_privileged_intents=0)
    await strict.start()
    try:
        strict.add_guild()
        core = await make_core(discord=discord_settings(strict, token=strict.valid_token))
        with pytest.raises(ConfigError, match="MESSAGE CONTENT INTENT"):
            await run_discord(core)
    finally:
        await strict.stop()


async def test_a_shard_process_serves_only_its_shards_guilds(
    fake: FakeDiscord, make_core: CoreFactory
) -> None:
    guilds = [fake.add_guild(name=f"shard-{i}", for_shard=(i, 2)) for i in range(2)]
    channels = [fake.add_text_channel(g.id, "general") for g in guilds]
    members = [fake.add_member(g.id, name=f"user-{i}") for i, g in enumerate(guilds)]
    core = await make_core()
    bot = MemoryBot(core, shard_count=2, shard_ids=[1], guild_ready_timeout=0.05)
    async with fake.running(bot):
        assert [g.id for g in bot.guilds] == [guilds[1].id]
        await fake.send_message(
            channel_id=channels[1].id,
            author_id=members[1].user.id,
            content="mine",
            mentions_bot=True,
        )
        await fake.wait_for_messages(channels[1].id, 1)
    assert [(i.shard_id, i.shard_count) for i in fake.identifies] == [(1, 2)]
    assert await texts_in(core, f"discord:{guilds[1].id}:{channels[1].id}") != []
