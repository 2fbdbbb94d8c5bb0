"""``/memory`` on Discord: an ``app_commands.Group`` whose subcommands build
:class:`bots.commands.Command` objects and run them through :func:`bots.frontdoor.run_command`.

Permission is checked at run time, for every invocation, by the one rule of
:mod:`bots.acting`: Manage Server, a configured admin role or admin user makes an admin of a
server the bot serves; the bot's own DM is its person's; a DM or group DM between people
(the interaction's ``context`` 2, which only a user install reaches) and a server the bot
was not added to (``authorizing_integration_owners`` without the guild install) are places
it does not serve, where nobody changes anything. The group sets no ``default_permissions``:
``show`` and ``forget me`` are for everyone, and Discord's command permissions can be
changed by server admins anyway, so they are never relied upon; nor are the commands'
registered contexts and installs, which another version's sync may have left wider.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Literal

import discord
from discord import app_commands

from bots.acting import Actor, Where, actor_for
from bots.commands import Command, CommandResult, pinned_note
from bots.discord.events import Place, attachments_of, is_allowed, message_text, place_of
from bots.discord.links import message_url
from bots.discord.places import resolved
from bots.discord.replies import MESSAGE_LIMIT
from bots.discord.ui import ConfirmView, send_ephemeral, send_result, texts_for
from bots.frontdoor import run_command
from bots.learn.discord_history import discord_past
from bots.learn_command import ChannelLearns
from config.prompts import load_prompts
from config.settings import DiscordSettings
from memory_core.bootstrap import Core
from memory_core.errors import ConfigError
from memory_core.scopes import Scope
from memory_core.service.past import PastSource
from memory_core.text.attachments import render_attachments

log = logging.getLogger(__name__)

ShowSection = Literal["overview", "tiers", "facts", "stats"]
ReplyMode = Literal["mention", "all", "off"]
LanguageChoice = Literal["auto", "en", "ja"]
OnOff = Literal["on", "off"]
LearnStep = Literal["confirm", "cancel", "status"]

# Only where the bot itself is: a server it was added to, or its own DMs. A user install
# would put the commands in group DMs and foreign servers, where the scope is not the bot's
# memory of that place and admin checks cannot work.
INSTALLS = app_commands.AppInstallationType(guild=True, user=False)
CONTEXTS = app_commands.AppCommandContext(guild=True, dm_channel=True, private_channel=False)

# Discord drops an interaction that is not acknowledged within 3 s of its creation: a command
# still running this long after the interaction was created is deferred ("thinking...") and
# answered with a follow-up.
DEFER_AFTER_S = 2.0


def seconds_until_defer(interaction: discord.Interaction) -> float:
    """How long a command may run before it must be deferred. Counted from the interaction's
    creation (the time in its snowflake ID), because that is where Discord's 3 seconds start:
    gateway or event-loop lag before the handler runs is already spent. A local clock behind
    Discord's never buys more than DEFER_AFTER_S."""
    age = (discord.utils.utcnow() - interaction.created_at).total_seconds()
    return min(DEFER_AFTER_S, max(0.0, DEFER_AFTER_S - age))


def where_of(interaction: discord.Interaction) -> Where:
    """Where an interaction runs, as Discord says (Interaction Context Types, and
    ``authorizing_integration_owners``): a DM or group DM between people (PRIVATE_CHANNEL,
    reached only through a user install) or a server the bot was not added to (a user
    install alone authorised it) is no place of the bot's; the bot's own DM (BOT_DM) is
    the person's; a server with the bot in it is a place."""
    if interaction.context.private_channel:
        return Where.NOT_SERVED
    if interaction.guild_id is None:
        return Where.OWN_DM
    if interaction.is_user_integration() and not interaction.is_guild_integration():
        return Where.NOT_SERVED
    return Where.PLACE


def is_admin(user: discord.User | discord.Member, settings: DiscordSettings) -> bool:
    """An admin of the server: Manage Server, a configured admin role or user."""
    if user.id in settings.admin_user_ids:
        return True
    if not isinstance(user, discord.Member):
        return False
    if user.guild_permissions.manage_guild:  # also true for administrators and the owner
        return True
    admin_roles = set(settings.admin_role_ids)
    return any(role.id in admin_roles for role in user.roles)


def interaction_language(interaction: discord.Interaction) -> str | None:
    """Japanese clients get Japanese; otherwise the scope's language setting decides."""
    return "ja" if str(interaction.locale).startswith("ja") else None


