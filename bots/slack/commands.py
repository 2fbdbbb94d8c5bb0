"""``/memory`` on Slack: the slash command and the forget-all buttons, through the one
``/memory`` implementation (:func:`bots.frontdoor.run_command`), answered privately.

Answers go to the command's ``response_url`` (they work in channels the bot is not in),
falling back to ``chat.postEphemeral``; an export goes to the user's DM with the bot. A
command runs in the channel's scope: its threads come with it (forget, settings, budgets
reach them), since Slack offers no slash commands inside a thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bots.acting import ADMIN_ACTIONS, Actor, Where, actor_for
from bots.commands import Command, CommandResult, Linker, parse_command
from bots.frontdoor import run_command
from bots.learn_command import ChannelLearns
from bots.slack.blocks import (
    CANCELLED,
    FALLBACK_CHARS,
    FORGET_ALL_CANCEL,
    FORGET_ALL_CONFIRM,
    confirm_blocks,
    fallback_text,
    result_blocks,
    shortened,
)
from bots.slack.connect import SLACK_ERRORS, error_code
from bots.slack.listening import Listening, listener
from bots.slack.send import permalinks
from bots.slack.text import channel_scope, escape, unescape
from bots.slack.users import SlackDirectory
from config.prompts import load_prompts
from memory_core.bootstrap import Core
from memory_core.errors import UsageError
from memory_core.service.past import PastSource

log = logging.getLogger(__name__)

#: Where an ephemeral answer goes when its response_url will not take it: (client, channel, user).
Recipient = tuple[AsyncWebClient, str, str]
# A channel's history as the running door reads it (client, the command's context, channel).
PastOf = Callable[[AsyncWebClient, AsyncBoltContext, str], PastSource]
# How often a learn says how far it got: Slack lets a command's answer be replaced five times.
LEARN_PROGRESS_EVERY_S = 300.0


def _parse_or_none(text: str) -> Command | None:
    try:
        return parse_command(text)
    except UsageError:
        return None  # run_command parses the text again and answers with the usage


class SlackCommands:
    """The ``/memory`` listeners. ``listening``: the scopes' order, shared with the message
    listeners ("forget me" right after a message forgets it too), and the listeners in
    flight."""

    def __init__(
        self,
        core: Core,
        *,
        directory: SlackDirectory,
        listening: Listening,
        past: PastOf | None = None,
    ) -> None:
        self.core = core
        self.directory = directory
        self.listening = listening
        self.past = past  # a channel's history, for /memory learn
        self.learns = ChannelLearns(
            core.learner, core.settings.learn, progress_every_s=LEARN_PROGRESS_EVERY_S
        )

    def register(self, app: AsyncApp) -> None:
        app.command("/memory")(self.on_memory_command)
        app.action(FORGET_ALL_CONFIRM)(self.on_forget_all_confirm)
        app.action(FORGET_ALL_CANCEL)(self.on_forget_all_cancel)

    # -- /memory -----------------------------------------------------------------------
    @listener
    async def on_memory_command(
        self,
        ack: AsyncAck,
        command: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        team_id = context.team_id or str(command.get("team_id", ""))
        user_id, channel_id = str(command["user_id"]), str(command["channel_id"])
        scope = channel_scope(team_id, channel_id)
        text = unescape(str(command.get("text") or ""))
        parsed = _parse_or_none(text)
        needs_admin = parsed is not None and parsed.action in ADMIN_ACTIONS
        actor = await self.actor(client, team_id, user_id, channel_id, needs_admin)
        to = (client, channel_id, user_id)
        if parsed is not None and parsed.action == "learn" and actor.is_admin and self.past:
            await self._learn(parsed, scope, respond, to, context)
            return
        result = await self.run(scope, parsed or text, actor, permalinks(client, channel_id))
        if result.needs_confirm:
            blocks = confirm_blocks(result, scope)
            await self.respond(respond, scope, to=to, text=escape(result.title), blocks=blocks)
        elif result.file is not None:
            await self._send_export(client, respond, to=to, scope=scope, result=result)
        else:
            await self.answer(respond, scope, result, to=to)

    async def _learn(
        self,
        command: Command,
        scope: str,
        respond: AsyncRespond,
        to: Recipient,
        context: AsyncBoltContext,
    ) -> None:
        """/memory learn: the channel's past (threads too), in the background; what it
        found and what it costs is said privately (the command's answer, replaced; past
        Slack's five replacements, a private message in the channel)."""
        client, channel_id, _ = to
        past = self.past
        assert past is not None

        async def source() -> PastSource:
            return past(client, context, channel_id)

        async def tell(text: str) -> None:
            await self.respond(respond, scope, to=to, text=escape(text), replace_original=True)

        p = load_prompts(self.core.settings.memory.language)
        answer = await self.learns.handle(command, place=scope, source=source, tell=tell, p=p)
        log.info("Slack: /memory learn %s in %s", command.key or command.arg or "-", scope)
        await tell(answer)

    async def run(
        self, scope: str, command: Command | str, actor: Actor, link: Linker | None = None
    ) -> CommandResult:
        async with self.listening.hold(scope):  # "forget me" right after a message forgets it too
            return await run_command(
                self.core, scope=scope, command=command, actor=actor, link=link
            )

    async def actor(
        self,
        client: AsyncWebClient,
        team_id: str,
        user_id: str,
        channel_id: str,
        needs_admin: bool,
    ) -> Actor:
        """Who runs a command, and where (a DM: the app's own with them, or one between
        people; :mod:`bots.acting` decides what they may do). Admin rights are looked up
        only when the command needs them, and at run time (a click on an old confirmation
        button is checked again)."""
        where = await self.directory.where(
            client, team_id=team_id, user_id=user_id, channel_id=channel_id
        )
        name = await self.directory.name(client, team_id, user_id)
        server_admin = (
            needs_admin
            and where is Where.PLACE
            and await self.directory.is_admin(client, team_id=team_id, user_id=user_id)
        )
        return actor_for(user_id=user_id, name=name, where=where, server_admin=server_admin)

    async def answer(
        self, respond: AsyncRespond, scope: str, result: CommandResult, **message: Any
    ) -> None:
        """A command's result as its private answer: Block Kit, plain text beside it."""
        text, blocks = fallback_text(result), result_blocks(result)
        await self.respond(respond, scope, text=text, blocks=blocks, **message)

    async def respond(
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
            plain["text"] = shortened(str(message.get("text") or ""))
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
        except SLACK_ERRORS as exc:
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
        except SLACK_ERRORS as exc:
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
        except SLACK_ERRORS as exc:
            code = error_code(exc)
            log.warning("Slack: could not send the export of %s: %s", scope, code)
            note = (
                f"{result.title} But I could not send you the file ({code}): the app needs "
                "the im:write and files:write scopes (see docs/slack.md)."
            )
            await self.respond(respond, scope, to=to, text=escape(note))
            return
        text = f"{result.title} I sent you the file in our direct messages."
        await self.respond(respond, scope, to=to, text=escape(text))

    # -- forget all: the buttons ------------------------------------------------------
    @listener
    async def on_forget_all_confirm(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        clicked = _clicked_in(body, action, context)
        if clicked is None:
            text = "This button does not belong to this conversation: nothing was forgotten."
            await self.respond(respond, "?", replace_original=True, text=text)
            return
        scope, user_id, channel_id = clicked
        actor = await self.actor(client, context.team_id or "", user_id, channel_id, True)
        result = await self.run(scope, "forget all confirm", actor)
        await self.answer(
            respond, scope, result, to=(client, channel_id, user_id), replace_original=True
        )

    @listener
    async def on_forget_all_cancel(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        respond: AsyncRespond,
        client: AsyncWebClient,
    ) -> None:
        scope = str(action.get("value") or "?")
        user_id = (body.get("user") or {}).get("id")
        channel_id = _clicked_channel(body)
        to = (client, channel_id, user_id) if user_id and channel_id else None
        await self.respond(respond, scope, to=to, replace_original=True, text=CANCELLED)


def _can_shorten(message: dict[str, Any]) -> bool:
    """Whether a plain-text copy differs from what Slack refused (blocks, or long text)."""
    text = str(message.get("text") or "")
    return bool(text) and ("blocks" in message or len(text) > FALLBACK_CHARS)


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
