"""The fake Discord against the real discord.py client, continued: shards, message commands,
places that go away (channels, threads, guilds), forwards, polls, voice messages, forum tags,
what a bot misses while away, and channel history.

As in test_discord_fake_server.py, each test runs a tiny throwaway bot (not memorybot's) and
awaits the bot's own queues or the fake's ``wait_for_*`` helpers; nothing sleeps blindly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord import (
    FakeDiscord,
    FakeDiscordError,
)
from tests.fakes.discord_clients import (
    GUILD_READY_TIMEOUT,
    RecordingBot,
    World,
    bot_intents,
    next_item,
)

pytestmark = pytest.mark.fake("discord", bot_name="throwaway-bot")


# ------------------------------------------------------------------------------- sharding


class ShardedBot(discord.AutoShardedClient):
    def __init__(self) -> None:
        super().__init__(
            intents=bot_intents(), shard_count=2, guild_ready_timeout=GUILD_READY_TIMEOUT
        )
        self.received: asyncio.Queue[discord.Message] = asyncio.Queue()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # The default sleeps 5 s before every non-initial IDENTIFY (Discord's identify rate
        # limit); the fake has none.
        return None

    async def on_message(self, message: discord.Message) -> None:
        await self.received.put(message)


async def test_auto_sharded_client_routes_guilds_to_their_shard(fake: FakeDiscord) -> None:
    guilds = [fake.add_guild(name=f"shard-{i}", for_shard=(i, 2)) for i in range(2)]
    channels = [fake.add_text_channel(g.id, "general") for g in guilds]
    users = [fake.add_member(g.id, name=f"user-{i}") for i, g in enumerate(guilds)]
    bot = ShardedBot()
    async with fake.running(bot):
        for channel, member in zip(channels, users, strict=True):
            await fake.send_message(channel_id=channel.id, author_id=member.user.id, content="hi")
        received = [await next_item(bot.received) for _ in range(2)]
        assert sorted(m.guild.id for m in received if m.guild) == sorted(g.id for g in guilds)
        for guild in guilds:
            cached = bot.get_guild(guild.id)
            assert cached is not None
            assert cached.shard_id == guilds.index(guild)

    assert sorted((i.shard_id, i.shard_count) for i in fake.identifies) == [(0, 2), (1, 2)]
    for shard_id, guild in enumerate(guilds):
        events = [d for d in fake.dispatched if d.shard_id == shard_id]
        ready = next(d for d in events if d.event == "READY")
        assert [g["id"] for g in ready.data["guilds"]] == [str(guild.id)]
        message_guilds = {d.data["guild_id"] for d in events if d.event == "MESSAGE_CREATE"}
        assert message_guilds == {str(guild.id)}


async def test_two_single_shard_clients_only_see_their_guilds(fake: FakeDiscord) -> None:
    guild_0 = fake.add_guild(name="zero", for_shard=(0, 2))
    guild_1 = fake.add_guild(name="one", for_shard=(1, 2))
    chan_0 = fake.add_text_channel(guild_0.id, "general")
    chan_1 = fake.add_text_channel(guild_1.id, "general")
    user_0 = fake.add_member(guild_0.id, name="zed")
    user_1 = fake.add_member(guild_1.id, name="uno")
    bot_0 = RecordingBot(shard_id=0, shard_count=2)
    bot_1 = RecordingBot(shard_id=1, shard_count=2)
    async with fake.running(bot_0), fake.running(bot_1):
        assert [g.id for g in bot_0.guilds] == [guild_0.id]
        assert [g.id for g in bot_1.guilds] == [guild_1.id]
        # Interleave: a misrouted message would be queued on the wrong socket *before* the
        # next correctly routed one, so checking order proves isolation without sleeping.
        first = await fake.send_message(channel_id=chan_1.id, author_id=user_1.user.id, content="1")
        second = await fake.send_message(
            channel_id=chan_0.id, author_id=user_0.user.id, content="2"
        )
        third = await fake.send_message(channel_id=chan_1.id, author_id=user_1.user.id, content="3")
        assert (await next_item(bot_0.received)).id == int(second["id"])
        assert (await next_item(bot_1.received)).id == int(first["id"])
        assert (await next_item(bot_1.received)).id == int(third["id"])
        assert bot_0.received.empty()


# ------------------------------------------------------------------------------- message commands


class MenuBot(commands.Bot):
    """A commands.Bot with a message context menu "Remember this" that records the
    ``discord.Message`` (and the interaction's channel) its callback gets."""

    def __init__(self) -> None:
        super().__init__(
            command_prefix="!", intents=bot_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
        )
        self.targets: asyncio.Queue[tuple[discord.Message, Any]] = asyncio.Queue()

        async def remember(interaction: discord.Interaction, message: discord.Message) -> None:
            await self.targets.put((message, interaction.channel))
            await interaction.response.send_message(f"remembered {message.id}", ephemeral=True)

        self.tree.add_command(app_commands.ContextMenu(name="Remember this", callback=remember))


async def test_a_message_command_round_trips_and_reaches_the_context_menu(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = MenuBot()
    async with fake.running(bot):
        synced = await bot.tree.sync()
        sent = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="my cat is Tom",
        )
        interaction = await fake.invoke_message_command(
            name="Remember this",
            channel_id=throwaway_world.general.id,
            user_id=throwaway_world.admin.user.id,
            message_id=int(sent["id"]),
        )
        target, channel = await next_item(bot.targets)
        response = await fake.wait_for_response(interaction)
    [menu] = synced
    assert (menu.name, menu.type, menu.description) == (
        "Remember this",
        discord.AppCommandType.message,
        "",
    )
    [registered] = fake.synced_commands[0].commands
    assert registered["type"] == 3 and "description" not in registered
    data = interaction.payload["data"]
    assert data["type"] == 3 and data["name"] == "Remember this"
    assert data["target_id"] == sent["id"] and "guild_id" not in data  # a global command
    assert data["resolved"]["messages"][sent["id"]]["content"] == "my cat is Tom"
    assert isinstance(target, discord.Message)
    assert (target.id, target.content) == (int(sent["id"]), "my cat is Tom")
    assert target.author.id == throwaway_world.alice.user.id
    assert target.guild is not None and target.guild.id == throwaway_world.guild.id
    assert isinstance(channel, discord.TextChannel) and channel.id == throwaway_world.general.id
    assert response.content == f"remembered {sent['id']}" and response.ephemeral
    # The original response is a CONTEXT_MENU_COMMAND message referring to the target.
    answer = fake.messages[response.message_id or 0]
    assert answer["type"] == 23
    assert answer["message_reference"]["message_id"] == sent["id"]
    assert answer["interaction_metadata"]["target_message_id"] == sent["id"]


async def test_a_message_command_on_an_old_message_in_an_uncached_archived_thread(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    archived = fake.add_thread(throwaway_world.general.id, "old-topic", archived=True)
    old = await fake.send_message(
        channel_id=archived.id,
        author_id=throwaway_world.alice.user.id,
        content="long ago",
        while_away=True,
    )
    bot = MenuBot()
    fake.register_commands([c.to_dict(bot.tree) for c in bot.tree.get_commands()])
    async with fake.running(bot):
        guild = bot.get_guild(throwaway_world.guild.id)
        assert guild is not None and guild.get_thread(archived.id) is None  # never cached
        interaction = await fake.invoke_message_command(
            name="Remember this",
            channel_id=archived.id,
            user_id=throwaway_world.alice.user.id,
            message_id=int(old["id"]),
        )
        target, channel = await next_item(bot.targets)
        await fake.wait_for_response(interaction)
    channel_payload = interaction.payload["channel"]
    assert channel_payload["parent_id"] == str(throwaway_world.general.id)
    assert channel_payload["thread_metadata"]["archived"] is True
    assert target.content == "long ago" and target.channel.id == archived.id
    assert isinstance(channel, discord.Thread)
    assert channel.archived and channel.parent_id == throwaway_world.general.id


# ------------------------------------------------------------------------------- places go away


class PlaceWatcher(RecordingBot):
    """Records the place events discord.py fires."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def on_guild_channel_delete(self, channel: discord.abc.GuildChannel) -> None:
        await self.events.put(("channel_delete", channel.id))

    async def on_raw_thread_delete(self, event: discord.RawThreadDeleteEvent) -> None:
        await self.events.put(("raw_thread_delete", event.thread_id))

    async def on_thread_delete(self, thread: discord.Thread) -> None:
        await self.events.put(("thread_delete", thread.id))

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await self.events.put(("guild_remove", guild.id))

    async def on_guild_unavailable(self, guild: discord.Guild) -> None:
        await self.events.put(("guild_unavailable", guild.id))

    async def on_guild_available(self, guild: discord.Guild) -> None:
        if self.is_ready():  # not the guilds announced at start-up
            await self.events.put(("guild_available", guild.id))


async def test_deleting_a_channel_takes_its_threads_without_thread_delete(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = PlaceWatcher()
    async with fake.running(bot):
        fake.delete_channel(throwaway_world.general.id)
        events = {await next_item(bot.events) for _ in range(3)}
        with pytest.raises(discord.NotFound) as gone:
            await bot.fetch_channel(throwaway_world.general.id)
        assert bot.get_channel(throwaway_world.thread.id) is None
    # discord.py drops the cached thread itself: the gateway sent only CHANNEL_DELETE
    assert events == {
        ("channel_delete", throwaway_world.general.id),
        ("thread_delete", throwaway_world.thread.id),
        ("raw_thread_delete", throwaway_world.thread.id),
    }
    sent = [d.event for d in fake.dispatched if d.event.endswith("_DELETE")]
    assert sent == ["CHANNEL_DELETE"]
    assert gone.value.code == 10003
    assert throwaway_world.thread.id not in fake.channels


async def test_deleting_a_thread_and_a_forum_post_sends_thread_delete(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = PlaceWatcher()
    async with fake.running(bot):
        for thread in (throwaway_world.thread, throwaway_world.forum_post):
            fake.delete_thread(thread.id)
            got = {await next_item(bot.events) for _ in range(2)}
            assert got == {("raw_thread_delete", thread.id), ("thread_delete", thread.id)}
        with pytest.raises(discord.NotFound):
            await bot.fetch_channel(throwaway_world.forum_post.id)
    deletes = [d.data for d in fake.dispatched if d.event == "THREAD_DELETE"]
    assert deletes == [
        {
            "id": str(thread.id),
            "guild_id": str(throwaway_world.guild.id),
            "parent_id": str(thread.parent_id),
            "type": 11,
        }
        for thread in (throwaway_world.thread, throwaway_world.forum_post)
    ]


async def test_the_bot_removed_from_a_guild_gets_guild_delete_and_missing_access(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = PlaceWatcher()
    async with fake.running(bot):
        fake.remove_bot_from_guild(throwaway_world.guild.id)
        assert await next_item(bot.events) == ("guild_remove", throwaway_world.guild.id)
        assert bot.get_guild(throwaway_world.guild.id) is None
        with pytest.raises(discord.Forbidden) as channel_error:
            await bot.fetch_channel(throwaway_world.general.id)
        with pytest.raises(discord.Forbidden) as history_error:
            await bot.http.logs_from(throwaway_world.general.id, 10)
        with pytest.raises(discord.Forbidden) as guild_error:
            await bot.fetch_guild(throwaway_world.guild.id)
        # people go on talking there; nothing of it reaches the bot any more
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="bye bot",
        )
        await fake.send_dm(user_id=throwaway_world.alice.user.id, content="still here?")
        assert (await next_item(bot.received)).content == "still here?"
    [removal] = [d.data for d in fake.dispatched if d.event == "GUILD_DELETE"]
    assert removal == {"id": str(throwaway_world.guild.id)}  # no "unavailable": removed
    for error in (channel_error, history_error, guild_error):
        assert (error.value.status, error.value.code) == (403, 50001)


async def test_a_guild_outage_makes_it_unavailable_until_it_ends(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = PlaceWatcher()
    async with fake.running(bot):
        fake.guild_outage(throwaway_world.guild.id)
        assert await next_item(bot.events) == ("guild_unavailable", throwaway_world.guild.id)
        guild = bot.get_guild(throwaway_world.guild.id)
        assert guild is not None and guild.unavailable  # still cached, unlike a removal
        with pytest.raises(FakeDiscordError, match="unavailable"):
            await fake.send_message(
                channel_id=throwaway_world.general.id,
                author_id=throwaway_world.alice.user.id,
                content="hello?",
            )
        fake.end_guild_outage(throwaway_world.guild.id)
        assert await next_item(bot.events) == ("guild_available", throwaway_world.guild.id)
        assert not guild.unavailable
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="back",
        )
        assert (await next_item(bot.received)).content == "back"
    outage = next(d for d in fake.dispatched if d.event == "GUILD_DELETE")
    assert outage.data == {"id": str(throwaway_world.guild.id), "unavailable": True}
    back = [d.data for d in fake.dispatched if d.event == "GUILD_CREATE"][-1]
    assert back["unavailable"] is False and back["id"] == str(throwaway_world.guild.id)


# ------------------------------------------------------------------------------- forwards


async def test_a_forward_carries_a_snapshot_of_the_message(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        original = await fake.send_message(
            channel_id=throwaway_world.thread.id,
            author_id=throwaway_world.admin.user.id,
            content="the meeting is on Friday",
            attachments={"agenda.txt": b"1. budget"},
        )
        await next_item(bot.received)
        forward = await fake.forward_message(
            message_id=int(original["id"]),
            to_channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="fyi",
        )
        in_guild, comment = await next_item(bot.received), await next_item(bot.received)
        dm = fake.dm_channel_id(throwaway_world.alice.user.id)
        await fake.forward_message(
            message_id=int(original["id"]),
            to_channel_id=dm,
            author_id=throwaway_world.alice.user.id,
        )
        in_dm = await next_item(bot.received)
    assert forward["content"] == "" and forward["type"] == 0
    assert forward["message_reference"] == {
        "type": 1,
        "message_id": original["id"],
        "channel_id": str(throwaway_world.thread.id),
        "guild_id": str(throwaway_world.guild.id),
    }
    [snapshot] = forward["message_snapshots"]
    assert "author" not in snapshot["message"] and "id" not in snapshot["message"]
    for message in (in_guild, in_dm):
        assert message.content == ""
        assert message.flags.forwarded
        assert message.reference is not None
        assert message.reference.type is discord.MessageReferenceType.forward
        assert message.reference.message_id == int(original["id"])
        assert message.reference.channel_id == throwaway_world.thread.id
        [snap] = message.message_snapshots
        assert snap.content == "the meeting is on Friday"
        assert [a.filename for a in snap.attachments] == ["agenda.txt"]
        assert snap.created_at == discord.utils.snowflake_time(int(original["id"]))
    assert isinstance(in_dm.channel, discord.DMChannel)
    assert comment.content == "fyi" and comment.reference is None  # sent after, on its own


async def test_a_forwarded_components_v2_message_keeps_its_components_and_mentions(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    """An app's Components V2 message (flag 1 << 15, no content) forwarded: the snapshot
    carries its components, its flags and the users its Text Displays mention."""
    app = fake.add_member(throwaway_world.guild.id, name="deploybot", bot=True)
    bob = throwaway_world.admin.user.id  # (a person: mentioned in the card)
    text = {"type": 10, "content": f"owner <@{bob}>"}
    section = {"type": 9, "components": [text], "accessory": {"type": 11, "media": {"url": "x"}}}
    card = fake.app_message(
        throwaway_world.general.id,
        author_id=app.user.id,
        components=[{"type": 17, "components": [{"type": 10, "content": "## 4.2"}, section]}],
    )
    assert card["flags"] == 1 << 15 and card["content"] == ""
    assert [m["id"] for m in card["mentions"]] == [str(bob)]
    with pytest.raises(FakeDiscordError, match="content or embeds"):
        fake.app_message(
            throwaway_world.general.id, author_id=app.user.id, content="hi", components=[text]
        )
    with pytest.raises(FakeDiscordError, match="not allowed"):
        fake.app_message(
            throwaway_world.general.id, author_id=app.user.id, components=[{"type": 11}]
        )
    with pytest.raises(FakeDiscordError, match="no app"):
        fake.app_message(throwaway_world.general.id, author_id=bob, components=[text])
    bot = RecordingBot()
    async with fake.running(bot):
        forward = await fake.forward_message(
            message_id=int(card["id"]),
            to_channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
        )
        received = await next_item(bot.received)
    [snapshot] = forward["message_snapshots"]
    assert snapshot["message"]["mentions"][0]["id"] == str(bob)
    assert snapshot["message"]["flags"] == 1 << 15
    [snap] = received.message_snapshots
    [container] = snap.components
    assert isinstance(container, discord.Container)
    heading, held = container.children
    assert isinstance(heading, discord.TextDisplay) and heading.content == "## 4.2"
    assert isinstance(held, discord.SectionComponent)
    assert [c.content for c in held.children if isinstance(c, discord.TextDisplay)] == [
        f"owner <@{bob}>"
    ]


# ------------------------------------------------------------------------------- polls


class PollBot(RecordingBot):
    def __init__(self) -> None:
        super().__init__()
        self.votes: asyncio.Queue[tuple[str, int, int]] = asyncio.Queue()

    async def on_raw_poll_vote_add(self, event: discord.RawPollVoteActionEvent) -> None:
        await self.votes.put(("add", event.user_id, event.answer_id))

    async def on_raw_poll_vote_remove(self, event: discord.RawPollVoteActionEvent) -> None:
        await self.votes.put(("remove", event.user_id, event.answer_id))


async def test_a_poll_its_votes_its_end_and_its_result_message(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = PollBot()
    async with fake.running(bot):
        sent = await fake.send_poll(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.admin.user.id,
            question="Lunch?",
            answers=["pizza", "sushi", "salad"],
            duration_hours=4,
        )
        message = await next_item(bot.received)
        await fake.vote_poll(int(sent["id"]), throwaway_world.alice.user.id, 2)
        await fake.vote_poll(int(sent["id"]), throwaway_world.admin.user.id, 1)
        await fake.vote_poll(
            int(sent["id"]), throwaway_world.admin.user.id, 2
        )  # changes their vote
        votes = [await next_item(bot.votes) for _ in range(4)]
        await fake.end_poll(int(sent["id"]))
        ended = await next_item(bot.edits)
        result = await next_item(bot.received)
    poll = message.poll
    assert poll is not None and message.content == ""
    assert poll.question == "Lunch?" and [a.text for a in poll.answers] == [
        "pizza",
        "sushi",
        "salad",
    ]
    assert not poll.multiple and poll.duration.total_seconds() == 4 * 3600
    assert poll.expires_at is not None and not poll.is_finalised()
    assert sent["poll"]["layout_type"] == 1 and "duration" not in sent["poll"]
    assert votes == [
        ("add", throwaway_world.alice.user.id, 2),
        ("add", throwaway_world.admin.user.id, 1),
        ("remove", throwaway_world.admin.user.id, 1),
        ("add", throwaway_world.admin.user.id, 2),
    ]
    assert ended.data["poll"]["results"] == {
        "is_finalized": True,
        "answer_counts": [{"id": 2, "count": 2, "me_voted": False}],
    }
    assert result.type is discord.MessageType.poll_result
    assert result.author.id == throwaway_world.admin.user.id
    assert [u.id for u in result.mentions] == [throwaway_world.admin.user.id]
    assert result.reference is not None and result.reference.message_id == int(sent["id"])
    [embed] = result.embeds
    assert embed.type == "poll_result"
    assert {f.name: f.value for f in embed.fields} == {
        "poll_question_text": "Lunch?",
        "victor_answer_votes": "2",
        "total_votes": "2",
        "victor_answer_id": "2",
        "victor_answer_text": "sushi",
    }
    # discord.py updates the cached poll from the result message
    assert poll.victor_answer is not None and poll.victor_answer.text == "sushi"
    assert poll.total_votes == 2


# ------------------------------------------------------------------------------- voice messages


async def test_a_voice_message_has_its_flag_duration_and_waveform(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        sent = await fake.send_voice_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            duration_secs=3.5,
        )
        message = await next_item(bot.received)
        [attachment] = message.attachments
        audio = await attachment.read()
    assert message.flags.voice and message.content == ""
    assert sent["flags"] == 1 << 13
    assert attachment.filename == "voice-message.ogg"
    assert attachment.content_type == "audio/ogg"
    assert attachment.duration == 3.5
    assert attachment.is_voice_message()
    assert attachment.waveform is not None and len(attachment.waveform) == 35  # 1 per 100 ms
    assert audio.startswith(b"OggS")
    with pytest.raises(FakeDiscordError, match="cannot be edited"):
        await fake.edit_user_message(sent, content="no")


# ------------------------------------------------------------------------------- forum tags


async def test_forum_tags_and_a_posts_applied_tags(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Tagged")
    forum = fake.add_forum(
        guild.id,
        "support",
        tags=["bug", {"name": "idea", "emoji_name": "💡"}, {"name": "solved", "moderated": True}],
    )
    bug, idea, solved = forum.available_tags
    member = fake.add_member(guild.id, name="alice")
    post = fake.add_thread(forum.id, "It crashes", owner_id=member.user.id, applied_tags=["bug"])
    bot = RecordingBot()
    async with fake.running(bot):
        cached = bot.get_channel(forum.id)
        assert isinstance(cached, discord.ForumChannel)
        tags = cached.available_tags
        assert [(t.id, t.name, t.moderated) for t in tags] == [
            (bug.id, "bug", False),
            (idea.id, "idea", False),
            (solved.id, "solved", True),
        ]
        assert str(tags[1].emoji) == "💡"
        thread = bot.get_channel(post.id)
        assert isinstance(thread, discord.Thread)
        assert [t.name for t in thread.applied_tags] == ["bug"]
        # the bot opens a post with a tag (the REST path)
        created = await cached.create_thread(
            name="From the bot", content="hello", applied_tags=[tags[1]]
        )
    assert [t.id for t in created.thread.applied_tags] == [idea.id]
    assert fake.channels[created.thread.id].applied_tags == [idea.id]
    payload = fake.requests[-1]
    assert payload.status == 201


# ------------------------------------------------------------------------------- missed events


class ReconnectingBot(RecordingBot):
    """Counts READY and RESUMED, and records deletions it is told about."""

    def __init__(self) -> None:
        super().__init__()
        self.readies: asyncio.Queue[None] = asyncio.Queue()
        self.resumed: asyncio.Queue[None] = asyncio.Queue()
        self.deleted: asyncio.Queue[int] = asyncio.Queue()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        return None  # discord.py sleeps 5 s before re-identifying; the fake needs no pause

    async def on_ready(self) -> None:
        await self.readies.put(None)

    async def on_resumed(self) -> None:
        await self.resumed.put(None)

    async def on_raw_message_delete(self, event: discord.RawMessageDeleteEvent) -> None:
        await self.deleted.put(event.message_id)


async def test_a_bot_that_cannot_resume_misses_what_happened_while_it_was_away(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = ReconnectingBot()
    async with fake.running(bot):
        first = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="one",
        )
        second = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="two",
        )
        for _ in range(2):
            await next_item(bot.received)
        before = len(fake.dispatched)
        await fake.disconnect_bot()
        fake.delete_message_quietly(int(first["id"]))
        fake.edit_message_quietly(int(second["id"]), content="two, edited")
        third = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="three",
            while_away=True,
        )
        await fake.wait_for_reconnect()
        await next_item(bot.readies)
        await next_item(bot.readies)  # on_ready again: a fresh session, not a resumed one
        channel = bot.get_channel(throwaway_world.general.id)
        assert isinstance(channel, discord.TextChannel)
        history = [m async for m in channel.history(limit=100)]
        # a live delete still arrives on the new session
        await fake.delete_message(int(third["id"]))
        assert await next_item(bot.deleted) == int(third["id"])
    assert [r.accepted for r in fake.resumes] == [False]
    assert len(fake.identifies) == 2
    after = [d.event for d in fake.dispatched[before:] if d.event != "MESSAGE_DELETE"]
    assert after == ["READY", "GUILD_CREATE"]  # nothing of what happened meanwhile
    assert bot.received.empty() and bot.edits.empty()
    assert [(m.id, m.content) for m in history] == [
        (int(third["id"]), "three"),
        (int(second["id"]), "two, edited"),
    ]
    assert history[1].edited_at is not None


async def test_a_resumed_session_gets_the_events_it_missed(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = ReconnectingBot()
    async with fake.running(bot):
        await fake.disconnect_bot(resumable=True)
        sent = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="while away",
        )
        await fake.wait_for_reconnect()
        await next_item(bot.resumed)
        message = await next_item(bot.received)
    assert message.id == int(sent["id"])
    assert bot.readies.qsize() == 1 and len(fake.identifies) == 1
    [resume] = fake.resumes
    assert resume.accepted and resume.session_id == fake.identifies[0].session_id


async def test_channel_history_pages_like_discord(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    ids = [
        int(
            (
                await fake.send_message(
                    channel_id=throwaway_world.thread.id,
                    author_id=throwaway_world.alice.user.id,
                    content=str(n),
                    while_away=True,
                )
            )["id"]
        )
        for n in range(7)
    ]
    bot = RecordingBot()
    async with fake.running(bot):
        thread = bot.get_channel(throwaway_world.thread.id)
        assert isinstance(thread, discord.Thread)
        newest = [m.content async for m in thread.history(limit=3)]
        before = [m.content async for m in thread.history(limit=2, before=discord.Object(ids[4]))]
        after = [m.content async for m in thread.history(limit=2, after=discord.Object(ids[1]))]
        everything = [m.content async for m in thread.history(limit=None, oldest_first=True)]
        around = await bot.http.logs_from(throwaway_world.thread.id, 4, around=ids[3])
    assert newest == ["6", "5", "4"]
    assert before == ["3", "2"]
    assert after == ["2", "3"]  # the oldest after it (discord.py pages forward with them)
    assert everything == [str(n) for n in range(7)]
    assert [m["content"] for m in around] == ["5", "4", "3", "2", "1"]
