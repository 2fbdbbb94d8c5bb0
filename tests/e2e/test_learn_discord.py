"""/memory learn on Discord as an admin uses it: the unmodified discord.py bot against the
fake Discord, a real Redis: the channel's past (its threads too) read, what was found and
what it costs said in the command's private answer, learned on confirm, once."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from memory_core.clock import ManualClock
from tests.discord_world import World, command, said, serving
from tests.fakes.discord import FakeDiscord
from tests.helpers import CoreFactory

pytestmark = pytest.mark.fake("discord")

JOIN = 7


async def test_an_admin_learns_a_channel_s_past_with_its_thread_once(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    other_bot = fake.add_member(world.guild.id, name="otherbot", bot=True)
    for n in range(120):
        member = (world.alice, world.bob)[n % 2]
        fake.past_message(world.general.id, author_id=member.user.id, content=f"past {n}")
    fake.past_message(world.general.id, author_id=other_bot.user.id, content="beep")
    fake.past_message(world.general.id, author_id=world.bob.user.id, message_type=JOIN)
    for n in range(3):
        fake.past_message(world.thread.id, author_id=world.alice.user.id, content=f"aside {n}")
    # Two days on: what was said is the channel's past, before its memory began.
    core = await make_core(clock=ManualClock(datetime.now(UTC) + timedelta(days=2)), offline=True)
    general, thread = world.scope(world.general), world.scope(world.thread)

    async with serving(fake, core) as bot:
        bot.memory_commands.learns.progress_every_s = 0  # (every page: the test reads fast)
        refused, _ = await command(fake, "memory learn", world.general, world.bob, days=30)
        assert "Only admins" in (await fake.wait_for_response(refused)).content

        reading, deferred = await command(fake, "memory learn", world.general, world.admin, days=30)
        assert deferred.type == 5 and deferred.ephemeral
        found = await said(fake, reading, "Found 123 new messages in " + general)
        progress = await said(fake, reading, f"Reading {general}: ")  # as it went
        assert "so far" in progress
        # The other bot, the join; and the world's own system messages (its thread began).
        skipped = re.search(r"(\d+) from bots or the system", found)
        assert skipped and int(skipped[1]) >= 2 and "/memory learn confirm" in found
        assert await core.repo.reads.all_entries(general) == []  # nothing learned before confirm

        storing, _ = await command(fake, "memory learn", world.general, world.admin, step="confirm")
        done = await said(fake, storing, f"Learned 123 messages of {general}")
        assert "2 day records" in done  # a day of the channel, a day of its thread

        texts = [e.text for e in await core.repo.reads.all_entries(general)]
        assert texts == [f"past {n}" for n in range(120)]
        assert [e.text for e in await core.repo.reads.all_entries(thread)] == [
            f"aside {n}" for n in range(3)
        ]
        assert {e.author for e in await core.repo.reads.all_entries(general)} == {"alice", "bob"}

        again, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, again, f"Nothing new to learn in {general}: 123 messages already")
        status, _ = await command(fake, "memory learn", world.general, world.admin, step="status")
        assert "done" in await said(fake, status, f"Learn of {general}")
    assert len(await core.repo.reads.all_entries(general)) == 120


async def test_2000_messages_and_30_threads_stopped_by_a_rate_limit_go_on_after_a_restart(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    for n in range(2000):
        member = (world.alice, world.bob)[n % 2]
        fake.past_message(world.general.id, author_id=member.user.id, content=f"old {n}")
    threads = []
    for t in range(30):
        thread = fake.add_thread(world.general.id, f"topic {t}")
        for r in range(3):
            fake.past_message(thread.id, author_id=world.alice.user.id, content=f"t{t} r{r}")
        if t >= 20:
            fake.archive_thread(thread.id)
        threads.append(thread)
    clock = ManualClock(datetime.now(UTC) + timedelta(days=2))
    short_waits = {"max_wait_s": 0.2}
    core = await make_core(clock=clock, offline=True, learn=short_waits)
    general = world.scope(world.general)
    history = "GET /channels/{channel_id}/messages"
    fake.set_route_budget(history, limit=10, window=30.0)  # half-way: a 30 s wait, past the cap
    async with serving(fake, core):
        stopped, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        why = await said(fake, stopped, f"The learn of {general} stopped")
        assert "Run /memory learn again to go on where it stopped" in why
    halfway = await core.learner.status(general)
    assert halfway.status == "reading" and 0 < halfway.new < 2090

    # The bot restarts (a new process: a new core on the same Redis); Discord lets it read.
    fake.set_route_budget(history, limit=1000, window=0.1)
    restarted = await make_core(clock=clock, offline=True, learn=short_waits)
    async with serving(fake, restarted):
        again, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        found = await said(fake, again, "Found 2090 new messages")  # the rest, none twice
        assert "0 already remembered" in found
        stored, _ = await command(fake, "memory learn", world.general, world.admin, step="confirm")
        await said(fake, stored, f"Learned 2090 messages of {general}")
    texts = [e.text for e in await restarted.repo.reads.all_entries(general)]
    assert texts == [f"old {n}" for n in range(2000)]
    for t, thread in enumerate(threads):
        said_there = [e.text for e in await restarted.repo.reads.all_entries(world.scope(thread))]
        assert said_there == [f"t{t} r{r}" for r in range(3)]


async def test_a_learn_waiting_on_a_rate_limit_stops_with_the_bot_and_goes_on_after(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """The bot shuts down while a learn waits out a rate limit: the learn stops with it
    (no task left running past the bot), and the next /memory learn goes on from there."""
    for n in range(300):
        fake.past_message(world.general.id, author_id=world.alice.user.id, content=f"old {n}")
    clock = ManualClock(datetime.now(UTC) + timedelta(days=2))
    core = await make_core(clock=clock, offline=True)  # (waits up to 120 s for a limit)
    general = world.scope(world.general)
    history = "GET /channels/{channel_id}/messages"
    fake.set_route_budget(history, limit=2, window=60.0)  # then a minute's wait
    async with serving(fake, core) as bot:
        bot.memory_commands.learns.progress_every_s = 0
        reading, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, reading, f"Reading {general}: ")
        learns = list(bot.memory_commands.learns.running.values())
        assert learns and not any(job.done() for job in learns)  # waiting out the limit
    assert all(job.done() for job in learns), "the learn stopped with the bot"
    halfway = await core.learner.status(general)
    assert halfway.status == "reading" and 0 < halfway.new < 300

    fake.set_route_budget(history, limit=1000, window=0.1)
    async with serving(fake, await make_core(clock=clock, offline=True)):
        again, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        found = await said(fake, again, "Found 300 new messages")
        assert "0 already remembered" in found
