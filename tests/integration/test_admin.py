"""Admin operations and the shared /memory command layer, on a real Redis."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from bots.commands import Actor, execute, parse_command
from memory_core.clock import ManualClock
from memory_core.errors import EmptyMessage, InputError, PermissionDenied
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, conversation, feed

ADMIN = Actor(user_id="1", name="Ada", is_admin=True)
MEMBER = Actor(user_id="2", name="Max", is_admin=False)


async def test_export_then_import_reproduces_the_memory(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await feed(core, clock, "discord:1:2", conversation(START, days=9, per_day=30))
    await core.admin.remember("discord:1:2", "launch on the 3rd", by="Ada")
    exported = await core.admin.export("discord:1:2")
    assert exported["format"] == "memorybot-export" and len(exported["log"]) == 270
    blob = json.loads(json.dumps(exported))  # through JSON, as a file would be
    count = await core.admin.import_("discord:1:99", blob)
    assert count == 270
    copy = await core.admin.export("discord:1:99")
    for part in ("log", "days", "weeks", "facts", "done"):
        assert copy[part] == exported[part], part
    for field in ("short", "mid", "long", "overview", "day"):
        assert copy["state"].get(field) == exported["state"].get(field)
    with pytest.raises(Exception, match="already has memory"):
        await core.admin.import_("discord:1:99", blob)
    assert await core.admin.import_("discord:1:99", blob, replace=True) == 270


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"format": "other"}, "not a memorybot export"),
        ({"format": "memorybot-export", "version": 9}, "unsupported export version"),
        ({"format": "memorybot-export", "version": 1, "log": [{"id": "x"}]}, "log[0]"),
        ({"format": "memorybot-export", "version": 1, "log": [{"ts": 1}]}, "log[0].id"),
    ],
)
async def test_import_rejects_bad_files_clearly(
    make_core: CoreFactory, data: dict, problem: str
) -> None:
    core = await make_core()
    with pytest.raises(InputError, match=problem.replace("[", r"\[")):
        await core.admin.import_("x", data)
    assert not await core.repo.reads.scope_exists("console:x")


async def test_pause_stops_remembering_and_resume_restarts(make_core: CoreFactory) -> None:
    core = await make_core()
    await core.intake.accept(IncomingMessage(scope="p", text="before", author="A"))
    await core.admin.set_paused("p", True)
    result = await core.intake.accept(IncomingMessage(scope="p", text="secret", author="A"))
    assert not result.stored
    await core.admin.set_paused("p", False)
    await core.intake.accept(IncomingMessage(scope="p", text="after", author="A"))
    assert [e.text for e in await core.repo.reads.all_entries("console:p")] == ["before", "after"]


async def test_a_paused_channel_keeps_its_reply_mode(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await core.admin.configure("discord:1:2", mode="off")
    await core.admin.set_paused("discord:1:2", True)
    mention = IncomingMessage(scope="discord:1:2", text="@bot hi", author="A", addressed=True)
    assert await converse(core, mention) is None, "mode off: a mention gets no answer"
    assert fake_llm.count("reply") == 0


async def test_reply_modes(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    core = await make_core()
    heard = IncomingMessage(scope="discord:1:2", text="chatting", author="A")
    asked = IncomingMessage(scope="discord:1:2", text="@bot hi", author="A", addressed=True)
    assert await converse(core, heard) is None
    assert (await converse(core, asked)).kind == "llm"  # type: ignore[union-attr]
    await core.admin.configure("discord:1:2", mode="all")
    assert await converse(core, heard) is not None
    await core.admin.configure("discord:1:2", mode="off")
    assert await converse(core, asked) is None
    dm = IncomingMessage(scope="discord:1:2", text="dm", author="A", direct=True)
    assert await converse(core, dm) is not None  # direct messages are always answered
    texts = [e.text for e in await core.repo.reads.all_entries("discord:1:2")]
    assert texts.count("chatting") == 2 and texts.count("@bot hi") == 2  # all remembered


async def test_config_validation(make_core: CoreFactory) -> None:
    core = await make_core()
    assert await core.admin.configure("c", mode="all", timezone="Asia/Tokyo", language="ja") == {
        "mode": "all",
        "tz": "Asia/Tokyo",
        "lang": "ja",
    }
    with pytest.raises(InputError, match="IANA"):
        await core.admin.configure("c", timezone="Nowhere/City")
    with pytest.raises(InputError, match="mode must be"):
        await core.admin.configure("c", mode="sometimes")
    with pytest.raises(InputError, match="nothing to change"):
        await core.admin.configure("c")


async def test_bad_messages(make_core: CoreFactory) -> None:
    core = await make_core(memory={"max_message_chars": 200, "new_message_tokens": 60})
    with pytest.raises(EmptyMessage):
        await core.intake.accept(IncomingMessage(scope="b", text="   \n ", author="A"))
    long = "word " * 5000
    result = await core.intake.accept(IncomingMessage(scope="b", text=long, author="A"))
    assert result.truncated
    stored = (await core.repo.reads.all_entries("console:b"))[0].text
    assert len(stored) < 300
    assert f"truncated: {len(long.strip()) - 200} more characters" in stored
    prompt = await core.replier.build_prompt(IncomingMessage(scope="b", text=long, author="A"))
    assert prompt.tokens <= core.settings.memory.budget_tokens
    assert prompt.sections["new_message"] <= 60


async def test_ingest_sends_one_script_and_one_index_update(make_core: CoreFactory) -> None:
    """The hot path is EVALSHA + ZADD, pipelined: no reads before or after."""
    core = await make_core()
    await core.intake.accept(IncomingMessage(scope="r", text="warm up", author="A"))

    async def calls() -> dict[str, int]:
        stats = await core.store.client.info("commandstats")
        return {name: int(value["calls"]) for name, value in stats.items()}

    before = await calls()
    await core.intake.accept(IncomingMessage(scope="r", text="measured", author="A"))
    after = await calls()
    delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert delta.pop("cmdstat_evalsha") == 1
    assert delta.pop("cmdstat_zadd") == 1
    delta.pop("cmdstat_info", None)
    # What is left ran inside the script (one round trip), none of it a scope read.
    assert not {"cmdstat_hgetall", "cmdstat_xrange", "cmdstat_xrevrange"} & set(delta)


async def test_commands_check_permissions_and_confirm(make_core: CoreFactory) -> None:
    core = await make_core()
    await core.intake.accept(
        IncomingMessage(scope="discord:1:2", text="hello", author="Max", author_id="2")
    )
    with pytest.raises(PermissionDenied, match="Only admins"):
        await execute(
            core.admin, scope="discord:1:2", command=parse_command("forget all"), actor=MEMBER
        )
    asked = await execute(
        core.admin, scope="discord:1:2", command=parse_command("forget all"), actor=ADMIN
    )
    assert asked.needs_confirm and await core.repo.reads.log_length("discord:1:2") == 1
    done = await execute(
        core.admin, scope="discord:1:2", command=parse_command("forget all confirm"), actor=ADMIN
    )
    assert "Forgot everything" in done.title
    assert not await core.repo.reads.scope_exists("discord:1:2")
    shown = await execute(
        core.admin, scope="discord:1:2", command=parse_command("show"), actor=MEMBER, language="ja"
    )
    assert "まだ何も記憶していません" in shown.text()
    exported = await execute(
        core.admin, scope="discord:1:2", command=parse_command("export"), actor=ADMIN
    )
    assert exported.file is not None and json.loads(exported.file[1])["scope"] == "discord:1:2"


async def test_remember_pins_a_note_with_provenance(make_core: CoreFactory) -> None:
    clock = ManualClock(START + timedelta(hours=3))
    core = await make_core(clock=clock)
    fact = await core.admin.remember("n", "  standup   is at 10:00 ", by="Ada")
    assert fact.id == "f1" and fact.text == "standup is at 10:00" and fact.pinned
    assert fact.by == "Ada" and fact.ts.startswith("2025-08-11T12:00")
    with pytest.raises(InputError):
        await core.admin.remember("n", "x" * 600)
    prompt = await core.replier.build_prompt(IncomingMessage(scope="n", text="when?", author="B"))
    assert "standup is at 10:00" in prompt.messages[0]["content"]
