"""The fake Discord as a bot finds it again after being away: a guild that removed the bot
and one in an outage in READY, channels and threads deleted meanwhile, a channel whose
overwrites took the bot's sight away, and one route failing for one channel. Plain HTTP for
what Discord's documentation fixes (the JSON errors), the real discord.py client for what
it makes of READY and GUILD_CREATE."""

from __future__ import annotations

from typing import Any

import aiohttp
import discord
import pytest

from tests.fakes.discord import (
    FakeDiscord,
    FakeDiscordError,
    Permission,
    PermissionOverwrite,
)
from tests.fakes.discord_clients import RecordingBot, World

pytestmark = pytest.mark.fake("discord")


async def get(session: aiohttp.ClientSession, fake: FakeDiscord, path: str) -> tuple[int, Any]:
    async with session.get(
        f"{fake.api_base}{path}", headers={"Authorization": f"Bot {fake.valid_token}"}
    ) as response:
        return response.status, await response.json()


def dispatched(fake: FakeDiscord, event: str) -> list[dict[str, Any]]:
    return [d.data for d in fake.dispatched if d.event == event]


async def test_ready_leaves_out_a_guild_that_removed_the_bot_and_marks_one_in_an_outage(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    """Discord's READY lists every guild the bot is in as ``{"id", "unavailable": true}``
    and then sends each one's GUILD_CREATE; one in an outage gets a GUILD_DELETE
    ``unavailable`` instead, one that removed the bot is not there at all."""
    removed = fake.add_guild(name="Kicked the bot")
    fake.add_text_channel(removed.id, "general")
    down = fake.add_guild(name="In an outage")
    fake.remove_bot_from_guild(removed.id)  # while no client is connected
    fake.guild_outage(down.id)
    client = RecordingBot()
    async with fake.running(client):
        in_cache = {g.id: g.unavailable for g in client.guilds}
    [ready] = dispatched(fake, "READY")
    assert sorted(ready["guilds"], key=lambda g: int(g["id"])) == [
        {"id": str(guild_id), "unavailable": True}
        for guild_id in sorted((throwaway_world.guild.id, down.id))
    ]
    assert [int(g["id"]) for g in dispatched(fake, "GUILD_CREATE")] == [throwaway_world.guild.id]
    assert dispatched(fake, "GUILD_DELETE") == [{"id": str(down.id), "unavailable": True}]
    # discord.py keeps the guild in an outage, unavailable; the removal it never hears of
    assert in_cache == {throwaway_world.guild.id: False, down.id: True}


async def test_channels_and_threads_deleted_while_away_are_unknown_channel(
    fake: FakeDiscord, throwaway_world: World, raw_http: aiohttp.ClientSession
) -> None:
    world = throwaway_world
    async with fake.running(RecordingBot()):
        pass
    fake.clear_records()
    fake.delete_channel(world.general.id)  # its thread with it
    fake.delete_thread(world.forum_post.id)
    client = RecordingBot()
    async with fake.running(client):
        guild = client.get_guild(world.guild.id)
        assert guild is not None and not guild.unavailable
        unseen = [guild.get_channel_or_thread(c.id) for c in (world.general, world.thread)]
        with pytest.raises(discord.NotFound) as raised:
            await client.fetch_channel(world.thread.id)
        assert guild.get_channel(world.forum.id) is not None
    assert unseen == [None, None]
    assert (raised.value.status, raised.value.code) == (404, 10003)
    for gone in (world.general, world.thread, world.forum_post):
        status, body = await get(raw_http, fake, f"/channels/{gone.id}")
        assert (status, body) == (404, {"message": "Unknown Channel", "code": 10003})
    # nothing of it was ever dispatched: the next session only finds it gone
    assert not [d for d in fake.dispatched if d.event.endswith("_DELETE")]


async def test_overwrites_that_take_view_channel_away_make_it_missing_access(
    fake: FakeDiscord, throwaway_world: World, raw_http: aiohttp.ClientSession
) -> None:
    world = throwaway_world
    hidden = PermissionOverwrite(
        id=fake.bot_user.id, type="member", deny=int(Permission.VIEW_CHANNEL)
    )
    client = RecordingBot()
    async with fake.running(client):
        fake.set_overwrites(world.general.id, [hidden])
        await fake.wait_for(
            lambda: bool(dispatched(fake, "CHANNEL_UPDATE")), timeout=5, what="CHANNEL_UPDATE"
        )
        with pytest.raises(FakeDiscordError, match="overwrites of its own"):
            fake.set_overwrites(world.thread.id, [hidden])
    [update] = dispatched(fake, "CHANNEL_UPDATE")
    assert update["id"] == str(world.general.id)
    assert update["permission_overwrites"] == [hidden.to_payload()]
    fake.clear_records()
    client = RecordingBot()
    async with fake.running(client):
        guild = client.get_guild(world.guild.id)
        assert guild is not None
        general = guild.get_channel(world.general.id)
        assert isinstance(general, discord.TextChannel)  # still listed, but not its thread
        assert not general.permissions_for(guild.me).view_channel
        assert guild.get_channel_or_thread(world.thread.id) is None
        with pytest.raises(discord.Forbidden) as raised:
            await client.fetch_channel(world.thread.id)
    assert (raised.value.status, raised.value.code) == (403, 50001)
    for unseen in (world.general, world.thread):
        status, body = await get(raw_http, fake, f"/channels/{unseen.id}")
        assert (status, body) == (403, {"message": "Missing Access", "code": 50001})
    [created] = dispatched(fake, "GUILD_CREATE")
    assert str(world.general.id) in {c["id"] for c in created["channels"]}
    assert str(world.thread.id) not in {t["id"] for t in created["threads"]}


async def test_fail_route_fails_one_route_for_one_channel(
    fake: FakeDiscord, throwaway_world: World, raw_http: aiohttp.ClientSession
) -> None:
    world = throwaway_world
    with pytest.raises(FakeDiscordError, match="no route"):
        fake.fail_route("GET /channels/{channel_id}/nothing")
    fake.fail_route(
        "GET /channels/{channel_id}",
        resource=world.general.id,
        status=503,
        message="503: Service Unavailable",
    )
    client = RecordingBot()
    async with fake.running(client):
        other = await client.fetch_channel(world.forum.id)  # another channel: answered
        history = await client.http.logs_from(world.general.id, 10)  # another route: too
        with pytest.raises(discord.DiscordServerError) as raised:  # (503: not retried)
            await client.fetch_channel(world.general.id)
        again = await client.fetch_channel(world.general.id)  # count=1: once only
    assert (other.id, history, again.id) == (world.forum.id, [], world.general.id)
    assert raised.value.status == 503
    answered = [(r.path, r.status) for r in fake.requests if r.path.startswith("/channels/")]
    assert answered == [
        (f"/channels/{world.forum.id}", 200),
        (f"/channels/{world.general.id}/messages", 200),
        (f"/channels/{world.general.id}", 503),
        (f"/channels/{world.general.id}", 200),
    ]
