"""The Slack front door: Bolt's ``AsyncApp`` translating Slack to the memory core and back,
one listener per kind of event, chosen by Bolt's matchers:

    message (a person's) / app_mention -> SlackMessage -> IncomingMessage -> conversation ->
                                          an answer in the message's thread
    message_changed                    -> conversation.edit(scope, ts, new text), once per event
    message_deleted, or message_changed to a tombstone (a thread parent deleted)
                                       -> conversation.delete(scope, [ts]), once per event
    any other message (joins, topic changes, bots): acknowledged, nothing kept
    channel_deleted / _left, app_uninstalled ... -> the place's (or workspace's) memory goes
    /memory, shortcuts, the App Home, the assistant panel: ``bots.slack.commands``,
                                          ``bots.slack.controls``, ``bots.slack.assistant``

``run_slack`` serves it over Socket Mode or HTTP (see docs/slack.md). What this module does
not decide lives beside it: scopes and text in ``bots.slack.text``, names and admin rights in
``bots.slack.users``, posting in ``bots.slack.send`` (streaming and splitting: the core's
conversation), tokens and connections in ``bots.slack.connect``, the listeners' shared
bookkeeping in ``bots.slack.listening``; reading a channel's past (``/memory learn``, a
thread's first message, the catch-up after an absence) in ``bots.learn.slack_*``.

A mention in a channel reaches the app twice (``app_mention`` and ``message``); both go
through the same listener, and the store keeps the message once (a repeat is not answered).
That also absorbs Slack's retries and Socket Mode redeliveries, fleet-wide.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bots.learn.slack_catch_up import CatchUpReport, SlackCatchUp
from bots.learn.slack_history import SlackThreadStarts, slack_past
from bots.slack.assistant import SlackAssistant
from bots.slack.commands import SlackCommands
from bots.slack.connect import (
    SlackIdentity,
    authenticate,
    build_client,
    connect_socket,
    connection_mode,
    require_bot_token,
    serve_http,
)
from bots.slack.controls import SlackControls
from bots.slack.files import SlackFiles
from bots.slack.listening import Listening, listener
from bots.slack.send import SlackReplies
from bots.slack.text import (
    HUMAN_SUBTYPES,
    SlackMessage,
    channel_scope,
    parse_change,
    parse_deletion,
    parse_message,
    slack_time,
)
from bots.slack.users import SlackDirectory
from memory_core.bootstrap import Core
from memory_core.errors import EmptyMessage, InputError, StoreError
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience, server_key
from memory_core.service.conversation import Delivery, Turn
from memory_core.service.past import PastSource

log = logging.getLogger(__name__)


async def _to_a_tombstone(event: dict[str, Any]) -> bool:
    """A message with replies, deleted: it stays as a ``tombstone`` and arrives as a change."""
    message = event.get("message")
    return isinstance(message, Mapping) and message.get("subtype") == "tombstone"


class SlackBot:
    """The listeners. Each one is small: translate, call the core, send."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.settings = core.settings.slack
        self.directory = SlackDirectory(core.platform, self.settings)
        self.files = SlackFiles(self.settings)
        self.replies = SlackReplies(core.pacing, stream=self.settings.stream_replies)
        self.thread_starts = SlackThreadStarts(
            self, requests_per_minute=core.settings.learn.slack_requests_per_minute
        )
        self.conversation = core.conversation
        self.listening = Listening()
        self.commands = SlackCommands(
            core, directory=self.directory, listening=self.listening, past=self.past_of
        )
        self.controls = SlackControls(core, commands=self.commands, memory_text=self.memory_text)
        self.assistant = SlackAssistant(self)

    def register(self, app: AsyncApp) -> None:
        self.assistant.register(app)  # first: its thread messages before the door's
        app.event({"type": "message", "subtype": "message_deleted"})(self.on_deleted)
        changed: dict[str, Any] = {"type": "message", "subtype": "message_changed"}
        app.event(changed, matchers=[_to_a_tombstone])(self.on_deleted)
        app.event(changed)(self.on_edited)
        # (app.message() would also take bot_message and leave out me_message)
        app.event({"type": "message", "subtype": (None, *HUMAN_SUBTYPES)})(self.on_message)
        app.event("app_mention")(self.on_message)
        app.event("message")(self.on_other_message)
        for kind in ("channel_deleted", "group_deleted"):
            app.event(kind)(self.on_channel_deleted)
        for kind in ("channel_left", "group_left", "member_left_channel"):
            app.event(kind)(self.on_channel_left)
        for kind in ("app_uninstalled", "tokens_revoked"):
            app.event(kind)(self.on_uninstalled)
        self.commands.register(app)
        self.controls.register(app)

    async def drain(self) -> None:
        """Wait for the listeners in flight (shutdown, tests)."""
        await self.listening.drain()

    # -- places that leave -------------------------------------------------------------
    # Slack asks apps to purge data on uninstall; a deleted channel's memory has no one to
    # serve, nor has that of a channel the bot was removed from (as on Discord, where a
    # server that removes the bot is forgotten). Never on an archive (channel_archive: it
    # comes back) or a lost connection.
    @listener
    async def on_channel_deleted(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A channel (public: channel_deleted, private: group_deleted) was deleted: its
        memory and its threads' go."""
        await self._forget_channel(context, event.get("channel"), "was deleted")

    @listener
    async def on_channel_left(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """The bot left or was removed from a channel: its memory and its threads' go.
        Slack says so with ``channel_left`` (public) or ``group_left`` (private) to the bot
        itself, which it "sometimes withholds", and with ``member_left_channel`` naming the
        bot user (the same event for anyone else who leaves changes nothing)."""
        if event.get("type") == "member_left_channel" and (
            not context.bot_user_id or event.get("user") != context.bot_user_id
        ):
            return
        await self._forget_channel(context, event.get("channel"), "no longer has the bot")

    async def _forget_channel(self, context: AsyncBoltContext, channel: object, why: str) -> None:
        try:
            scope = channel_scope(context.team_id or "", str(channel))
        except InputError:
            return  # not an id Slack sends
        try:
            await self.core.admin.place.forget_all(scope, keep_settings=False)
        except StoreError as exc:
            log.error("Slack: memory of %s (%s) not forgotten: %s", scope, why, exc)
            return
        log.info("Slack: %s %s: its memory is forgotten", scope, why)

    @listener
    async def on_uninstalled(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """The app was uninstalled (app_uninstalled) or its bot token revoked
        (tokens_revoked naming bot tokens): everything of the workspace goes."""
        tokens = event.get("tokens") if event.get("type") == "tokens_revoked" else None
        if isinstance(tokens, dict) and not tokens.get("bot"):
            return  # only users' tokens: the app stays
        team_id = context.team_id or ""
        try:
            places = await self.core.admin.place.forget_server(server_key("slack", team_id))
            await self.directory.forget_team(team_id)
        except (StoreError, InputError) as exc:
            log.error("Slack: memory of workspace %s not forgotten: %s", team_id, exc)
            return
        log.warning("Slack: removed from workspace %s: forgot its %d places", team_id, places)

    # -- messages ----------------------------------------------------------------------
    @listener
    async def on_message(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        """A person's message (or a mention): stored, then answered if it asks for one."""
        bot_user_id = context.bot_user_id or ""
        msg = parse_message(
            event,
            team_id=context.team_id or "",
            bot_user_id=bot_user_id,
            shared=body.get("is_ext_shared_channel") is True,
        )
        if msg is None:
            return
        async with self.listening.hold(msg.scope):
            turn = await self.store(msg, bot_user_id=bot_user_id, client=client)
        if turn is not None:
            await self.answer(turn, msg, client=client)

    @listener
    async def on_other_message(self) -> None:
        """Joins, topic changes, bots' messages...: not conversation, nothing is kept."""

    @listener
    async def on_deleted(
        self, event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """A message deleted (a thread parent: changed to a tombstone) is forgotten, in its
        scope's queue (never before the message itself), once per event."""
        deletion = parse_deletion(event, team_id=context.team_id or "")
        if deletion is None:
            return
        async with self.listening.hold(deletion.scope):
            await self.conversation.delete(
                deletion.scope,
                [(deletion.ts, slack_time(deletion.ts))],
                delivery=Delivery("slack", str(body.get("event_id") or "")),
            )

    @listener
    async def on_edited(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        """The new text replaces the stored one (in the scope's queue, so an edit right after
        the message never overtakes it); once per event (a retry that finds it applied does
        nothing, one that finds it failed applies it)."""
        team_id, bot_user_id = context.team_id or "", context.bot_user_id or ""
        edit = parse_change(event, team_id=team_id, bot_user_id=bot_user_id)
        if edit is None:
            return
        async with self.listening.hold(edit.scope):
            try:
                text = await self.memory_text(
                    edit.raw_text, team_id=team_id, bot_user_id=bot_user_id, client=client
                )
            except StoreError as exc:  # (names are cached in Redis)
                log.error("Slack: could not apply an edit in %s: %s", edit.scope, exc)
                return
            await self.conversation.edit(
                edit.scope,
                edit.ts,
                text,
                when=slack_time(edit.ts),
                attachments=edit.files,
                delivery=Delivery("slack", str(body.get("event_id") or "")),
            )

    async def answer(self, turn: Turn, msg: SlackMessage, *, client: AsyncWebClient) -> None:
        """Answer a stored message where it was asked (also the assistant panel's)."""
        stream = self.settings.stream_interval_s if self.settings.stream_replies else None
        sink = self.replies.sink(client, msg)
        await self.conversation.answer(turn, sink, stream_interval_s=stream, links=sink)

    async def store(
        self, msg: SlackMessage, *, bot_user_id: str, client: AsyncWebClient
    ) -> Turn | None:
        """Store the message: the turn to answer, None when there is none. A mention arrives
        as app_mention and as message, Slack retries, Socket Mode redelivers: the store
        keeps the message once and a repeat is not answered."""
        try:
            incoming = await self._incoming(msg, bot_user_id=bot_user_id, client=client)
            return await self.conversation.receive(incoming)
        except EmptyMessage:
            # No text and no file, only what Slack itself calls legacy secondary
            # attachments (the message's ``attachments`` field): nothing to remember.
            return None
        except StoreError as exc:
            log.error("Slack: could not store a message in %s: %s", msg.scope, exc)
            return None
        except InputError as exc:
            log.warning("Slack: message in %s not stored: %s", msg.scope, exc)
            return None

    async def _incoming(
        self, msg: SlackMessage, *, bot_user_id: str, client: AsyncWebClient
    ) -> IncomingMessage:
        author = await self.directory.name(client, msg.team_id, msg.user_id)
        text = await self.memory_text(
            msg.raw_text, team_id=msg.team_id, bot_user_id=bot_user_id, client=client
        )
        audience = msg.audience
        if msg.direct:
            audience = Audience.DM
        elif audience is None:  # an app_mention says no channel type: looked up
            audience = await self.directory.audience(client, msg.team_id, msg.channel_id)
        return IncomingMessage(
            scope=msg.scope,
            text=text,
            author=author,
            author_id=msg.user_id,
            ts=slack_time(msg.ts),
            platform_id=msg.ts,
            addressed=msg.addressed,
            direct=msg.direct,
            audience=audience,
            attachments=self.files.with_images(msg.files, msg.downloads),
            thread_starter=self.thread_starts.source(client, msg, bot_user_id=bot_user_id),
        )

    def past_of(
        self, client: AsyncWebClient, context: AsyncBoltContext, channel_id: str
    ) -> PastSource:
        """A channel's history, read by this door (its names, files, and the pace and waits
        of the [learn] settings): /memory learn."""
        learn = self.core.settings.learn
        return slack_past(
            self,
            client,
            team_id=context.team_id or "",
            channel_id=channel_id,
            bot_user_id=context.bot_user_id or "",
            bot_id=context.bot_id or "",
            restricted=learn.slack_requests_per_minute <= 1,
            requests_per_minute=learn.slack_requests_per_minute,
            max_wait_s=learn.max_wait_s,
        )

    async def memory_text(
        self, raw_text: str, *, team_id: str, bot_user_id: str, client: AsyncWebClient
    ) -> str:
        """Slack markup -> what memory keeps, mentions by name (new and edited alike)."""
        return await self.directory.memory_text(
            client,
            team_id,
            raw_text,
            bot_user_id=bot_user_id,
            bot_name=self.core.settings.bot.name,
        )


# -- wiring ------------------------------------------------------------------------------
def build_app(
    core: Core, *, client: AsyncWebClient | None = None, bot: SlackBot | None = None
) -> AsyncApp:
    """The Bolt app with memorybot's listeners (``bot``: to keep a handle for drain())."""
    settings = core.settings.slack
    require_bot_token(settings)
    secret = settings.signing_secret.get_secret_value() if settings.signing_secret else ""
    app = AsyncApp(
        name="memorybot",
        client=client or build_client(settings),
        # Socket Mode requests are not signed; Bolt verifies only HTTP ones.
        signing_secret=secret,
    )
    (bot or SlackBot(core)).register(app)
    return app


async def run_slack(
    core: Core, *, on_caught_up: Callable[[CatchUpReport], object] | None = None
) -> None:
    """Serve Slack until cancelled; then stop taking events, let handlers finish, close.
    Once connected, and after each Socket Mode reconnection, what was deleted or edited
    while the bot was away is caught up in the background (:mod:`bots.learn.slack_catch_up`;
    ``on_caught_up``: told what each catch-up did)."""
    settings = core.settings.slack
    mode = connection_mode(settings)
    async with aiohttp.ClientSession() as session:
        client = build_client(settings, session=session)
        me = await authenticate(client)
        bot = SlackBot(core)
        app = build_app(core, client=client, bot=bot)
        catch_up = SlackCatchUp(bot, client, identity=me, queue=bot.listening, on_done=on_caught_up)
        try:
            if mode == "socket":
                assert settings.app_token is not None
                handler = await connect_socket(app, settings.app_token.get_secret_value())
                try:
                    log.warning(_ready_line(me, "Socket Mode"))
                    catch_up.start()
                    catch_up.follow(handler.client)
                    await asyncio.Event().wait()
                finally:
                    await handler.close_async()  # type: ignore[no-untyped-call]
            else:
                async with serve_http(app, host=settings.http_host, port=settings.http_port) as url:
                    log.warning(_ready_line(me, f"HTTP, listening on {url}"))
                    catch_up.start()
                    await asyncio.Event().wait()
        finally:
            await catch_up.close()  # (what it did not reach, the next start catches up)
            await bot.drain()
            await bot.commands.learns.close()  # (a learn goes on with the next one)


def _ready_line(me: SlackIdentity, how: str) -> str:
    return f"Slack: connected as bot user {me.user_id} in {me.team} ({me.team_id}), {how}"
