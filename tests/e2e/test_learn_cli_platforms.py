"""``memorybot learn slack|discord`` as an admin runs them from the shell: a real process,
the fake Slack Web API or the fake Discord (REST and gateway) at the URLs the settings name,
a real Redis; the channel's past with its threads learned once."""

from __future__ import annotations

import pytest
import redis

from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.helpers import CLI
from tests.slack_harness import BOT_TOKEN, C1, past_ts, seed_past


def _texts(url: str, key: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return [fields["t"] for _, fields in client.xrange(key)]
    finally:
        client.close()


@pytest.mark.fake("slack")
async def test_memorybot_learn_slack(cli: CLI, clean_redis: str, fake: FakeSlack) -> None:
    seed_past(fake, messages=120, threads={3: 2})
    env = {
        "REDIS_URL": clean_redis,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "MEMORYBOT_SLACK__API_BASE_URL": fake.api_url,
        "MEMORYBOT_LEARN__SLACK_REQUESTS_PER_MINUTE": "1000",
        # The fake's channel said its past in 2020: read back that far, and keep its raw
        # messages (past the retention a place keeps only their day records).
        "MEMORYBOT_LEARN__MAX_DAYS": "3650",
        "MEMORYBOT_MEMORY__RETENTION_DAYS": "3650",
    }
    run = await cli("learn", "slack", "--channel", C1, "--days", "3650", "--yes", **env)
    assert run.code == 0, run.err
    assert "slack:T1:C1 (slack): done." in run.out and "learned 122" in run.out
    assert len(_texts(clean_redis, "mb:{slack:T1:C1}:log")) == 120
    thread = _texts(clean_redis, f"mb:{{slack:T1:C1}}/{past_ts(3)}:log")
    assert thread == ["reply 1 to 3", "reply 2 to 3"]

    again = await cli("learn", "slack", "--channel", C1, "--days", "3650", "--yes", **env)
    assert again.code == 0, again.err
    assert "0 new" in again.out and "122 already remembered" in again.out
    no_token = await cli("learn", "slack", "--channel", C1, REDIS_URL=clean_redis)
    assert no_token.code == 2 and "SLACK_BOT_TOKEN" in no_token.err


@pytest.mark.fake("discord")
async def test_memorybot_learn_discord(cli: CLI, clean_redis: str, fake: FakeDiscord) -> None:
    guild = fake.add_guild(name="Memory Lab")
    general = fake.add_text_channel(guild.id, "general")
    alice = fake.add_member(guild.id, name="alice")
    thread = fake.add_thread(general.id, "side")
    for n in range(130):
        fake.past_message(general.id, author_id=alice.user.id, content=f"past {n}")
    fake.past_message(thread.id, author_id=alice.user.id, content="aside")
    env = {
        "REDIS_URL": clean_redis,
        "DISCORD_TOKEN": fake.valid_token,
        "MEMORYBOT_DISCORD__API_BASE": fake.api_base,
        "MEMORYBOT_DISCORD__GATEWAY_URL": fake.gateway_url,
    }
    run = await cli("learn", "discord", "--channel", str(general.id), "--yes", **env)
    assert run.code == 0, run.err
    assert f"discord:{guild.id}:{general.id} (discord): done." in run.out
    texts = _texts(clean_redis, f"mb:{{discord:{guild.id}:{general.id}}}:log")
    assert texts == [f"past {n}" for n in range(130)]
    aside = _texts(clean_redis, f"mb:{{discord:{guild.id}:{general.id}}}/{thread.id}:log")
    assert aside == ["aside"]
    too_far = await cli("learn", "discord", "--channel", "1", "--days", "400", **env)
    assert too_far.code == 1 and "at most 365 days" in too_far.err