class MemoryCommands:
    """Runs one ``/memory`` invocation: where, who, the command, the answer."""

    def __init__(self, core: Core, *, confirm_timeout_s: float = 60.0) -> None:
        self.core = core
        self.settings = core.settings.discord
        self.confirm_timeout_s = confirm_timeout_s
        self.learns = ChannelLearns(core.learner, core.settings.learn)  # /memory learn

    def place(self, interaction: discord.Interaction) -> Place:
        return place_of(
            interaction.channel,
            guild_id=interaction.guild_id,
            channel_id=interaction.channel_id or 0,
            user_id=interaction.user.id,
        )

    def actor(self, interaction: discord.Interaction) -> Actor:
        user = interaction.user
        return actor_for(
            user_id=str(user.id),
            name=user.display_name,
            where=where_of(interaction),
            server_admin=is_admin(user, self.settings),
        )

    async def run(self, interaction: discord.Interaction, command: Command) -> None:
        # A thread the client has no copy of (an archived one) is found in memory's tree.
        place = await resolved(self.core, self.place(interaction), interaction.channel)
        language = interaction_language(interaction)
        texts = texts_for(language)
        if not is_allowed(place, self.settings):
            await send_ephemeral(interaction, content=texts["not_here"])
            return
        actor = self.actor(interaction)
        if command.action == "learn" and actor.is_admin and place.guild_id:
            await self._learn(interaction, place, command, language)
            return
        result = await self._in_time(interaction, self._execute(place, command, actor, language))
        log.info(
            "/memory %s in %s (%s) by %s: ok=%s",
            command.action,
            place.scope,
            actor.where,
            interaction.user.id,
            result.ok,
        )
        if not result.needs_confirm:
            await send_result(
                interaction, result, too_big=texts["too_big"].format(scope=place.scope)
            )
            return
        view = ConfirmView(
            owner_id=interaction.user.id,
            on_confirm=self._confirmed(place, command, language),
            texts=texts,
            timeout=self.confirm_timeout_s,
        )
        await send_result(interaction, result, view=view)
        view.origin = interaction

    async def _learn(
        self, interaction: discord.Interaction, place: Place, command: Command, language: str | None
    ) -> None:
        """/memory learn: the channel's past (a thread's: its channel's, threads included),
        told in the command's private answer, which is edited as the learn goes (Discord
        lets it be edited for 15 minutes; /memory learn status says where it is after)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        channel_id = place.parent_id or place.channel_id
        root = Scope.of(place.scope).root.key
        bot_name = self.core.settings.bot.name

        async def source() -> PastSource:
            return await discord_past(
                interaction.client,
                channel_id,
                bot_name=bot_name,
                max_wait=self.core.settings.learn.max_wait_s,
            )

        async def tell(text: str) -> None:
            await interaction.edit_original_response(content=text[:MESSAGE_LIMIT])

        p = load_prompts(language or "en")
        answer = await self.learns.handle(command, place=root, source=source, tell=tell, p=p)
        step = command.key or command.arg or "-"
        log.info("/memory learn %s in %s by %s", step, root, interaction.user.id)
        await tell(answer)

    def _confirmed(
        self, place: Place, command: Command, language: str | None
    ) -> Callable[[discord.Interaction], Awaitable[str]]:
        async def confirm(click: discord.Interaction) -> str:
            # Permission is checked again at the click: it may have changed meanwhile.
            confirmed = replace(command, confirmed=True)
            result = await self._execute(place, confirmed, self.actor(click), language)
            log.info(
                "/memory %s confirmed in %s by %s: ok=%s",
                command.action,
                place.scope,
                click.user.id,
                result.ok,
            )
            return result.text()

        return confirm

    async def _execute(
        self, place: Place, command: Command, actor: Actor, language: str | None
    ) -> CommandResult:
        async def link(message_id: str, in_parent: bool) -> str:  # /memory why
            channel_id = place.parent_id if in_parent and place.parent_id else place.channel_id
            return message_url(
                guild_id=place.guild_id, channel_id=channel_id, message_id=message_id
            )

        return await run_command(
            self.core,
            scope=place.scope,
            command=command,
            actor=actor,
            language=language,
            link=link,
        )

    async def _in_time(
        self, interaction: discord.Interaction, work: Awaitable[CommandResult]
    ) -> CommandResult:
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait({task}, timeout=seconds_until_defer(interaction))
        if not done:
            await interaction.response.defer(ephemeral=True, thinking=True)
        return await task


def message_commands(runner: MemoryCommands, *, bot_name: str) -> list[app_commands.ContextMenu]:
    """The message context menu (Apps > ...): "Forget this message" (its author, or an
    admin) and "Remember this" (a pinned note quoting it, with its link; admins, as
    /memory remember). Both run on any message the user can see, in an archived thread
    too, where no slash command can be typed."""

    async def forget_this(interaction: discord.Interaction, message: discord.Message) -> None:
        command = Command("forget_message", arg=str(message.id), key=str(message.author.id))
        await runner.run(interaction, command)

    async def remember_this(interaction: discord.Interaction, message: discord.Message) -> None:
        me = interaction.client.user
        text = message_text(message, bot_id=me.id if me else 0, bot_name=bot_name)
        text = text or render_attachments(attachments_of(message))
        note = pinned_note(message.author.display_name, text, message.jump_url)
        await runner.run(interaction, Command("remember", arg=note))

    return [
        app_commands.ContextMenu(
            name=name,
            callback=callback,
            allowed_installs=INSTALLS,
            allowed_contexts=CONTEXTS,
        )
        for name, callback in (
            ("Forget this message", forget_this),
            ("Remember this", remember_this),
        )
    ]


class MemoryGroup(app_commands.Group, name="memory", description="What this bot remembers here"):
    """The ``/memory`` command tree: show, forget ..., remember, learn, why, export, pause,
    resume, config ...; every leaf only builds a Command for :class:`MemoryCommands`.

    Options typed ``bool`` are compared with ``is True``: discord.py passes option values
    through unchecked, and a stray "false" must not, say, delete a channel's memory."""

    forget = app_commands.Group(name="forget", description="Make the bot forget")
    config = app_commands.Group(name="config", description="Memory settings")

    def __init__(self, runner: MemoryCommands) -> None:
        super().__init__(allowed_installs=INSTALLS, allowed_contexts=CONTEXTS)
        self.runner = runner

    @app_commands.command(name="show", description="Show what is remembered in this channel")
    @app_commands.describe(section="What to show (default: overview)")
    async def show(
        self, interaction: discord.Interaction, section: ShowSection = "overview"
    ) -> None:
        await self.runner.run(interaction, Command("show", arg=section))

    @forget.command(name="all", description="Forget everything in this channel (admins)")
    @app_commands.describe(confirm="Skip the confirmation buttons")
    async def forget_all(self, interaction: discord.Interaction, confirm: bool = False) -> None:
        await self.runner.run(interaction, Command("forget_all", confirmed=confirm is True))

    @forget.command(name="me", description="Forget your messages and facts about you")
    @app_commands.describe(
        everywhere="In every channel, thread and DM of this server, not only here"
    )
    async def forget_me(self, interaction: discord.Interaction, everywhere: bool = False) -> None:
        everywhere_only = everywhere is True
        command = Command("forget_me_everywhere") if everywhere_only else Command("forget_me")
        await self.runner.run(interaction, command)

    @forget.command(name="text", description="Forget messages and facts containing a text (admins)")
    @app_commands.describe(text="The text to forget")
    async def forget_text(self, interaction: discord.Interaction, text: str) -> None:
        await self.runner.run(interaction, Command("forget_text", arg=text))

    @forget.command(name="fact", description="Forget one fact by its id (admins)")
    @app_commands.describe(fact_id="The fact id, as shown by /memory show facts")
    async def forget_fact(self, interaction: discord.Interaction, fact_id: str) -> None:
        await self.runner.run(interaction, Command("forget_fact", arg=fact_id))

    @app_commands.command(
        name="remember", description="Pin a note to this channel (admins), or about yourself"
    )
    @app_commands.describe(
        text="The note",
        about_me="A note about you, for everyone: it follows you across this server",
    )
    async def remember(
        self, interaction: discord.Interaction, text: str, about_me: bool = False
    ) -> None:
        about = about_me is True
        command = Command("remember_me", arg=text) if about else Command("remember", arg=text)
        await self.runner.run(interaction, command)

    @app_commands.command(
        name="learn", description="Learn this channel's past, threads too (admins)"
    )
    @app_commands.describe(
        days="How many days back to read (default: learn.default_days)",
        step="confirm: learn what was read; cancel: stop and drop it; status: where it is",
    )
    async def learn(
        self,
        interaction: discord.Interaction,
        days: app_commands.Range[int, 1, 3650] | None = None,
        step: LearnStep | None = None,
    ) -> None:
        command = Command("learn", key=step) if step else Command("learn", arg=str(days or ""))
        await self.runner.run(interaction, command)

    @app_commands.command(name="why", description="What the last answer here was based on")
    async def why(self, interaction: discord.Interaction) -> None:
        await self.runner.run(interaction, Command("why"))

    @app_commands.command(
        name="export", description="Download this channel's memory as JSON (admins)"
    )
    async def export(self, interaction: discord.Interaction) -> None:
        await self.runner.run(interaction, Command("export"))

    @app_commands.command(name="pause", description="Stop remembering new messages (admins)")
    async def pause(self, interaction: discord.Interaction) -> None:
        await self.runner.run(interaction, Command("pause"))

    @app_commands.command(name="resume", description="Remember new messages again (admins)")
    async def resume(self, interaction: discord.Interaction) -> None:
        await self.runner.run(interaction, Command("resume"))

    async def _set(self, interaction: discord.Interaction, key: str, value: str) -> None:
        await self.runner.run(interaction, Command("config", key=key, arg=value.strip()))

    @config.command(name="mode", description="When the bot answers here (admins)")
    @app_commands.describe(value="mention: when mentioned or replied to; all: always; off: never")
    async def config_mode(self, interaction: discord.Interaction, value: ReplyMode) -> None:
        await self._set(interaction, "mode", value)

    @config.command(name="timezone", description="When days end here, e.g. Asia/Tokyo (admins)")
    @app_commands.describe(value="An IANA timezone name")
    async def config_timezone(self, interaction: discord.Interaction, value: str) -> None:
        await self._set(interaction, "timezone", value)

    @config.command(name="language", description="The language of memory and answers (admins)")
    @app_commands.describe(value="auto follows the conversation")
    async def config_language(
        self, interaction: discord.Interaction, value: LanguageChoice
    ) -> None:
        await self._set(interaction, "language", value)

    @config.command(name="daily_tokens", description="Daily model-token budget here (admins)")
    @app_commands.describe(value="A number of tokens, off (no limit here) or default")
    async def config_daily_tokens(self, interaction: discord.Interaction, value: str) -> None:
        await self._set(interaction, "daily_tokens", value)

    @config.command(name="user_daily_tokens", description="Each member's daily budget (admins)")
    @app_commands.describe(value="A number of tokens, off (no limit here) or default")
    async def config_user_daily_tokens(self, interaction: discord.Interaction, value: str) -> None:
        await self._set(interaction, "user_daily_tokens", value)

    @config.command(name="sources", description="End answers with their source (admins)")
    @app_commands.describe(value="on: a 'from <date>' link under answers that used an old message")
    async def config_sources(self, interaction: discord.Interaction, value: OnOff) -> None:
        await self._set(interaction, "sources", value)


