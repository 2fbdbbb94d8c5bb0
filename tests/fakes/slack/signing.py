"""Signed delivery to an app's HTTP endpoint (X-Slack-Signature), the bodies Slack sends, and
serving a web app on a free port.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from .models import _DEFAULT_TIMEOUT

# --------------------------------------------------------------------------------------------
# HTTP-mode helpers (no server needed)
# --------------------------------------------------------------------------------------------


def signed_headers(
    signing_secret: str,
    body: str | bytes,
    timestamp: int | str | None = None,
    *,
    content_type: str | None = None,
) -> dict[str, str]:
    """Headers Slack would send with ``body`` in HTTP mode, signed with ``signing_secret``.

    Pass an old ``timestamp`` (e.g. ``int(time.time()) - 600``) to build a stale request, or a
    different secret to build a wrong signature. ``content_type`` defaults to JSON for bodies
    starting with ``{`` and to form encoding otherwise (slash commands, interactivity).
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    if signature is None:  # generate_signature only returns None for a missing timestamp/body
        raise ValueError("could not sign the request body")
    if content_type is None:
        head = body[:1] if isinstance(body, str) else body[:1].decode("latin-1")
        content_type = "application/json" if head == "{" else "application/x-www-form-urlencoded"
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


def event_body(payload: Mapping[str, Any]) -> str:
    """The HTTP body of an Events API request (JSON)."""
    return json.dumps(payload)


def slash_command_form_body(payload: Mapping[str, str]) -> str:
    """The HTTP body of a slash command request (form fields)."""
    return urlencode(dict(payload))


def interactive_form_body(payload: Mapping[str, Any]) -> str:
    """The HTTP body of an interactivity request: one form field ``payload`` holding JSON."""
    return urlencode({"payload": json.dumps(payload)})


@dataclass(frozen=True, slots=True)
class SignedDelivery:
    """What the app answered to a signed HTTP-mode request."""

    status: int
    text: str
    headers: dict[str, str]


async def send_signed(
    url: str,
    *,
    signing_secret: str,
    body: str,
    timestamp: int | str | None = None,
    timeout: float = _DEFAULT_TIMEOUT,
) -> SignedDelivery:
    """POST ``body`` to an HTTP-mode app the way Slack does, signed with ``signing_secret``."""
    headers = signed_headers(signing_secret, body, timestamp)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with (
        aiohttp.ClientSession(timeout=client_timeout) as session,
        session.post(url, data=body.encode("utf-8"), headers=headers) as response,
    ):
        return SignedDelivery(
            status=response.status, text=await response.text(), headers=dict(response.headers)
        )


@asynccontextmanager
async def serve_web_app(app: web.Application) -> AsyncIterator[str]:
    """Serve an aiohttp application (e.g. Bolt's ``app.web_app()``) on 127.0.0.1:<free port>.

    Yields the base URL ``http://127.0.0.1:PORT``; the server is torn down on exit.
    """
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
