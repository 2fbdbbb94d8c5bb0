"""A forget holds against the past, learned from an export with ``memorybot learn`` (a real
process, a real Redis): a forgotten text is not learned from older messages that were never
in memory, and a person who asked to be forgotten everywhere does not come back through an
export of their DM with the bot, while what they say to it afterwards is remembered."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.clock import ManualClock
from memory_core.scopes import Scope
from tests.discord_world import World, command, serving
from tests.fakes.discord import FakeDiscord
from tests.helpers import CLI, CoreFactory, scope_values

# Within the raw messages' retention (past it, a place keeps only its day records).
DAY = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0) - timedelta(days=6)
SECRET = "zebrafalcon42"


def author(ident: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": ident, "name": name, "nickname": None, "isBot": bot}


def dce(
    path: Path,
    guild: Mapping[str, str],
    channel: Mapping[str, str],
    messages: list[tuple[str, dict[str, Any], str, int]],
) -> Path:
    """A DiscordChatExporter JSON file: (id, author, text, hours after DAY) per message."""
    said: list[dict[str, Any]] = [
        {
            "id": mid,
            "type": "Default",
            "timestamp": (DAY + timedelta(hours=hours)).astimezone().isoformat(),
            "timestampEdited": None,
            "content": text,
            "author": who,
            "attachments": [],
        }
        for mid, who, text, hours in messages
    ]
    path.write_text(json.dumps({"guild": guild, "channel": channel, "messages": said}))
    return path


async def test_a_forgotten_text_is_not_learned_from_an_older_export(
    cli: CLI, clean_redis: str, tmp_path: Path, make_core: CoreFactory
) -> None:
    place = "discord:1:2"
    alice, bob = author("11", "alice"), author("12", "bob")
    export = dce(
        tmp_path / "general.json",
        {"id": "1", "name": "Memory Lab"},
        {"id": "2", "type": "GuildTextChat", "name": "general"},
        [
            ("100", alice, "we picked Postgres", 0),
            ("101", alice, f"the launch code is {SECRET}", 1),
            ("102", bob, "for billing", 2),
            ("103", bob, "ＺＥＢＲＡＦＡＬＣＯＮ４２, said twice", 3),  # full width, upper case
        ],
    )
    env = {"REDIS_URL": clean_redis}
    # Nothing in memory holds it yet: the forget is of what a learn could bring.
    forget = await cli("memory", "forget", "ZebraFalcon42", "--scope", place, **env)
    assert forget.code == 0, forget.err

    learned = await cli("learn", "discord-export", str(export), "--public", "--yes", **env)
    assert learned.code == 0, learned.err
    assert "2 new" in learned.out and "2 forgotten here" in learned.out, learned.out
    shown = await cli("memory", "show", "--scope", place, **env)
    assert shown.code == 0, shown.err
    assert "we picked Postgres" in shown.out and "for billing" in shown.out, shown.out
    assert SECRET not in shown.out.casefold() and "ＺＥＢＲＡ" not in shown.out

    core = await make_core(offline=True)  # (to read what is stored, not to write)
    assert [e.text for e in await core.repo.reads.all_entries(place)] == [
        "we picked Postgres",
        "for billing",
    ]
    values = await scope_values(core, place, memory_only=True)
    assert not [v for v in values if SECRET in v.casefold() or "ＺＥＢＲＡ" in v], values


@pytest.mark.fake("discord")
async def test_forget_me_everywhere_holds_against_a_dm_export_and_not_for_the_future(
    fake: FakeDiscord,
    world: World,
    make_core: CoreFactory,
    cli: CLI,
    clean_redis: str,
    tmp_path: Path,
) -> None:
    alice_id, bot_id = str(world.alice.user.id), str(fake.bot_user.id)
    dm = Scope.discord_dm(alice_id).key
    export = dce(
        tmp_path / "dm.json",
        {"id": "0", "name": "Direct Messages"},
        {
            "id": str(fake.dm_channel_id(world.alice.user.id)),
            "type": "DirectTextChat",
            "name": "alice",
        },
        [
            ("900001", author(alice_id, "alice"), "my new address is 12 Elm Street", 0),
            ("900002", author(bot_id, fake.bot_user.name, bot=True), "Noted: 12 Elm Street", 1),
            ("900003", author(alice_id, "alice"), "and my doctor is Dr Okafor", 2),
        ],
    )
    core = await make_core(clock=ManualClock(datetime.now(UTC)))
    async with serving(fake, core) as bot:
        _, done = await command(
            fake, "memory forget me", world.general, world.alice, everywhere=True
        )
        assert (done.content or "").startswith("Forgot you (alice)"), done

        learn = ("learn", "discord-export", str(export), "--bot-user-id", bot_id, "--yes")
        learned = await cli(*learn, REDIS_URL=clean_redis)
        assert learned.code == 0, learned.err
        assert f"{dm} (discord-export)" in learned.out, learned.out
        assert "0 new" in learned.out and "3 forgotten here" in learned.out, learned.out
        assert await core.repo.reads.all_entries(dm) == []

        # What she says to the bot from now on is remembered as ever.
        later = await fake.send_dm(user_id=world.alice.user.id, content="call me Ali from now on")
        await bot.handled(later)
        # Learned again now that the DM has a memory the past would go before: still out.
        again = await cli(*learn, REDIS_URL=clean_redis)
        assert again.code == 0, again.err
        assert "3 forgotten here" in again.out, again.out

    texts = [e.text for e in await core.repo.reads.all_entries(dm) if e.role == "user"]
    assert texts == ["call me Ali from now on"]
    shown = await cli("memory", "show", "--scope", dm, REDIS_URL=clean_redis)
    assert shown.code == 0, shown.err
    assert "call me Ali from now on" in shown.out, shown.out
    assert "Elm Street" not in shown.out and "Okafor" not in shown.out
    values = await scope_values(core, dm, memory_only=True)
    assert not [v for v in values if "Elm Street" in v or "Okafor" in v], values
