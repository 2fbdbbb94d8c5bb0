"""A forwarded message on Discord is kept as what people read in it: its text with mentions
by name, its embeds', an app's Components V2 text, and where it was forwarded from. The
unmodified discord.py client against the fake Discord (which sends forwards as Discord
documents them: ``message_reference`` of type 1 with the source's channel and server, a
``message_snapshots`` entry with its content, embeds, components and mentions)."""

from __future__ import annotations

import pytest

from tests.discord_world import World, serving
from tests.fakes.discord import FakeDiscord
from tests.helpers import CoreFactory

pytestmark = pytest.mark.fake("discord")


async def test_a_forward_keeps_names_embeds_components_and_where_it_came_from(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    deploybot = fake.add_member(world.guild.id, name="deploybot", bot=True)
    alice, bob, carol = world.alice.user.id, world.bob.user.id, world.carol.user.id
    async with serving(fake, core) as bot:
        said = await fake.send_message(
            channel_id=world.random.id,
            author_id=bob,
            content=f"hand the keys to <@{alice}> in <#{world.general.id}>",
            embeds=[{"title": "Runbook", "description": "step 1: unlock", "fields": []}],
        )
        await bot.handled(said)
        card = fake.app_message(
            world.random.id,
            author_id=deploybot.user.id,
            components=[
                {
                    "type": 17,
                    "components": [
                        {"type": 10, "content": "## Release 4.2"},
                        {
                            "type": 9,
                            "components": [
                                {"type": 10, "content": f"ships Friday, owner <@{bob}>"}
                            ],
                            "accessory": {
                                "type": 2,
                                "style": 5,
                                "label": "Open",
                                "url": "https://example.com/4.2",
                            },
                        },
                    ],
                }
            ],
        )
        forwards = []
        for source in (said, card):
            forward = await fake.forward_message(
                message_id=int(source["id"]), to_channel_id=world.general.id, author_id=alice
            )
            await bot.handled(forward)
            forwards.append(forward)
        # From another server the bot is in, into Carol's DM with the bot.
        elsewhere = await fake.send_message(
            channel_id=world.other_channel.id, author_id=carol, content="the venue is Hall B"
        )
        await bot.handled(elsewhere)
        to_dm = await fake.forward_message(
            message_id=int(elsewhere["id"]),
            to_channel_id=fake.dm_channel_id(carol),
            author_id=carol,
        )
        await bot.handled(to_dm)
    general = {
        e.platform_id: e for e in await core.repo.reads.all_entries(world.scope(world.general))
    }
    mentions, v2 = (general[str(f["id"])] for f in forwards)
    assert mentions.author == "alice"
    assert mentions.text == (
        "[forwarded from #random, its author not given] hand the keys to @alice in #general"
        "\nRunbook\nstep 1: unlock"
    )
    assert v2.text == (
        "[forwarded from #random, its author not given] ## Release 4.2\nships Friday, owner @bob"
    )
    dm = await core.repo.reads.all_entries(f"discord:dm:{carol}")
    [in_dm] = [e for e in dm if e.platform_id == str(to_dm["id"])]
    assert in_dm.text == (
        "[forwarded from #general (Elsewhere), its author not given] the venue is Hall B"
    )
