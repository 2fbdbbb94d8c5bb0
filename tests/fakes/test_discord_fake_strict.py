"""The fake Discord refuses what real Discord refuses (issue 17): embed limits and expired
interaction tokens. Each test drives the real discord.py client against the fake and expects
the error Discord documents, so a fake that grew lenient again fails here."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NamedTuple

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord import (
    INTERACTION_TOKEN_LIFETIME,
    FakeDiscord,
    FakeDiscordError,
    Permission,
    PermissionOverwrite,
)

GUILD_READY_TIMEOUT = 0.05
WAIT = 5.0


def _intents() -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


class EmbedBot(discord.Client):
    """Sends the embed a test puts in ``to_send`` when a member writes ``!embed``."""

    def __init__(self) -> None:
        super().__init__(intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT)
        self.to_send: list[discord.Embed] = []
        self.results: asyncio.Queue[Exception | None] = asyncio.Queue()

    async def on_message(self, message: discord.Message) -> None:
        if message.author == self.user or message.content != "!embed":
            return
        try:
            await message.channel.send(embeds=self.to_send)
        except Exception as exc:
            await self.results.put(exc)
        else:
            await self.results.put(None)


pytestmark = pytest.mark.fake("discord", bot_name="strict-bot")


async def _send_embeds(fake: FakeDiscord, embeds: list[discord.Embed]) -> Exception | None:
    guild = fake.add_guild(name="Strict")
    channel = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    bot = EmbedBot()
    bot.to_send = embeds
    async with fake.running(bot):
        await fake.send_message(channel_id=channel.id, author_id=member.user.id, content="!embed")
        return await asyncio.wait_for(bot.results.get(), WAIT)


def _with_fields(count: int, *, name: str = "n", value: str = "v") -> discord.Embed:
    embed = discord.Embed(title="t")
    for _ in range(count):
        embed.add_field(name=name, value=value)
    return embed


@pytest.mark.parametrize(
    ("embeds", "where", "limit"),
    [
        ([discord.Embed(title="x" * 257)], "embeds.0.title", 256),
        ([discord.Embed(description="x" * 4097)], "embeds.0.description", 4096),
        ([_with_fields(26)], "embeds.0.fields", 25),
        ([_with_fields(1, name="x" * 257)], "embeds.0.fields.0.name", 256),
        ([_with_fields(1, value="x" * 1025)], "embeds.0.fields.0.value", 1024),
        ([discord.Embed(title="t").set_footer(text="x" * 2049)], "embeds.0.footer.text", 2048),
        ([discord.Embed(title="t").set_author(name="x" * 257)], "embeds.0.author.name", 256),
    ],
    ids=[
        "title",
        "description",
        "fields",
        "field-name",
        "field-value",
        "footer",
        "author",
    ],
)
async def test_each_embed_limit_is_refused_with_invalid_form_body(
    fake: FakeDiscord, embeds: list[discord.Embed], where: str, limit: int
) -> None:
    error = await _send_embeds(fake, embeds)
    assert isinstance(error, discord.HTTPException)
    assert (error.status, error.code) == (400, 50035)
    assert f"In {where}: Must be {limit} or fewer in length." in error.text
    assert fake.sent_messages == []


async def test_six_thousand_characters_over_all_embeds_are_refused(fake: FakeDiscord) -> None:
    # every single field is within its own limit; only the sum over both embeds is too much
    embeds = [discord.Embed(description="x" * 3000), discord.Embed(description="x" * 3001)]
    error = await _send_embeds(fake, embeds)
    assert isinstance(error, discord.HTTPException)
    assert (error.status, error.code) == (400, 50035)
    assert "Embed size exceeds maximum size of 6000" in error.text


async def test_embeds_at_the_limits_are_accepted(fake: FakeDiscord) -> None:
    full = discord.Embed(title="x" * 256, description="x" * 3013)
    full.set_footer(text="x" * 1000).set_author(name="x" * 256)
    for _ in range(25):
        full.add_field(name="n" * 19, value="v" * 40)
    assert len(full) == 6000
    assert await _send_embeds(fake, [full]) is None
    [sent] = fake.sent_messages
    assert len(sent.embeds[0]["fields"]) == 25


# ------------------------------------------------------------------ interaction tokens


def _slow_bot(release: asyncio.Event, outcome: asyncio.Queue[Exception | None]) -> commands.Bot:
    """``/slow`` defers, waits until the test releases it, then follows up and edits."""
    bot = commands.Bot(
        command_prefix="!", intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
    )

    @bot.tree.command(name="slow", description="Answer late")
    async def slow(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True)
        await release.wait()
        for late_call in (
            lambda: interaction.followup.send("late"),
            lambda: interaction.edit_original_response(content="late"),
        ):
            try:
                await late_call()
            except Exception as exc:
                await outcome.put(exc)
            else:
                await outcome.put(None)

    return bot


async def _run_slow(fake: FakeDiscord, *, aged: float) -> list[Exception | None]:
    guild = fake.add_guild(name="Strict")
    channel = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    release = asyncio.Event()
    outcome: asyncio.Queue[Exception | None] = asyncio.Queue()
    bot = _slow_bot(release, outcome)
    fake.register_commands([command.to_dict(bot.tree) for command in bot.tree.get_commands()])
    async with fake.running(bot):
        interaction = await fake.invoke_command(
            name="slow", channel_id=channel.id, user_id=member.user.id
        )
        await fake.wait_for_response(interaction)
        fake.age_interaction(interaction, aged)
        release.set()
        return [await asyncio.wait_for(outcome.get(), WAIT) for _ in range(2)]


async def test_follow_up_and_edit_after_fifteen_minutes_are_invalid_webhook_token(
    fake: FakeDiscord,
) -> None:
    results = await _run_slow(fake, aged=INTERACTION_TOKEN_LIFETIME + 1)
    for error in results:
        assert isinstance(error, discord.HTTPException)
        assert (error.status, error.code) == (401, 50027)
    assert fake.followups == []
    assert fake.edits == []


async def test_follow_up_and_edit_within_fifteen_minutes_work(fake: FakeDiscord) -> None:
    results: list[Any] = await _run_slow(fake, aged=INTERACTION_TOKEN_LIFETIME - 60)
    assert results == [None, None]
    assert len(fake.followups) == 1
    assert len(fake.edits) == 1


# ------------------------------------------------------------------ View Channel


class ListeningBot(discord.Client):
    """Records the channel of every message it receives."""

    def __init__(self) -> None:
        super().__init__(intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT)
        self.channels: asyncio.Queue[int] = asyncio.Queue()

    async def on_message(self, message: discord.Message) -> None:
        if message.author != self.user:
            await self.channels.put(message.channel.id)


async def test_messages_of_channels_the_bot_cannot_view_are_not_dispatched(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    hidden = fake.add_text_channel(
        guild.id,
        "staff",
        overwrites=[PermissionOverwrite(id=guild.id, type="role", deny=Permission.VIEW_CHANNEL)],
    )
    # the same deny for @everyone, but the bot is let in by a member overwrite
    shared = fake.add_text_channel(
        guild.id,
        "staff-with-bot",
        overwrites=[
            PermissionOverwrite(id=guild.id, type="role", deny=Permission.VIEW_CHANNEL),
            PermissionOverwrite(id=fake.bot_user.id, type="member", allow=Permission.VIEW_CHANNEL),
        ],
    )
    hidden_thread = fake.add_thread(hidden.id, "hidden-thread")
    member = fake.add_member(guild.id, name="alice")
    bot = ListeningBot()
    async with fake.running(bot):
        for channel in (hidden, hidden_thread, shared):
            await fake.send_message(channel_id=channel.id, author_id=member.user.id, content="hi")
        # messages are dispatched in order, so the first one received shows the others were not
        assert await asyncio.wait_for(bot.channels.get(), WAIT) == shared.id
    assert bot.channels.empty()


# ------------------------------------------------------------------ private threads


async def test_private_thread_messages_reach_the_bot_only_as_member_or_thread_manager(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    outside = fake.add_thread(general.id, "secret", private=True, owner_id=member.user.id)
    joined = fake.add_thread(general.id, "with-bot", private=True, owner_id=member.user.id)
    fake.join_thread(joined.id, fake.bot_user.id)
    invited = fake.add_thread(
        general.id, "invited", private=True, owner_id=member.user.id, members=[fake.bot_user.id]
    )
    bot = ListeningBot()
    async with fake.running(bot):
        for channel in (outside, joined, invited):
            await fake.send_message(channel_id=channel.id, author_id=member.user.id, content="hi")
        received = [await asyncio.wait_for(bot.channels.get(), WAIT) for _ in range(2)]
        assert received == [joined.id, invited.id]
        assert bot.channels.empty()
        # Manage Threads on the parent channel lets the bot see every private thread
        general.overwrites.append(
            PermissionOverwrite(id=fake.bot_user.id, type="member", allow=Permission.MANAGE_THREADS)
        )
        await fake.send_message(channel_id=outside.id, author_id=member.user.id, content="again")
        assert await asyncio.wait_for(bot.channels.get(), WAIT) == outside.id


class ThreadWatcher(discord.Client):
    """Records the threads discord.py learns of: created (``newly_created``) or joined."""

    def __init__(self) -> None:
        super().__init__(intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT)
        self.threads: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    async def on_thread_create(self, thread: discord.Thread) -> None:
        await self.threads.put(("create", thread.id))

    async def on_thread_join(self, thread: discord.Thread) -> None:
        await self.threads.put(("join", thread.id))


async def test_private_threads_reach_the_bot_only_as_member_or_thread_manager(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    staff = fake.add_text_channel(
        guild.id,
        "staff",
        overwrites=[PermissionOverwrite(id=guild.id, type="role", deny=Permission.VIEW_CHANNEL)],
    )
    member = fake.add_member(guild.id, name="alice")
    before = fake.add_thread(general.id, "before-connect", private=True, owner_id=member.user.id)
    bot = ThreadWatcher()
    async with fake.running(bot):
        # GUILD_CREATE lists only the threads the bot can see
        assert bot.get_channel(before.id) is None
        outside = fake.add_thread(general.id, "secret", private=True, owner_id=member.user.id)
        fake.add_thread(staff.id, "hidden-public")  # a public thread of a channel it cannot view
        invited = fake.add_thread(
            general.id, "invited", private=True, owner_id=member.user.id, members=[fake.bot_user.id]
        )
        assert await asyncio.wait_for(bot.threads.get(), WAIT) == ("create", invited.id)
        assert bot.get_channel(outside.id) is None
        # added later: THREAD_CREATE then, and THREAD_MEMBERS_UPDATE (discord.py calls
        # on_thread_join for each)
        fake.join_thread(outside.id, fake.bot_user.id)
        for _ in range(2):
            assert await asyncio.wait_for(bot.threads.get(), WAIT) == ("join", outside.id)
        assert isinstance(bot.get_channel(outside.id), discord.Thread)
        # Manage Threads on the parent: every private thread of it
        general.overwrites.append(
            PermissionOverwrite(id=fake.bot_user.id, type="member", allow=Permission.MANAGE_THREADS)
        )
        managed = fake.add_thread(general.id, "managed", private=True, owner_id=member.user.id)
        assert await asyncio.wait_for(bot.threads.get(), WAIT) == ("create", managed.id)
    assert bot.threads.empty()


# ------------------------------------------------------------------ registered commands


def _group_bot(answered: asyncio.Queue[str]) -> commands.Bot:
    bot = commands.Bot(
        command_prefix="!", intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
    )
    memory = app_commands.Group(name="memory", description="Memory")

    @memory.command(name="show", description="Show")
    async def show(interaction: discord.Interaction) -> None:
        await answered.put("show")
        await interaction.response.send_message("shown", ephemeral=True)

    bot.tree.add_command(memory)
    return bot


async def test_only_commands_the_bot_synced_can_be_invoked(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Strict")
    channel = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    answered: asyncio.Queue[str] = asyncio.Queue()
    bot = _group_bot(answered)
    async with fake.running(bot):
        with pytest.raises(FakeDiscordError, match="not registered"):
            await fake.invoke_command(
                name="memory show", channel_id=channel.id, user_id=member.user.id
            )
        await bot.tree.sync()
        for unknown in ("remember", "memory forget", "memory show extra"):
            with pytest.raises(FakeDiscordError, match="not registered"):
                await fake.invoke_command(
                    name=unknown, channel_id=channel.id, user_id=member.user.id
                )
        interaction = await fake.invoke_command(
            name="memory show", channel_id=channel.id, user_id=member.user.id
        )
        response = await fake.wait_for_response(interaction)
    assert response.content == "shown"
    assert answered.qsize() == 1
    assert len(fake.interactions) == 1  # refused invocations never reached the bot


async def test_a_guild_command_is_not_registered_in_another_guild(fake: FakeDiscord) -> None:
    home = fake.add_guild(name="Home")
    other = fake.add_guild(name="Other")
    other_channel = fake.add_text_channel(other.id, "general")
    member = fake.add_member(other.id, name="bob")
    bot = _group_bot(asyncio.Queue())
    fake.register_commands(
        [command.to_dict(bot.tree) for command in bot.tree.get_commands()], guild_id=home.id
    )
    async with fake.running(bot):
        with pytest.raises(FakeDiscordError, match="not registered globally"):
            await fake.invoke_command(
                name="memory show", channel_id=other_channel.id, user_id=member.user.id
            )


# ------------------------------------------------------------------ deferred responses


def _deferring_bot(answered: asyncio.Queue[list[discord.WebhookMessage]]) -> commands.Bot:
    """``/defer public`` and ``/defer private`` think, then send two follow-ups that ask for
    the opposite visibility of the defer."""
    bot = commands.Bot(
        command_prefix="!", intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
    )
    group = app_commands.Group(name="defer", description="Defer")

    async def answer(interaction: discord.Interaction, *, ephemeral: bool) -> None:
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        sent = [
            await interaction.followup.send(text, ephemeral=not ephemeral, wait=True)
            for text in ("first", "second")
        ]
        await answered.put(sent)

    @group.command(name="public", description="Think in public")
    async def public(interaction: discord.Interaction) -> None:
        await answer(interaction, ephemeral=False)

    @group.command(name="private", description="Think privately")
    async def private(interaction: discord.Interaction) -> None:
        await answer(interaction, ephemeral=True)

    bot.tree.add_command(group)
    return bot


@pytest.mark.parametrize("visibility", ["public", "private"])
async def test_the_first_follow_up_after_a_defer_replaces_the_thinking_message(
    fake: FakeDiscord, visibility: str
) -> None:
    guild = fake.add_guild(name="Strict")
    channel = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    answered: asyncio.Queue[list[discord.WebhookMessage]] = asyncio.Queue()
    bot = _deferring_bot(answered)
    fake.register_commands([command.to_dict(bot.tree) for command in bot.tree.get_commands()])
    async with fake.running(bot):
        interaction = await fake.invoke_command(
            name=f"defer {visibility}", channel_id=channel.id, user_id=member.user.id
        )
        deferred = await fake.wait_for_response(interaction)
        first_sent, second_sent = await asyncio.wait_for(answered.get(), WAIT)
    first, second = fake.followups
    # one message: the loading message became the answer; its visibility is the defer's,
    # whatever the follow-up asked for
    assert first_sent.id == first.message_id == deferred.message_id
    assert first.replaced_loading
    assert int(first.payload.get("flags") or 0) == (64 if visibility == "public" else 0)
    assert first.ephemeral is deferred.ephemeral is (visibility == "private")
    stored = fake.messages[first.message_id]
    assert stored["content"] == "first" and stored["flags"] & (1 << 7) == 0  # no longer loading
    # later follow-ups are new messages, ephemeral as they ask
    assert not second.replaced_loading and second.message_id != first.message_id
    assert second_sent.id == second.message_id
    assert second.ephemeral is (visibility == "public")
    bot_messages = [m for m in fake.messages.values() if int(m["channel_id"]) == channel.id]
    assert [m["content"] for m in bot_messages] == ["first", "second"]


# ------------------------------------------------------------------ command contexts


class Ran(NamedTuple):
    command: str
    context: int  # 0 GUILD, 1 BOT_DM, 2 PRIVATE_CHANNEL
    guild_install: bool  # discord.py: only in a server
    user_install: bool


def _context_bot(ran: asyncio.Queue[Ran]) -> commands.Bot:
    """``/guildonly`` (contexts: GUILD) and ``/anywhere`` (every context, guild and user
    installs) record where they ran."""
    bot = commands.Bot(
        command_prefix="!", intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
    )

    async def record(interaction: discord.Interaction) -> None:
        context = interaction.context
        await ran.put(
            Ran(
                command=interaction.command.name if interaction.command else "",
                context=0 if context.guild else 1 if context.dm_channel else 2,
                guild_install=interaction.is_guild_integration(),
                user_install=interaction.is_user_integration(),
            )
        )
        await interaction.response.send_message("ran", ephemeral=True)

    @bot.tree.command(name="guildonly", description="Servers only")
    @app_commands.allowed_contexts(guilds=True, dms=False, private_channels=False)
    async def guild_only(interaction: discord.Interaction) -> None:
        await record(interaction)

    @bot.tree.command(name="anywhere", description="Everywhere it is installed")
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.allowed_installs(guilds=True, users=True)
    async def anywhere(interaction: discord.Interaction) -> None:
        await record(interaction)

    return bot


async def test_a_command_is_offered_only_in_the_contexts_and_installs_it_allows(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    channel = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    dm = fake.dm_channel_id(alice.user.id)
    ran: asyncio.Queue[Ran] = asyncio.Queue()
    bot = _context_bot(ran)
    fake.register_commands([command.to_dict(bot.tree) for command in bot.tree.get_commands()])

    async def invoke(name: str, channel_id: int) -> Ran:
        await fake.invoke_command(name=name, channel_id=channel_id, user_id=alice.user.id)
        return await asyncio.wait_for(ran.get(), WAIT)

    async with fake.running(bot):
        assert await invoke("guildonly", channel.id) == Ran("guildonly", 0, True, False)
        with pytest.raises(FakeDiscordError, match=r"not offered in the bot's DM \(BOT_DM\)"):
            await fake.invoke_command(name="guildonly", channel_id=dm, user_id=alice.user.id)
        assert await invoke("anywhere", dm) == Ran("anywhere", 1, False, False)
        # a group DM is reached only by a user install, of the user who runs the command
        group = fake.add_group_dm([alice.user.id, fake.add_user(name="bob").id])
        for name in ("guildonly", "anywhere"):
            with pytest.raises(FakeDiscordError, match="not offered in PRIVATE_CHANNEL"):
                await fake.invoke_command(name=name, channel_id=group.id, user_id=alice.user.id)
        fake.install_for_user(alice.user.id)
        assert await invoke("anywhere", group.id) == Ran("anywhere", 2, False, True)
        assert await invoke("anywhere", channel.id) == Ran("anywhere", 0, True, True)
        with pytest.raises(FakeDiscordError, match="not offered in PRIVATE_CHANNEL"):
            await fake.invoke_command(name="guildonly", channel_id=group.id, user_id=alice.user.id)
    assert ran.empty()
    assert len(fake.interactions) == 4  # refused invocations never reached the bot


# ------------------------------------------------------------------ message commands


class MenuBot(commands.Bot):
    """``/remember`` (a slash command) and a "Remember this" message command."""

    def __init__(self, ran: asyncio.Queue[str]) -> None:
        super().__init__(
            command_prefix="!", intents=_intents(), guild_ready_timeout=GUILD_READY_TIMEOUT
        )

        @self.tree.command(name="remember", description="Remember something")
        async def remember_slash(interaction: discord.Interaction) -> None:
            await ran.put("slash")
            await interaction.response.send_message("ok", ephemeral=True)

        async def remember_message(
            interaction: discord.Interaction, message: discord.Message
        ) -> None:
            await ran.put(f"menu:{message.content}")
            await interaction.response.send_message("ok", ephemeral=True)

        self.tree.add_command(
            app_commands.ContextMenu(name="Remember this", callback=remember_message)
        )


async def test_context_menus_are_registered_as_discord_registers_them(fake: FakeDiscord) -> None:
    fake.add_guild(name="Strict")
    bot = MenuBot(asyncio.Queue())
    app_id = fake.application_id
    async with fake.running(bot):
        synced = await bot.tree.sync()
        errors: list[discord.HTTPException] = []
        for bad in (
            [{"type": 3, "name": "Remember this", "description": "why not"}],
            [
                {"type": 1, "name": "ok", "description": "fine"},
                {"type": 3, "name": "Pick", "options": [{"type": 3, "name": "x"}]},
            ],
            [{"type": 1, "name": "Remember", "description": "capitals"}],
            [{"type": 1, "name": "two words", "description": "a space"}],
            [{"type": 1, "name": "nodescription"}],
            [{"type": 3, "name": "x" * 33}],
        ):
            with pytest.raises(discord.HTTPException) as refused:
                await bot.http.bulk_upsert_global_commands(app_id, payload=bad)
            errors.append(refused.value)
        # POST upserts: 201 when new, 200 when the (type, name) existed
        pin: Any = {"type": 3, "name": "Pin It"}
        created = await bot.http.upsert_global_command(app_id, pin)
        again = await bot.http.upsert_global_command(app_id, pin)
    assert sorted((c.name, c.type.value) for c in synced) == [
        ("Remember this", 3),
        ("remember", 1),
    ]
    for error in errors:
        assert (error.status, error.code) == (400, 50035)
    assert "In 0.description: Context menu commands cannot have description" in errors[0].text
    assert "In 1.options: Context menu commands cannot have options" in errors[1].text
    assert all("name" in e.text for e in (errors[2], errors[3], errors[5]))
    assert "In 0.description: This field is required" in errors[4].text
    assert created["id"] == again["id"] and created["description"] == ""
    assert [r.status for r in fake.requests if r.method == "POST" and r.kind == "commands"] == [
        201,
        200,
    ]
    with pytest.raises(FakeDiscordError, match="cannot have description"):
        fake.register_commands([{"type": 3, "name": "Nope", "description": "no"}])


async def test_a_message_command_is_invoked_only_as_registered_and_on_a_visible_message(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    staff = fake.add_text_channel(
        guild.id,
        "staff",
        overwrites=[PermissionOverwrite(id=guild.id, type="role", deny=Permission.VIEW_CHANNEL)],
    )
    alice = fake.add_member(guild.id, name="alice")
    ran: asyncio.Queue[str] = asyncio.Queue()
    bot = MenuBot(ran)
    async with fake.running(bot):
        in_general = await fake.send_message(
            channel_id=general.id, author_id=alice.user.id, content="hello"
        )
        in_staff = await fake.send_message(
            channel_id=staff.id, author_id=guild.owner_id, content="secret"
        )
        with pytest.raises(FakeDiscordError, match="message command 'Remember this' is not"):
            await fake.invoke_message_command(
                name="Remember this",
                channel_id=general.id,
                user_id=alice.user.id,
                message_id=int(in_general["id"]),
            )
        await bot.tree.sync()
        with pytest.raises(FakeDiscordError, match="message command 'remember' is not"):
            # a slash command of that name is not a message command
            await fake.invoke_message_command(
                name="remember",
                channel_id=general.id,
                user_id=alice.user.id,
                message_id=int(in_general["id"]),
            )
        with pytest.raises(FakeDiscordError, match="cannot see"):
            await fake.invoke_message_command(
                name="Remember this",
                channel_id=staff.id,
                user_id=alice.user.id,
                message_id=int(in_staff["id"]),
            )
        with pytest.raises(FakeDiscordError, match="not .*" + str(staff.id)):
            await fake.invoke_message_command(
                name="Remember this",
                channel_id=staff.id,
                user_id=guild.owner_id,
                message_id=int(in_general["id"]),
            )
        await fake.invoke_message_command(
            name="Remember this",
            channel_id=general.id,
            user_id=alice.user.id,
            message_id=int(in_general["id"]),
        )
        await fake.invoke_command(name="remember", channel_id=general.id, user_id=alice.user.id)
        assert [await asyncio.wait_for(ran.get(), WAIT) for _ in range(2)] == [
            "menu:hello",
            "slash",
        ]
    assert len(fake.interactions) == 2


# ------------------------------------------------------------------ deletions


async def test_thread_delete_reaches_only_a_bot_that_could_see_the_thread(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    member = fake.add_member(guild.id, name="alice")
    hidden = fake.add_thread(general.id, "secret", private=True, owner_id=member.user.id)
    seen = fake.add_thread(general.id, "public")
    deleted: asyncio.Queue[int] = asyncio.Queue()

    class DeletionWatcher(ListeningBot):
        async def on_raw_thread_delete(self, event: discord.RawThreadDeleteEvent) -> None:
            await deleted.put(event.thread_id)

    async with fake.running(DeletionWatcher()):
        fake.delete_thread(hidden.id)
        fake.delete_thread(seen.id)
        # dispatched in order: the first deletion heard of shows the other was not sent
        assert await asyncio.wait_for(deleted.get(), WAIT) == seen.id
        with pytest.raises(FakeDiscordError):
            fake.delete_thread(general.id)  # not a thread
    assert [d.data["id"] for d in fake.dispatched if d.event == "THREAD_DELETE"] == [str(seen.id)]


# ------------------------------------------------------------------ forwards and polls


async def test_forwards_keep_the_message_content_rules_and_refuse_polls(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    staff = fake.add_text_channel(
        guild.id,
        "staff",
        overwrites=[PermissionOverwrite(id=guild.id, type="role", deny=Permission.VIEW_CHANNEL)],
    )
    alice = fake.add_member(guild.id, name="alice")
    received: asyncio.Queue[discord.Message] = asyncio.Queue()

    class BlindBot(discord.Client):  # no MESSAGE_CONTENT intent
        async def on_message(self, message: discord.Message) -> None:
            await received.put(message)

    blind = BlindBot(intents=discord.Intents.default(), guild_ready_timeout=GUILD_READY_TIMEOUT)
    async with fake.running(blind):
        secret = await fake.send_message(
            channel_id=staff.id, author_id=guild.owner_id, content="staff only"
        )
        with pytest.raises(FakeDiscordError, match="cannot view"):
            await fake.forward_message(
                message_id=int(secret["id"]), to_channel_id=general.id, author_id=alice.user.id
            )
        poll = await fake.send_poll(
            channel_id=general.id, author_id=alice.user.id, question="?", answers=["a", "b"]
        )
        with pytest.raises(FakeDiscordError, match="basic messages"):
            await fake.forward_message(
                message_id=int(poll["id"]), to_channel_id=general.id, author_id=alice.user.id
            )
        await fake.forward_message(
            message_id=int(secret["id"]), to_channel_id=general.id, author_id=guild.owner_id
        )
        # the bot cannot view #staff: the poll and the forward are all it hears of
        polled, forwarded = [await asyncio.wait_for(received.get(), WAIT) for _ in range(2)]
    assert polled.poll is None  # without MESSAGE_CONTENT the poll is left out
    [snapshot] = forwarded.message_snapshots
    assert snapshot.content == "" and forwarded.flags.forwarded


async def test_polls_keep_to_the_documented_limits(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    with pytest.raises(FakeDiscordError, match="answers"):
        await fake.send_poll(
            channel_id=general.id,
            author_id=alice.user.id,
            question="Too many?",
            answers=[str(n) for n in range(11)],
        )
    with pytest.raises(FakeDiscordError, match="duration"):
        await fake.send_poll(
            channel_id=general.id,
            author_id=alice.user.id,
            question="Forever?",
            answers=["yes"],
            duration_hours=32 * 24 + 1,
        )
    bot = EmbedBot()
    async with fake.running(bot):
        poll = await fake.send_poll(
            channel_id=general.id, author_id=alice.user.id, question="Q", answers=["a", "b"]
        )
        with pytest.raises(FakeDiscordError, match="apps are not allowed"):
            await fake.vote_poll(int(poll["id"]), fake.bot_user.id, 1)
        with pytest.raises(FakeDiscordError, match="answers are"):
            await fake.vote_poll(int(poll["id"]), alice.user.id, 3)
        await fake.end_poll(int(poll["id"]))
        with pytest.raises(FakeDiscordError, match="ended"):
            await fake.vote_poll(int(poll["id"]), alice.user.id, 1)
        channel = bot.get_channel(general.id)
        assert isinstance(channel, discord.TextChannel)
        too_long = discord.Poll(question="Q", duration=timedelta(hours=1))
        too_long.add_answer(text="x" * 56)
        with pytest.raises(discord.HTTPException) as refused:
            await channel.send(poll=too_long)
        fine = discord.Poll(question="Bot poll", duration=timedelta(hours=2))
        fine.add_answer(text="yes").add_answer(text="no")
        sent = await channel.send(poll=fine)
    assert (refused.value.status, refused.value.code) == (400, 50035)
    assert "answers.0.poll_media.text" in refused.value.text
    assert sent.poll is not None and [a.id for a in sent.poll.answers] == [1, 2]
    assert sent.poll.expires_at is not None
    result = [m for m in fake.messages.values() if m["type"] == 46]
    [embed] = result[0]["embeds"]
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert fields == {"poll_question_text": "Q", "victor_answer_votes": "0", "total_votes": "0"}


# ------------------------------------------------------------------ forum tags


async def test_forum_tags_keep_to_their_limits_and_moderation(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Strict")
    alice = fake.add_member(guild.id, name="alice")
    with pytest.raises(FakeDiscordError, match="at most 20"):
        fake.add_forum(guild.id, "many", tags=[f"t{n}" for n in range(21)])
    with pytest.raises(FakeDiscordError, match="1-20 characters"):
        fake.add_forum(guild.id, "long", tags=["x" * 21])
    forum = fake.add_forum(
        guild.id, "support", tags=["a", "b", "c", "d", "e", "f", {"name": "ok", "moderated": True}]
    )
    with pytest.raises(FakeDiscordError, match="at most 5"):
        fake.add_thread(forum.id, "too many", applied_tags=["a", "b", "c", "d", "e", "f"])
    with pytest.raises(FakeDiscordError, match="moderated"):
        fake.add_thread(forum.id, "self-approved", owner_id=alice.user.id, applied_tags=["ok"])
    with pytest.raises(FakeDiscordError, match="no tag 'zzz'"):
        fake.add_thread(forum.id, "unknown", applied_tags=["zzz"])
    text = fake.add_text_channel(guild.id, "general")
    with pytest.raises(FakeDiscordError, match="only forum posts"):
        fake.add_thread(text.id, "tagged thread", applied_tags=["a"])
    # the owner may manage threads: a moderated tag is fine
    post = fake.add_thread(forum.id, "approved", applied_tags=["ok", forum.available_tags[0].id])
    assert post.applied_tags == [forum.available_tags[6].id, forum.available_tags[0].id]


# ------------------------------------------------------------------ missed events and history


class AwayBot(EmbedBot):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        return None


async def test_changes_the_bot_misses_are_only_possible_while_it_is_away(
    fake: FakeDiscord,
) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    early = await fake.send_message(
        channel_id=general.id, author_id=alice.user.id, content="before", while_away=True
    )
    bot = AwayBot()
    async with fake.running(bot):
        for quiet in (
            lambda: fake.delete_message_quietly(int(early["id"])),
            lambda: fake.edit_message_quietly(int(early["id"]), content="x"),
        ):
            with pytest.raises(FakeDiscordError, match="is connected"):
                quiet()
        with pytest.raises(FakeDiscordError, match="is connected"):
            await fake.send_message(
                channel_id=general.id, author_id=alice.user.id, content="x", while_away=True
            )
        with pytest.raises(FakeDiscordError, match="does not reconnect"):
            await fake.disconnect_bot(code=4004)
        await fake.disconnect_bot(resumable=True)
        with pytest.raises(FakeDiscordError, match="resumable"):
            fake.delete_message_quietly(int(early["id"]))
        await fake.wait_for_reconnect()
    assert [r.accepted for r in fake.resumes] == [True]


async def test_channel_history_is_as_strict_as_the_docs(fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Strict")
    general = fake.add_text_channel(guild.id, "general")
    no_history = fake.add_text_channel(
        guild.id,
        "no-history",
        overwrites=[
            PermissionOverwrite(
                id=fake.bot_user.id, type="member", deny=Permission.READ_MESSAGE_HISTORY
            )
        ],
    )
    hidden = fake.add_text_channel(
        guild.id,
        "hidden",
        overwrites=[
            PermissionOverwrite(id=fake.bot_user.id, type="member", deny=Permission.VIEW_CHANNEL)
        ],
    )
    alice = fake.add_member(guild.id, name="alice")
    unseen = await fake.send_message(
        channel_id=no_history.id, author_id=alice.user.id, content="x", while_away=True
    )
    bot = AwayBot()
    async with fake.running(bot):
        http = bot.http
        failures: list[discord.HTTPException] = []
        for call in (
            lambda: http.logs_from(general.id, 101),
            lambda: http.logs_from(general.id, 0),
            lambda: http.logs_from(general.id, 10, before=1, after=2),
            lambda: http.logs_from(hidden.id, 10),
            lambda: http.get_message(no_history.id, int(unseen["id"])),
        ):
            with pytest.raises(discord.HTTPException) as refused:
                await call()
            failures.append(refused.value)
        # without Read Message History: "no messages will be returned", not an error
        assert await http.logs_from(no_history.id, 50) == []
    assert [(f.status, f.code) for f in failures] == [
        (400, 50035),
        (400, 50035),
        (400, 50035),
        (403, 50001),
        (403, 50013),
    ]
