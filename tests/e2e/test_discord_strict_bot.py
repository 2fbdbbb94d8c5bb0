"""memorybot through the stricter fake Discord (issue 17): what the gateway never sends the
bot, the bot cannot remember."""

from __future__ import annotations

import pytest

from bots.discord import commands as discord_commands
from tests.discord_world import World, say, serving, texts_in
from tests.fakes.discord import (
    EPHEMERAL_FLAG,
    FakeDiscord,
    FakeDiscordError,
    Permission,
    PermissionOverwrite,
)
from tests.helpers import CoreFactory

pytestmark = pytest.mark.fake("discord")


async def test_messages_of_a_channel_or_private_thread_the_bot_cannot_see_are_not_remembered(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    hidden = fake.add_text_channel(
        world.guild.id,
        "staff",
        overwrites=[
            PermissionOverwrite(id=world.guild.id, type="role", deny=Permission.VIEW_CHANNEL)
        ],
    )
    private_thread = fake.add_thread(
        world.general.id, "just-us", private=True, owner_id=world.alice.user.id
    )
    async with serving(fake, core) as bot:
        for channel in (hidden, private_thread):
            await fake.send_message(
                channel_id=channel.id, author_id=world.alice.user.id, content="secret plans"
            )
        # handled in order: once this one is remembered, the two before were not sent at all
        await say(fake, bot, world.general, world.alice, "public plans")
    assert await texts_in(core, world.scope(world.general)) == ["public plans"]
    assert await texts_in(core, world.scope(hidden)) == []
    assert await texts_in(core, world.scope(private_thread)) == []


async def test_a_slow_memory_command_stays_private_when_it_is_deferred(
    fake: FakeDiscord, world: World, make_core: CoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every /memory answer is private. A slow command is deferred and answered by a follow-up,
    # and Discord makes that first follow-up as private, or as public, as the defer was: a
    # public defer would show the answer (facts about people, an export) to the channel.
    monkeypatch.setattr(discord_commands, "DEFER_AFTER_S", 0.0)  # every command is "slow"
    core = await make_core()
    invocations: list[tuple[str, dict[str, str | bool]]] = [
        ("memory show", {}),
        ("memory show", {"section": "facts"}),
        ("memory remember", {"text": "standup is at 10:00"}),
        ("memory remember", {"text": "I drink tea", "about_me": True}),
        ("memory export", {}),
        ("memory config mode", {"value": "all"}),
        ("memory forget text", {"text": "standup"}),
        ("memory forget me", {}),
        ("memory forget all", {}),  # the confirmation buttons
    ]
    async with serving(fake, core) as bot:
        bot.memory_commands.confirm_timeout_s = 0.2
        await say(fake, bot, world.general, world.alice, "my phone number is 555-0199")
        for name, options in invocations:
            interaction = await fake.invoke_command(
                name=name,
                channel_id=world.general.id,
                user_id=world.admin.user.id,
                options=options or None,
            )
            assert (await fake.wait_for_response(interaction)).type == 5, name
            [answer] = await fake.wait_for_followups(interaction)
            assert answer.ephemeral, name  # what people see, whatever the follow-up asked
            assert answer.replaced_loading, name
        asked = fake.messages[answer.message_id]
        assert [row["components"] for row in asked["components"]]  # the buttons are there
        # the unanswered confirmation times out on the very message that shows the buttons
        [timed_out] = await fake.wait_for_edits(answer.message_id)
    assert "nothing was forgotten" in (timed_out.content or "")
    answers = [m for m in fake.messages.values() if int(m["author"]["id"]) == fake.bot_user.id]
    assert len(answers) == len(invocations)
    assert all(int(m["flags"]) & EPHEMERAL_FLAG for m in answers)
    echoed = [
        d
        for d in fake.dispatched
        if d.event in ("MESSAGE_CREATE", "MESSAGE_UPDATE")
        and int(d.data["author"]["id"]) == fake.bot_user.id
    ]
    assert echoed == []  # nothing of it reached the channel


async def test_a_private_thread_the_bot_is_added_to_later_is_remembered_as_a_thread(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    # Discord tells the bot of a private thread only once it is added (THREAD_CREATE then):
    # from that moment its messages arrive, and the thread reads its parent's memory.
    core = await make_core()
    thread = fake.add_thread(
        world.general.id, "planning", private=True, owner_id=world.alice.user.id
    )
    scope = world.scope(thread)
    async with serving(fake, core) as bot:
        await fake.send_message(
            channel_id=thread.id, author_id=world.alice.user.id, content="before"
        )
        fake.join_thread(thread.id, fake.bot_user.id)
        await say(fake, bot, thread, world.alice, "after the bot joined")
    assert await texts_in(core, scope) == ["after the bot joined"]
    assert scope == f"{world.scope(world.general)}:{thread.id}"  # under its channel
    assert await core.repo.reads.threads_of(world.scope(world.general)) == [scope]


async def test_memory_is_offered_in_servers_and_the_bot_dm_only(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    # /memory is about the bot's memory of a place: a group DM (reached only by a user
    # install, even one the user made) is no place the bot is in.
    core = await make_core()
    fake.install_for_user(world.alice.user.id)
    group = fake.add_group_dm([world.alice.user.id, world.bob.user.id])
    async with serving(fake, core):
        with pytest.raises(FakeDiscordError, match="not offered in PRIVATE_CHANNEL"):
            await fake.invoke_command(
                name="memory show", channel_id=group.id, user_id=world.alice.user.id
            )
        for channel_id in (world.general.id, fake.dm_channel_id(world.alice.user.id)):
            interaction = await fake.invoke_command(
                name="memory show", channel_id=channel_id, user_id=world.alice.user.id
            )
            shown = await fake.wait_for_response(interaction)
            assert shown.ephemeral and "Memory of" in (shown.embeds[0].get("title") or "")
    assert len(fake.interactions) == 2
