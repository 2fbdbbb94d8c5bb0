"""Facts: extracted in the summary call, about people kept guild-wide, updated by id when
they change (newest wins, history kept), shown to the person, gone with forget me."""

from __future__ import annotations

import json
from datetime import timedelta

from bots.commands import Actor, execute, parse_command
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, CoreFactory
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, default_answer

SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0}


def scripted(facts_by_call: list[list[dict[str, object]]]):  # type: ignore[no-untyped-def]
    calls = iter(facts_by_call)

    def answer(request: RecordedRequest) -> str:
        if request.purpose != "compact":
            return default_answer(request)
        data = json.loads(default_answer(request))
        data["facts"] = next(calls, [])
        return json.dumps(data)

    return answer


async def _talk(core, clock: ManualClock, scope: str, lines: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    for who, text in lines:
        clock.advance(timedelta(minutes=1))
        await core.pipeline.ingest(
            IncomingMessage(scope=scope, text=text, author=who, author_id=who.lower())
        )


async def test_people_facts_travel_the_guild_and_update_by_id(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = scripted(
        [
            [
                {"kind": "preference", "subject": "Alice", "text": "Alice likes green tea"},
                {"kind": "decision", "subject": None, "text": "Release on Friday"},
            ],
            [
                {
                    "id": "p1",
                    "kind": "preference",
                    "subject": "Alice",
                    "text": "Alice prefers coffee now",
                }
            ],
        ]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    chat = [
        ("Alice", "I really like green tea, every morning " * 8),
        ("Bob", "we ship friday " * 10),
    ]
    await _talk(core, clock, "discord:1:10", chat * 2)
    person = "discord:1:user:alice"
    assert [f.text for f in await core.repo.facts(person)] == ["Alice likes green tea"]
    assert [f.text for f in await core.repo.facts("discord:1:10")] == ["Release on Friday"]
    # In another channel of the same guild, Alice's fact is known; the model sees it by alias.
    await _talk(core, clock, "discord:1:20", [("Alice", "switched to coffee lately " * 8)] * 4)
    compact = fake_llm.of("compact")[-1].prompt_text
    assert "p1 [preference] Alice: Alice likes green tea" in compact
    [fact] = await core.repo.facts(person)
    assert fact.text == "Alice prefers coffee now"
    assert fact.history == ["Alice likes green tea"]
    assert fact.origin == "discord:1:10"
    # Alice's replies in any channel of the guild carry it; Bob's do not.
    mine = await core.pipeline.build_prompt(
        IncomingMessage(
            scope="discord:1:30", text="what do I drink?", author="Alice", author_id="alice"
        )
    )
    assert "Alice prefers coffee now" in mine.messages[0]["content"]
    his = await core.pipeline.build_prompt(
        IncomingMessage(
            scope="discord:1:30", text="what do I drink?", author="Bob", author_id="bob"
        )
    )
    assert "coffee" not in his.messages[0]["content"]
    # Another guild never sees it.
    other = await core.pipeline.build_prompt(
        IncomingMessage(
            scope="discord:2:30", text="what do I drink?", author="Alice", author_id="alice"
        )
    )
    assert "coffee" not in other.messages[0]["content"]
    # /memory show facts shows it to Alice only; forget me removes it.
    alice = Actor(user_id="alice", name="Alice", is_admin=False)
    shown = await execute(
        core.admin, scope="discord:1:10", command=parse_command("show facts"), actor=alice
    )
    assert "me:f1" in shown.text() and "Alice prefers coffee now" in shown.text()
    await execute(core.admin, scope="discord:1:10", command=parse_command("forget me"), actor=alice)
    assert await core.repo.facts(person) == []


async def test_nothing_learned_in_a_dm_leaves_it(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = scripted(
        [[{"kind": "profile", "subject": "Alice", "text": "Alice is moving to Osaka"}]]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await _talk(core, clock, "discord:dm:alice", [("Alice", "I am moving to Osaka soon " * 8)] * 4)
    assert [f.text for f in await core.repo.facts("discord:dm:alice")] == [
        "Alice is moving to Osaka"
    ]
    keys = [k async for k in core.store.client.scan_iter(match="*user:alice*")]
    assert keys == []


async def test_facts_survive_in_the_prompt_and_pinned_notes_are_not_rewritten(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = scripted(
        [[{"id": "f1", "kind": "note", "subject": None, "text": "standup moved to 11"}]]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    note = await core.admin.remember("console:c", "standup is at 10", by="Ada")
    await _talk(core, clock, "console:c", [("Bob", "maybe we move standup " * 10)] * 4)
    facts = {f.id: f for f in await core.repo.facts("console:c")}
    assert facts[note.id].text == "standup is at 10"  # pinned: only people change it
    assert any(f.text == "standup moved to 11" for f in facts.values())