async def answer_command_error(
    interaction: discord.Interaction, error: app_commands.AppCommandError
) -> None:
    """The command tree's error handler: a /memory invocation that could not run (a
    subcommand or options this bot does not know, when Discord's copy of the commands is
    out of date or a client sends garbage, or a bug) gets a private answer instead of
    Discord's "This interaction failed"."""
    if isinstance(error, app_commands.CommandInvokeError):
        log.error("/memory failed: %s", error.original, exc_info=error.original)
    else:
        log.warning("/memory could not be run: %s", error)
    try:
        await send_ephemeral(
            interaction, content=texts_for(interaction_language(interaction))["failed"]
        )
    except discord.HTTPException as exc:
        log.warning("could not answer a /memory that failed: %s %s", exc.status, exc.code)


async def sync_command_tree(tree: app_commands.CommandTree, guild_ids: list[int]) -> None:
    """Register /memory with Discord: in the given guilds (instant; for testing servers), or
    globally when none are given."""
    try:
        if not guild_ids:
            synced = await tree.sync()
            log.warning("registered %d command(s) globally", len(synced))
            return
        for guild_id in guild_ids:
            guild = discord.Object(id=guild_id)
            tree.copy_global_to(guild=guild)
            synced = await tree.sync(guild=guild)
            log.warning("registered %d command(s) in guild %s", len(synced), guild_id)
    except discord.Forbidden as exc:
        raise ConfigError(
            f"Discord refused to register /memory ({exc.text}): invite the bot with the "
            "'applications.commands' scope into every guild in discord.sync_guild_ids "
            "(MEMORYBOT_DISCORD__SYNC_GUILD_IDS); see docs/discord.md"
        ) from exc
