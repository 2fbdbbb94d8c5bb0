"""Learning a Discord channel's past end to end: :class:`bots.learn.discord_history.DiscordPast`
with the real discord.py client against the fake Discord (its history, thread listings and
rate limits as Discord documents them): everything read once, in pages that resume, as the
live door would have stored it."""

from __future__ import annotations

import asyncio
from collections import Counter

import discord
import pytest

from bots.learn.discord_history import Cursor, DiscordPast, discord_past
from memory_core.scopes import Audience
from memory_core.service.past import LearnRefused, PastMessage, PastPage
from tests.discord_world import LONG_AGO, learn, learning_client, spend_budget
from tests.fakes.discord import (
    FakeChannel,
    FakeDiscord,
    FakeGuild,
    FakeMember,
    Permission,
    PermissionOverwrite,
)

pytestmark = pytest.mark.fake("discord")

HISTORY = "GET /channels/{channel_id}/messages"
JOIN, PIN, THREAD_CREATED = 7, 6, 18


def scope(channel: FakeChannel) -> str:
    if channel.is_thread:
        return f"discord:{channel.guild_id}:{channel.parent_id}:{channel.id}"
    return f"discord:{channel.guild_id}:{channel.id}"


def messages(pages: list[PastPage]) -> list[PastMessage]:
    return [m for page in pages for m in page.messages]


def manage_threads(guild: FakeGuild) -> None:
    guild.roles[guild.bot_role_id].permissions |= int(Permission.MANAGE_THREADS)


async def source_for(
    client: discord.Client, channel: FakeChannel, *, max_wait: float = 60.0, page_size: int = 100
) -> DiscordPast:
    source = await discord_past(
        client, channel.id, bot_name="memorybot", max_wait=max_wait, page_size=page_size
    )
    assert source.place == scope(channel)
    return source


