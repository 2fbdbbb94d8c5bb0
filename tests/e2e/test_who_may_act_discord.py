"""Who may act on a message, and where, checked against Discord: the message commands run
through a user install in a DM between two people, a group DM or a server without the bot
(the interaction's ``context`` and ``authorizing_integration_owners`` say so) change nothing
and say why, whatever the commands' registration lets through; the bot's own DM is its
person's. The unmodified discord.py client against the fake Discord, a real Core on the
private Redis."""

from __future__ import annotations

from typing import Any

import discord
import pytest

from tests.discord_world import World, serving, texts_in
from tests.fakes.discord import FakeDiscord, InteractionResponse
from tests.helpers import CoreFactory, all_keys
from tests.observed_discord import ObservedBot

pytestmark = pytest.mark.fake("discord")

NOT_HERE = "I am not part of this conversation"


async def menu(
    fake: FakeDiscord, name: str, channel_id: int, user_id: int, message: dict[str, Any]
) -> InteractionResponse:
    interaction = await fake.invoke_message_command(
        name=name, channel_id=channel_id, user_id=user_id, message_id=int(message["id"])
    )
    return await fake.wait_for_response(interaction)


def said(response: InteractionResponse) -> str:
    parts = [response.content or ""]
    for embed in response.embeds:
        parts += [embed.get("title") or "", embed.get("description") or ""]
    return "\n".join(parts)


def registered_wider(fake: FakeDiscord, bot: ObservedBot) -> None:
    """The message commands as a sync by another version of the bot could have left them:
    offered to user installs, in every context (the bot registers them for its server
    install, in servers and its DMs only)."""
    menus = [
        c.to_dict(bot.tree) for c in bot.tree.get_commands(type=discord.AppCommandType.message)
    ]
    for command in menus:
        command.update(integration_types=[0, 1], contexts=[0, 1, 2])
    fake.register_commands(menus)


async def test_the_menus_through_a_user_install_where_the_bot_is_not_change_nothing(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    bob, alice = world.bob.user.id, world.alice.user.id
    between = fake.add_dm_between(bob, alice)
    group = fake.add_group_dm([bob, alice, world.admin.user.id])
    elsewhere = fake.add_guild(name="No bot here")
    lobby = fake.add_text_channel(elsewhere.id, "lobby")
    fake.add_member(elsewhere.id, user_id=bob)
    fake.add_member(elsewhere.id, user_id=alice)
    fake.remove_bot_from_guild(elsewhere.id)
    fake.install_for_user(bob)
    async with serving(fake, core) as bot:
        registered_wider(fake, bot)
        before = set(await all_keys(core))
        in_dm = fake.say_in_private(between.id, author_id=alice, content="my pin is 4242")
        in_group = fake.say_in_private(group.id, author_id=alice, content="my pin is 4242")
        in_lobby = await fake.send_message(
            channel_id=lobby.id, author_id=alice, content="my pin is 4242"
        )
        answers = [
            await menu(fake, name, channel_id, bob, message)
            for channel_id, message in (
                (between.id, in_dm),
                (group.id, in_group),
                (lobby.id, in_lobby),
            )
            for name in ("Remember this", "Forget this message")
        ]
        # Discord said where: a DM or group DM between people (context 2), a server that
        # only Bob's user install reaches (context 0, no guild install).
        contexts = [i.payload["context"] for i in fake.interactions]
        assert contexts == [2, 2, 2, 2, 0, 0]
        assert all(
            "0" not in i.payload["authorizing_integration_owners"] for i in fake.interactions
        )
        after = set(await all_keys(core))
    for answer in answers:
        assert answer.ephemeral and NOT_HERE in said(answer), said(answer)
    # Nobody is an admin there: not even in Bob's own DM with the bot did a note land.
    assert after == before
    assert await core.repo.reads.facts(f"discord:dm:{bob}") == []


async def test_the_bots_own_dm_is_its_persons(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    alice = world.alice.user.id
    scope = f"discord:dm:{alice}"
    async with serving(fake, core) as bot:
        mine = await fake.send_dm(user_id=alice, content="my locker is 12")
        await bot.handled(mine)
        dm = fake.dm_channel_id(alice)
        pinned = await menu(fake, "Remember this", dm, alice, mine)
        assert "Remembered" in said(pinned), said(pinned)
        forgot = await menu(fake, "Forget this message", dm, alice, mine)
        assert "Forgot that message" in said(forgot), said(forgot)
    [note] = await core.repo.reads.facts(scope)
    assert note.pinned and note.text.startswith("alice: my locker is 12 (https://")
    assert "my locker is 12" not in await texts_in(core, scope)
