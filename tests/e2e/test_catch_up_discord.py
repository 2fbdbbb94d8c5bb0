"""Places that changed while the bot was down: memorybot stops, something happens on Discord
that no event will ever tell it (a channel or thread deleted, the bot removed from a server,
an outage, lost access, Discord failing), and it starts again. The unmodified discord.py
client against the fake Discord, a real Core on the private Redis, the fake OpenAI server."""

from __future__ import annotations

import asyncio
import logging

import pytest

from memory_core.bootstrap import Core
from tests.discord_world import World, say, serving, texts_in
from tests.fakes.discord import FakeChannel, FakeDiscord, Permission, PermissionOverwrite
from tests.helpers import CoreFactory
from tests.observed_discord import ObservedBot

pytestmark = pytest.mark.fake("discord")


async def caught_up(bot: ObservedBot) -> int:
    """Wait for the catch-up the session's on_ready started; what it returned."""
    async with asyncio.timeout(10):
        while bot.rechecking is None:  # noqa: ASYNC110 (on_ready runs as a task of its own)
            await asyncio.sleep(0.01)
        return await bot.rechecking


async def remembered(fake: FakeDiscord, core: Core, world: World, *places: FakeChannel) -> None:
    """A first run of the bot: alice (carol, in the other server) says something in each
    place; then it stops."""
    async with serving(fake, core) as bot:
        await caught_up(bot)  # (nothing to catch up on a first start)
        for place in places:
            member = world.carol if place.guild_id == world.other_guild.id else world.alice
            await say(fake, bot, place, member, f"{member.user.name} in {place.name}")


async def restart(fake: FakeDiscord, core: Core) -> None:
    """The bot starts again, on a fresh session, and catches up."""
    fake.clear_records()
    async with serving(fake, core) as bot:
        await caught_up(bot)


def channel_lookups(fake: FakeDiscord) -> list[tuple[str, int]]:
    """The bot's GET /channels/{id} since the restart, with Discord's answers."""
    return [
        (r.path, r.status)
        for r in fake.requests
        if r.method == "GET" and r.path.startswith("/channels/") and r.path.count("/") == 2
    ]


async def forgotten(core: Core, scope: str) -> bool:
    """Redis holds no memory of the place (the repo's own test: nothing but the counters a
    forget keeps) and the scopes index no longer lists it."""
    indexed = {s for s, _ in await core.repo.reads.scopes(offset=0, limit=10_000)}
    return not await core.repo.reads.scope_exists(scope) and scope not in indexed