class BigChannel:
    """#general with 2,000 past messages by Alice and Bob, and 30 threads of 3 messages each:
    20 active, 9 archived, 1 private and archived; the bot may manage threads."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.guild = fake.add_guild(name="Memory Lab")
        manage_threads(self.guild)
        self.general = fake.add_text_channel(self.guild.id, "general")
        self.alice = fake.add_member(self.guild.id, name="alice")
        self.bob = fake.add_member(self.guild.id, name="bob", nick="Bobby")
        self.said: dict[str, tuple[str, str, str]] = {}  # id -> (scope, text, author)
        for i in range(2_000):
            member = (self.alice, self.bob)[i % 2]
            self.say(fake, self.general, member, f"message {i}")
        self.threads = []
        for t in range(30):
            private = t == 29
            thread = fake.add_thread(
                self.general.id,
                f"topic {t}",
                private=private,
                owner_id=self.alice.user.id,
            )
            for j in range(3):
                self.say(fake, thread, (self.alice, self.bob)[j % 2], f"thread {t} reply {j}")
            if t >= 20:
                fake.archive_thread(thread.id)
            self.threads.append(thread)

    def say(self, fake: FakeDiscord, channel: FakeChannel, member: FakeMember, text: str) -> None:
        sent = fake.past_message(channel.id, author_id=member.user.id, content=text)
        name = member.nick or member.user.name
        self.said[sent["id"]] = (scope(channel), text, name)


def as_said(found: list[PastMessage]) -> dict[str, tuple[str, str, str]]:
    return {m.platform_id: (m.scope, m.text, m.author) for m in found}


async def test_a_channel_with_2000_messages_and_30_threads_is_read_completely(
    fake: FakeDiscord,
) -> None:
    world = BigChannel(fake)
    async with learning_client(fake) as client:
        pages = await learn(await source_for(client, world.general))
    found = messages(pages)
    assert len(found) == 2_000 + 30 * 3
    assert as_said(found) == world.said  # every message once: scope, id, text, author
    assert all(0 < len(p.messages) + p.skipped <= 100 for p in pages[:-1])
    assert [p.cursor == "" for p in pages] == [False] * (len(pages) - 1) + [True]
    in_channel = [int(m.platform_id) for m in found if m.scope == scope(world.general)]
    assert in_channel == sorted(in_channel)  # oldest first
    assert {m.audience for m in found if m.scope == scope(world.threads[-1])} == {Audience.PRIVATE}
    assert {m.audience for m in found if m.scope == scope(world.general)} == {Audience.SERVER}
    assert all(m.role == "user" and m.ts.tzinfo is not None for m in found)
    assert not any(p.notes for p in pages)


async def test_learning_resumed_from_a_cursor_half_way_misses_and_doubles_nothing(
    fake: FakeDiscord,
) -> None:
    world = BigChannel(fake)
    async with learning_client(fake) as client:
        pages = await learn(await source_for(client, world.general, page_size=40))
    places = [json_place(p.cursor) for p in pages]
    in_threads = next(i for i, at in enumerate(places) if at != str(world.general.id))
    assert places[in_threads] and places[-2] != places[in_threads]  # two threads' pages
    for stop in (len(pages) // 2, in_threads, len(pages) - 2):
        # a fresh client, as after a restart: nothing of the first run is cached
        async with learning_client(fake) as client:
            source = await source_for(client, world.general, page_size=40)
            rest = await learn(source, cursor=pages[stop].cursor)
        ids = [m.platform_id for m in messages(pages[: stop + 1]) + messages(rest)]
        assert Counter(ids) == Counter(list(world.said)), stop
    assert as_said(messages(pages)) == world.said


async def pages_until_refused(source: DiscordPast) -> tuple[list[PastPage], LearnRefused]:
    handed: list[PastPage] = []
    try:
        async for page in source.pages(LONG_AGO):
            handed.append(page)
    except LearnRefused as refused:
        return handed, refused
    raise AssertionError(f"learning was not refused; {len(handed)} pages handed over")


def json_place(cursor: str) -> str:
    return str(Cursor.load(cursor).at) if cursor else ""


async def test_what_memory_would_not_keep_live_is_skipped_and_counted(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Memory Lab")
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    other_bot = fake.add_member(guild.id, name="otherbot", bot=True)
    fake.past_message(general.id, author_id=alice.user.id, content="", message_type=JOIN)
    first = fake.past_message(general.id, author_id=alice.user.id, content="the plan is A")
    fake.past_message(general.id, author_id=other_bot.user.id, content="beep")
    fake.past_message(general.id, author_id=alice.user.id, message_type=PIN)
    fake.past_message(general.id, author_id=alice.user.id, content="t", message_type=THREAD_CREATED)
    answer = fake.past_message(general.id, author_id=fake.bot_user.id, content="Noted: plan A")
    fake.past_message(  # a /memory follow-up: command output, not conversation
        general.id, author_id=fake.bot_user.id, content="Memory of #general: ...", webhook=True
    )
    files = fake.past_message(
        general.id, author_id=alice.user.id, content="", attachments={"plan.txt": b"A then B"}
    )
    fake.edit_message_quietly(first, content="the plan is B")
    async with learning_client(fake) as client:
        [page] = await learn(await source_for(client, general))
    assert page.skipped == 5
    kept = {m.platform_id: m for m in page.messages}
    assert list(kept) == [first["id"], answer["id"], files["id"]]
    assert kept[first["id"]].text == "the plan is B"  # as it is now
    assert (kept[answer["id"]].role, kept[answer["id"]].author) == ("assistant", "memorybot")
    assert kept[first["id"]].role == "user" and kept[first["id"]].author_id == str(alice.user.id)
    [attachment] = kept[files["id"]].attachments
    assert (attachment.name, attachment.size) == ("plan.txt", 8)
    assert kept[first["id"]].place_name == "#general (Memory Lab)"


async def test_only_messages_from_since_on_are_read(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    old = fake.add_thread(general.id, "old", archived=True)
    fake.past_message(old.id, author_id=alice.user.id, content="long ago")
    for i in range(5):
        fake.past_message(general.id, author_id=alice.user.id, content=f"early {i}")
    await asyncio.sleep(0.01)  # the later messages' snowflakes: a later millisecond
    late = [
        fake.past_message(general.id, author_id=alice.user.id, content=f"late {i}")
        for i in range(3)
    ]
    since = discord.utils.snowflake_time(int(late[0]["id"]))
    async with learning_client(fake) as client:
        pages = await learn(await source_for(client, general), since=since)
    assert [m.text for m in messages(pages)] == ["late 0", "late 1", "late 2"]


async def test_a_forums_posts_are_read_as_threads(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Memory Lab")
    forum = fake.add_forum(guild.id, "ideas", tags=["release"])
    alice = fake.add_member(guild.id, name="alice")
    async with learning_client(fake) as client:
        said: list[tuple[str, str]] = []
        posts = []
        for i in range(3):
            post, starter = await fake.start_forum_post(
                forum.id,
                f"Idea {i}",
                author_id=alice.user.id,
                content=f"idea {i}",
                applied_tags=["release"],
            )
            reply = fake.past_message(post.id, author_id=alice.user.id, content=f"more on {i}")
            said += [(scope(post), starter["id"]), (scope(post), reply["id"])]
            posts.append(post)
        fake.archive_thread(posts[0].id)
        pages = await learn(await source_for(client, forum))
    found = messages(pages)
    assert [(m.scope, m.platform_id) for m in found] == said
    assert found[0].text == "[forum post: Idea 0; tags: release]\nidea 0"
    assert not [r for r in fake.requests if r.path == f"/channels/{forum.id}/messages"]


async def test_without_read_message_history_learning_says_what_to_grant(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild()
    deny = PermissionOverwrite(
        id=fake.bot_user.id, type="member", deny=int(Permission.READ_MESSAGE_HISTORY)
    )
    quiet = fake.add_text_channel(guild.id, "quiet", overwrites=[deny])
    alice = fake.add_member(guild.id, name="alice")
    fake.past_message(quiet.id, author_id=alice.user.id, content="said before")
    async with learning_client(fake) as client:
        source = await source_for(client, quiet)
        with pytest.raises(LearnRefused, match="Read Message History"):
            await learn(source)


async def test_private_threads_it_may_not_list_are_noted(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    secret = fake.add_thread(general.id, "secret", private=True, archived=True)
    fake.past_message(secret.id, author_id=alice.user.id, content="between us")
    joined = fake.add_thread(general.id, "mine", private=True, members=[fake.bot_user.id])
    fake.past_message(joined.id, author_id=alice.user.id, content="with the bot")
    was_in = fake.add_thread(
        general.id, "was in", private=True, archived=True, members=[fake.bot_user.id]
    )
    fake.past_message(was_in.id, author_id=alice.user.id, content="with the bot, archived")
    async with learning_client(fake) as client:
        [page] = await learn(await source_for(client, general))
    assert [m.text for m in page.messages] == ["with the bot", "with the bot, archived"]
    [note] = page.notes
    assert "Manage Threads" in note


async def test_a_429_is_waited_out_and_learning_goes_on(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    for i in range(250):
        fake.past_message(general.id, author_id=alice.user.id, content=str(i))
    fake.set_route_budget(HISTORY, limit=2, window=0.2)
    async with learning_client(fake) as client:
        source = await source_for(client, general)
        await spend_budget(fake, f"/channels/{general.id}/messages")
        await spend_budget(fake, f"/channels/{general.id}/messages")
        pages = await learn(source)
    assert [m.text for m in messages(pages)] == [str(i) for i in range(250)]
    statuses = [r.status for r in fake.requests if r.path == f"/channels/{general.id}/messages"]
    assert 429 in statuses and statuses[-1] == 200


async def test_a_wait_over_the_clients_cap_stops_learning(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    for i in range(150):
        fake.past_message(general.id, author_id=alice.user.id, content=str(i))
    fake.set_route_budget(HISTORY, limit=1, window=40.0)  # the next request waits ~40 s
    async with learning_client(fake, max_ratelimit_timeout=30.0) as client:
        source = await source_for(client, general)
        handed, refused = await pages_until_refused(source)
    assert "run learn again" in str(refused)
    # the first request's page was handed over, with the cursor to go on from
    assert [m.text for m in messages(handed)] == [str(i) for i in range(100)]
    assert Cursor.load(handed[-1].cursor).at == general.id


async def test_the_source_caps_each_wait_itself(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    for i in range(150):
        fake.past_message(general.id, author_id=alice.user.id, content=str(i))
    async with learning_client(fake) as client:  # no cap of the client's own
        source = await source_for(client, general, max_wait=0.2, page_size=50)
        fake.set_route_budget(HISTORY, limit=1, window=1.0)
        handed, refused = await pages_until_refused(source)
        assert "over 0.2 s" in str(refused)
        await asyncio.sleep(1.0)  # the window passes; learn is run again
        fake.set_route_budget(HISTORY, limit=100, window=0.1)
        rest = await learn(source, cursor=handed[-1].cursor if handed else "")
    texts = [m.text for m in messages(handed) + messages(rest)]
    assert texts == [str(i) for i in range(150)]


async def test_discord_failing_stops_learning_until_it_is_run_again(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    fake.past_message(general.id, author_id=alice.user.id, content="hello")
    async with learning_client(fake) as client:
        source = await source_for(client, general)
        fake.fail_next("other", status=503, message="503: Service Unavailable")
        handed, refused = await pages_until_refused(source)
        assert handed == [] and "run learn again later" in str(refused)
        assert [m.text for m in messages(await learn(source))] == ["hello"]


def test_a_cursor_that_is_not_ours_is_refused() -> None:
    with pytest.raises(LearnRefused, match="start the learn again"):
        Cursor.load('{"channel": 1}')
    assert Cursor.load(Cursor(at=5, after=7, todo=(8, 9)).dump()) == Cursor(5, 7, (8, 9))
