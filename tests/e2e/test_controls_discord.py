"""Where a slash command cannot go, what people post that is more than words, and memory
leaving with its place: the unmodified discord.py client against the fake Discord, a real
Core on the private Redis, the fake OpenAI server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_core.bootstrap import Core
from tests.discord_world import World, say, serving, texts_in
from tests.fakes.discord import FakeDiscord, InteractionResponse
from tests.helpers import CoreFactory, forgotten

pytestmark = pytest.mark.fake("discord")


async def menu(
    fake: FakeDiscord, name: str, channel: Any, member: Any, message: dict[str, Any]
) -> InteractionResponse:
    interaction = await fake.invoke_message_command(
        name=name, channel_id=channel.id, user_id=member.user.id, message_id=int(message["id"])
    )
    return await fake.wait_for_response(interaction)


def said(response: InteractionResponse) -> str:
    parts = [response.content or ""]
    for embed in response.embeds:
        parts += [embed.get("title") or "", embed.get("description") or ""]
    return "\n".join(parts)


async def test_forget_this_message_works_in_an_archived_thread(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    scope = world.scope(world.thread)
    async with serving(fake, core) as bot:
        mine = await say(fake, bot, world.thread, world.bob, "my locker code is 5521")
        await say(fake, bot, world.thread, world.alice, "alice's line stays")
        fake.archive_thread(world.thread.id)
        refused = await menu(fake, "Forget this message", world.thread, world.alice, mine)
        assert refused.ephemeral and "author or an admin" in said(refused)
        done = await menu(fake, "Forget this message", world.thread, world.bob, mine)
    assert done.ephemeral and "Forgot that message" in said(done), said(done)
    assert await texts_in(core, scope) == ["alice's line stays"]


async def test_remember_this_pins_a_note_with_its_link(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        message = await say(fake, bot, world.thread, world.bob, "the release is on May 4")
        refused = await menu(fake, "Remember this", world.thread, world.bob, message)
        assert "Only admins" in said(refused)
        await menu(fake, "Remember this", world.thread, world.admin, message)
    [note] = await core.repo.reads.facts(world.scope(world.thread))
    assert note.pinned and note.text.startswith("bob: the release is on May 4 (https://")
    assert f"/{world.thread.id}/{message['id']})" in note.text


async def test_deleted_channels_and_threads_and_a_removed_bot_are_forgotten(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        for place in (world.general, world.thread, world.random, world.forum_post):
            await say(fake, bot, place, world.alice, f"alice in {place.name}")
        await say(fake, bot, world.other_channel, world.carol, "another server stays")
        fake.delete_thread(world.forum_post.id)
        fake.delete_channel(world.general.id)  # its thread with it
        await until_forgotten(core, world.scope(world.general))
        assert await forgotten(core, world.scope(world.thread))
        assert await forgotten(core, world.scope(world.forum_post))
        assert await texts_in(core, world.scope(world.random)) == ["alice in random"]
        # An outage forgets nothing; a removal forgets the whole server.
        fake.guild_outage(world.guild.id)
        fake.end_guild_outage(world.guild.id)
        await say(fake, bot, world.other_channel, world.carol, "still serving")
        assert await texts_in(core, world.scope(world.random)) == ["alice in random"]
        fake.remove_bot_from_guild(world.guild.id)
        await until_forgotten(core, world.scope(world.random))
    assert await texts_in(core, world.scope(world.other_channel)) == [
        "another server stays",
        "still serving",
    ]
    assert await core.repo.reads.places_of(f"discord:{world.guild.id}") == []


async def until_forgotten(core: Core, scope: str) -> None:
    """Wait for the bot to have handled a gateway event that forgets ``scope``."""
    async with asyncio.timeout(10):
        while (await core.admin.show(scope)).messages:  # noqa: ASYNC110 (no event to wait on)
            await asyncio.sleep(0.05)


async def test_forwards_polls_voice_messages_and_forum_posts_are_remembered(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        original = await say(fake, bot, world.random, world.bob, "the wifi password is hunter2")
        forwarded = await fake.forward_message(
            message_id=int(original["id"]),
            to_channel_id=world.general.id,
            author_id=world.alice.user.id,
        )
        await bot.handled(forwarded)
        dm = fake.dm_channel_id(world.alice.user.id)  # forwarding to the bot: "remember this"
        to_bot = await fake.forward_message(
            message_id=int(original["id"]), to_channel_id=dm, author_id=world.alice.user.id
        )
        await bot.handled(to_bot)
        poll = await fake.send_poll(
            channel_id=world.general.id,
            author_id=world.alice.user.id,
            question="Lunch?",
            answers=["pizza", "sushi"],
        )
        await bot.handled(poll)
        await fake.vote_poll(int(poll["id"]), world.bob.user.id, 2)
        result = await fake.end_poll(int(poll["id"]))
        await bot.handled(result)
        voice = await fake.send_voice_message(
            channel_id=world.general.id, author_id=world.bob.user.id, duration_secs=12.4
        )
        await bot.handled(voice)
        forum = fake.add_forum(world.guild.id, "support", tags=["bug", "idea"])
        post, first = await fake.start_forum_post(
            forum.id,
            "Login fails",
            author_id=world.bob.user.id,
            content="it says 403",
            applied_tags=["bug"],
        )
        await bot.handled(first)
    entries = await core.repo.reads.all_entries(world.scope(world.general))
    by_id = {e.platform_id: e for e in entries}
    forward = by_id[str(forwarded["id"])]
    assert forward.author == "alice" and forward.author_id == str(world.alice.user.id)
    assert forward.text.startswith(
        "[forwarded from #random, its author not given] the wifi password"
    )
    dm_log = await core.repo.reads.all_entries(f"discord:dm:{world.alice.user.id}")
    [in_dm] = [e for e in dm_log if e.role == "user"]  # (and the bot's answer: a DM is answered)
    # (in the DM, which is no server's, the server is named too)
    assert in_dm.text == forward.text.replace("#random", "#random (Memory Lab)")
    assert in_dm.platform_id == str(to_bot["id"])
    assert by_id[str(poll["id"])].text == "[poll] Lunch?: pizza; sushi"
    assert "[poll closed] Lunch?: sushi won, 1 of 1 votes" in by_id[str(result["id"])].text
    assert by_id[str(voice["id"])].text.startswith("[voice message, 12 s]")
    [opened] = await core.repo.reads.all_entries(world.scope(post))
    assert opened.text == "[forum post: Login fails; tags: bug]\nit says 403"


async def test_deletes_and_edits_made_while_away_are_caught_up_on_a_fresh_session(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """The connection drops, Discord refuses to resume it; meanwhile a message is deleted
    and one edited (no event reaches the bot). On its fresh session the bot reads the
    channel's recent history and memory follows."""
    core = await make_core()
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:

        async def at_once(shard_id: int | None, *, initial: bool = False) -> None:
            """discord.py waits 5 s before identifying again: not in a test."""

        bot.before_identify_hook = at_once  # type: ignore[method-assign]
        await say(fake, bot, world.general, world.alice, "kept as it was")
        gone = await say(fake, bot, world.general, world.alice, "deleted while away")
        edited = await say(fake, bot, world.general, world.bob, "the old words")
        first = bot.rechecking
        await fake.disconnect_bot(resumable=False)
        fake.delete_message_quietly(gone)
        fake.edit_message_quietly(edited, content="the new words")
        await fake.wait_for_reconnect()
        async with asyncio.timeout(10):
            while bot.rechecking is first or bot.rechecking is None:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            assert await bot.rechecking == 2
    assert await texts_in(core, scope) == ["kept as it was", "the new words"]


async def test_a_delete_in_an_archived_thread_is_applied_with_an_allow_list(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """The thread is archived (discord.py drops it from its cache) and only its channel is
    allowed: the delete names the thread alone, and memory's tree finds its channel."""
    core = await make_core(discord={"allowed_channel_ids": [world.general.id]})
    scope = world.scope(world.thread)
    async with serving(fake, core) as bot:
        message = await say(fake, bot, world.thread, world.alice, "a secret in the thread")
        fake.archive_thread(world.thread.id)
        await fake.delete_message(message)
        await bot.deleted(message)
    assert await texts_in(core, scope) == []
