"""What people do on the fake Discord: send, edit, delete and forward messages, DMs, polls, voice
messages and link unfurls, delivered to the bot through the gateway.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import base64
import copy
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .models import (
    _USER_MENTION,
    FORWARDABLE_MESSAGE_TYPES,
    HAS_SNAPSHOT_FLAG,
    IS_COMPONENTS_V2_FLAG,
    IS_VOICE_MESSAGE_FLAG,
    JSON,
    MAX_POLL_ANSWER,
    MAX_POLL_ANSWERS,
    MAX_POLL_HOURS,
    MAX_POLL_QUESTION,
    MAX_TEXT_DISPLAY,
    MAX_WAVEFORM_POINTS,
    MESSAGE_POLL_RESULT,
    REFERENCE_DEFAULT,
    REFERENCE_FORWARD,
    SNAPSHOT_FIELDS,
    V2_CONTAINER_TYPES,
    V2_TOP_LEVEL_TYPES,
    ChannelType,
    FakeChannel,
    FakeDiscordError,
    FakeUser,
    Intent,
    Permission,
    SentMessage,
    _now_iso,
)

if TYPE_CHECKING:
    pass


class PeopleMixin:
    """Drive users: messages, edits, deletes, forwards, DMs, polls, voice messages."""

    # ------------------------------------------------------------------ user-side actions

    async def send_message(
        self,
        *,
        channel_id: int,
        author_id: int,
        content: str = "",
        mentions_bot: bool = False,
        reply_to: int | SentMessage | JSON | None = None,
        attachments: Mapping[str, bytes] | None = None,
        descriptions: Mapping[str, str] | None = None,
        embeds: Sequence[JSON] = (),
        timeout: float = 5.0,
        while_away: bool = False,
    ) -> JSON:
        """A member posts in a guild text channel, thread or forum post (MESSAGE_CREATE).

        Args:
            channel_id: Text channel or thread; use :meth:`send_dm` for DMs.
            author_id: A member of the channel's guild (see :meth:`add_member`).
            content: Message text; user mentions ``<@id>`` in it are resolved.
            mentions_bot: Prefix the content with the bot's mention (if not already there).
            reply_to: Message (ID, record or payload) this one replies to.
            attachments: ``filename -> bytes``; served by the fake so ``Attachment.read()``
                works.
            descriptions: ``filename -> description`` (the alt text people give a file).
            embeds: Raw embed objects.
            timeout: How long to wait for a connected gateway session owning the guild.
            while_away: The message was sent while the bot had no gateway session (see
                :meth:`disconnect_bot`): it is stored (REST history shows it) and never
                dispatched. Refused while a session is connected or resumable.

        Returns:
            The message payload as stored (REST shape, without ``guild_id``/``member``).
        """
        channel = self._channel(channel_id)
        if channel.guild_id is None:
            raise FakeDiscordError("use send_dm() for DM channels")
        author = self._author_in(channel, author_id)
        if mentions_bot and not re.search(rf"<@!?{self.bot_user.id}>", content):
            content = f"<@{self.bot_user.id}> {content}".rstrip()
        await self._before_user_event(channel, while_away=while_away, timeout=timeout)
        message = self._new_message(
            channel=channel,
            author=author,
            content=content,
            embeds=list(embeds),
            attachments=self._user_attachments(channel.id, attachments, descriptions),
            reference=self._reference_for(channel, reply_to),
        )
        await self._deliver_user_event("MESSAGE_CREATE", message, while_away=while_away)
        return message

    def past_message(
        self,
        channel_id: int,
        *,
        author_id: int,
        content: str = "",
        message_type: int = 0,
        attachments: Mapping[str, bytes] | None = None,
        webhook: bool = False,
    ) -> JSON:
        """Something said in a guild channel or thread before the bot looked (the past it can
        only read in history): stored, never dispatched, whether a session is connected or
        not. The author may be a member, another bot (``add_member(bot=True)``) or the bot
        itself; ``message_type`` a system message's (7 a join, 6 a pin, 18 a thread created);
        ``webhook``: posted through the application's webhook (an interaction's follow-up)."""
        channel = self._channel(channel_id)
        if channel.guild_id is None or channel.type is ChannelType.GUILD_FORUM:
            raise FakeDiscordError("past messages are said in a guild channel or a thread")
        if author_id == self.bot_user.id:
            author = self.bot_user
        else:
            author = self._author_in(channel, author_id)
        return self._new_message(
            channel=channel,
            author=author,
            content=content,
            attachments=self._user_attachments(channel.id, attachments),
            message_type=message_type,
            webhook=webhook,
        )

    def app_message(
        self,
        channel_id: int,
        *,
        author_id: int,
        content: str = "",
        embeds: Sequence[JSON] = (),
        components: Sequence[JSON] = (),
    ) -> JSON:
        """Another app (a bot member: ``add_member(bot=True)``) posts in a guild channel or
        thread: with ``components``, a Components V2 message (flag IS_COMPONENTS_V2, 1 << 15:
        Discord then refuses ``content`` and ``embeds``; its Text Displays' ``<@id>`` are its
        mentions), else ``content`` and ``embeds``. Stored and not dispatched (memorybot
        ignores bots): people see it, and may forward it (:meth:`forward_message`)."""
        channel = self._channel(channel_id)
        author = self._author_in(channel, author_id)
        if not author.bot:
            raise FakeDiscordError(f"user {author_id} is no app: add_member(bot=True)")
        if components and (content or embeds):
            raise FakeDiscordError(
                "a message with IS_COMPONENTS_V2 cannot have content or embeds (50035)"
            )
        texts = _v2_texts(components, V2_TOP_LEVEL_TYPES)
        ids = dict.fromkeys(int(uid) for text in texts for uid in _USER_MENTION.findall(text))
        mentioned = [self.users[uid] for uid in ids if uid in self.users]
        return self._new_message(
            channel=channel,
            author=author,
            content=content,
            embeds=list(embeds),
            components=copy.deepcopy(list(components)),
            flags=IS_COMPONENTS_V2_FLAG if components else 0,
            extra_mentions=mentioned,
        )

    def _author_in(self, channel: FakeChannel, author_id: int) -> FakeUser:
        """The author of a user message in ``channel``: a member of its guild (posting in a
        text channel or thread, never in a forum itself), or the person of a DM with the bot."""
        if channel.guild_id is None:
            if channel.type is not ChannelType.DM or channel.recipient_ids != [author_id]:
                raise FakeDiscordError(
                    f"channel {channel.id} is not the bot's DM with user {author_id}; the bot "
                    "only sees its own DMs (fake.dm_channel_id(user_id))"
                )
            return self.users[author_id]
        if channel.type is ChannelType.GUILD_FORUM:
            raise FakeDiscordError("post into a forum thread (add_thread), not the forum itself")
        guild = self.guilds[channel.guild_id]
        if author_id not in guild.members:
            raise FakeDiscordError(
                f"user {author_id} is not a member of guild {guild.id}; "
                f"call fake.add_member({guild.id}, {author_id}) first"
            )
        return self.users[author_id]

    async def _before_user_event(
        self, channel: FakeChannel, *, while_away: bool, timeout: float
    ) -> None:
        """Before a user changes a channel: wait for the session the event goes to, or (for
        a change made while the bot was away) make sure no session could have seen it."""
        if while_away:
            self._check_away(channel.guild_id)
        else:
            await self._await_delivery_target(channel.guild_id, timeout)

    async def _deliver_user_event(self, event: str, message: JSON, *, while_away: bool) -> None:
        if while_away:
            return
        self._dispatch_message(event, message)
        await self._flush_sessions(self.channels[int(message["channel_id"])].guild_id)

    def _check_away(self, guild_id: int | None) -> None:
        """A change "while the bot was away" is only possible while no session of the bot
        could receive it: none connected (a resumable one would have it replayed)."""
        self._require_guild_up(guild_id)
        if guild_id is not None and not self._bot_in(self.guilds[guild_id]):
            return  # nothing of a guild the bot left reaches it anyway
        live = self._live_sessions(guild_id)
        if not live:
            return
        if any(s.detached for s in live):
            raise FakeDiscordError(
                "the bot's session is resumable (disconnect_bot(resumable=True)): Discord "
                "would replay this on RESUME; make the change normally"
            )
        raise FakeDiscordError(
            "a gateway session of the bot is connected, so Discord would dispatch this; "
            "await fake.disconnect_bot() first (or make the change before the bot starts)"
        )

    async def send_dm(
        self,
        *,
        user_id: int,
        content: str,
        attachments: Mapping[str, bytes] | None = None,
        descriptions: Mapping[str, str] | None = None,
        reply_to: int | SentMessage | JSON | None = None,
        timeout: float = 5.0,
        while_away: bool = False,
    ) -> JSON:
        """A user DMs the bot (MESSAGE_CREATE without ``guild_id``, delivered to shard 0).

        discord.py then builds a ``DMChannel`` (``message.guild is None``). ``while_away`` as
        in :meth:`send_message`.
        """
        channel = self._channel(self.dm_channel_id(user_id))
        await self._before_user_event(channel, while_away=while_away, timeout=timeout)
        message = self._new_message(
            channel=channel,
            author=self.users[user_id],
            content=content,
            attachments=self._user_attachments(channel.id, attachments, descriptions),
            reference=self._reference_for(channel, reply_to),
        )
        await self._deliver_user_event("MESSAGE_CREATE", message, while_away=while_away)
        return message

    def say_in_private(self, channel_id: int, *, author_id: int, content: str) -> JSON:
        """Someone writes in a DM between people or a group DM (:meth:`add_dm_between`,
        :meth:`add_group_dm`): stored, never dispatched, since the bot is in neither. A
        message command (through a user install) can run on it."""
        channel = self._channel(channel_id)
        if channel.guild_id is not None or self.is_bot_dm(channel):
            raise FakeDiscordError("say_in_private is for DMs and group DMs between people")
        if author_id not in channel.recipient_ids:
            raise FakeDiscordError(f"user {author_id} is not in DM {channel_id}")
        return self._new_message(channel=channel, author=self.users[author_id], content=content)

    async def edit_user_message(
        self,
        message: int | SentMessage | JSON,
        *,
        content: str | None = None,
        keep_attachments: Sequence[str] | None = None,
        timeout: float = 5.0,
    ) -> JSON:
        """The message's author edits it (MESSAGE_UPDATE): its text, or which of its files
        stay (people can remove a message's attachments when editing it, not add any).

        Since API v10 the update carries the full message object, with the same extra
        fields as MESSAGE_CREATE (``guild_id``, ``member``) and the same MESSAGE_CONTENT
        rules; ``edited_timestamp`` is the time of the edit, ``timestamp`` stays the send
        time. Only messages people wrote: the bot edits its own through the REST API.

        Args:
            content: The new text (``None``: unchanged).
            keep_attachments: File names of the attachments that stay (``None``: all).

        Returns:
            The message payload as now stored (REST shape).
        """
        stored = self._stored_user_message(message)
        self._check_user_editable(stored)
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        self._apply_user_edit(stored, content=content, keep_attachments=keep_attachments)
        self._dispatch_message("MESSAGE_UPDATE", stored)
        await self._flush_sessions(channel.guild_id)
        return stored

    def edit_message_quietly(
        self,
        message: int | SentMessage | JSON,
        *,
        content: str | None = None,
        keep_attachments: Sequence[str] | None = None,
    ) -> JSON:
        """The author edits a message while the bot is away (after :meth:`disconnect_bot`,
        or before it ever connected): the stored message changes as in
        :meth:`edit_user_message` (REST history shows the edit) and no MESSAGE_UPDATE is ever
        dispatched. Refused while a session of the bot is connected or resumable."""
        stored = self._stored_user_message(message)
        self._check_away(self._channel(int(stored["channel_id"])).guild_id)
        self._apply_user_edit(stored, content=content, keep_attachments=keep_attachments)
        return stored

    @staticmethod
    def _check_user_editable(stored: JSON) -> None:
        flags = int(stored.get("flags") or 0)
        if flags & IS_VOICE_MESSAGE_FLAG:
            raise FakeDiscordError("voice messages cannot be edited")
        if "poll" in stored:
            raise FakeDiscordError("after creation, a poll message cannot be edited")
        if flags & HAS_SNAPSHOT_FLAG:
            raise FakeDiscordError("a forward has no content of its own to edit")

    def _apply_user_edit(
        self, stored: JSON, *, content: str | None, keep_attachments: Sequence[str] | None
    ) -> None:
        self._check_user_editable(stored)
        if keep_attachments is not None:
            names = {a["filename"] for a in stored["attachments"]}
            if unknown := set(keep_attachments) - names:
                raise FakeDiscordError(f"an edit cannot add attachments: {sorted(unknown)}")
            stored["attachments"] = [
                a for a in stored["attachments"] if a["filename"] in keep_attachments
            ]
            if not stored["content"] and not stored["attachments"] and content is None:
                raise FakeDiscordError("Discord deletes a message whose last file is removed")
        if content is not None:
            stored["content"] = content
            stored["mentions"] = [
                self.users[int(uid)].to_payload()
                for uid in dict.fromkeys(_USER_MENTION.findall(content))
                if int(uid) in self.users
            ]
        stored["edited_timestamp"] = _now_iso()

    async def delete_message(
        self, message: int | SentMessage | JSON, *, timeout: float = 5.0
    ) -> None:
        """Someone deletes a message (its author, or a moderator; the bot's own too):
        MESSAGE_DELETE with ``id``, ``channel_id`` and ``guild_id`` (GUILD_MESSAGES or
        DIRECT_MESSAGES intent; no content, so no MESSAGE_CONTENT rule), to who may view the
        channel."""
        stored = self._stored_message(message)
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        self._forget_message(channel, stored)
        if channel.guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        data: JSON = {"id": stored["id"], "channel_id": str(channel.id)}
        if channel.guild_id is not None:
            data["guild_id"] = str(channel.guild_id)
        intent = Intent.GUILD_MESSAGES if channel.guild_id else Intent.DIRECT_MESSAGES
        self._dispatch("MESSAGE_DELETE", data, guild_id=channel.guild_id, intent=intent)
        await self._flush_sessions(channel.guild_id)

    def delete_message_quietly(self, message: int | SentMessage | JSON) -> None:
        """A message is deleted while the bot is away (after :meth:`disconnect_bot`, or
        before it ever connected): gone from the store and from REST history, and no
        MESSAGE_DELETE is ever dispatched, so the bot can only notice by reading history.
        Refused while a session of the bot is connected or resumable."""
        stored = self._stored_message(message)
        channel = self._channel(int(stored["channel_id"]))
        self._check_away(channel.guild_id)
        self._forget_message(channel, stored)

    def _stored_message(self, message: int | SentMessage | JSON) -> JSON:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid} (deleted, or never sent)")
        return stored

    def _forget_message(self, channel: FakeChannel, message: JSON) -> None:
        mid = int(message["id"])
        del self.messages[mid]
        self._poll_votes.pop(mid, None)
        if channel.is_thread and channel.message_count:
            channel.message_count -= 1  # total_message_sent is not decremented

    async def forward_message(
        self,
        *,
        message_id: int | SentMessage | JSON,
        to_channel_id: int,
        author_id: int,
        content: str = "",
        timeout: float = 5.0,
    ) -> JSON:
        """A user forwards a message into a guild channel or into their DM with the bot.

        The forward is a MESSAGE_CREATE of type DEFAULT whose own ``content`` is empty, with
        the HAS_SNAPSHOT flag (1 << 14), ``message_reference`` = ``{"type": 1 (FORWARD),
        "message_id", "channel_id", "guild_id"}`` (the *source's* channel and guild; no
        ``referenced_message``) and ``message_snapshots`` = ``[{"message": {...}}]`` with the
        documented subset of the source (``type``, ``content``, ``embeds``, ``attachments``,
        ``timestamp``, ``edited_timestamp``, ``flags``, ``mentions``, ``mention_roles``,
        ``components``; sticker fields only when it has stickers; never ``author``), frozen
        at this moment. discord.py: ``message.message_snapshots[0].content``.

        Only "basic" messages can be forwarded (types DEFAULT, REPLY, CHAT_INPUT_COMMAND,
        CONTEXT_MENU_COMMAND, without a poll), and only by someone who can view the source.
        A ``content`` is the comment people may add: like Discord's client, the fake sends it
        as a separate, ordinary message right after the forward.

        Returns:
            The forward's payload as stored.
        """
        source = self._stored_message(message_id)
        source_channel = self._channel(int(source["channel_id"]))
        if int(source.get("type") or 0) not in FORWARDABLE_MESSAGE_TYPES or "poll" in source:
            raise FakeDiscordError(
                "only basic messages (DEFAULT, REPLY, CHAT_INPUT_COMMAND, CONTEXT_MENU_COMMAND, "
                "no poll) can be forwarded"
            )
        if int(source.get("flags") or 0) & HAS_SNAPSHOT_FLAG:
            raise FakeDiscordError("snapshots nest one level deep: forward the original message")
        if not self._user_can_view(source_channel, author_id):
            raise FakeDiscordError(
                f"user {author_id} cannot view channel {source_channel.id}, so cannot forward "
                "from it"
            )
        destination = self._channel(to_channel_id)
        author = self._author_in(destination, author_id)
        await self._await_delivery_target(destination.guild_id, timeout)
        snapshot = {k: copy.deepcopy(source[k]) for k in SNAPSHOT_FIELDS if k in source}
        reference: JSON = {
            "type": REFERENCE_FORWARD,
            "message_id": source["id"],
            "channel_id": source["channel_id"],
        }
        if source_channel.guild_id is not None:
            reference["guild_id"] = str(source_channel.guild_id)
        forward = self._new_message(
            channel=destination,
            author=author,
            content="",
            flags=HAS_SNAPSHOT_FLAG,
            reference=reference,
            snapshots=[{"message": snapshot}],
        )
        self._dispatch_message("MESSAGE_CREATE", forward)
        if content:
            comment = self._new_message(channel=destination, author=author, content=content)
            self._dispatch_message("MESSAGE_CREATE", comment)
        await self._flush_sessions(destination.guild_id)
        return forward

    def _user_can_view(self, channel: FakeChannel, user_id: int) -> bool:
        """Whether a person sees a channel: a DM they are in, or a guild channel they may view
        (a private thread only as a member or with Manage Threads)."""
        if channel.guild_id is None:
            return user_id in channel.recipient_ids
        if user_id not in self.guilds[channel.guild_id].members:
            return False
        perms = self.permissions_for(channel.guild_id, user_id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            return False
        if channel.type is ChannelType.PRIVATE_THREAD:
            return user_id in channel.member_ids or bool(perms & Permission.MANAGE_THREADS)
        return True

    async def send_poll(
        self,
        *,
        channel_id: int,
        author_id: int,
        question: str,
        answers: Sequence[str],
        duration_hours: int = 24,
        allow_multiselect: bool = False,
        timeout: float = 5.0,
    ) -> JSON:
        """A user posts a poll (MESSAGE_CREATE with empty ``content`` and a ``poll`` object):
        ``question`` ``{"text"}``, ``answers`` ``[{"answer_id": 1.., "poll_media":
        {"text"}}]``, ``expiry`` (creation + ``duration_hours``), ``allow_multiselect``,
        ``layout_type`` 1 and ``results`` not finalized, without votes. Like the rest of a
        message's content, ``poll`` is omitted for a bot without MESSAGE_CONTENT. discord.py:
        ``message.poll``.

        Limits as documented: question 1-300 characters, 1-10 answers of 1-55 characters,
        1 hour to 32 days (the fake refuses more with FakeDiscordError).
        """
        channel = self._channel(channel_id)
        author = self._author_in(channel, author_id)
        poll = self._new_poll(
            question=question,
            answers=answers,
            duration_hours=duration_hours,
            allow_multiselect=allow_multiselect,
            layout_type=1,
        )
        if isinstance(poll, tuple):
            raise FakeDiscordError(f"invalid poll ({'.'.join(map(str, poll[0]))}): {poll[2]}")
        await self._await_delivery_target(channel.guild_id, timeout)
        message = self._new_message(channel=channel, author=author, content="", poll=poll)
        self._dispatch_message("MESSAGE_CREATE", message)
        await self._flush_sessions(channel.guild_id)
        return message

    def _new_poll(
        self,
        *,
        question: Any,
        answers: Sequence[Any],
        duration_hours: Any,
        allow_multiselect: bool,
        layout_type: Any,
    ) -> JSON | tuple[tuple[str | int, ...], str, str]:
        """A poll object from a poll create request, or ``(path, code, message)`` of the
        first documented limit it breaks (the ``expiry`` is filled in by the message)."""
        if not isinstance(question, str) or not question:
            return ("poll", "question", "text"), "BASE_TYPE_REQUIRED", "This field is required"
        if len(question) > MAX_POLL_QUESTION:
            return (
                ("poll", "question", "text"),
                "BASE_TYPE_MAX_LENGTH",
                f"Must be {MAX_POLL_QUESTION} or fewer in length.",
            )
        if not 1 <= len(answers) <= MAX_POLL_ANSWERS:
            return (
                ("poll", "answers"),
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between 1 and {MAX_POLL_ANSWERS} in length.",
            )
        for index, answer in enumerate(answers):
            if not isinstance(answer, str) or not answer:
                return (
                    ("poll", "answers", index, "poll_media", "text"),
                    "BASE_TYPE_REQUIRED",
                    "This field is required",
                )
            if len(answer) > MAX_POLL_ANSWER:
                return (
                    ("poll", "answers", index, "poll_media", "text"),
                    "BASE_TYPE_MAX_LENGTH",
                    f"Must be {MAX_POLL_ANSWER} or fewer in length.",
                )
        if (
            isinstance(duration_hours, bool)
            or not isinstance(duration_hours, int | float)
            or duration_hours != int(duration_hours)
            or not 1 <= duration_hours <= MAX_POLL_HOURS
        ):
            return (
                ("poll", "duration"),
                "NUMBER_TYPE_MAX"
                if isinstance(duration_hours, int | float)
                else "NUMBER_TYPE_COERCE",
                f"Must be a whole number of hours between 1 and {MAX_POLL_HOURS}.",
            )
        if layout_type != 1:
            return ("poll", "layout_type"), "BASE_TYPE_CHOICES", "Value must be one of {1}."
        return {
            "question": {"text": question},
            "answers": [
                {"answer_id": answer_id, "poll_media": {"text": text}}
                for answer_id, text in enumerate(answers, start=1)
            ],
            "expiry": None,
            "allow_multiselect": bool(allow_multiselect),
            "layout_type": 1,
            "results": {"is_finalized": False, "answer_counts": []},
            "_duration_hours": int(duration_hours),
        }

    async def vote_poll(
        self,
        message_id: int | SentMessage | JSON,
        user_id: int,
        answer_id: int,
        *,
        timeout: float = 5.0,
    ) -> None:
        """A user votes: MESSAGE_POLL_VOTE_ADD ``{user_id, channel_id, message_id, guild_id,
        answer_id}`` (intents GUILD_MESSAGE_POLLS / DIRECT_MESSAGE_POLLS), and the stored
        ``results.answer_counts`` grow (Discord sends no MESSAGE_UPDATE for votes; REST shows
        the counts). In a single-choice poll a vote for another answer first takes the old
        vote back (MESSAGE_POLL_VOTE_REMOVE). Bots cannot vote; ended polls take no votes."""
        stored = self._stored_message(message_id)
        poll = stored.get("poll")
        if poll is None:
            raise FakeDiscordError(f"message {stored['id']} has no poll")
        if poll["results"]["is_finalized"]:
            raise FakeDiscordError("the poll has ended")
        voter = self.users.get(user_id)
        if voter is None:
            raise FakeDiscordError(f"unknown user {user_id}")
        if voter.bot:
            raise FakeDiscordError("apps are not allowed to vote on polls")
        channel = self._channel(int(stored["channel_id"]))
        if not self._user_can_view(channel, user_id):
            raise FakeDiscordError(f"user {user_id} cannot see channel {channel.id}")
        answer_ids = [int(a["answer_id"]) for a in poll["answers"]]
        if answer_id not in answer_ids:
            raise FakeDiscordError(f"the poll's answers are {answer_ids}, not {answer_id}")
        votes = self._poll_votes.setdefault(int(stored["id"]), {})
        if user_id in votes.get(answer_id, set()):
            raise FakeDiscordError(f"user {user_id} already voted for answer {answer_id}")
        await self._await_delivery_target(channel.guild_id, timeout)
        if not poll["allow_multiselect"]:
            for previous, voters in votes.items():
                if user_id in voters:
                    voters.discard(user_id)
                    self._dispatch_poll_vote("MESSAGE_POLL_VOTE_REMOVE", stored, user_id, previous)
        votes.setdefault(answer_id, set()).add(user_id)
        poll["results"]["answer_counts"] = self._answer_counts(poll, votes)
        self._dispatch_poll_vote("MESSAGE_POLL_VOTE_ADD", stored, user_id, answer_id)
        await self._flush_sessions(channel.guild_id)

    @staticmethod
    def _answer_counts(poll: JSON, votes: Mapping[int, set[int]]) -> list[JSON]:
        # "If answer_counts does not contain an entry for a particular answer, then there are
        # no votes for that answer"; me_voted is the bot's, and bots cannot vote.
        return [
            {"id": int(a["answer_id"]), "count": len(votes[a["answer_id"]]), "me_voted": False}
            for a in poll["answers"]
            if votes.get(a["answer_id"])
        ]

    def _dispatch_poll_vote(self, event: str, message: JSON, user_id: int, answer_id: int) -> None:
        channel = self._channel(int(message["channel_id"]))
        if channel.guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        data: JSON = {
            "user_id": str(user_id),
            "channel_id": str(channel.id),
            "message_id": message["id"],
            "answer_id": answer_id,
        }
        if channel.guild_id is not None:
            data["guild_id"] = str(channel.guild_id)
        intent = Intent.GUILD_MESSAGE_POLLS if channel.guild_id else Intent.DIRECT_MESSAGE_POLLS
        self._dispatch(event, data, guild_id=channel.guild_id, intent=intent)

    async def end_poll(self, message_id: int | SentMessage | JSON, *, timeout: float = 5.0) -> JSON:
        """The poll ends (its author ends it early, or it expires) and Discord tallies it:

        1. MESSAGE_UPDATE of the poll message, ``poll.results`` = ``{"is_finalized": true,
           "answer_counts": [{"id", "count", "me_voted"}]}`` (answers without votes left out)
           and, when ended early, ``expiry`` moved to now;
        2. the POLL_RESULT system message (type 46): same author as the poll, who is
           mentioned, empty content, ``message_reference`` ``{"message_id", "channel_id"}`` of
           the poll, and one embed of type ``"poll_result"`` whose fields are
           ``poll_question_text``, ``victor_answer_votes``, ``total_votes`` and, when one answer
           won, ``victor_answer_id`` and ``victor_answer_text`` (Message resource, "Poll Result
           Embed Fields"; values are strings). discord.py updates the cached poll from it.

        Returns:
            The POLL_RESULT message as stored.
        """
        stored = self._stored_message(message_id)
        poll = stored.get("poll")
        if poll is None:
            raise FakeDiscordError(f"message {stored['id']} has no poll")
        if poll["results"]["is_finalized"]:
            raise FakeDiscordError("the poll has already ended")
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        votes = self._poll_votes.get(int(stored["id"]), {})
        counts = self._answer_counts(poll, votes)
        now = datetime.now(tz=UTC)
        if now < datetime.fromisoformat(str(poll["expiry"])):
            poll["expiry"] = now.isoformat()
        poll["results"] = {"is_finalized": True, "answer_counts": counts}
        self._dispatch_any("MESSAGE_UPDATE", stored)
        most = max((c["count"] for c in counts), default=0)
        fields = [
            ("poll_question_text", poll["question"]["text"]),
            ("victor_answer_votes", str(most)),
            ("total_votes", str(sum(c["count"] for c in counts))),
        ]
        winners = [c["id"] for c in counts if c["count"] == most]
        if most and len(winners) == 1:
            [winner] = [a for a in poll["answers"] if a["answer_id"] == winners[0]]
            fields += [
                ("victor_answer_id", str(winner["answer_id"])),
                ("victor_answer_text", winner["poll_media"]["text"]),
            ]
        author = self.users[int(stored["author"]["id"])]
        result = self._new_message(
            channel=channel,
            author=author,
            content="",
            embeds=[
                {
                    "type": "poll_result",
                    "fields": [
                        {"name": name, "value": value, "inline": False} for name, value in fields
                    ],
                }
            ],
            reference={
                "type": REFERENCE_DEFAULT,
                "message_id": stored["id"],
                "channel_id": stored["channel_id"],
            },
            message_type=MESSAGE_POLL_RESULT,
            extra_mentions=[author],
        )
        self._dispatch_any("MESSAGE_CREATE", result)
        await self._flush_sessions(channel.guild_id)
        return result

    def _dispatch_any(self, event: str, message: JSON) -> None:
        """A Discord-made event about a message: echoed like the bot's own if it is one."""
        if int(message["author"]["id"]) == self.bot_user.id:
            self._echo_bot_message(event, message)
        else:
            self._dispatch_message(event, message)

    async def send_voice_message(
        self,
        *,
        channel_id: int,
        author_id: int,
        duration_secs: float,
        audio: bytes | None = None,
        timeout: float = 5.0,
    ) -> JSON:
        """A user records a voice message: MESSAGE_CREATE with the IS_VOICE_MESSAGE flag
        (1 << 13), empty ``content`` and exactly one attachment ``voice-message.ogg``
        (``content_type`` ``audio/ogg``) with ``duration_secs`` and ``waveform`` (base64, one
        byte per 100 ms, at most 256 bytes). discord.py: ``Attachment.duration``,
        ``Attachment.waveform``, ``Attachment.is_voice_message()``. Voice messages cannot be
        edited. ``audio`` is what ``Attachment.read()`` returns (an Ogg page header by default).
        """
        if duration_secs <= 0:
            raise FakeDiscordError("a voice message lasts more than 0 seconds")
        channel = self._channel(channel_id)
        author = self._author_in(channel, author_id)
        await self._await_delivery_target(channel.guild_id, timeout)
        data = audio if audio is not None else b"OggS\x00\x02" + bytes(22)
        points = min(MAX_WAVEFORM_POINTS, max(1, math.ceil(duration_secs * 10)))
        waveform = bytes((37 * i) % 256 for i in range(points))
        [attachment] = self._user_attachments(channel.id, {"voice-message.ogg": data})
        attachment.update(
            content_type="audio/ogg",
            duration_secs=float(duration_secs),
            waveform=base64.b64encode(waveform).decode(),
        )
        message = self._new_message(
            channel=channel,
            author=author,
            content="",
            attachments=[attachment],
            flags=IS_VOICE_MESSAGE_FLAG,
        )
        self._dispatch_message("MESSAGE_CREATE", message)
        await self._flush_sessions(channel.guild_id)
        return message

    async def unfurl_links(
        self, message: int | SentMessage | JSON, *, embeds: Sequence[JSON], timeout: float = 5.0
    ) -> JSON:
        """Discord adds link previews to a message after it was sent: a MESSAGE_UPDATE
        with the new ``embeds`` and the text unchanged (``edited_timestamp`` untouched:
        nobody edited it)."""
        stored = self._stored_user_message(message)
        channel = self._channel(int(stored["channel_id"]))
        await self._wait_for_owner_session(channel.guild_id, timeout)
        stored["embeds"] = [*stored.get("embeds", []), *embeds]
        self._dispatch_message("MESSAGE_UPDATE", stored)
        await self._flush_sessions(channel.guild_id)
        return stored

    def _stored_user_message(self, message: int | SentMessage | JSON) -> JSON:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid} (deleted, or never sent)")
        if int(stored["author"]["id"]) == self.bot_user.id:
            raise FakeDiscordError("the bot edits its own messages through the REST API")
        return stored


def _v2_texts(components: Sequence[JSON], allowed: frozenset[int]) -> list[str]:
    """The Text Displays' contents of Components V2, checked as Discord checks their shape
    (which types go where, a Section's 1 to 3 Text Displays and its accessory, a Text
    Display's content up to 4000 characters); FakeDiscordError for one it refuses."""
    texts: list[str] = []
    for component in components:
        kind = component.get("type")
        if kind not in allowed:
            raise FakeDiscordError(f"component type {kind} is not allowed here (50035)")
        if kind == 10:
            content = component.get("content")
            if not isinstance(content, str) or not 0 < len(content) <= MAX_TEXT_DISPLAY:
                raise FakeDiscordError("a Text Display needs content of 1 to 4000 characters")
            texts.append(content)
        elif kind == 9:
            inner = component.get("components") or []
            accessory = (component.get("accessory") or {}).get("type")
            if not 1 <= len(inner) <= 3 or accessory not in (2, 11):
                raise FakeDiscordError(
                    "a Section holds 1 to 3 Text Displays and a Button or Thumbnail accessory"
                )
            texts += _v2_texts(inner, frozenset({10}))
        elif kind == 17:
            texts += _v2_texts(component.get("components") or [], V2_CONTAINER_TYPES)
    return texts
