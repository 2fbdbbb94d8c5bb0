"""The Slack front door: Bolt's ``AsyncApp`` translating Slack to the memory core and back.

    message / app_mention event -> SlackMessage -> IncomingMessage -> conversation -> thread reply
    message_changed             -> admin.edit_message(scope, ts, new text)
    message_deleted, or message_changed to a tombstone (a thread parent deleted)
                                -> admin.forget_message(scope, ts)
    /memory ...                 -> run_command -> ephemeral Block Kit answer (export: a file
                                   in a DM; forget all: confirmation buttons)

``run_slack`` serves it over Socket Mode or HTTP (see docs/slack.md). What this module does
not decide lives beside it: scopes and text in ``bots.slack.text``, names and admin rights
in ``bots.slack.users``, Block Kit in ``bots.slack.blocks``, posting in ``bots.slack.send``
(streaming and splitting: the core's conversation), tokens and connections in
``bots.slack.connect``.

A mention in a channel reaches the app twice (``app_mention`` and ``message``); both go
through the same handler, and the first to claim the message's (team, channel, ts) in Redis
handles it. That key also absorbs Slack's retries and Socket Mode redeliveries, fleet-wide.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bots.commands import ADMIN_ACTIONS, Actor, Command, CommandResult, Linker, parse_command
from bots.frontdoor import run_command
from bots.slack.blocks import (
    CANCELLED,
    FALLBACK_CHARS,
    FORGET_ALL_CANCEL,
    FORGET_ALL_CONFIRM,
    confirm_blocks,
    fallback_text,
    result_blocks,
)
from bots.slack.connect import (
    SlackIdentity,
    authenticate,
    build_client,
    connect_socket,
    connection_mode,
    error_code,
    require_bot_token,
    serve_http,
)
from bots.slack.files import SlackFiles
from bots.slack.links import permalinks
from bots.slack.send import SEND_ERRORS, ThreadReply
from bots.slack.text import (
    Deletion,
    Edit,
    SlackMessage,
    channel_scope,
    escape,
    mentioned_users,
    parse_change,
    parse_deletion,
    parse_message,
    plain_text,
    unescape,
)
from bots.slack.users import SlackDirectory
from memory_core.bootstrap import Core
from memory_core.errors import EmptyMessage, InputError, StoreError, UsageError
from memory_core.models import IncomingMessage
from memory_core.service.conversation import Turn

log = logging.getLogger(__name__)

#: Where an ephemeral answer goes when its response_url will not take it: (client, channel, user).
Recipient = tuple[AsyncWebClient, str, str]

DRAIN_S = 10.0  # at shutdown, how long handlers in flight may finish

# Redis failures surface as StoreError (translated at the store boundary).
STORE_ERRORS = (StoreError,)


class _ScopeQueue:
    """Messages of one scope are stored in the order they arrived (Slack delivers a
    channel's events in order; a users.info lookup for one must not let the next overtake
    it). Held only while storing: answers run concurrently."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, scope: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(scope, (asyncio.Lock(), 0))
        self._locks[scope] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[scope]
            if users <= 1:
                del self._locks[scope]
            else:
                self._locks[scope] = (lock, users - 1)


def slack_time(ts: str) -> datetime | None:
    """A Slack ts ("1700000000.000100") as a time; it is when the message was said."""
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC)
    except (ValueError, OverflowError):
        return None


def _parse_or_none(text: str) -> Command | None:
    try:
        return parse_command(text)
    except UsageError:
        return None  # run_command parses the text again and answers with the usage


