"""A request to a route or method a fake does not implement is kept until the end of the test,
and the check tests/conftest.py runs after every test (``no_unknown_route``) reports it: the
check is shown catching one here, on each fake, by calling it directly."""

from __future__ import annotations

import aiohttp
import pytest

from tests.fakes import unknown
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack


@pytest.mark.fake("discord")
async def test_a_route_the_fake_discord_does_not_know_is_reported(
    fake: FakeDiscord, raw_http: aiohttp.ClientSession
) -> None:
    headers = {"Authorization": f"Bot {fake.valid_token}"}
    async with raw_http.get(f"{fake.api_base}/users/@me", headers=headers) as known:
        assert known.status == 200
    assert unknown.take() == []  # a route the fake implements is not reported
    async with raw_http.post(f"{fake.api_base}/channels/1/invites", headers=headers) as r:
        assert r.status == 404
    fake.clear_records()  # what a test clears does not hide it
    received = unknown.take()
    assert received == ["discord: POST /channels/1/invites"]
    failure = unknown.check(received)
    assert failure is not None and "discord: POST /channels/1/invites" in failure
    assert unknown.check([]) is None


@pytest.mark.fake("slack", bot_token="xoxb-test", team_id="T1")
async def test_a_method_or_path_the_fake_slack_does_not_know_is_reported(
    fake: FakeSlack, raw_http: aiohttp.ClientSession
) -> None:
    headers = {"Authorization": "Bearer xoxb-test"}
    async with raw_http.post(f"{fake.api_url}auth.test", headers=headers) as known:
        assert (await known.json())["ok"] is True
    assert unknown.take() == []
    async with raw_http.post(f"{fake.api_url}admin.users.invite", headers=headers) as r:
        assert (await r.json())["error"] == "unknown_method"
    async with raw_http.get(f"{fake.base_url}/apps/manifest") as r:
        assert r.status == 404
    received = unknown.take()
    assert received == [
        "slack: Web API method admin.users.invite",
        "slack: GET /apps/manifest",
    ]
    failure = unknown.check(received)
    assert failure is not None
    assert "admin.users.invite" in failure and "GET /apps/manifest" in failure
