"""The fake Discord keeps per-route rate limits by default on the routes a bot answers through:
five messages, and five edits, per five seconds in a channel (each channel its own bucket),
with Discord's headers on every answer and a 429 past the budget; ``set_route_budget`` gives a
route another budget.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.fakes.discord import FakeDiscord

pytestmark = pytest.mark.fake("discord")


async def post(
    session: aiohttp.ClientSession, fake: FakeDiscord, path: str, payload: dict[str, Any]
) -> tuple[int, Any, Any]:
    async with session.post(
        f"{fake.api_base}{path}",
        data=json.dumps(payload),
        headers={"Authorization": f"Bot {fake.valid_token}", "Content-Type": "application/json"},
    ) as response:
        return response.status, await response.json(), response.headers


async def test_a_channel_takes_five_messages_per_five_seconds_by_default(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    other = fake.add_text_channel(guild.id, "other")
    path = f"/channels/{general.id}/messages"
    for n in range(5):
        status, _, headers = await post(raw_http, fake, path, {"content": f"m{n}"})
        assert status == 200 and headers["X-RateLimit-Limit"] == "5"
    assert headers["X-RateLimit-Remaining"] == "0"
    status, body, headers = await post(raw_http, fake, path, {"content": "sixth"})
    assert status == 429 and 0 < body["retry_after"] <= 5 and headers["Retry-After"]
    status, _, _ = await post(raw_http, fake, f"/channels/{other.id}/messages", {"content": "x"})
    assert status == 200  # each channel its own bucket
    assert [m.content for m in fake.sent_messages] == [*(f"m{n}" for n in range(5)), "x"]


async def test_a_budget_set_for_a_route_replaces_its_default(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    guild = fake.add_guild()
    general = fake.add_text_channel(guild.id, "general")
    path = f"/channels/{general.id}/messages"
    _, _, headers = await post(raw_http, fake, path, {"content": "by default"})
    assert (headers["X-RateLimit-Limit"], headers["X-RateLimit-Remaining"]) == ("5", "4")
    fake.set_route_budget("POST /channels/{channel_id}/messages", limit=2, window=5.0)
    other = fake.add_text_channel(guild.id, "other")
    path = f"/channels/{other.id}/messages"
    statuses = [(await post(raw_http, fake, path, {"content": str(n)}))[0] for n in range(3)]
    assert statuses == [200, 200, 429]
