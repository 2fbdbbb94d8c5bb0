"""memorybot through the stricter fake Discord (issue 17): what the gateway never sends the
bot, the bot cannot remember."""

# The fixtures come from the Discord suite: their names are parameters here.
# ruff: noqa: F811

from __future__ import annotations

from tests.conftest import CoreFactory
from tests.e2e.test_discord_bot import (  # noqa: F401  (fixtures)
    World,
    fake,
    say,
    serving,
    texts_in,
    world,
)
from tests.fakes.discord_server import FakeDiscord, Permission, PermissionOverwrite


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
