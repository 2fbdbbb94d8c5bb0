"""End-to-end tests of the fake Discord server against the real, unmodified discord.py client.

Each test runs a tiny throwaway bot (not memorybot's) through ``FakeDiscord.running``, drives
users through the fake and asserts on what discord.py saw and what the fake recorded. Nothing
sleeps blindly: tests await either the bot's own queues or the fake's ``wait_for_*`` helpers.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord import (
    ChannelType,
    FakeChannel,
    FakeDiscord,
    FakeDiscordError,
    FakeGuild,
    FakeMember,
    Intent,
    Permission,
    PermissionOverwrite,
)

# discord.py waits this long after the last GUILD_CREATE before on_ready (default 2 s).
GUILD_READY_TIMEOUT = 0.05
WAIT = 5.0


def bot_intents(*, message_content: bool = True) -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = message_content
    return intents


@dataclass
class World:
    guild: FakeGuild
    general: FakeChannel
    thread: FakeChannel
    forum: FakeChannel
    forum_post: FakeChannel
    alice: FakeMember
    admin: FakeMember


pytestmark = pytest.mark.fake("discord", bot_name="throwaway-bot")


@pytest.fixture
def throwaway_world(fake: FakeDiscord) -> World:
    guild = fake.add_guild(name="Memory Lab")
    general = fake.add_text_channel(guild.id, "general")
    forum = fake.add_forum(guild.id, "ideas")
    return World(
        guild=guild,
        general=general,
        thread=fake.add_thread(general.id, "side-topic"),
        forum=forum,
        forum_post=fake.add_thread(forum.id, "Remember my birthday"),
        alice=fake.add_member(guild.id, name="alice"),
        admin=fake.add_member(guild.id, name="root", manage_guild=True),
    )


class ForgetView(discord.ui.View):
    def __init__(self, clicks: asyncio.Queue[int]) -> None:
        super().__init__(timeout=30)
        self.clicks = clicks

    @discord.ui.button(label="Forget", custom_id="memory:forget", style=discord.ButtonStyle.danger)
    async def forget(
        self, interaction: discord.Interaction, button: discord.ui.Button[Any]
    ) -> None:
        await self.clicks.put(interaction.user.id)
        await interaction.response.edit_message(content="forgotten", view=None)
        self.stop()


class RecordingBot(discord.Client):
    """A throwaway bot: records what it receives and performs ``!``-commands."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("intents", bot_intents())
        super().__init__(guild_ready_timeout=GUILD_READY_TIMEOUT, **options)
        self.received: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.errors: asyncio.Queue[Exception] = asyncio.Queue()
        self.clicks: asyncio.Queue[int] = asyncio.Queue()
        self.edits: asyncio.Queue[discord.RawMessageUpdateEvent] = asyncio.Queue()

    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        await self.edits.put(event)

    async def on_message(self, message: discord.Message) -> None:
        if message.author == self.user:
            return  # the fake echoes the bot's own messages, as Discord does
        await self.received.put(message)
        try:
            await self.perform(message)
        except Exception as exc:
            await self.errors.put(exc)

    async def perform(self, message: discord.Message) -> None:
        channel = message.channel
        match message.content.split(" ")[0]:
            case "!ping":
                await message.reply("pong")
            case "!typing":
                async with channel.typing():
                    await channel.send("typed")
            case "!edit":
                sent = await channel.send("v1")
                await sent.edit(content="v2")
            case "!file":
                await channel.send(
                    "here",
                    file=discord.File(io.BytesIO(b"hello memory"), filename="notes.txt"),
                    embed=discord.Embed(title="Summary", description="short"),
                )
            case "!buttons":
                await channel.send("Forget this?", view=ForgetView(self.clicks))
            case "!long":
                await channel.send("x" * 2001)
            case "!invite":
                assert isinstance(channel, discord.TextChannel)
                await channel.create_invite()
            case _:
                pass


async def next_item(queue: asyncio.Queue[Any]) -> Any:
    return await asyncio.wait_for(queue.get(), WAIT)


