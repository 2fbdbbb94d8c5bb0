"""Socket Mode on the fake Slack: pushing envelopes, reconnect requests, the WebSocket endpoint and
acks.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import WSMsgType, web

from .models import _DEFAULT_TIMEOUT, EnvelopeType, SocketAck, SocketEnvelope, _SocketConnection


class SocketModeMixin:
    """Socket Mode: envelopes, reconnects, the WebSocket endpoint."""

    # ---------------------------------------------------------------- Socket Mode pushes

    async def socket_push(
        self,
        *,
        envelope_type: EnvelopeType,
        payload: Mapping[str, Any],
        accepts_response_payload: bool | None = None,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> str:
        """Push one envelope to the newest open connection; return its ``envelope_id``.

        Waits up to ``timeout`` for a connection. Use ``wait_for_ack`` for the ack.
        """
        connection = await self.wait_for(
            self._newest_socket, timeout=timeout, description="an open Socket Mode connection"
        )
        if accepts_response_payload is None:
            # Slack lets the app answer in the ack for slash commands and for the interactive
            # payloads that expect a synchronous answer (modal submissions, option loads).
            accepts_response_payload = envelope_type == "slash_commands" or (
                envelope_type == "interactive"
                and payload.get("type") in {"view_submission", "block_suggestion"}
            )
        if envelope_type == "events_api":
            self._learn_from_event(payload.get("event"))
        envelope_id = str(uuid.uuid4())
        message: dict[str, Any] = {
            "envelope_id": envelope_id,
            "payload": dict(payload),
            "type": envelope_type,
            "accepts_response_payload": accepts_response_payload,
        }
        if envelope_type == "events_api":
            message["retry_attempt"] = retry_attempt or 0
            message["retry_reason"] = retry_reason or ""
        self.socket_envelopes.append(
            SocketEnvelope(
                envelope_id=envelope_id,
                type=envelope_type,
                payload=dict(payload),
                accepts_response_payload=accepts_response_payload,
            )
        )
        await connection.ws.send_str(json.dumps(message))
        return envelope_id

    async def socket_send_event(
        self,
        *,
        event: Mapping[str, Any],
        team_id: str | None = None,
        event_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> SocketAck:
        """Push an Events API envelope and wait for its ack.

        ``event`` is either a bare event (wrapped with ``event_payload``) or a complete
        ``event_callback`` body.
        """
        payload = (
            dict(event)
            if event.get("type") == "event_callback"
            else self.event_payload(event=event, team_id=team_id, event_id=event_id)
        )
        envelope_id = await self.socket_push(
            envelope_type="events_api",
            payload=payload,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
            timeout=timeout,
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_send_slash_command(
        self, *, payload: Mapping[str, str], timeout: float = _DEFAULT_TIMEOUT
    ) -> SocketAck:
        """Push a slash command (``slash_command_payload``) and wait for its ack."""
        envelope_id = await self.socket_push(
            envelope_type="slash_commands", payload=payload, timeout=timeout
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_send_interactive(
        self, *, payload: Mapping[str, Any], timeout: float = _DEFAULT_TIMEOUT
    ) -> SocketAck:
        """Push an interactivity payload (e.g. ``block_action_payload``) and wait for its ack."""
        envelope_id = await self.socket_push(
            envelope_type="interactive", payload=payload, timeout=timeout
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_request_reconnect(
        self, *, reason: str = "refresh_requested", timeout: float = _DEFAULT_TIMEOUT
    ) -> None:
        """Send Slack's ``disconnect`` message and wait until the client reconnected.

        slack_sdk answers it by calling ``apps.connections.open`` again and opening a new
        socket (Slack itself sends this a few hours into a connection).
        """
        connection = await self.wait_for(
            self._newest_socket, timeout=timeout, description="an open Socket Mode connection"
        )
        opened_before = self.socket_connections_opened
        await connection.ws.send_str(
            json.dumps(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}}
            )
        )
        await self.wait_for_socket_connections(count=opened_before + 1, timeout=timeout)

    def _newest_socket(self) -> _SocketConnection | None:
        open_sockets = [s for s in self._sockets if not s.closed and not s.ws.closed]
        return open_sockets[-1] if open_sockets else None

    @property
    def open_socket_count(self) -> int:
        """How many Socket Mode connections are open right now."""
        return sum(1 for s in self._sockets if not s.closed and not s.ws.closed)

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            # A ticket is single-use and only comes from apps.connections.open.
            return web.Response(status=401, text="invalid_ticket")
        self._tickets.discard(ticket)
        # autoping answers the client's "sdk-ping-pong" pings, which it uses to detect stale
        # connections.
        ws = web.WebSocketResponse(autoping=True, timeout=2.0)
        await ws.prepare(request)
        connection = _SocketConnection(number=next(self._socket_numbers), ws=ws)
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": self.open_socket_count + 1,
                    "debug_info": {
                        "host": "fake-slack",
                        "build_number": 1,
                        "approximate_connection_time": 18060,
                    },
                    "connection_info": {"app_id": self.api_app_id},
                }
            )
        )
        # Register only after hello so no envelope can overtake it.
        self._sockets.append(connection)
        self.socket_connections_opened += 1
        self._notify()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._record_ack(str(message.data))
        finally:
            connection.closed = True
            self._sockets.remove(connection)
            self._notify()
        return ws

    def _record_ack(self, raw: str) -> None:
        try:
            data = json.loads(raw)
        except ValueError:
            return
        if not isinstance(data, dict) or "envelope_id" not in data:
            return
        payload = data.get("payload")
        self.socket_acks.append(
            SocketAck(
                envelope_id=str(data["envelope_id"]),
                payload=payload if isinstance(payload, dict) else None,
                raw=raw,
            )
        )
        self._notify()
