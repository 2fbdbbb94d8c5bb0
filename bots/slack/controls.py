"""What Slack offers where ``/memory`` cannot go: Slack has no app slash commands inside a
thread (where every answer of the bot lives), so a member acts on a message from its own
menu, and on themselves from the App Home tab.

- Message shortcuts (on any message, in threads too): "Forget this message" (its author or
  an admin) and "Remember this" (a pinned note quoting it, with its permalink; admins, as
  ``/memory remember``). The answer is private (the shortcut's ``response_url``). Slack
  offers them on every message, also in a DM between two people, which the app is not
  in: there nobody is an admin and nothing is remembered or forgotten (who may act, and
  where: :mod:`bots.acting`; whose a DM is: ``conversations.info``).
- The App Home tab: what memorybot keeps about the member who opens it in this workspace,
  place by place, with "Forget me here" and "Forget me everywhere" buttons, each asked
  again before it is done.

Everything runs through the one ``/memory`` implementation (:func:`bots.frontdoor.
run_command`) with its permission rules, in the message's own scope (a thread's message:
the thread).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bots.commands import Command, CommandResult, pinned_note
from bots.slack.commands import SlackCommands
from bots.slack.connect import SLACK_ERRORS, error_code
from bots.slack.home import (
    HOME_CANCEL,
    HOME_CONFIRM,
    HOME_FORGET_EVERYWHERE,
    HOME_FORGET_HERE,
    home_view,
)
from bots.slack.listening import listener
from bots.slack.send import permalink
from bots.slack.text import channel_scope, message_scope
from memory_core.bootstrap import Core
from memory_core.errors import InvalidScope, StoreError
from memory_core.scopes import Scope

#: Slack markup -> what memory keeps (the door's text conversion, names looked up).
MemoryText = Callable[..., Awaitable[str]]

log = logging.getLogger(__name__)

FORGET_SHORTCUT = "memorybot_forget_message"
REMEMBER_SHORTCUT = "memorybot_remember_message"


class SlackControls:
    """The message shortcuts and the App Home, beside the bot's other listeners."""

    def __init__(self, core: Core, *, commands: SlackCommands, memory_text: MemoryText) -> None:
        self.core = core
        self.commands = commands  # who acts, running a command, answering privately
        self.directory = commands.directory
        self.listening = commands.listening
        self.memory_text = memory_text

    def register(self, app: AsyncApp) -> None:
        app.shortcut(FORGET_SHORTCUT)(self.on_forget_message)
        app.shortcut(REMEMBER_SHORTCUT)(self.on_remember_message)
        app.event("app_home_opened")(self.on_home_opened)
        app.action(HOME_FORGET_HERE)(self.on_home_ask)
        app.action(HOME_FORGET_EVERYWHERE)(self.on_home_ask)
        app.action(HOME_CONFIRM)(self.on_home_confirm)
        app.action(HOME_CANCEL)(self.on_home_cancel)

    # -- message shortcuts ---------------------------------------------------------------
    @listener
    async def on_forget_message(
        self,
        ack: AsyncAck,
        shortcut: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        found = _message_of(shortcut, context)
        if found is None:
            return
        scope, channel_id, user_id, message = found
        author = str(message.get("user") or ("bot" if message.get("bot_id") else ""))
        command = Command("forget_message", arg=str(message["ts"]), key=author)
        actor = await self.commands.actor(
            client, scope_team(scope), user_id, channel_id, user_id != author
        )
        result = await self.commands.run(scope, command, actor)
        await self.commands.answer(respond, scope, result, to=(client, channel_id, user_id))

    @listener
    async def on_remember_message(
        self,
        ack: AsyncAck,
        shortcut: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        found = _message_of(shortcut, context)
        if found is None:
            return
        scope, channel_id, user_id, message = found
        team_id = scope_team(scope)
        actor = await self.commands.actor(client, team_id, user_id, channel_id, True)
        # Where the app keeps no memory (a DM between people) the command is refused
        # before its note is read: nothing of the message is looked up there.
        note = ""
        if actor.where.serves:
            note = await self._note(client, context, channel_id, message)
        result = await self.commands.run(scope, Command("remember", arg=note), actor)
        await self.commands.answer(respond, scope, result, to=(client, channel_id, user_id))

    async def _note(
        self,
        client: AsyncWebClient,
        context: AsyncBoltContext,
        channel_id: str,
        message: dict[str, Any],
    ) -> str:
        """The note "Remember this" pins: the message quoted under its author's name, with
        its permalink."""
        team_id = context.team_id or ""
        author = await self.directory.name(client, team_id, str(message.get("user", "")))
        text = await self.memory_text(
            str(message.get("text") or ""),
            team_id=team_id,
            bot_user_id=context.bot_user_id or "",
            client=client,
        )
        link = await permalink(client, channel=channel_id, ts=str(message["ts"]))
        return pinned_note(author, text, link)

    # -- App Home ------------------------------------------------------------------------
    @listener
    async def on_home_opened(
        self, event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
    ) -> None:
        if event.get("tab") != "home":
            return
        user_id, channel_id = str(event.get("user", "")), str(event.get("channel", ""))
        team_id = context.team_id or ""
        try:
            dm = channel_scope(team_id, channel_id)
        except InvalidScope:
            return  # not an event Slack sends
        await self._publish(client, user_id, dm)

    @listener
    async def on_home_ask(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        """A "Forget me ..." button: the home again, asking to confirm."""
        clicked = _home_click(body, context, str(action.get("value", "")))
        if clicked is None:
            return
        user_id, scope = clicked
        what = "everywhere" if action.get("action_id") == HOME_FORGET_EVERYWHERE else "here"
        await self._publish(client, user_id, scope, asking=(what, scope))

    @listener
    async def on_home_confirm(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        what, value = _asked(str(action.get("value", "")))
        clicked = _home_click(body, context, value)
        if clicked is None or what not in ("here", "everywhere"):
            return
        user_id, scope = clicked
        name = await self.directory.name(client, scope_team(scope), user_id)
        command = Command("forget_me_everywhere" if what == "everywhere" else "forget_me")
        actor = await self.commands.actor(client, scope_team(scope), user_id, "", False)
        result = await self.commands.run(scope, command, replace(actor, name=name))
        await self._publish(client, user_id, scope, notice=result)

    @listener
    async def on_home_cancel(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        _, value = _asked(str(action.get("value", "")))
        clicked = _home_click(body, context, value)
        if clicked is not None:
            await self._publish(client, clicked[0], clicked[1])

    async def _publish(
        self,
        client: AsyncWebClient,
        user_id: str,
        scope: str,
        *,
        asking: tuple[str, str] | None = None,
        notice: CommandResult | None = None,
    ) -> None:
        try:
            view = await self.core.admin.member_view(scope, user_id)
        except StoreError as exc:
            log.error("Slack: no App Home for %s: %s", user_id, exc)
            return
        anchor = Scope.of(scope).root.key  # the app's DM with them: any place of the workspace
        try:
            await client.views_publish(
                user_id=user_id,
                view=home_view(view, anchor=anchor, asking=asking, notice=notice),
            )
        except SLACK_ERRORS as exc:
            log.warning("Slack: could not publish the App Home of %s: %s", user_id, error_code(exc))


def scope_team(scope: str) -> str:
    return Scope.of(scope).server


def _message_of(
    shortcut: dict[str, Any], context: AsyncBoltContext
) -> tuple[str, str, str, dict[str, Any]] | None:
    """(scope, channel, user, message) of a message shortcut, or None for a payload that
    names no message in a conversation of this workspace."""
    team_id = context.team_id or ""
    channel = (shortcut.get("channel") or {}).get("id")
    user = (shortcut.get("user") or {}).get("id")
    message = shortcut.get("message")
    if not (isinstance(channel, str) and isinstance(user, str) and isinstance(message, dict)):
        return None
    ts, thread_ts = message.get("ts"), message.get("thread_ts")
    if not isinstance(ts, str):
        return None
    try:
        scope = message_scope(
            team_id, channel, ts, thread_ts if isinstance(thread_ts, str) else None
        )
    except InvalidScope:
        return None
    return scope, channel, user, message


def _home_click(
    body: dict[str, Any], context: AsyncBoltContext, scope: str
) -> tuple[str, str] | None:
    """(user, scope) of a home button, when the scope it carries is a place of this
    workspace (a button names no other)."""
    user = (body.get("user") or {}).get("id")
    try:
        place = Scope.of(scope)
    except InvalidScope:
        return None
    if not isinstance(user, str) or place.platform != "slack" or place.server != context.team_id:
        return None
    return user, place.key


def _asked(value: str) -> tuple[str, str]:
    """(what, scope) a confirm button carries."""
    try:
        data = json.loads(value)
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("what", "")), str(data.get("scope", ""))
