"""Fixtures of the fakes' own tests (tests/fakes/test_*.py).

The fakes themselves start through the shared ``fake`` fixture of tests/conftest.py, set by
each module's ``pytestmark = pytest.mark.fake(...)``; what one module alone needs (a Bolt app,
a client with a token) stays in that module; what the Discord ones share, and the Slack ones'
plain Web API client, is here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_clients import World
from tests.fakes.slack import FakeSlack


@pytest.fixture
async def raw_http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client, for requests no platform client would make."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def throwaway_world(fake: FakeDiscord) -> World:
    """A guild with a channel, a thread, a forum post, a member and an admin."""
    guild = fake.add_guild(name="Memory Lab")
    general = fake.add_text_channel(guild.id, "general")
    forum = fake.add_forum(guild.id, "ideas")
    return World(
        guild=guild,
        general=general,
        thread=fake.add_thread(general.id, "side-topic"),
        forum=forum,
        forum_post=fake.add_thread(forum.id, "Remember my birthday"),
        alice=fake.add_member(guild.id, name="alice"),
        admin=fake.add_member(guild.id, name="root", manage_guild=True),
    )


@pytest.fixture
def web_client(fake: FakeSlack) -> AsyncWebClient:
    """slack_sdk's client with the fake's bot token and slack_sdk's default retries (none for
    429s: a rate-limited call raises)."""
    return AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