# ------------------------------------------------------------------------------- login


async def test_client_logs_in_and_becomes_ready(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        assert bot.user is not None
        assert bot.user.id == fake.bot_user.id
        assert bot.application_id == fake.application_id
        guild = bot.get_guild(throwaway_world.guild.id)
        assert guild is not None
        assert guild.name == "Memory Lab"
        assert guild.me is not None
        general = guild.get_channel(throwaway_world.general.id)
        assert isinstance(general, discord.TextChannel)
        assert general.permissions_for(guild.me).send_messages
        assert not general.permissions_for(guild.me).manage_guild
        assert isinstance(guild.get_channel(throwaway_world.forum.id), discord.ForumChannel)
        assert guild.get_thread(throwaway_world.thread.id) is not None

    [identify] = fake.identifies
    assert identify.intents & Intent.MESSAGE_CONTENT
    # discord.py asks for transport compression; the fake must speak it.
    assert identify.compression == discord.utils._ActiveDecompressionContext.COMPRESSION_TYPE
    assert (identify.shard_id, identify.shard_count) == (0, 1)
    assert fake.unknown_routes == []
    assert [r.path for r in fake.requests] == ["/users/@me", "/oauth2/applications/@me"]


async def test_bad_token_raises_login_failure(fake: FakeDiscord) -> None:
    client = discord.Client(intents=bot_intents())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.start("not-the-token")
    finally:
        await client.close()  # login opened an HTTP session even though it failed
    assert [r.status for r in fake.requests] == [401]
    assert fake.identifies == []


async def test_disallowed_privileged_intent_is_rejected() -> None:
    async with FakeDiscord(enabled_privileged_intents=0) as strict:
        strict.add_guild()
        with pytest.raises(discord.PrivilegedIntentsRequired):
            async with strict.running(RecordingBot()):
                pass


# ------------------------------------------------------------------------------- messages


async def test_guild_message_reaches_on_message_and_reply_is_recorded(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        sent = await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!ping",
        )
        message = await next_item(bot.received)
        assert message.id == int(sent["id"])
        assert message.content == "!ping"
        assert isinstance(message.author, discord.Member)
        assert message.author.id == throwaway_world.alice.user.id
        assert message.author.name == "alice"
        assert message.guild is not None
        assert message.guild.id == throwaway_world.guild.id
        assert message.channel.id == throwaway_world.general.id
        assert isinstance(message.channel, discord.TextChannel)
        assert message.attachments == []

        [reply] = await fake.wait_for_messages(throwaway_world.general.id, 1)
        assert reply.content == "pong"
        assert reply.message_reference is not None
        assert reply.message_reference["message_id"] == sent["id"]
        assert fake.messages[reply.id]["type"] == 19  # REPLY
        assert bot.errors.empty()


async def test_user_attachments_can_be_downloaded(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="see file",
            attachments={"diary.txt": b"dear diary"},
        )
        message = await next_item(bot.received)
        [attachment] = message.attachments
        assert attachment.filename == "diary.txt"
        assert attachment.content_type == "text/plain"
        assert await attachment.read() == b"dear diary"


async def test_world_changes_after_connect_are_dispatched(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        joined = bot.wait_for("guild_join", timeout=WAIT)
        new_guild = fake.add_guild(name="Second Home")
        assert (await joined).id == new_guild.id

        created = bot.wait_for("guild_channel_create", timeout=WAIT)
        new_channel = fake.add_text_channel(new_guild.id, "fresh")
        assert (await created).id == new_channel.id

        # Without the GUILD_MEMBERS intent Discord does not send GUILD_MEMBER_ADD.
        fake.add_member(new_guild.id, name="newcomer")
        assert not [d for d in fake.dispatched if d.event == "GUILD_MEMBER_ADD"]


async def test_members_intent_chunks_members(fake: FakeDiscord, throwaway_world: World) -> None:
    intents = bot_intents()
    intents.members = True
    bot = RecordingBot(intents=intents)
    async with fake.running(bot):
        guild = bot.get_guild(throwaway_world.guild.id)
        assert guild is not None
        # chunk_guilds_at_startup defaults to True with the members intent: op 8 -> chunk.
        assert guild.get_member(throwaway_world.alice.user.id) is not None
        assert guild.chunked
        joined = bot.wait_for("member_join", timeout=WAIT)
        newcomer = fake.add_member(throwaway_world.guild.id, name="newcomer")
        assert (await joined).id == newcomer.user.id
    assert any(d.event == "GUILD_MEMBERS_CHUNK" for d in fake.dispatched)


async def test_member_permissions_are_computed_from_roles(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.admin.user.id,
            content="hello",
        )
        from_admin = await next_item(bot.received)
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="hello",
        )
        from_alice = await next_item(bot.received)
        assert isinstance(from_admin.author, discord.Member)
        assert isinstance(from_alice.author, discord.Member)
        assert from_admin.author.guild_permissions.manage_guild
        assert not from_alice.author.guild_permissions.manage_guild


async def test_thread_and_forum_messages_have_parent(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.thread.id,
            author_id=throwaway_world.alice.user.id,
            content="in thread",
        )
        in_thread = await next_item(bot.received)
        assert isinstance(in_thread.channel, discord.Thread)
        assert isinstance(in_thread.channel.parent, discord.TextChannel)
        assert in_thread.channel.parent.id == throwaway_world.general.id

        await fake.send_message(
            channel_id=throwaway_world.forum_post.id,
            author_id=throwaway_world.alice.user.id,
            content="in forum",
        )
        in_post = await next_item(bot.received)
        assert isinstance(in_post.channel, discord.Thread)
        assert isinstance(in_post.channel.parent, discord.ForumChannel)
        assert in_post.channel.parent.id == throwaway_world.forum.id
        assert throwaway_world.forum.type is ChannelType.GUILD_FORUM

        # A thread created while the bot is connected arrives through THREAD_CREATE.
        late = fake.add_thread(throwaway_world.general.id, "late-thread")
        await fake.send_message(
            channel_id=late.id, author_id=throwaway_world.alice.user.id, content="late"
        )
        in_late = await next_item(bot.received)
        assert isinstance(in_late.channel, discord.Thread)
        assert in_late.channel.name == "late-thread"


async def test_dm_arrives_as_dm_channel(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_dm(user_id=throwaway_world.alice.user.id, content="!ping")
        message = await next_item(bot.received)
        assert isinstance(message.channel, discord.DMChannel)
        assert message.guild is None
        assert message.author.id == throwaway_world.alice.user.id
        assert message.content == "!ping"
        [reply] = await fake.wait_for_messages(fake.dm_channel_id(throwaway_world.alice.user.id), 1)
        assert reply.content == "pong"
        assert reply.guild_id is None


async def test_message_content_is_hidden_without_the_intent(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot(intents=bot_intents(message_content=False))
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="secret",
        )
        assert (await next_item(bot.received)).content == ""
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="remember this",
            mentions_bot=True,
        )
        mentioned = await next_item(bot.received)
        assert mentioned.content == f"<@{fake.bot_user.id}> remember this"
        assert bot.user in mentioned.mentions


async def test_a_members_edit_and_a_link_preview_are_message_updates(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot, blind = RecordingBot(), RecordingBot(intents=bot_intents(message_content=False))
    async with fake.running(bot), fake.running(blind):
        sent = await fake.send_message(
            channel_id=throwaway_world.thread.id,
            author_id=throwaway_world.alice.user.id,
            content="v1 secret",
        )
        await fake.edit_user_message(sent, content=f"v2 for <@{throwaway_world.admin.user.id}>")
        edit, blind_edit = await next_item(bot.edits), await next_item(blind.edits)
        await fake.unfurl_links(sent, embeds=[{"type": "link", "url": "https://example.com"}])
        unfurl = await next_item(bot.edits)
    message = edit.message
    assert (edit.message_id, edit.channel_id, edit.guild_id) == (
        int(sent["id"]),
        throwaway_world.thread.id,
        throwaway_world.guild.id,
    )
    assert message.content == f"v2 for <@{throwaway_world.admin.user.id}>"
    assert [u.id for u in message.mentions] == [throwaway_world.admin.user.id]
    assert (
        isinstance(message.author, discord.Member)
        and message.author.id == throwaway_world.alice.user.id
    )
    assert isinstance(message.channel, discord.Thread)
    assert message.edited_at is not None and message.created_at < message.edited_at
    assert edit.cached_message is not None and edit.cached_message.content == "v1 secret"
    assert blind_edit.message.content == ""  # MESSAGE_CONTENT rules, as for new messages
    assert unfurl.data["edited_timestamp"] == edit.data["edited_timestamp"]
    assert unfurl.message.embeds and unfurl.message.content == message.content


async def test_typing_file_upload_and_edit_are_recorded(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        for command in ("!typing", "!file", "!edit"):
            await fake.send_message(
                channel_id=throwaway_world.general.id,
                author_id=throwaway_world.alice.user.id,
                content=command,
            )
        [typing_event] = await fake.wait_for_typing(throwaway_world.general.id)
        messages = await fake.wait_for_messages(throwaway_world.general.id, 3)
        [edit] = await fake.wait_for_edits()

    # The three on_message handlers run concurrently, so look the messages up by content.
    by_content = {m.content: m for m in messages}
    typed, with_file, edited = by_content["typed"], by_content["here"], by_content["v1"]
    assert typed.at >= typing_event.at
    assert [(f.filename, f.data) for f in with_file.attachments] == [("notes.txt", b"hello memory")]
    assert with_file.embeds[0]["title"] == "Summary"
    assert with_file.content == "here"
    assert edited.content == "v1"
    assert edit.message_id == edited.id
    assert edit.content == "v2"
    assert fake.messages[edited.id]["content"] == "v2"
    assert bot.errors.empty()


@pytest.mark.parametrize("is_global", [False, True])
async def test_rate_limited_post_is_retried(
    fake: FakeDiscord, throwaway_world: World, is_global: bool
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        fake.rate_limit_next("messages", count=1, retry_after=0.2, is_global=is_global)
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!ping",
        )
        [reply] = await fake.wait_for_messages(throwaway_world.general.id, 1)
        assert reply.content == "pong"
        # Wait for the echo so no late request sneaks in before the assertions.
        await fake.wait_for(lambda: len(fake.sent_messages) == 1)
    posts = [r for r in fake.requests if r.kind == "messages"]
    assert [r.status for r in posts] == [429, 200]
    assert len(fake.sent_messages) == 1
    assert bot.errors.empty()


async def test_forbidden_channel_raises_forbidden_in_bot(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    fake.forbid_channel(throwaway_world.general.id)
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!ping",
        )
        error = await next_item(bot.errors)
    assert isinstance(error, discord.Forbidden)
    assert error.status == 403
    assert error.code == 50013
    assert fake.sent_messages == []


async def test_channel_overwrites_apply_to_discord_py_and_rest(fake: FakeDiscord) -> None:
    guild = fake.add_guild()
    read_only = fake.add_text_channel(
        guild.id,
        "announcements",
        overwrites=[PermissionOverwrite(id=guild.id, type="role", deny=Permission.SEND_MESSAGES)],
    )
    member = fake.add_member(guild.id, name="reader")
    bot = RecordingBot()
    async with fake.running(bot):
        cached = bot.get_guild(guild.id)
        assert cached is not None
        channel = cached.get_channel(read_only.id)
        assert isinstance(channel, discord.TextChannel)
        assert not channel.permissions_for(cached.me).send_messages
        assert channel.permissions_for(cached.me).read_messages
        await fake.send_message(channel_id=read_only.id, author_id=member.user.id, content="!ping")
        error = await next_item(bot.errors)
    assert isinstance(error, discord.Forbidden)
    assert error.code == 50013
    assert fake.permissions_for(guild.id, fake.bot_user.id, read_only.id) & Permission.VIEW_CHANNEL


async def test_too_long_message_is_rejected(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!long",
        )
        error = await next_item(bot.errors)
    assert isinstance(error, discord.HTTPException)
    assert error.code == 50035
    assert fake.sent_messages == []


@pytest.mark.calls_unknown_routes  # what this test checks is how the fake answers one
async def test_unknown_routes_are_recorded(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!invite",
        )
        error = await next_item(bot.errors)
    assert isinstance(error, discord.NotFound)
    [unknown] = fake.unknown_routes
    assert unknown.method == "POST"
    assert unknown.path == f"/channels/{throwaway_world.general.id}/invites"


# ------------------------------------------------------------------------------- interactions


def memory_bot(fake: FakeDiscord) -> commands.Bot:
    """A commands.Bot with a ``/memory`` group: show, note (modal) and config set, registered
    with ``fake`` (only registered commands can be invoked)."""
    bot = commands.Bot(
        command_prefix="!", intents=bot_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
    )
    memory = app_commands.Group(name="memory", description="Inspect the bot's memory")
    config = app_commands.Group(name="config", description="Settings", parent=memory)

    @memory.command(name="show", description="Show what the bot remembers")
    async def show(interaction: discord.Interaction, limit: int = 5) -> None:
        can_manage = interaction.permissions.manage_guild
        await interaction.response.send_message(
            f"{interaction.user.name}: limit={limit} manage={can_manage}", ephemeral=True
        )

    @config.command(name="set", description="Change a setting")
    async def set_value(interaction: discord.Interaction, key: str, value: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await interaction.followup.send(f"{key} = {value}", ephemeral=True)
        await interaction.edit_original_response(content="saved")

    class NoteModal(discord.ui.Modal, title="New note"):
        text: discord.ui.TextInput[Any] = discord.ui.TextInput(label="Note", custom_id="note")

        async def on_submit(self, interaction: discord.Interaction) -> None:
            await interaction.response.send_message(f"noted: {self.text.value}")

    @memory.command(name="note", description="Write a note")
    async def note(interaction: discord.Interaction) -> None:
        await interaction.response.send_modal(NoteModal())

    bot.tree.add_command(memory)
    fake.register_commands([command.to_dict(bot.tree) for command in bot.tree.get_commands()])
    return bot


async def test_slash_command_group_ephemeral_response(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = memory_bot(fake)
    async with fake.running(bot):
        interaction = await fake.invoke_command(
            name="memory show",
            options={"limit": 3},
            channel_id=throwaway_world.general.id,
            user_id=throwaway_world.admin.user.id,
        )
        response = await fake.wait_for_response(interaction)
    assert response.type == 4
    assert response.flags == 64
    assert response.ephemeral
    assert response.content == "root: limit=3 manage=True"
    assert interaction.payload["data"]["options"] == [
        {"type": 1, "name": "show", "options": [{"type": 4, "name": "limit", "value": 3}]}
    ]


async def test_subcommand_group_defer_followup_and_edit(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = memory_bot(fake)
    async with fake.running(bot):
        interaction = await fake.invoke_command(
            name="memory config set",
            options={"key": "tone", "value": "dry"},
            channel_id=throwaway_world.thread.id,
            user_id=throwaway_world.alice.user.id,
        )
        response = await fake.wait_for_response(interaction)
        [followup] = await fake.wait_for_followups(interaction)
        [edit] = await fake.wait_for_edits(response.message_id)
    assert response.type == 5
    assert response.ephemeral
    assert followup.content == "tone = dry"
    assert followup.ephemeral
    assert edit.via == "interaction"
    assert edit.content == "saved"


async def test_modal_submit_reaches_on_submit(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = memory_bot(fake)
    async with fake.running(bot):
        opened = await fake.invoke_command(
            name="memory note",
            channel_id=throwaway_world.general.id,
            user_id=throwaway_world.alice.user.id,
        )
        modal = await fake.wait_for_response(opened)
        assert modal.type == 9
        submitted = await fake.submit_modal(interaction=opened, values={"note": "buy milk"})
        response = await fake.wait_for_response(submitted)
    assert response.type == 4
    assert response.content == "noted: buy milk"
    assert not response.ephemeral


async def test_slash_command_in_dm(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = memory_bot(fake)
    async with fake.running(bot):
        interaction = await fake.invoke_command(
            name="memory show",
            channel_id=fake.dm_channel_id(throwaway_world.alice.user.id),
            user_id=throwaway_world.alice.user.id,
        )
        response = await fake.wait_for_response(interaction)
    assert response.content == "alice: limit=5 manage=False"


async def test_button_click_reaches_view_callback(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = RecordingBot()
    async with fake.running(bot):
        await fake.send_message(
            channel_id=throwaway_world.general.id,
            author_id=throwaway_world.alice.user.id,
            content="!buttons",
        )
        [prompt] = await fake.wait_for_messages(throwaway_world.general.id, 1)
        assert prompt.custom_ids == ["memory:forget"]
        interaction = await fake.click_button(
            message=prompt, custom_id="memory:forget", user_id=throwaway_world.alice.user.id
        )
        clicked_by = await next_item(bot.clicks)
        response = await fake.wait_for_response(interaction)
    assert clicked_by == throwaway_world.alice.user.id
    assert response.type == 7
    assert response.content == "forgotten"
    assert fake.messages[prompt.id]["content"] == "forgotten"
    assert fake.messages[prompt.id]["components"] == []


async def test_late_interaction_response_is_rejected() -> None:
    async with FakeDiscord(interaction_ack_timeout=0.0) as impatient:
        guild = impatient.add_guild()
        channel = impatient.add_text_channel(guild.id, "general")
        user = impatient.add_member(guild.id, name="bob")
        bot = memory_bot(impatient)
        errors: asyncio.Queue[Exception] = asyncio.Queue()

        @bot.tree.error
        async def on_error(
            interaction: discord.Interaction, error: app_commands.AppCommandError
        ) -> None:
            await errors.put(error)

        async with impatient.running(bot):
            await impatient.invoke_command(
                name="memory show", channel_id=channel.id, user_id=user.user.id
            )
            error = await next_item(errors)
    assert isinstance(error, app_commands.CommandInvokeError)
    assert isinstance(error.original, discord.NotFound)
    assert error.original.code == 10062  # Unknown interaction


async def test_the_three_seconds_count_from_the_interactions_creation(
    fake: FakeDiscord, throwaway_world: World
) -> None:
    bot = memory_bot(fake)
    errors: asyncio.Queue[Exception] = asyncio.Queue()

    @bot.tree.error
    async def on_error(
        interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await errors.put(error)

    async with fake.running(bot):
        late = await fake.invoke_command(
            name="memory show",
            channel_id=throwaway_world.general.id,
            user_id=throwaway_world.alice.user.id,
            created_ago=3.5,
        )
        error = await next_item(errors)
    # The ID carries the creation time, as Discord's do (discord.Interaction.created_at).
    age = (discord.utils.utcnow() - discord.utils.snowflake_time(late.id)).total_seconds()
    assert 3.5 <= age < 13.5
    assert isinstance(error, app_commands.CommandInvokeError)
    assert isinstance(error.original, discord.NotFound) and error.original.code == 10062


async def test_tree_sync_is_recorded(fake: FakeDiscord, throwaway_world: World) -> None:
    bot = memory_bot(fake)
    async with fake.running(bot):
        synced = await bot.tree.sync()
        guild = discord.Object(id=throwaway_world.guild.id)
        bot.tree.copy_global_to(guild=guild)
        await bot.tree.sync(guild=guild)
        global_sync, guild_sync = await fake.wait_for_synced_commands(2)
    assert [c.name for c in synced] == ["memory"]
    assert synced[0].id != 0
    assert global_sync.guild_id is None
    assert global_sync.names == ["memory"]
    [memory] = global_sync.commands
    assert sorted(o["name"] for o in memory["options"]) == ["config", "note", "show"]
    assert guild_sync.guild_id == throwaway_world.guild.id
    assert guild_sync.names == ["memory"]


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
