"""The fake Discord's past: channel history, a guild's active threads, a channel's archived
threads (public and private, a forum's posts) and per-route rate limits, as Discord's API
documents them: plain HTTP for what the documentation fixes, the real discord.py client for
what it does with it."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import discord
import pytest

from tests.fakes.discord import (
    FakeDiscord,
    FakeDiscordError,
    FakeGuild,
    Permission,
    PermissionOverwrite,
)
from tests.fakes.discord_clients import RecordingBot

pytestmark = pytest.mark.fake("discord")

HISTORY = "GET /channels/{channel_id}/messages"


async def get(
    session: aiohttp.ClientSession, fake: FakeDiscord, path: str, **query: Any
) -> tuple[int, Any, Any]:
    async with session.get(
        f"{fake.api_base}{path}",
        params={k: str(v) for k, v in query.items()},
        headers={"Authorization": f"Bot {fake.valid_token}"},
    ) as response:
        return response.status, await response.json(), response.headers


def manage_threads(fake: FakeDiscord, guild: FakeGuild) -> None:
    guild.roles[guild.bot_role_id].permissions |= int(Permission.MANAGE_THREADS)


def denied_to_the_bot(fake: FakeDiscord, permission: Permission) -> PermissionOverwrite:
    """A channel overwrite that takes ``permission`` from the bot's member."""
    return PermissionOverwrite(id=fake.bot_user.id, type="member", deny=int(permission))


# ------------------------------------------------------------------------ channel history


