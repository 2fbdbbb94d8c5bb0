"""An edited export, or a state hash edited by hand, cannot bring another guild's memory into
a prompt: a thread's channel is in its scope's name (the tree), never in data; ``memory
import`` refuses an export whose state names a parent, and ``build_prompt`` reads no parent
from the state hash."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from memory_core.models import IncomingMessage
from tests.helpers import CoreFactory, scope_values, spawn_memorybot

OTHER_GUILD = "discord:200:1"
OTHER_WORDS = "zanzibar quorum of the other guild"
SOURCE = "discord:100:1"
TARGET = "discord:100:3"


async def memorybot(home: Path, *args: str, redis_url: str) -> tuple[int, str, str]:
    proc = await spawn_memorybot(home, *args, env={"REDIS_URL": redis_url})
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def other_guild_with_an_overview(make_core: CoreFactory) -> Any:
    core = await make_core(offline=True)
    await core.intake.accept(IncomingMessage(scope=OTHER_GUILD, text="hi", author="Eve"))
    await core.admin.edit_tier(OTHER_GUILD, "overview", f"The {OTHER_WORDS} plan a merger.")
    return core


async def test_an_import_naming_another_guilds_parent_is_refused_by_the_cli(
    make_core: CoreFactory, clean_redis: str, tmp_path: Path
) -> None:
    """An export edited to name discord:200:1 as parent, imported into discord:100:3,
    through ``memorybot memory import`` as a user runs it: a parent is no state field (a
    thread's channel is in its name), so the file is refused, naming the field."""
    core = await other_guild_with_an_overview(make_core)
    await core.intake.accept(IncomingMessage(scope=SOURCE, text="our standup", author="Ada"))
    export = await core.admin.export(SOURCE)
    export["state"]["parent"] = OTHER_GUILD
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(export), encoding="utf-8")

    code, out, err = await memorybot(
        tmp_path, "memory", "import", str(path), "--scope", TARGET, redis_url=clean_redis
    )
    assert code == 1, out + err
    problem = [line for line in err.splitlines() if "state.parent" in line]
    assert problem, err
    assert "remove it" in problem[0]
    assert await scope_values(core, TARGET) == [], "nothing is written"
    assert not await core.repo.reads.scope_exists(TARGET)

    ask = ("ask", "what do we plan?", "--scope", TARGET, "--dry-run", "--json")
    code, out, err = await memorybot(tmp_path, *ask, redis_url=clean_redis)
    assert code == 0, err
    prompt = json.loads(out)
    assert "zanzibar" not in json.dumps(prompt["messages"])
    assert "parent" not in prompt["sections"]


async def test_a_thread_imported_into_a_thread_of_the_same_channel_reads_that_channel(
    make_core: CoreFactory,
) -> None:
    """A thread's parent is its scope's channel: an export of one thread imported into
    another thread of the channel reads the channel's overview, as live."""
    core = await make_core(offline=True)
    await core.admin.edit_tier(SOURCE, "overview", "The channel overview of guild 100.")
    await core.intake.accept(IncomingMessage(scope=f"{SOURCE}:7", text="q", author="Ada"))
    export = json.loads(json.dumps(await core.admin.export(f"{SOURCE}:7")))
    await core.admin.import_(f"{SOURCE}:8", export)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope=f"{SOURCE}:8", text="?", author="A")
    )
    assert "channel overview of guild 100" in json.dumps(prompt.messages)


@pytest.mark.parametrize("value", [OTHER_GUILD, "{x} " + "y" * 3_000_000])
async def test_a_parent_set_by_hand_in_redis_is_not_read_by_the_prompt(
    make_core: CoreFactory, value: str
) -> None:
    """A state hash whose "parent" was HSET by hand (another guild's channel, 3 MB of
    garbage): nothing reads it; the prompt has no parent section and no other guild."""
    core = await other_guild_with_an_overview(make_core)
    await core.intake.accept(IncomingMessage(scope=TARGET, text="our standup", author="Ada"))
    client: Any = core.store.client
    await client.hset(core.repo.k(TARGET).state, "parent", value)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope=TARGET, text="what do we plan?", author="Ada")
    )
    assert "zanzibar" not in json.dumps(prompt.messages)
    assert "parent" not in prompt.sections
