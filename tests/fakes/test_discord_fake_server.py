"""End-to-end tests of the fake Discord server against the real, unmodified discord.py client.

Each test runs a tiny throwaway bot (not memorybot's) through ``FakeDiscord.running``, drives
users through the fake and asserts on what discord.py saw and what the fake recorded. Nothing
sleeps blindly: tests await either the bot's own queues or the fake's ``wait_for_*`` helpers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord import (
    ChannelType,
    FakeDiscord,
    Intent,
    Permission,
    PermissionOverwrite,
)
from tests.fakes.discord_clients import (
    GUILD_READY_TIMEOUT,
    WAIT,
    RecordingBot,
    World,
    bot_intents,
    next_item,
)

pytestmark = pytest.mark.fake("discord", bot_name="throwaway-bot")


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
