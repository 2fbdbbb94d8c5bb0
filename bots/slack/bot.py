"""The Slack front door: Bolt's ``AsyncApp`` translating Slack to the memory core and back.

    message / app_mention event -> SlackMessage -> IncomingMessage -> conversation -> thread reply
    message_changed             -> conversation.edit(scope, ts, new text), once per event
    message_deleted, or message_changed to a tombstone (a thread parent deleted)
                                -> conversation.delete(scope, [ts]), once per event
    /memory ...                 -> run_command -> ephemeral Block Kit answer (export: a file
                                   in a DM; forget all: confirmation buttons)

``run_slack`` serves it over Socket Mode or HTTP (see docs/slack.md). What this module does
not decide lives beside it: ``/memory`` in ``bots.slack.commands``, scopes and text in
``bots.slack.text``, names and admin rights in ``bots.slack.users``, Block Kit in
``bots.slack.blocks``, posting in ``bots.slack.send``
(streaming and splitting: the core's conversation), tokens and connections in
``bots.slack.connect``.

A mention in a channel reaches the app twice (``app_mention`` and ``message``); both go
through the same handler, and the first to claim the message's (team, channel, ts) in Redis
handles it. That key also absorbs Slack's retries and Socket Mode redeliveries, fleet-wide.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.assistant import SlackAssistant
from bots.slack.catch_up import CatchUpReport, SlackCatchUp
from bots.slack.commands import ScopeQueue, SlackCommands
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
from bots.slack.history import slack_past
from bots.slack.send import SlackReplies
from bots.slack.text import (
    Deletion,
    Edit,
    SlackMessage,
    channel_scope,
    parse_change,
    parse_deletion,
    parse_message,
    slack_time,
)
from bots.slack.thread_starts import SlackThreadStarts
from bots.slack.users import SlackDirectory
from memory_core.bootstrap import Core
from memory_core.errors import EmptyMessage, InputError, StoreError
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience, server_key
from memory_core.service.conversation import Delivery, Turn
from memory_core.service.past import PastSource

log = logging.getLogger(__name__)

#: Where an ephemeral answer goes when its response_url will not take it: (client, channel, user).
Recipient = tuple[AsyncWebClient, str, str]

DRAIN_S = 10.0  # at shutdown, how long handlers in flight may finish

# Redis failures surface as StoreError (translated at the store boundary).
STORE_ERRORS = (StoreError,)


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
        self._queue = ScopeQueue()
        self._inflight: set[asyncio.Task[Any]] = set()
        self.commands = SlackCommands(
            core,
            directory=self.directory,
            queue=self._queue,
            tracked=self.tracked,
            past=self.past_of,
        )
        self.controls = SlackControls(
            core,
            commands=self.commands,
            directory=self.directory,
            memory_text=self.memory_text,
            tracked=self.tracked,
        )
        self.assistant = SlackAssistant(
            core, queue=self._queue, tracked=self.tracked, store=self._store, answer=self.answer
        )

    def register(self, app: AsyncApp) -> None:
        self.assistant.register(app)  # first: its thread messages before on_message
        app.event("message")(self.on_message)
        app.event("app_mention")(self.on_message)
        app.event("channel_deleted")(self.on_channel_deleted)
        app.event("group_deleted")(self.on_channel_deleted)
        app.event("channel_left")(self.on_channel_left)
        app.event("group_left")(self.on_channel_left)
        app.event("member_left_channel")(self.on_channel_left)
        app.event("app_uninstalled")(self.on_uninstalled)
        app.event("tokens_revoked")(self.on_uninstalled)
        self.commands.register(app)
        self.controls.register(app)

    # -- bookkeeping -------------------------------------------------------------------
    @contextmanager
    def tracked(self) -> Iterator[None]:
        """Bolt runs listeners as loose tasks after acking; shutdown (and tests) wait for
        the ones running through :meth:`drain`."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def drain(self, grace_s: float = DRAIN_S) -> None:
        """Wait until every listener that has started has finished (at most ``grace_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        current = asyncio.current_task()
        while pending := {t for t in self._inflight if t is not current and not t.done()}:
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning("Slack: %d handlers still running after %.0fs", len(pending), grace_s)
                return
            await asyncio.wait(pending, timeout=remaining)

    # -- places that leave -------------------------------------------------------------
    # Slack asks apps to purge data on uninstall; a deleted channel's memory has no one to
    # serve, nor has that of a channel the bot was removed from (as on Discord, where a
    # server that removes the bot is forgotten). Never on an archive (channel_archive: it
    # comes back) or a lost connection.
    async def on_channel_deleted(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A channel (public: channel_deleted, private: group_deleted) was deleted: its
        memory and its threads' go."""
        with self.tracked():
            await self._forget_channel(context, event.get("channel"), "was deleted")

    async def on_channel_left(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """The bot left or was removed from a channel: its memory and its threads' go.
        Slack says so with ``channel_left`` (public) or ``group_left`` (private) to the bot
        itself, which it "sometimes withholds", and with ``member_left_channel`` naming the
        bot user (the same event for anyone else who leaves changes nothing)."""
        with self.tracked():
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
            await self.core.admin.forget_all(scope, keep_settings=False)
        except STORE_ERRORS as exc:
            log.error("Slack: memory of %s (%s) not forgotten: %s", scope, why, exc)
            return
        log.info("Slack: %s %s: its memory is forgotten", scope, why)

    async def on_uninstalled(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """The app was uninstalled (app_uninstalled) or its bot token revoked
        (tokens_revoked naming bot tokens): everything of the workspace goes."""
        with self.tracked():
            tokens = event.get("tokens") if event.get("type") == "tokens_revoked" else None
            if isinstance(tokens, dict) and not tokens.get("bot"):
                return  # only users' tokens: the app stays
            team_id = context.team_id or ""
            try:
                places = await self.core.admin.forget_server(server_key("slack", team_id))
                await self.directory.forget_team(team_id)
            except (*STORE_ERRORS, InputError) as exc:
                log.error("Slack: memory of workspace %s not forgotten: %s", team_id, exc)
                return
            log.warning("Slack: removed from workspace %s: forgot its %d places", team_id, places)

    # -- messages ----------------------------------------------------------------------
    async def on_message(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        with self.tracked():
            team_id, bot_user_id = context.team_id, context.bot_user_id or ""
            if not team_id:
                return
            event_id = str(body.get("event_id") or "")
            change = parse_change(event, team_id=team_id, bot_user_id=bot_user_id)
            deletion = (
                change if isinstance(change, Deletion) else parse_deletion(event, team_id=team_id)
            )
            if deletion is not None:
                await self._forget_deleted(deletion, event_id=event_id)
                return
            if isinstance(change, Edit):
                await self._apply_edit(
                    change,
                    team_id=team_id,
                    bot_user_id=bot_user_id,
                    event_id=event_id,
                    client=client,
                )
                return
            msg = parse_message(
                event,
                team_id=team_id,
                bot_user_id=bot_user_id,
                shared=body.get("is_ext_shared_channel") is True,
            )
            if msg is not None:
                await self._handle(msg, bot_user_id=bot_user_id, client=client)

    async def _handle(self, msg: SlackMessage, *, bot_user_id: str, client: AsyncWebClient) -> None:
        async with self._queue.hold(msg.scope):
            turn = await self._store(msg, bot_user_id=bot_user_id, client=client)
        if turn is None:
            return
        await self.answer(turn, msg, client=client)

    async def answer(self, turn: Turn, msg: SlackMessage, *, client: AsyncWebClient) -> None:
        """Answer a stored message where it was asked (also the assistant panel's)."""
        stream = self.settings.stream_interval_s if self.settings.stream_replies else None
        sink = self.replies.sink(client, msg)
        await self.conversation.answer(turn, sink, stream_interval_s=stream, links=sink)

    async def _store(
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
        except STORE_ERRORS as exc:
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

    async def _forget_deleted(self, deletion: Deletion, *, event_id: str) -> None:
        async with self._queue.hold(deletion.scope):  # never before the message itself
            await self.conversation.delete(
                deletion.scope,
                [(deletion.ts, slack_time(deletion.ts))],
                delivery=Delivery("slack", event_id),
            )

    async def _apply_edit(
        self,
        edit: Edit,
        *,
        team_id: str,
        bot_user_id: str,
        event_id: str,
        client: AsyncWebClient,
    ) -> None:
        """The new text replaces the stored one (in the scope's queue, so an edit right after
        the message never overtakes it); once per event (a retry that finds it applied does
        nothing, one that finds it failed applies it)."""
        async with self._queue.hold(edit.scope):
            try:
                text = await self.memory_text(
                    edit.raw_text, team_id=team_id, bot_user_id=bot_user_id, client=client
                )
            except STORE_ERRORS as exc:  # (names are cached in Redis)
                log.error("Slack: could not apply an edit in %s: %s", edit.scope, exc)
                return
            await self.conversation.edit(
                edit.scope,
                edit.ts,
                text,
                when=slack_time(edit.ts),
                attachments=edit.files,
                delivery=Delivery("slack", event_id),
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
    while the bot was away is caught up in the background (:mod:`bots.slack.catch_up`;
    ``on_caught_up``: told what each catch-up did)."""
    settings = core.settings.slack
    mode = connection_mode(settings)
    async with aiohttp.ClientSession() as session:
        client = build_client(settings, session=session)
        me = await authenticate(client)
        bot = SlackBot(core)
        app = build_app(core, client=client, bot=bot)
        catch_up = SlackCatchUp(bot, client, identity=me, queue=bot._queue, on_done=on_caught_up)
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
