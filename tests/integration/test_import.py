"""An edited export, or a state hash edited by hand, cannot bring another guild's memory into
a prompt: ``memory import`` checks the file like live input (the parent through the same
boundary check as a live thread's parent) and ``build_prompt`` re-checks the stored parent."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from memory_core.models import IncomingMessage
from tests.conftest import CoreFactory
from tests.helpers import scope_values, spawn_memorybot

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
    await core.pipeline.ingest(IncomingMessage(scope=OTHER_GUILD, text="hi", author="Eve"))
    await core.admin.edit_tier(OTHER_GUILD, "overview", f"The {OTHER_WORDS} plan a merger.")
    return core


async def test_an_import_naming_another_guilds_parent_is_refused_by_the_cli(
    make_core: CoreFactory, clean_redis: str, tmp_path: Path
) -> None:
    """The issue's case: an export edited to name discord:200:1 as parent, imported into
    discord:100:3, through ``memorybot memory import`` as a user runs it."""
    core = await other_guild_with_an_overview(make_core)
    await core.pipeline.ingest(IncomingMessage(scope=SOURCE, text="our standup", author="Ada"))
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
    assert OTHER_GUILD in problem[0]
    assert TARGET in problem[0], "scopes are printed as they are (rich made :100: an emoji)"
    assert await scope_values(core, TARGET) == [], "nothing is written"
    assert not await core.repo.scope_exists(TARGET)

    ask = ("ask", "what do we plan?", "--scope", TARGET, "--dry-run", "--json")
    code, out, err = await memorybot(tmp_path, *ask, redis_url=clean_redis)
    assert code == 0, err
    prompt = json.loads(out)
    assert "zanzibar" not in json.dumps(prompt["messages"])
    assert "parent" not in prompt["sections"]


async def test_an_import_into_the_same_guild_keeps_its_parent(make_core: CoreFactory) -> None:
    """The check refuses only what live input refuses: a thread's parent channel of the
    same guild comes through the import and is read by the prompt."""
    core = await make_core(offline=True)
    await core.admin.edit_tier(SOURCE, "overview", "The channel overview of guild 100.")
    await core.pipeline.ingest(
        IncomingMessage(scope="discord:100:7", text="q", author="Ada", parent_scope=SOURCE)
    )
    export = json.loads(json.dumps(await core.admin.export("discord:100:7")))
    assert export["state"]["parent"] == SOURCE
    await core.admin.import_(TARGET, export)
    assert (await core.repo.state(TARGET)).parent == SOURCE
    prompt = await core.pipeline.build_prompt(IncomingMessage(scope=TARGET, text="?", author="A"))
    assert "channel overview of guild 100" in json.dumps(prompt.messages)


async def test_a_parent_set_by_hand_in_redis_is_not_read_by_the_prompt(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A state hash whose parent was HSET by hand to another guild's channel: build_prompt
    ignores it, and says so in a warning naming the scope."""
    core = await other_guild_with_an_overview(make_core)
    await core.pipeline.ingest(IncomingMessage(scope=TARGET, text="our standup", author="Ada"))
    client: Any = core.store.client
    await client.hset(core.repo.k(TARGET).state, "parent", OTHER_GUILD)

    with caplog.at_level(logging.WARNING, logger="memory_core.service.pipeline"):
        prompt = await core.pipeline.build_prompt(
            IncomingMessage(scope=TARGET, text="what do we plan?", author="Ada")
        )
    assert "zanzibar" not in json.dumps(prompt.messages)
    assert "parent" not in prompt.sections
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(TARGET in w and OTHER_GUILD in w for w in warnings), warnings


async def test_a_parent_that_is_not_a_scope_is_ignored_too(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage in the hash (here 3 MB of it) is a warning, cut short, not a failed reply."""
    core = await other_guild_with_an_overview(make_core)
    await core.pipeline.ingest(IncomingMessage(scope=TARGET, text="our standup", author="Ada"))
    client: Any = core.store.client
    await client.hset(core.repo.k(TARGET).state, "parent", "{x} " + "y" * 3_000_000)
    with caplog.at_level(logging.WARNING, logger="memory_core.service.pipeline"):
        prompt = await core.pipeline.build_prompt(
            IncomingMessage(scope=TARGET, text="what do we plan?", author="Ada")
        )
    assert "parent" not in prompt.sections
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all(len(w) < 1000 for w in warnings), [len(w) for w in warnings]
    assert any(TARGET in w for w in warnings)