class SlackBot:
    """The listeners. Each one is small: translate, call the core, send."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.settings = core.settings.slack
        self.directory = SlackDirectory(core.platform, self.settings)
        self.files = SlackFiles(self.settings)
        self.conversation = core.conversation
        self._queue = _ScopeQueue()
        self._inflight: set[asyncio.Task[Any]] = set()

    def register(self, app: AsyncApp) -> None:
        app.event("message")(self.on_message)
        app.event("app_mention")(self.on_message)
        app.command("/memory")(self.on_memory_command)
        app.action(FORGET_ALL_CONFIRM)(self.on_forget_all_confirm)
        app.action(FORGET_ALL_CANCEL)(self.on_forget_all_cancel)

    # -- bookkeeping -------------------------------------------------------------------
    @contextmanager
    def _tracked(self) -> Iterator[None]:
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

    # -- messages ----------------------------------------------------------------------
    async def on_message(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        with self._tracked():
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
            msg = parse_message(event, team_id=team_id, bot_user_id=bot_user_id)
            if msg is not None:
                await self._handle(msg, bot_user_id=bot_user_id, client=client)

    async def _handle(self, msg: SlackMessage, *, bot_user_id: str, client: AsyncWebClient) -> None:
        async with self._queue.hold(msg.scope):
            turn = await self._store(msg, bot_user_id=bot_user_id, client=client)
        if turn is None:
            return
        stream = self.settings.stream_interval_s if self.settings.stream_replies else None
        sink = ThreadReply(
            client, channel=msg.channel_id, thread_ts=msg.reply_thread_ts, scope=msg.scope
        )
        await self.conversation.answer(turn, sink, stream_interval_s=stream)

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
            return None  # no text and no file (a legacy attachment only): nothing to remember
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
        text = await self._plain_text(
            msg.raw_text, team_id=msg.team_id, bot_user_id=bot_user_id, client=client
        )
        public = msg.public
        if public is None and not msg.direct:
            public = await self.directory.is_public(client, msg.team_id, msg.channel_id)
        return IncomingMessage(
            scope=msg.scope,
            text=text,
            author=author,
            author_id=msg.user_id,
            ts=slack_time(msg.ts),
            platform_id=msg.ts,
            parent_scope=msg.parent_scope,
            addressed=msg.addressed,
            direct=msg.direct,
            public=bool(public),
            attachments=self.files.with_images(msg.files, msg.downloads),
        )

    async def _plain_text(
        self, raw_text: str, *, team_id: str, bot_user_id: str, client: AsyncWebClient
    ) -> str:
        """Slack markup -> what memory keeps, mentions by name (new and edited alike)."""
        mentioned = mentioned_users(raw_text, exclude=bot_user_id)
        names = await self.directory.names(client, team_id, mentioned)
        bot_name = self.core.settings.bot.name
        return plain_text(raw_text, bot_user_id=bot_user_id, bot_name=bot_name, names=names)

    async def _forget_deleted(self, deletion: Deletion, *, event_id: str) -> None:
        platform = self.core.platform
        async with self._queue.hold(deletion.scope):
            try:
                if not await platform.first_delivery("slack", event_id):
                    return
                removed = await self.core.admin.forget_message(
                    deletion.scope, deletion.ts, when=slack_time(deletion.ts)
                )
            except (*STORE_ERRORS, InputError) as exc:
                log.error(
                    "Slack: could not forget a deleted message in %s: %s", deletion.scope, exc
                )
                with suppress(*STORE_ERRORS):
                    await platform.forget_delivery("slack", event_id)
                return
        log.info("Slack: deleted message forgotten in %s (%d entries)", deletion.scope, removed)

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
        the message never overtakes it). Not applied: the claim is released for a retry."""
        platform = self.core.platform
        async with self._queue.hold(edit.scope):
            try:
                if not await platform.first_delivery("slack", event_id):
                    return
                text = await self._plain_text(
                    edit.raw_text, team_id=team_id, bot_user_id=bot_user_id, client=client
                )
                changed = await self.core.admin.edit_message(
                    edit.scope, edit.ts, text, when=slack_time(edit.ts), attachments=edit.files
                )
            except (*STORE_ERRORS, InputError) as exc:
                log.error("Slack: could not apply an edit in %s: %s", edit.scope, exc)
                with suppress(*STORE_ERRORS):
                    await platform.forget_delivery("slack", event_id)
                return
        if changed:
            log.info("Slack: edited message %s updated in %s", edit.ts, edit.scope)

    # -- /memory -----------------------------------------------------------------------
    async def on_memory_command(
        self,
        ack: AsyncAck,
        command: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        with self._tracked():
            await ack()  # Slack wants it within 3 s; the work comes after
            team_id = context.team_id or str(command.get("team_id", ""))
            user_id, channel_id = str(command["user_id"]), str(command["channel_id"])
            scope = channel_scope(team_id, channel_id)
            text = unescape(str(command.get("text") or ""))
            parsed = _parse_or_none(text)
            needs_admin = parsed is not None and parsed.action in ADMIN_ACTIONS
            actor = await self._actor(client, team_id, user_id, channel_id, needs_admin)
            result = await self._run(scope, parsed or text, actor, permalinks(client, channel_id))
            to = (client, channel_id, user_id)
            if result.needs_confirm:
                blocks = confirm_blocks(result, scope)
                await self._respond(respond, scope, to=to, text=escape(result.title), blocks=blocks)
            elif result.file is not None:
                await self._send_export(client, respond, to=to, scope=scope, result=result)
            else:
                await self._respond(
                    respond,
                    scope,
                    to=to,
                    text=fallback_text(result),
                    blocks=result_blocks(result),
                )

    async def _run(
        self, scope: str, command: Command | str, actor: Actor, link: Linker | None = None
    ) -> CommandResult:
        async with self._queue.hold(scope):  # "forget me" right after a message forgets it too
            return await run_command(
                self.core, scope=scope, command=command, actor=actor, link=link
            )

    async def _actor(
        self,
        client: AsyncWebClient,
        team_id: str,
        user_id: str,
        channel_id: str,
        needs_admin: bool,
    ) -> Actor:
        """Who runs a command. Admin rights are looked up only when the command needs them,
        and at run time (a click on an old confirmation button is checked again)."""
        name = await self.directory.name(client, team_id, user_id)
        is_admin = needs_admin and await self.directory.is_admin(
            client, team_id=team_id, user_id=user_id, channel_id=channel_id
        )
        return Actor(user_id=user_id, name=name, is_admin=is_admin)

    async def _respond(
        self,
        respond: AsyncRespond,
        scope: str,
        *,
        to: Recipient | None = None,
        **message: Any,
    ) -> None:
        """An answer only the user sees (response_url: works in channels the bot is not in).

        slack_sdk's webhook client returns, not raises, when Slack refuses the post (HTTP
        400 ``invalid_blocks``, ``msg_too_long``; 404 ``expired_url``, ``used_url``): the
        refusal is logged, and a refused message is sent again as short plain text. When the
        response_url will not take it at all (expired, or even the plain text refused), the
        answer goes to ``to`` with chat.postEphemeral, so the user still sees it."""
        message.setdefault("response_type", "ephemeral")
        status = await self._post_response(respond, scope, message)
        if status == 200:
            return
        if status == 400 and _can_shorten(message):
            keep = ("response_type", "replace_original")
            plain = {k: v for k, v in message.items() if k in keep}
            plain["text"] = _shortened(str(message.get("text") or ""))
            if await self._post_response(respond, scope, plain) == 200:
                log.info("Slack: /memory answer in %s sent as plain text instead", scope)
                return
            message = plain
        if to is not None:
            await self._post_ephemeral(to, scope, message)

    async def _post_ephemeral(self, to: Recipient, scope: str, message: dict[str, Any]) -> None:
        """The last way to answer: chat.postEphemeral (the bot and the user must be in the
        channel). Refused (``not_in_channel``, ``user_not_in_channel``...), it is logged with
        Slack's code and the answer is dropped: never sent to a DM instead, which would show
        a channel's memory to someone who is no longer in it."""
        client, channel_id, user_id = to
        fields = {k: v for k, v in message.items() if k in ("text", "blocks")}
        try:
            await client.chat_postEphemeral(channel=channel_id, user=user_id, **fields)
        except SEND_ERRORS as exc:
            log.warning(
                "Slack: could not answer /memory in %s by chat.postEphemeral either: %s",
                scope,
                error_code(exc),
            )
            return
        log.info("Slack: /memory answer in %s sent by chat.postEphemeral instead", scope)

    async def _post_response(
        self, respond: AsyncRespond, scope: str, message: dict[str, Any]
    ) -> int | None:
        """POST to the response_url; the HTTP status, None when it could not be sent."""
        try:
            response = await respond(**message)
        except SEND_ERRORS as exc:
            log.warning("Slack: could not answer /memory in %s: %s", scope, error_code(exc))
            return None
        if response.status_code != 200:
            log.warning(
                "Slack refused the /memory answer in %s: HTTP %s %s",
                scope,
                response.status_code,
                str(response.body)[:100],
            )
        return int(response.status_code)

    async def _send_export(
        self,
        client: AsyncWebClient,
        respond: AsyncRespond,
        *,
        to: Recipient,
        scope: str,
        result: CommandResult,
    ) -> None:
        """Slack has no ephemeral files, so the export goes to the user's DM with the bot,
        never into the channel: it is everything remembered, and /memory answers are
        private. (Asked in that DM, it lands right there.)"""
        assert result.file is not None
        filename, content = result.file
        user_id = to[2]
        try:
            opened = await client.conversations_open(users=user_id)
            await client.files_upload_v2(
                channel=str(opened["channel"]["id"]),
                filename=filename,
                content=content,
                title=filename,
                initial_comment=escape(result.title),
            )
        except SEND_ERRORS as exc:
            code = error_code(exc)
            log.warning("Slack: could not send the export of %s: %s", scope, code)
            note = (
                f"{result.title} But I could not send you the file ({code}): the app needs "
                "the im:write and files:write scopes (see docs/slack.md)."
            )
            await self._respond(respond, scope, to=to, text=escape(note))
            return
        text = f"{result.title} I sent you the file in our direct messages."
        await self._respond(respond, scope, to=to, text=escape(text))

    # -- forget all: the buttons ------------------------------------------------------
    async def on_forget_all_confirm(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        with self._tracked():
            await ack()
            clicked = _clicked_in(body, action, context)
            if clicked is None:
                text = "This button does not belong to this conversation: nothing was forgotten."
                await self._respond(respond, "?", replace_original=True, text=text)
                return
            scope, user_id, channel_id = clicked
            actor = await self._actor(client, context.team_id or "", user_id, channel_id, True)
            result = await self._run(scope, "forget all confirm", actor)
            await self._respond(
                respond,
                scope,
                to=(client, channel_id, user_id),
                replace_original=True,
                text=fallback_text(result),
                blocks=result_blocks(result),
            )

    async def on_forget_all_cancel(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        respond: AsyncRespond,
        client: AsyncWebClient,
    ) -> None:
        with self._tracked():
            await ack()
            scope = str(action.get("value") or "?")
            user_id = (body.get("user") or {}).get("id")
            channel_id = _clicked_channel(body)
            to = (client, channel_id, user_id) if user_id and channel_id else None
            await self._respond(respond, scope, to=to, replace_original=True, text=CANCELLED)


def _can_shorten(message: dict[str, Any]) -> bool:
    """Whether a plain-text copy differs from what Slack refused (blocks, or long text)."""
    text = str(message.get("text") or "")
    return bool(text) and ("blocks" in message or len(text) > FALLBACK_CHARS)


def _shortened(text: str) -> str:
    return text if len(text) <= FALLBACK_CHARS else text[: FALLBACK_CHARS - 1] + "…"


def _clicked_in(
    body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> tuple[str, str, str] | None:
    """(scope, user, channel) of a confirmation click, if the scope in the button is the
    conversation it was clicked in (never another channel or workspace)."""
    team_id = context.team_id
    user_id = (body.get("user") or {}).get("id")
    channel_id = _clicked_channel(body)
    if not (team_id and isinstance(user_id, str) and isinstance(channel_id, str)):
        return None
    scope = channel_scope(team_id, channel_id)
    if action.get("value") != scope:
        return None
    return scope, user_id, channel_id


def _clicked_channel(body: dict[str, Any]) -> str | None:
    """The channel of a click (an ephemeral message's payload may carry only ``container``)."""
    channel_id = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
        "channel_id"
    )
    return channel_id if isinstance(channel_id, str) else None


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


async def run_slack(core: Core) -> None:
    """Serve Slack until cancelled; then stop taking events, let handlers finish, close."""
    settings = core.settings.slack
    mode = connection_mode(settings)
    async with aiohttp.ClientSession() as session:
        client = build_client(settings, session=session)
        me = await authenticate(client)
        bot = SlackBot(core)
        app = build_app(core, client=client, bot=bot)
        try:
            if mode == "socket":
                assert settings.app_token is not None
                handler = await connect_socket(app, settings.app_token.get_secret_value())
                try:
                    log.warning(_ready_line(me, "Socket Mode"))
                    await asyncio.Event().wait()
                finally:
                    await handler.close_async()  # type: ignore[no-untyped-call]
            else:
                async with serve_http(app, host=settings.http_host, port=settings.http_port) as url:
                    log.warning(_ready_line(me, f"HTTP, listening on {url}"))
                    await asyncio.Event().wait()
        finally:
            await bot.drain()


def _ready_line(me: SlackIdentity, how: str) -> str:
    return f"Slack: connected as bot user {me.user_id} in {me.team} ({me.team_id}), {how}"