async def test_history_pages_as_documented(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    channel = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    ids = [
        int(fake.past_message(channel.id, author_id=alice.user.id, content=str(i))["id"])
        for i in range(60)
    ]
    path = f"/channels/{channel.id}/messages"
    status, default, _ = await get(raw_http, fake, path)
    assert status == 200 and [int(m["id"]) for m in default] == ids[::-1][:50]  # newest first
    _, after, _ = await get(raw_http, fake, path, after=ids[9], limit=3)
    assert [m["content"] for m in after] == ["12", "11", "10"]
    _, before, _ = await get(raw_http, fake, path, before=ids[9], limit=100)
    assert [m["content"] for m in before] == [str(i) for i in range(8, -1, -1)]
    for limit in (0, 101):
        status, error, _ = await get(raw_http, fake, path, limit=limit)
        assert (status, error["code"]) == (400, 50035)
        assert "limit" in error["errors"]
    status, error, _ = await get(raw_http, fake, path, before=ids[5], after=ids[1])
    assert (status, error["code"]) == (400, 50035)


async def test_history_without_read_message_history_is_empty_not_an_error(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    deny = denied_to_the_bot(fake, Permission.READ_MESSAGE_HISTORY)
    channel = fake.add_text_channel(guild.id, "quiet", overwrites=[deny])
    alice = fake.add_member(guild.id, name="alice")
    fake.past_message(channel.id, author_id=alice.user.id, content="said before")
    status, found, _ = await get(raw_http, fake, f"/channels/{channel.id}/messages")
    assert (status, found) == (200, [])


async def test_a_private_thread_is_read_by_its_members_and_who_manages_threads(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    channel = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    secret = fake.add_thread(channel.id, "secret", private=True, owner_id=alice.user.id)
    fake.past_message(secret.id, author_id=alice.user.id, content="between us")
    status, error, _ = await get(raw_http, fake, f"/channels/{secret.id}/messages")
    assert (status, error["code"]) == (403, 50001)
    manage_threads(fake, guild)
    status, found, _ = await get(raw_http, fake, f"/channels/{secret.id}/messages")
    assert status == 200 and [m["content"] for m in found] == ["between us"]


# ------------------------------------------------------------------------------- threads


async def test_active_threads_are_those_the_bot_can_see_newest_first(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    hidden = fake.add_text_channel(
        guild.id,
        "hidden",
        overwrites=[
            PermissionOverwrite(id=guild.id, type="role", deny=int(Permission.VIEW_CHANNEL))
        ],
    )
    forum = fake.add_forum(guild.id, "ideas")
    public = fake.add_thread(general.id, "public")
    fake.add_thread(general.id, "old", archived=True)
    fake.add_thread(general.id, "not mine", private=True)
    mine = fake.add_thread(general.id, "mine", private=True, members=[fake.bot_user.id])
    fake.add_thread(hidden.id, "behind a wall")
    post = fake.add_thread(forum.id, "a post")
    status, body, _ = await get(raw_http, fake, f"/guilds/{guild.id}/threads/active")
    assert status == 200
    assert [t["id"] for t in body["threads"]] == [str(post.id), str(mine.id), str(public.id)]
    assert [m["id"] for m in body["members"]] == [str(mine.id)]
    assert "has_more" not in body


async def test_archived_public_threads_page_by_archive_time(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    threads = [fake.add_thread(general.id, f"t{i}") for i in range(5)]
    for thread in reversed(threads):  # archived last-made first: archive order is not id order
        fake.archive_thread(thread.id)
    fake.add_thread(general.id, "private and archived", private=True, archived=True)
    fake.add_thread(general.id, "still active")
    path = f"/channels/{general.id}/threads/archived/public"
    status, first, _ = await get(raw_http, fake, path, limit=2)
    assert status == 200 and first["has_more"] is True
    assert [t["name"] for t in first["threads"]] == ["t0", "t1"]  # most recently archived first
    before = first["threads"][-1]["thread_metadata"]["archive_timestamp"]
    _, rest, _ = await get(raw_http, fake, path, limit=100, before=before)
    assert [t["name"] for t in rest["threads"]] == ["t2", "t3", "t4"]
    assert rest["has_more"] is False
    for limit in (1, 101):
        status, error, _ = await get(raw_http, fake, path, limit=limit)
        assert (status, error["code"]) == (400, 50035)
    status, error, _ = await get(raw_http, fake, path, before="yesterday")
    assert (status, error["code"]) == (400, 50035)


async def test_a_forums_archived_posts_are_its_public_archived_threads(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    forum = fake.add_forum(guild.id, "ideas")
    post = fake.add_thread(forum.id, "an old post", archived=True)
    fake.add_thread(forum.id, "a live post")
    _, body, _ = await get(raw_http, fake, f"/channels/{forum.id}/threads/archived/public")
    assert [t["id"] for t in body["threads"]] == [str(post.id)]


async def test_archived_threads_need_their_permissions(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    no_history = fake.add_text_channel(
        guild.id,
        "no-history",
        overwrites=[
            PermissionOverwrite(
                id=fake.bot_user.id, type="member", deny=int(Permission.READ_MESSAGE_HISTORY)
            )
        ],
    )
    unseen = fake.add_text_channel(
        guild.id,
        "unseen",
        overwrites=[
            PermissionOverwrite(
                id=fake.bot_user.id, type="member", deny=int(Permission.VIEW_CHANNEL)
            )
        ],
    )
    secret = fake.add_thread(general.id, "secret", private=True, archived=True)
    public = "/channels/{}/threads/archived/public"
    status, error, _ = await get(raw_http, fake, public.format(no_history.id))
    assert (status, error["code"]) == (403, 50013)
    status, error, _ = await get(raw_http, fake, public.format(unseen.id))
    assert (status, error["code"]) == (403, 50001)
    private = f"/channels/{general.id}/threads/archived/private"
    status, error, _ = await get(raw_http, fake, private)
    assert (status, error["code"]) == (403, 50013)  # Manage Threads too
    manage_threads(fake, guild)
    status, body, _ = await get(raw_http, fake, private)
    assert status == 200 and [t["id"] for t in body["threads"]] == [str(secret.id)]


async def test_joined_private_archived_threads_page_by_id(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    me = [fake.bot_user.id]
    joined = [
        fake.add_thread(general.id, f"j{i}", private=True, archived=True, members=me)
        for i in range(3)
    ]
    fake.add_thread(general.id, "not joined", private=True, archived=True)
    fake.add_thread(general.id, "joined, active", private=True, members=me)
    path = f"/channels/{general.id}/users/@me/threads/archived/private"
    status, first, _ = await get(raw_http, fake, path, limit=2)
    assert status == 200 and first["has_more"] is True
    assert [t["name"] for t in first["threads"]] == ["j2", "j1"]  # newest id first
    assert [m["id"] for m in first["members"]] == [str(joined[2].id), str(joined[1].id)]
    _, rest, _ = await get(raw_http, fake, path, before=first["threads"][-1]["id"])
    assert [t["name"] for t in rest["threads"]] == ["j0"] and rest["has_more"] is False


async def test_discord_py_lists_every_thread_of_a_channel(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    manage_threads(fake, guild)
    general = fake.add_text_channel(guild.id, "general")
    archived = {fake.add_thread(general.id, f"old {i}", archived=True).id for i in range(7)}
    secret = fake.add_thread(general.id, "secret", private=True, archived=True).id
    live = fake.add_thread(general.id, "live").id
    async with fake.running(RecordingBot()) as bot:
        channel = bot.get_channel(general.id)
        assert isinstance(channel, discord.TextChannel)
        public = {t.id async for t in channel.archived_threads(limit=None)}
        private = {t.id async for t in channel.archived_threads(private=True, limit=None)}
        active = {t.id for t in await channel.guild.active_threads()}
    assert (public, private, active) == (archived, {secret}, {live})


# --------------------------------------------------------------------------- rate limits


async def test_a_route_budget_counts_down_then_refuses_with_429(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    other = fake.add_text_channel(guild.id, "other")
    fake.set_route_budget(HISTORY, limit=2, window=0.5)
    path = f"/channels/{general.id}/messages"
    remaining = []
    for _ in range(2):
        status, _, headers = await get(raw_http, fake, path)
        assert status == 200
        remaining.append(headers["X-RateLimit-Remaining"])
        assert headers["X-RateLimit-Limit"] == "2"
        assert 0 < float(headers["X-RateLimit-Reset-After"]) <= 0.5
        assert float(headers["X-RateLimit-Reset"]) == pytest.approx(time.time() + 0.5, abs=0.5)
    assert remaining == ["1", "0"]
    status, body, headers = await get(raw_http, fake, path)
    assert status == 429
    assert body["message"] and body["global"] is False and 0 < body["retry_after"] <= 0.5
    assert headers["Retry-After"] == "1" and headers["X-RateLimit-Scope"] == "user"
    assert headers["X-RateLimit-Remaining"] == "0" and headers["Via"]
    bucket = headers["X-RateLimit-Bucket"]
    status, _, headers = await get(raw_http, fake, f"/channels/{other.id}/messages")
    assert status == 200 and headers["X-RateLimit-Remaining"] == "1"  # per channel
    assert headers["X-RateLimit-Bucket"] == bucket  # one route, one bucket
    time.sleep(body["retry_after"])  # noqa: ASYNC251 - the fake's window runs on the wall clock
    status, _, headers = await get(raw_http, fake, path)
    assert status == 200 and headers["X-RateLimit-Remaining"] == "1"  # a new window


async def test_discord_py_waits_a_429_out(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    fake.past_message(general.id, author_id=alice.user.id, content="hello")
    fake.set_route_budget(HISTORY, limit=1, window=0.3)
    async with fake.running(RecordingBot()) as bot:
        channel = bot.get_channel(general.id)
        assert isinstance(channel, discord.TextChannel)
        await get(raw_http, fake, f"/channels/{general.id}/messages")  # another process's use
        found = [m.content async for m in channel.history(limit=5)]
    assert found == ["hello"]
    statuses = [r.status for r in fake.requests if r.path.endswith("/messages")]
    assert statuses == [200, 429, 200]


def test_a_budget_names_a_route_the_fake_has() -> None:
    fake = FakeDiscord()
    with pytest.raises(FakeDiscordError, match="no route"):
        fake.set_route_budget("GET /channels/{channel_id}/nothing", limit=1, window=1)


async def test_get_channel_of_a_channel_the_bot_cannot_see_is_missing_access(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    hidden = denied_to_the_bot(fake, Permission.VIEW_CHANNEL)
    unseen = fake.add_text_channel(guild.id, "unseen", overwrites=[hidden])
    seen = fake.add_text_channel(guild.id, "general")
    status, error, _ = await get(raw_http, fake, f"/channels/{unseen.id}")
    assert (status, error["code"]) == (403, 50001)
    status, channel, _ = await get(raw_http, fake, f"/channels/{seen.id}")
    assert (status, channel["name"]) == (200, "general")