async def test_a_channel_deleted_while_down_is_forgotten_with_its_threads(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    await remembered(fake, core, world, world.general, world.thread, world.forum_post, world.random)
    fake.delete_channel(world.general.id)  # with its thread: no event reaches anyone
    fake.delete_thread(world.forum_post.id)  # a forum post alone: its forum stays
    await restart(fake, core)
    for gone in (world.general, world.thread, world.forum_post):
        assert await forgotten(core, world.scope(gone)), gone.name
    assert await texts_in(core, world.scope(world.random)) == ["alice in random"]
    places = [scope for scope, _ in await core.repo.reads.places_of(f"discord:{world.guild.id}")]
    assert world.scope(world.general) not in places
    # the channel was asked for once, its thread not at all (the channel's 404 took it)
    assert sorted(channel_lookups(fake)) == sorted(
        [(f"/channels/{world.general.id}", 404), (f"/channels/{world.forum_post.id}", 404)]
    )


async def test_a_server_that_removed_the_bot_while_down_is_forgotten(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    await remembered(fake, core, world, world.general, world.thread, world.random)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.other_channel, world.carol, "another server stays")
        dm = await fake.send_dm(user_id=world.alice.user.id, content="my DM stays")
        await bot.handled(dm)
    fake.remove_bot_from_guild(world.guild.id)
    await restart(fake, core)
    assert await core.repo.reads.places_of(f"discord:{world.guild.id}") == []
    for place in (world.general, world.thread, world.random):
        assert await forgotten(core, world.scope(place)), place.name
    indexed = [scope for scope, _ in await core.repo.reads.scopes(offset=0, limit=100)]
    assert not [s for s in indexed if s.startswith(f"discord:{world.guild.id}:")]
    assert await texts_in(core, world.scope(world.other_channel)) == ["another server stays"]
    assert "my DM stays" in await texts_in(core, f"discord:dm:{world.alice.user.id}")


async def test_a_server_in_an_outage_at_the_restart_keeps_its_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """READY lists it as unavailable and no GUILD_CREATE follows: its channels are unknown
    to the client, which asks nothing about them; the other server removed the bot."""
    core = await make_core()
    await remembered(fake, core, world, world.general, world.thread, world.other_channel)
    fake.guild_outage(world.guild.id)
    fake.remove_bot_from_guild(world.other_guild.id)
    await restart(fake, core)
    assert await texts_in(core, world.scope(world.general)) == ["alice in general"]
    assert await texts_in(core, world.scope(world.thread)) == ["alice in side-topic"]
    assert await forgotten(core, world.scope(world.other_channel))
    assert channel_lookups(fake) == []


async def test_a_place_the_bot_can_no_longer_see_keeps_its_memory(
    fake: FakeDiscord, world: World, make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """As live, where losing access forgets nothing: the channel stays listed (Discord lists
    every channel to a bot), its thread is not, and asking for it is 403 Missing Access."""
    core = await make_core()
    await remembered(fake, core, world, world.general, world.thread, world.forum_post)
    hidden = PermissionOverwrite(
        id=fake.bot_user.id, type="member", deny=int(Permission.VIEW_CHANNEL)
    )
    fake.set_overwrites(world.general.id, [hidden])
    fake.delete_thread(world.forum_post.id)
    with caplog.at_level(logging.WARNING, logger="bots.learn.discord_catch_up"):
        await restart(fake, core)
    assert await texts_in(core, world.scope(world.general)) == ["alice in general"]
    assert await texts_in(core, world.scope(world.thread)) == ["alice in side-topic"]
    assert await forgotten(core, world.scope(world.forum_post))
    assert (f"/channels/{world.thread.id}", 403) in channel_lookups(fake)
    said = caplog.text
    assert f"cannot see {world.scope(world.thread)} any more (403 Missing Access)" in said


async def test_discord_failing_to_answer_forgets_nothing(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """A 5xx says nothing about the place, even one that is in fact gone."""
    core = await make_core()
    await remembered(fake, core, world, world.general, world.thread, world.forum_post)
    fake.delete_thread(world.thread.id)
    fake.delete_thread(world.forum_post.id)
    fake.fail_route(
        "GET /channels/{channel_id}",
        resource=world.thread.id,
        status=503,
        message="503: Service Unavailable",
        count=10,
    )
    await restart(fake, core)
    assert await texts_in(core, world.scope(world.thread)) == ["alice in side-topic"]
    assert await forgotten(core, world.scope(world.forum_post))
    lookups = channel_lookups(fake)
    assert lookups.count((f"/channels/{world.thread.id}", 503)) == 1  # once: not again


async def test_at_most_catch_up_places_are_asked_for(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """The most recently active first; a place beyond the bound keeps its memory."""
    core = await make_core(bot={"catch_up_places": 1})
    await remembered(fake, core, world, world.thread, world.forum_post, world.random)
    fake.delete_thread(world.thread.id)
    fake.delete_thread(world.forum_post.id)
    await restart(fake, core)
    assert await forgotten(core, world.scope(world.forum_post))
    assert await texts_in(core, world.scope(world.thread)) == ["alice in side-topic"]
    assert channel_lookups(fake) == [(f"/channels/{world.forum_post.id}", 404)]


async def test_with_catch_up_off_only_servers_that_removed_the_bot_are_forgotten(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """``catch_up_hours = 0``: nothing is asked of Discord; READY alone still says which
    servers removed the bot."""
    core = await make_core(bot={"catch_up_hours": 0})
    await remembered(fake, core, world, world.general, world.other_channel)
    fake.delete_channel(world.general.id)
    fake.remove_bot_from_guild(world.other_guild.id)
    await restart(fake, core)
    assert await forgotten(core, world.scope(world.other_channel))
    assert await texts_in(core, world.scope(world.general)) == ["alice in general"]
    assert [r for r in fake.requests if r.path.startswith("/channels/")] == []
