"""The fake Discord's gateway: transport compression (zlib-stream, zstd-stream), sessions
(identify, resume, ready, member chunks, reconnects) and routing dispatches to the shard that
owns a guild.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import secrets
import zlib
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import WSMsgType, web

from .models import (
    _FATAL_CLOSE_CODES,
    EPHEMERAL_FLAG,
    JSON,
    PRIVILEGED_INTENTS,
    ChannelType,
    DispatchRecord,
    FakeChannel,
    FakeDiscordError,
    IdentifyRecord,
    Intent,
    Permission,
    ResumeRecord,
)

if TYPE_CHECKING:
    pass


class _Compressor(Protocol):
    def compress(self, data: bytes) -> bytes: ...


class _ZlibStream:
    """``compress=zlib-stream``: one zlib context per connection, Z_SYNC_FLUSH per payload.

    discord.py buffers binary frames until it sees the ``00 00 ff ff`` sync-flush suffix and
    then inflates with a single long-lived decompressor, so we must never reset the context.
    """

    def __init__(self) -> None:
        self._context = zlib.compressobj()

    def compress(self, data: bytes) -> bytes:
        return self._context.compress(data) + self._context.flush(zlib.Z_SYNC_FLUSH)


class _ZstdStream:
    """``compress=zstd-stream`` (discord.py picks it when ``zstandard`` is installed)."""

    def __init__(self) -> None:
        zstandard = importlib.import_module("zstandard")
        self._flush_block: int = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        self._context: Any = zstandard.ZstdCompressor().compressobj()

    def compress(self, data: bytes) -> bytes:
        return bytes(self._context.compress(data) + self._context.flush(self._flush_block))


def _make_compressor(kind: str | None) -> _Compressor | None:
    if kind is None:
        return None
    if kind == "zlib-stream":
        return _ZlibStream()
    if kind == "zstd-stream":
        return _ZstdStream()
    raise FakeDiscordError(f"unsupported gateway compression {kind!r}")


class _GatewaySession:
    """One gateway WebSocket connection (one shard of one client).

    Payloads go through a queue drained by a single writer task so that (a) synchronous code
    such as the model builders can enqueue events and (b) ordering is strictly FIFO, which
    matters because discord.py must see READY and GUILD_CREATE before any MESSAGE_CREATE.
    """

    def __init__(
        self,
        ws: web.WebSocketResponse,
        compressor: _Compressor | None,
        compression: str | None,
        serial: int = 0,
    ) -> None:
        self.ws = ws
        self.compression = compression
        self.serial = serial
        """Order of the connection among all the fake accepted (for reconnect waits)."""
        self.id = secrets.token_hex(16)
        self.seq = 0
        self.shard_id = 0
        self.shard_count = 1
        self.intents = 0
        self.identified = False
        self.ready = False
        self.closed = False
        self.detached = False
        """Dropped by ``disconnect_bot(resumable=True)``: still sequences (and keeps) its
        events, which a RESUME replays."""
        self.history: list[JSON] = []
        """Every dispatch sequenced on this session, for a RESUME to replay."""
        self._compressor = compressor
        self._queue: asyncio.Queue[JSON | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._write_loop(), name=f"fake-gateway-{self.id}")

    def owns(self, guild_id: int | None) -> bool:
        """Whether events for this guild (``None`` = DMs, always shard 0) go to this session."""
        if guild_id is None:
            return self.shard_id == 0
        return (guild_id >> 22) % self.shard_count == self.shard_id

    def send(self, op: int, data: Any, event: str | None = None) -> int:
        """Queue a payload; returns its sequence number (0 for non-dispatch opcodes)."""
        seq = 0
        payload: JSON = {"op": op, "d": data, "s": None, "t": None}
        if event is not None:
            self.seq += 1
            seq = self.seq
            payload["s"] = seq
            payload["t"] = event
            self.history.append(payload)
        if not self.closed:
            self._queue.put_nowait(payload)
        return seq

    def replay(self, payload: JSON) -> None:
        """Queue an already sequenced dispatch again (a RESUME replaying missed events)."""
        if not self.closed:
            self._queue.put_nowait(payload)

    async def flush(self) -> None:
        """Wait until everything queued so far has been written to the socket."""
        await self._queue.join()

    async def _write_loop(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                if self.closed:
                    continue
                raw = json.dumps(item, separators=(",", ":"))
                try:
                    if self._compressor is not None:
                        await self.ws.send_bytes(self._compressor.compress(raw.encode()))
                    else:
                        await self.ws.send_str(raw)
                except (ConnectionError, RuntimeError):
                    # The client went away mid-write; drop the rest instead of crashing.
                    self.closed = True
            finally:
                self._queue.task_done()

    async def shutdown(self, *, code: int | None = None, message: str = "") -> None:
        """Stop the writer and optionally close the socket with a gateway close code."""
        if code is not None and not self.ws.closed:
            # Flush first so e.g. a HELLO before a 4004 close still reaches the client.
            await self.flush()
        self.closed = True
        self._queue.put_nowait(None)
        await self._writer
        if code is not None and not self.ws.closed:
            await self.ws.close(code=code, message=message.encode())


class GatewayMixin:
    """The gateway: sessions, dispatches, disconnects and reconnects."""

    # ------------------------------------------------------------------ gateway dispatch

    def _live_sessions(self, guild_id: int | None) -> list[_GatewaySession]:
        """Sessions events for ``guild_id`` go to: ready ones, and resumable dropped ones
        (which keep sequencing events for the RESUME to replay)."""
        return [
            s
            for s in self._sessions
            if s.ready and (not s.closed or s.detached) and s.owns(guild_id)
        ]

    def _reaches_bot(self, guild_id: int | None) -> bool:
        """Whether the guild's events reach the bot at all: not after it left the guild, and
        not while the guild is unavailable."""
        if guild_id is None:
            return True
        guild = self.guilds.get(guild_id)
        return guild is not None and self._bot_in(guild) and not guild.unavailable

    def _send_dispatch(self, session: _GatewaySession, event: str, data: JSON) -> None:
        seq = session.send(0, data, event)
        self.dispatched.append(DispatchRecord(session.id, session.shard_id, event, data, seq))
        self._notify()

    def _dispatch(
        self, event: str, data: JSON, *, guild_id: int | None, intent: Intent | None
    ) -> None:
        # Interactions reach the app wherever it is installed (a user install works in
        # guilds the bot is not in); everything else only from guilds it is in.
        if event != "INTERACTION_CREATE" and not self._reaches_bot(guild_id):
            return
        for session in self._live_sessions(guild_id):
            if intent is not None and not session.intents & intent:
                continue  # Discord never sends events the client did not subscribe to.
            self._send_dispatch(session, event, copy.deepcopy(data))

    def _dispatch_message(self, event: str, message: JSON) -> None:
        """MESSAGE_CREATE/UPDATE with guild_id, member and MESSAGE_CONTENT filtering."""
        channel = self.channels[int(message["channel_id"])]
        guild_id = channel.guild_id
        intent = Intent.GUILD_MESSAGES if guild_id is not None else Intent.DIRECT_MESSAGES
        author_id = int(message["author"]["id"])
        mentions_bot = any(int(u["id"]) == self.bot_user.id for u in message["mentions"])
        if not self._reaches_bot(guild_id):
            return
        if guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        for session in self._live_sessions(guild_id):
            if not session.intents & intent:
                continue
            data = copy.deepcopy(message)
            if guild_id is not None:
                guild = self.guilds[guild_id]
                data["guild_id"] = str(guild_id)
                member = guild.members.get(author_id)
                if member is not None and "webhook_id" not in data:
                    data["member"] = member.to_payload(with_user=False)
                for mention in data["mentions"]:
                    mentioned = guild.members.get(int(mention["id"]))
                    if mentioned is not None:
                        mention["member"] = mentioned.to_payload(with_user=False)
            # MESSAGE_CONTENT is privileged: without it, guild messages arrive empty unless
            # they mention the bot or are the bot's own (DMs are always readable).
            can_read = (
                session.intents & Intent.MESSAGE_CONTENT
                or guild_id is None
                or mentions_bot
                or author_id == self.bot_user.id
            )
            if not can_read:
                data.update(content="", embeds=[], attachments=[], components=[])
                data.pop("poll", None)
                # a forward's snapshot is the forwarded message's content: emptied alike
                for snapshot in data.get("message_snapshots") or []:
                    snapshot["message"].update(content="", embeds=[], attachments=[], components=[])
            self._send_dispatch(session, event, data)

    def _bot_receives_messages_of(self, channel: FakeChannel) -> bool:
        """The gateway sends a guild channel's messages (and a thread's existence) only to who
        can view it, and a private thread's only to its members and to those who may manage
        threads."""
        assert channel.guild_id is not None
        perms = self.permissions_for(channel.guild_id, self.bot_user.id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            return False
        if channel.type == ChannelType.PRIVATE_THREAD:
            return self.bot_user.id in channel.member_ids or bool(perms & Permission.MANAGE_THREADS)
        return True

    def _echo_bot_message(self, event: str, message: JSON) -> None:
        if self.echo_bot_messages and not int(message.get("flags") or 0) & EPHEMERAL_FLAG:
            self._dispatch_message(event, message)

    async def _flush_sessions(self, guild_id: int | None) -> None:
        await asyncio.gather(*(s.flush() for s in self._live_sessions(guild_id)))

    async def _wait_for_owner_session(self, guild_id: int | None, timeout: float) -> None:
        self._require_guild_up(guild_id)
        held = (
            "; the bot is held offline by disconnect_bot(): await fake.wait_for_reconnect()"
            if self._hold_gateway
            else ""
        )
        await self.wait_for(
            lambda: bool(self._live_sessions(guild_id)),
            timeout=timeout,
            what=f"a ready gateway session owning guild {guild_id} (is the client running?{held})",
        )

    async def _await_delivery_target(self, guild_id: int | None, timeout: float) -> None:
        """Before a user event: wait for the session it goes to; nothing goes anywhere from
        a guild the bot left."""
        self._require_guild_up(guild_id)
        if guild_id is not None and not self._bot_in(self.guilds[guild_id]):
            return
        await self._wait_for_owner_session(guild_id, timeout)

    def _require_guild_up(self, guild_id: int | None) -> None:
        if guild_id is not None and self.guilds[guild_id].unavailable:
            raise FakeDiscordError(
                f"guild {guild_id} is unavailable (guild_outage): nobody can use it until "
                "end_guild_outage()"
            )

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        try:
            compressor = _make_compressor(request.query.get("compress"))
        except (FakeDiscordError, ImportError):
            await ws.close(code=4000, message=b"unsupported compression")
            return ws
        self._session_serial += 1
        session = _GatewaySession(
            ws, compressor, request.query.get("compress"), serial=self._session_serial
        )
        self._sessions.append(session)
        try:
            if request.query.get("encoding", "json") != "json":
                await session.shutdown(code=4002, message="Error while decoding payload.")
                return ws
            session.send(10, {"heartbeat_interval": self.heartbeat_interval_ms})
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    close = await self._on_gateway_payload(session, json.loads(msg.data))
                    if close is not None:
                        await session.shutdown(code=close[0], message=close[1])
                        break
                elif msg.type is WSMsgType.BINARY:
                    await session.shutdown(code=4002, message="Error while decoding payload.")
                    break
        finally:
            if not session.closed:
                await session.shutdown()
            # a resumable dropped session outlives its socket until it is resumed
            if session in self._sessions and not session.detached:
                self._sessions.remove(session)
            self._held = [(s, action) for s, action in self._held if s is not session]
            self._notify()
        return ws

    async def _on_gateway_payload(
        self, session: _GatewaySession, payload: JSON
    ) -> tuple[int, str] | None:
        """Handle one client payload; returns a close code and reason to end the session."""
        op = payload.get("op")
        data = payload.get("d")
        if op == 1:  # HEARTBEAT
            session.send(11, None)
        elif op == 2:  # IDENTIFY
            return self._identify(session, data or {})
        elif op == 3:  # PRESENCE_UPDATE
            self.presence_updates.append(dict(data or {}))
            self._notify()
        elif op == 6:  # RESUME
            return self._resume(session, data or {})
        elif op == 8:  # REQUEST_GUILD_MEMBERS
            self._send_member_chunks(session, data or {})
        elif not session.identified and op not in (4,):
            return 4003, "Not authenticated."
        return None

    def _identify(self, session: _GatewaySession, data: JSON) -> tuple[int, str] | None:
        if session.identified:
            return 4005, "Already authenticated."
        token = str(data.get("token") or "")
        if token != self.valid_token:
            return 4004, "Authentication failed."
        if "intents" not in data:
            return 4013, "Invalid intent(s)."
        intents = int(data["intents"])
        shard = data.get("shard") or [0, 1]
        shard_id, shard_count = int(shard[0]), int(shard[1])
        if shard_count < 1 or not 0 <= shard_id < shard_count:
            return 4010, "Invalid shard."
        if intents & PRIVILEGED_INTENTS & ~self.enabled_privileged_intents:
            return 4014, "Disallowed intent(s)."
        session.identified = True
        session.intents = intents
        session.shard_id = shard_id
        session.shard_count = shard_count
        # a fresh session replaces the shard's resumable dropped one, if any
        for stale in [s for s in self._sessions if s.detached and s.shard_id == shard_id]:
            stale.detached = False
            self._sessions.remove(stale)
        self.identifies.append(
            IdentifyRecord(
                session_id=session.id,
                shard_id=shard_id,
                shard_count=shard_count,
                intents=intents,
                token=token,
                properties=dict(data.get("properties") or {}),
                presence=data.get("presence"),
                compression=session.compression,
            )
        )
        if self._hold_gateway:
            self._held.append((session, lambda: self._send_ready(session)))
        else:
            self._send_ready(session)
        return None

    def _send_ready(self, session: _GatewaySession) -> None:
        """READY, then a GUILD_CREATE per guild of the shard (a GUILD_DELETE ``unavailable``
        for a guild in an outage)."""
        shard_id, shard_count, intents = session.shard_id, session.shard_count, session.intents
        owned = [
            g
            for g in self.guilds.values()
            if session.owns(g.id) and not g.withheld and self._bot_in(g)
        ]
        ready: JSON = {
            "v": 10,
            "user": self._me_payload(),
            "guilds": [{"id": str(g.id), "unavailable": True} for g in owned],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "shard": [shard_id, shard_count],
            "application": {"id": str(self.application_id), "flags": self._app_flags()},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "user_settings": {},
            "geo_ordered_rtc_regions": ["us-east"],
            "guild_join_requests": [],
            "_trace": ['["fake-discord"]'],
        }
        self._send_dispatch(session, "READY", ready)
        if intents & Intent.GUILDS:
            for guild in owned:
                if guild.unavailable:
                    outage = {"id": str(guild.id), "unavailable": True}
                    self._send_dispatch(session, "GUILD_DELETE", outage)
                    continue
                self._send_dispatch(
                    session, "GUILD_CREATE", self._guild_create_payload(guild, session)
                )
        # Everything dispatched from now on is queued after READY/GUILD_CREATE.
        session.ready = True
        self._notify()

    def _resume(self, session: _GatewaySession, data: JSON) -> tuple[int, str] | None:
        """RESUME succeeds only for a session dropped by ``disconnect_bot(resumable=True)``:
        the events sequenced since the client's ``seq`` are replayed, then RESUMED. Any other
        session is not resumable: op 9 INVALID_SESSION ``false``, and discord.py IDENTIFYs
        again (a fresh READY; what happened in between is never dispatched)."""
        if session.identified:
            return 4005, "Already authenticated."
        if str(data.get("token") or "") != self.valid_token:
            return 4004, "Authentication failed."
        raw_seq = data.get("seq")
        seq = None if raw_seq is None else int(raw_seq)
        dropped = next(
            (s for s in self._sessions if s.detached and s.id == data.get("session_id")), None
        )
        accepted = dropped is not None and seq is not None and seq <= dropped.seq
        self.resumes.append(
            ResumeRecord(session_id=str(data.get("session_id")), seq=seq, accepted=accepted)
        )
        self._notify()
        if dropped is None or seq is None or not accepted:
            session.send(9, False)
            return None
        client_seq: int = seq
        session.identified = True  # a second RESUME or IDENTIFY on this socket is refused

        def finish() -> None:
            session.id = dropped.id
            session.seq = dropped.seq
            session.shard_id, session.shard_count = dropped.shard_id, dropped.shard_count
            session.intents = dropped.intents
            session.history = dropped.history
            dropped.detached = False
            if dropped in self._sessions:
                self._sessions.remove(dropped)
            for payload in dropped.history:
                if int(payload["s"]) > client_seq:
                    session.replay(payload)
            self._send_dispatch(session, "RESUMED", {"_trace": ['["fake-discord"]']})
            session.ready = True
            self._notify()

        if self._hold_gateway:
            self._held.append((session, finish))
        else:
            finish()
        return None

    async def disconnect_bot(
        self,
        *,
        resumable: bool = False,
        code: int = 4000,
        shard_id: int | None = None,
    ) -> None:
        """Drop the bot's gateway connection(s) (every shard, or ``shard_id``): the socket is
        closed with ``code`` (4000 "unknown error" by default, after which discord.py
        reconnects and tries to RESUME; codes it cannot recover from are refused here).

        The bot stays away until :meth:`wait_for_reconnect`: discord.py reconnects at once,
        but the fake holds back the READY (or RESUMED) its IDENTIFY (or RESUME) asks for. In
        between, changes made with ``while_away=True`` / :meth:`delete_message_quietly` /
        :meth:`edit_message_quietly` are what happened while the bot was offline.

        ``resumable=False``: the session is gone, as after a long outage: the RESUME is
        answered with op 9 INVALID_SESSION ``false``, discord.py IDENTIFYs again (its default
        ``before_identify_hook`` sleeps 5 s first) and gets a fresh READY and GUILD_CREATEs
        (``on_ready`` fires again); nothing that happened in between is ever dispatched, so a
        bot notices missed messages, edits and deletions only by reading channel history.

        ``resumable=True``: Discord keeps the session: events keep being sequenced for it and
        the RESUME replays them, then RESUMED (``on_resumed``); no new READY.
        """
        if code in _FATAL_CLOSE_CODES:
            raise FakeDiscordError(f"discord.py does not reconnect after close code {code}")
        dropped = [
            s
            for s in self._sessions
            if s.ready and not s.closed and (shard_id is None or s.shard_id == shard_id)
        ]
        if not dropped:
            raise FakeDiscordError("no connected gateway session of the bot to drop")
        self._hold_gateway = True
        self._dropped_shards = {(s.shard_id, s.shard_count) for s in dropped}
        self._drop_serial = self._session_serial
        for session in dropped:
            session.detached = resumable
            await session.shutdown(code=code, message="fake: connection dropped")
        self._notify()

    async def wait_for_reconnect(self, *, timeout: float = 10.0) -> None:
        """End the absence begun by :meth:`disconnect_bot` and wait until every dropped shard
        has a ready session again: a fresh READY (re-IDENTIFY) or a RESUMED. The default
        timeout allows for the 5 s discord.py sleeps before re-identifying."""
        self._hold_gateway = False
        held, self._held = self._held, []
        for session, action in held:
            if not session.ws.closed:
                action()
        await self.wait_for(
            lambda: all(
                any(
                    s.serial > self._drop_serial
                    and s.ready
                    and not s.closed
                    and (s.shard_id, s.shard_count) == shard
                    for s in self._sessions
                )
                for shard in self._dropped_shards
            ),
            timeout=timeout,
            what="the bot's gateway session(s) to come back (READY or RESUMED)",
        )

    def _send_member_chunks(self, session: _GatewaySession, data: JSON) -> None:
        raw_guilds = data.get("guild_id")
        guild_ids: list[Any] = raw_guilds if isinstance(raw_guilds, list) else [raw_guilds]
        for raw_gid in guild_ids:
            guild = self.guilds.get(int(raw_gid)) if raw_gid is not None else None
            if guild is None:
                continue
            members = list(guild.members.values())
            user_ids = data.get("user_ids")
            if user_ids:
                wanted = {int(u) for u in (user_ids if isinstance(user_ids, list) else [user_ids])}
                members = [m for m in members if m.user.id in wanted]
            query = data.get("query")
            if query:
                members = [m for m in members if m.user.name.startswith(str(query))]
            limit = int(data.get("limit") or 0)
            if limit:
                members = members[:limit]
            chunk: JSON = {
                "guild_id": str(guild.id),
                "members": [m.to_payload() for m in members],
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [],
            }
            if data.get("nonce") is not None:
                chunk["nonce"] = data["nonce"]
            self._send_dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)
