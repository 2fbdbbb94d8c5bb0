"""The Slack assistant panel (the "AI app" split view): memorybot beside any channel.

    assistant_thread_started          -> a greeting, which carries the thread's context (the
                                         channel the member is viewing) for Bolt's default
                                         thread-context store, and suggested prompts drawn
                                         from what memory holds
    assistant_thread_context_changed  -> the new context saved in that store, and prompts
                                         for the channel now viewed
    a member's message in the thread  -> stored and answered on the door's DM path (the
                                         thread is ``slack:T:D...:thread_ts``, under the DM),
                                         with "is thinking..." while the answer is written,
                                         the title from the first question, and the viewed
                                         channel's memory when the member may read it

Whether the member may read the viewed channel is asked of Slack at every question, never
taken from the event (a context is kept for the thread's life, and people leave private
channels): a public channel, unless the member is a guest (who sees only the channels they
are in); a private one, only if ``conversations.members`` lists them. A channel they may not
read contributes nothing: the core is not even told of it.

Bolt's ``AsyncAssistant`` middleware is not used: it acknowledges and drops every
``message_changed`` / ``message_deleted`` of a DM thread, so edits and deletes there would
never reach memory. These listeners use Bolt's pieces instead: its matcher for a member's
message in an assistant thread, and its default thread-context store (the context kept in
the metadata of the app's first message in the thread).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.context.assistant.thread_context_store.default_async_store import (
    DefaultAsyncAssistantThreadContextStore,
)
from slack_bolt.request.payload_utils import is_user_message_event_in_assistant_thread
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.blocks import section
from bots.slack.connect import SLACK_ERRORS, error_code
from bots.slack.listening import Listening, listener
from bots.slack.text import SlackMessage, channel_scope, parse_message
from config.prompts import PromptSet, load_prompts
from memory_core.bootstrap import Core
from memory_core.errors import StoreError
from memory_core.models import Fact
from memory_core.service.conversation import Turn
from memory_core.text.language import reply_language

log = logging.getLogger(__name__)

# A channel a member can look at: public (C...) or private (G... or C...); a DM is D...
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{1,40}")
_DM_ID = re.compile(r"D[A-Z0-9]{1,40}")
_TEAM_ID = re.compile(r"[TE][A-Z0-9]{1,40}")
_TS = re.compile(r"\d{1,12}\.\d{1,9}")
MAX_PROMPTS = 4  # Slack shows up to four suggested prompts
PROMPT_TITLE_CHARS = 60
PROMPT_CHARS = 300
TITLE_CHARS = 80
MEMBER_PAGES = 20  # conversations.members pages read (1,000 ids each) before giving up
LANGUAGE_SAMPLE = 20  # the member's latest DM messages their language is told from
# What a suggestion may be drawn from: what was decided, asked or noted in a place, never
# what is known about a person.
SUGGESTED_KINDS = ("question", "decision", "note")
CONTEXT_EVENT = "assistant_thread_context"  # Bolt's metadata event type for the context


class Door(Protocol):
    """What the panel takes from the door (:class:`bots.slack.bot.SlackBot`): its DM path,
    storing a message and answering it (paced, maybe streamed)."""

    core: Core
    listening: Listening

    async def store(
        self, msg: SlackMessage, *, bot_user_id: str, client: AsyncWebClient
    ) -> Turn | None: ...

    async def answer(self, turn: Turn, msg: SlackMessage, *, client: AsyncWebClient) -> None: ...


@dataclass(frozen=True, slots=True)
class AssistantThread:
    """An assistant thread as an ``assistant_thread_*`` event names it."""

    team_id: str
    user_id: str
    channel_id: str  # the member's DM with the app
    thread_ts: str
    context: dict[str, Any]  # what the member is viewing (channel_id, team_id...)

    @property
    def dm_scope(self) -> str:
        return channel_scope(self.team_id, self.channel_id)


def parse_thread(event: Mapping[str, Any], *, team_id: str) -> AssistantThread | None:
    """An ``assistant_thread_started`` / ``_context_changed`` event's thread, or None for
    one no assistant thread could have sent."""
    thread = event.get("assistant_thread")
    if not isinstance(thread, Mapping):
        return None
    user, channel, ts = thread.get("user_id"), thread.get("channel_id"), thread.get("thread_ts")
    context = thread.get("context")
    if not (isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str)):
        return None
    if not (_TEAM_ID.fullmatch(team_id) and user and _DM_ID.fullmatch(channel)):
        return None
    if not _TS.fullmatch(ts):
        return None
    return AssistantThread(
        team_id=team_id,
        user_id=user,
        channel_id=channel,
        thread_ts=ts,
        context=dict(context) if isinstance(context, Mapping) else {},
    )


@dataclass(frozen=True, slots=True)
class Viewed:
    """A channel the member is viewing and may read."""

    scope: str
    name: str  # "#general", as Slack names it


def suggested_prompts(
    p: PromptSet,
    *,
    viewed: Viewed | None,
    remembered: Sequence[tuple[str, str]],
) -> list[dict[str, str]]:
    """Up to four prompts for an assistant thread: catching up on the viewed channel, then
    what memory holds (``remembered``: (kind, text), the most useful first; a kind of
    :data:`SUGGESTED_KINDS` or ``topic``, a day's topic), then general ones, in ``p``'s
    language."""
    messages: list[str] = []
    if viewed is not None:
        messages.append(p.say("assistant_catch_up", place=viewed.name))
    for kind, text in remembered:
        messages.append(p.say(f"assistant_{kind}", text=_one_line(text, PROMPT_CHARS)))
    messages += [p.say(key) for key in ("assistant_last_time", "assistant_about_me")]
    messages.append(p.say("assistant_help"))
    unique = list(dict.fromkeys(messages))[:MAX_PROMPTS]
    return [{"title": _one_line(m, PROMPT_TITLE_CHARS), "message": m} for m in unique]


def remembered_in(facts: Sequence[Fact], topics: Sequence[str]) -> list[tuple[str, str]]:
    """What a place's memory offers to ask about: its open questions, decisions and pinned
    notes (pinned first, then the newest), then its latest days' topics."""
    usable = [f for f in facts if f.kind in SUGGESTED_KINDS and f.text.strip()]
    newest = sorted(usable, key=lambda fact: fact.ts, reverse=True)
    ordered = sorted(newest, key=lambda fact: not fact.pinned)
    return [(f.kind, f.text) for f in ordered] + [("topic", t) for t in topics if t.strip()]


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


class SlackAssistant:
    """The assistant panel's listeners; the answers themselves take the door's DM path."""

    def __init__(self, door: Door) -> None:
        self.core = door.core
        self.door = door  # its DM path: storing a message, answering it
        self.listening = door.listening

    def register(self, app: AsyncApp) -> None:
        """Before the door's own ``message`` listener: Bolt runs the first that matches."""
        app.event("assistant_thread_started")(self.on_thread_started)
        app.event("assistant_thread_context_changed")(self.on_context_changed)
        app.event("message", matchers=[_member_message_in_assistant_thread])(self.on_message)

    # -- the thread ---------------------------------------------------------------------
    @listener
    async def on_thread_started(
        self, event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
    ) -> None:
        """Greet (the greeting keeps the thread's context, Bolt's way) and suggest."""
        thread = parse_thread(event, team_id=context.team_id or "")
        if thread is None:
            return
        p = load_prompts(await self._language(thread))
        metadata = None
        if thread.context.get("channel_id"):
            metadata = {"event_type": CONTEXT_EVENT, "event_payload": thread.context}
        try:
            await client.chat_postMessage(
                channel=thread.channel_id,
                thread_ts=thread.thread_ts,
                text=p.say("assistant_greeting"),
                # Blocks, so that Bolt's context store can write the metadata back with it.
                blocks=[section(p.say("assistant_greeting"))],
                metadata=metadata,
            )
        except SLACK_ERRORS as exc:
            log.warning(
                "could not greet in assistant thread of %s: %s", thread.dm_scope, error_code(exc)
            )
        await self._suggest(client, thread, p)

    @listener
    async def on_context_changed(
        self, event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
    ) -> None:
        """The member looks at another channel: keep it for the thread, suggest for it."""
        thread = parse_thread(event, team_id=context.team_id or "")
        if thread is None:
            return
        store = DefaultAsyncAssistantThreadContextStore(context)
        try:
            await store.save(
                channel_id=thread.channel_id,
                thread_ts=thread.thread_ts,
                context=thread.context,
            )
        except SLACK_ERRORS as exc:
            log.warning("could not keep the context of %s: %s", thread.dm_scope, error_code(exc))
        await self._suggest(client, thread, load_prompts(await self._language(thread)))

    async def _suggest(self, client: AsyncWebClient, thread: AssistantThread, p: PromptSet) -> None:
        viewed = await self.readable(client, thread)
        try:
            remembered = await self._remembered(viewed, thread.dm_scope)
        except StoreError as exc:
            log.warning("suggested prompts without memory in %s: %s", thread.dm_scope, exc)
            remembered = []
        prompts = suggested_prompts(p, viewed=viewed, remembered=remembered)
        try:
            await client.assistant_threads_setSuggestedPrompts(
                channel_id=thread.channel_id,
                thread_ts=thread.thread_ts,
                title=p.say("assistant_prompts_title"),
                prompts=prompts,
            )
        except SLACK_ERRORS as exc:
            log.warning("could not suggest prompts in %s: %s", thread.dm_scope, error_code(exc))

    async def _remembered(self, viewed: Viewed | None, dm_scope: str) -> list[tuple[str, str]]:
        """What the viewed channel, then the member's DM, remember to ask about."""
        found: list[tuple[str, str]] = []
        for scope in ([viewed.scope] if viewed else []) + [dm_scope]:
            days = await self.core.repo.reads.days(scope)
            topics = [day.topic for day in reversed(days[-3:])]
            found += remembered_in(await self.core.repo.reads.facts(scope), topics)
        return found

    async def _language(self, thread: AssistantThread) -> str:
        """The member's language: their DM's setting, else the bot's, told from what they
        wrote to the bot when it is ``auto``."""
        memory = self.core.settings.memory
        try:
            state = await self.core.repo.reads.state(thread.dm_scope)
            recent = await self.core.repo.reads.recent(thread.dm_scope, LANGUAGE_SAMPLE)
        except StoreError:
            return reply_language(None, memory.language, [])
        said = [e.text for e in recent if e.role == "user" and e.author_id == thread.user_id]
        return reply_language(state.lang, memory.language, said)

    # -- who may read what --------------------------------------------------------------
    async def readable(self, client: AsyncWebClient, thread: AssistantThread) -> Viewed | None:
        """The channel of the thread's context when its member may read it, asked of Slack
        now (``conversations.info``; for a guest or a private channel,
        ``conversations.members``); None otherwise, or when Slack cannot say."""
        channel = thread.context.get("channel_id")
        if not isinstance(channel, str) or not _CHANNEL_ID.fullmatch(channel):
            return None  # nothing viewed, or a DM (the member's own with the app is read)
        if thread.context.get("team_id") not in (None, "", thread.team_id):
            return None  # another workspace's channel: memory never crosses one
        try:
            info = await client.conversations_info(channel=channel)
        except SLACK_ERRORS as exc:  # a private channel the app is not in: not found
            log.info(
                "viewed channel %s not readable for the assistant: %s", channel, error_code(exc)
            )
            return None
        data = info.get("channel")
        data = data if isinstance(data, Mapping) else {}
        if data.get("is_im") is True or data.get("is_mpim") is True:
            return None
        public = data.get("is_channel") is True and data.get("is_private") is False
        # Public: open to every member but guests. Otherwise: to those Slack lists in it.
        needs_membership = not public or await self._guest(client, thread.user_id)
        if needs_membership and not await self._member(client, channel, thread.user_id):
            return None
        name = data.get("name")
        label = f"#{name}" if isinstance(name, str) and name else channel
        return Viewed(scope=channel_scope(thread.team_id, channel), name=label)

    async def _guest(self, client: AsyncWebClient, user_id: str) -> bool:
        """A guest sees only the channels they are in (also when Slack cannot say)."""
        try:
            user = (await client.users_info(user=user_id)).get("user")
        except SLACK_ERRORS as exc:
            log.warning("users.info for %s failed: %s", user_id, error_code(exc))
            return True
        if not isinstance(user, Mapping):
            return True
        return any(user.get(flag) is True for flag in ("is_restricted", "is_ultra_restricted"))

    async def _member(self, client: AsyncWebClient, channel: str, user_id: str) -> bool:
        """Whether Slack lists ``user_id`` in ``channel`` (slack_sdk follows the cursors)."""
        read = 0
        try:
            async for page in await client.conversations_members(channel=channel, limit=1000):
                if user_id in (page.get("members") or ()):
                    return True
                read += 1
                if read == MEMBER_PAGES:  # giving up: as if not listed
                    return False
        except SLACK_ERRORS as exc:
            log.info("members of %s unknown to the assistant: %s", channel, error_code(exc))
        return False

    # -- questions ----------------------------------------------------------------------
    @listener
    async def on_message(
        self,
        event: dict[str, Any],
        context: AsyncBoltContext,
        client: AsyncWebClient,
    ) -> None:
        """A member's message in an assistant thread: stored, then answered with what the
        thread, the member's DM and (if they may read it) the viewed channel remember."""
        team_id, bot_user_id = context.team_id or "", context.bot_user_id or ""
        msg = parse_message(event, team_id=team_id, bot_user_id=bot_user_id)
        if not team_id or msg is None or msg.thread_ts is None:
            return
        async with self.listening.hold(msg.scope):
            turn = await self.door.store(msg, bot_user_id=bot_user_id, client=client)
        if turn is None:
            return
        thread = AssistantThread(
            team_id=team_id,
            user_id=msg.user_id,
            channel_id=msg.channel_id,
            thread_ts=msg.thread_ts,
            context={},
        )
        language = reply_language(
            turn.stored.lang, self.core.settings.memory.language, [turn.message.text]
        )
        # "is thinking..." at once, while memory is read and the answer written (Slack
        # clears it when the answer comes; cleared here too, for one that never came).
        await self._status(client, thread, load_prompts(language).say("assistant_thinking"))
        try:
            thread = replace(thread, context=await self._context(context, msg))
            viewed = await self.readable(client, thread)
            if viewed is not None:
                turn = replace(turn, message=replace(turn.message, also_reads=viewed.scope))
            if await self._first_question(msg.scope):
                await self._title(client, thread, turn.message.text, msg.scope)
            await self.door.answer(turn, msg, client=client)
        finally:
            await self._status(client, thread, "")

    async def _context(self, context: AsyncBoltContext, msg: SlackMessage) -> dict[str, Any]:
        """The thread's context, from Bolt's default store ({} when it holds none)."""
        store = DefaultAsyncAssistantThreadContextStore(context)
        try:
            found = await store.find(channel_id=msg.channel_id, thread_ts=msg.thread_ts or "")
        except SLACK_ERRORS as exc:
            log.warning("no context for the assistant thread in %s: %s", msg.scope, error_code(exc))
            return {}
        return dict(found) if found else {}

    async def _first_question(self, scope: str) -> bool:
        """Whether the message just stored is the thread's first."""
        try:
            return await self.core.repo.reads.log_length(scope) == 1
        except StoreError:
            return False

    async def _status(self, client: AsyncWebClient, thread: AssistantThread, status: str) -> None:
        try:
            await client.assistant_threads_setStatus(
                channel_id=thread.channel_id, thread_ts=thread.thread_ts, status=status
            )
        except SLACK_ERRORS as exc:  # a status is decoration: the answer goes on
            log.warning(
                "could not set the assistant's status in %s: %s", thread.dm_scope, error_code(exc)
            )

    async def _title(
        self, client: AsyncWebClient, thread: AssistantThread, question: str, scope: str
    ) -> None:
        try:
            await client.assistant_threads_setTitle(
                channel_id=thread.channel_id,
                thread_ts=thread.thread_ts,
                title=_one_line(question, TITLE_CHARS),
            )
        except SLACK_ERRORS as exc:
            log.warning("could not title the assistant thread %s: %s", scope, error_code(exc))


async def _member_message_in_assistant_thread(body: dict[str, Any]) -> bool:
    """Bolt's own rule: a person's message in a thread of a DM with the app."""
    return is_user_message_event_in_assistant_thread(body)
