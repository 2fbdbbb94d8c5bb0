"""Forgetting holds against every way in, on Discord as people use it: the unmodified
discord.py bot against the fake Discord, a real Redis. A learn read before a forget stores
nothing it took; a forget landing while a learn stores or summarises is not undone; an
answer posted in two parts is remembered under both, so neither a learn nor a forget of the
person brings its second part back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from tests.discord_world import World, command, said, say, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, all_keys, key_values

pytestmark = pytest.mark.fake("discord")


async def stored_values(core: Core) -> str:
    return "\n".join([v for key in await all_keys(core) for v in await key_values(core, key)])


def past_chat(fake: FakeDiscord, world: World) -> None:
    """#general's past, before the bot: Alice's secrets among Bob's plans, and a thread."""
    for n in range(12):
        if n % 3 == 0:
            fake.past_message(
                world.general.id, author_id=world.alice.user.id, content=f"alice secret {n}"
            )
        else:
            fake.past_message(
                world.general.id, author_id=world.bob.user.id, content=f"bob plan {n}"
            )
    fake.past_message(world.thread.id, author_id=world.alice.user.id, content="alice secret t")


async def test_a_staged_learn_stores_nothing_of_a_member_forgotten_everywhere_meanwhile(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    """Alice never spoke in #general since the bot came: her forget everywhere, run in
    #random while a learn of #general waits for confirm, still holds for #general."""
    past_chat(fake, world)
    core = await make_core(clock=ManualClock(datetime.now(UTC) + timedelta(days=2)), offline=True)
    general = world.scope(world.general)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.random, world.alice, "hello from random")
        reading, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, reading, "Found 13 new messages in " + general)

        forgot, _ = await command(
            fake, "memory forget me", world.random, world.alice, everywhere=True
        )
        await fake.wait_for_response(forgot)

        storing, _ = await command(fake, "memory learn", world.general, world.admin, step="confirm")
        await said(fake, storing, "Learned ")
        texts = [e.text for e in await core.repo.reads.all_entries(general)]
        texts += [e.text for e in await core.repo.reads.all_entries(world.scope(world.thread))]
        assert texts and not [t for t in texts if "alice" in t], texts
        assert [t for t in texts if t.startswith("bob plan")]  # the rest is learned
        await core.drain()
    assert "alice secret" not in await stored_values(core)


class ForgetAt:
    """Runs ``action`` (a forget, through the door) just before the first store command that
    ``when`` picks: a forget landing at that moment of a learn."""

    def __init__(self, client: Any, when: Callable[[tuple[Any, ...]], bool]) -> None:
        self.when, self.fired = when, False
        self.action: Callable[[], Awaitable[None]] | None = None
        self._command = client.execute_command

        async def execute_command(*args: Any, **kwargs: Any) -> Any:
            if not self.fired and self.action is not None and self.when(args):
                self.fired = True
                await self.action()
            return await self._command(*args, **kwargs)

        client.execute_command = execute_command


def script_named(core: Core, name: str) -> Callable[[tuple[Any, ...]], bool]:
    from memory_core.store.scripts import SHAS

    sha = SHAS[name]
    return lambda args: len(args) > 1 and args[0] in ("EVALSHA", "evalsha") and args[1] == sha


@pytest.mark.parametrize(
    "moment",
    [
        "prepend_finish",  # the past put before the channel's memory
        "insert_records",  # its days summarised into day records
        "ingest",  # the missing messages of the channel's own days stored
    ],
)
async def test_a_forget_while_a_learn_stores_or_summarises_is_not_undone(
    fake: FakeDiscord, world: World, make_core: CoreFactory, moment: str
) -> None:
    past_chat(fake, world)
    core = await make_core(clock=ManualClock(datetime.now(UTC) + timedelta(days=2)), offline=True)
    core.repo.lane = None  # every store command through the client watched here
    general = world.scope(world.general)
    async with serving(fake, core) as bot:
        if moment == "ingest":
            # The channel's memory began before its past ends: the rest is stored as live.
            await say(fake, bot, world.general, world.bob, "bob is here")
            for n in range(3):
                fake.past_message(
                    world.general.id, author_id=world.alice.user.id, content=f"alice secret x{n}"
                )
        reading, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, reading, "Found ")
        gate = ForgetAt(core.store.client, script_named(core, moment))

        async def forget() -> None:
            forgot, _ = await command(
                fake, "memory forget text", world.general, world.admin, text="alice secret"
            )
            await fake.wait_for_response(forgot)

        gate.action = forget
        storing, _ = await command(fake, "memory learn", world.general, world.admin, step="confirm")
        await said(fake, storing, "Learned ")
        await core.drain()
        assert gate.fired
        texts = [e.text for e in await core.repo.reads.all_entries(general)]
        assert [t for t in texts if t.startswith("bob plan")]
    values = await stored_values(core)
    assert "alice secret" not in values.casefold()


async def test_an_answer_in_two_posts_is_known_by_both_to_learns_and_forgets(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Discord posts 2,000 characters a message: a long answer goes out in two. A learn of
    the channel finds both parts in memory (nothing stored twice), and once Alice forgets
    herself, neither part comes back with the next learn."""
    long_answer = " ".join(f"alice-echo-{n} is repeated here." for n in range(100))
    assert 2000 < len(long_answer) < 4000
    fake_llm.responder = lambda request: long_answer if request.purpose == "reply" else None
    core = await make_core(clock=ManualClock(datetime.now(UTC) + timedelta(days=2)))
    general = world.scope(world.general)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "tell me all", mentions_bot=True)
        await fake.wait_for(lambda: len(fake.sent_messages) >= 2, what="the answer's two posts")
        entries = await core.repo.reads.all_entries(general)
        answer = [e for e in entries if e.role == "assistant"]
        assert len(answer) == 1  # one answer, in two posts

        again, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, again, f"Nothing new to learn in {general}")

        forgot, _ = await command(fake, "memory forget me", world.general, world.alice)
        await fake.wait_for_response(forgot)
        relearn, _ = await command(fake, "memory learn", world.general, world.admin, days=30)
        await said(fake, relearn, "Nothing new to learn")
        await core.drain()
    assert "alice-echo" not in await stored_values(core)
