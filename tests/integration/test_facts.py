"""Facts: extracted in the summary call, about people kept guild-wide, updated by id when
they change (newest wins, history kept), shown to the person, gone with forget me."""

from __future__ import annotations

import json
from datetime import timedelta

from bots.commands import Actor, execute, parse_command
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, default_answer
from tests.helpers import START, CoreFactory

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


async def _talk(  # type: ignore[no-untyped-def]
    core, clock: ManualClock, scope: str, lines: list[tuple[str, str]], *, public: bool = False
) -> None:
    """``lines`` as (name, text); the user id is the lower-cased name unless given as
    "Name#id"."""
    for who, text in lines:
        clock.advance(timedelta(minutes=1))
        name, _, user_id = who.partition("#")
        await core.intake.accept(
            IncomingMessage(
                scope=scope,
                text=text,
                author=name,
                author_id=user_id or name.lower(),
                audience=Audience.SERVER if public else Audience.PRIVATE,
            )
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
    await _talk(core, clock, "discord:1:10", chat * 2, public=True)
    person = "discord:1:user:alice"
    assert [f.text for f in await core.repo.reads.facts(person)] == ["Alice likes green tea"]
    assert [f.text for f in await core.repo.reads.facts("discord:1:10")] == ["Release on Friday"]
    # In another channel of the same guild, Alice's fact is known; the model sees it by alias.
    await _talk(
        core, clock, "discord:1:20", [("Alice", "switched to coffee lately " * 8)] * 4, public=True
    )
    compact = fake_llm.of("compact")[-1].prompt_text
    assert "p1 [preference] Alice: Alice likes green tea" in compact
    [fact] = await core.repo.reads.facts(person)
    assert fact.text == "Alice prefers coffee now"
    # Learned again in #20: it is #20's now, with nothing of what #10 said (forgetting
    # either channel leaves nothing of it behind).
    assert fact.history == []
    assert fact.origin == "discord:1:20"
    # Alice's replies in any channel of the guild carry it; Bob's do not.
    mine = await core.replier.build_prompt(
        IncomingMessage(
            scope="discord:1:30", text="what do I drink?", author="Alice", author_id="alice"
        )
    )
    assert "Alice prefers coffee now" in mine.messages[0]["content"]
    his = await core.replier.build_prompt(
        IncomingMessage(
            scope="discord:1:30", text="what do I drink?", author="Bob", author_id="bob"
        )
    )
    assert "coffee" not in his.messages[0]["content"]
    # Another guild never sees it.
    other = await core.replier.build_prompt(
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
    assert await core.repo.reads.facts(person) == []


async def test_a_fact_learned_in_a_private_place_stays_there(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Said in a channel the whole guild cannot see: the fact about Alice is the channel's,
    shown in its prompts only, never in another channel's, and not offered to update her
    guild-wide facts."""
    fake_llm.responder = scripted(
        [
            [{"kind": "preference", "subject": "Alice", "text": "Alice likes green tea"}],
            [{"kind": "profile", "subject": "Alice", "text": "Alice is pregnant"}],
        ]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await _talk(
        core, clock, "discord:1:10", [("Alice", "green tea every morning " * 8)] * 4, public=True
    )
    await _talk(core, clock, "discord:1:99", [("Alice", "between us: I am pregnant " * 8)] * 4)
    person = "discord:1:user:alice"
    assert [f.text for f in await core.repo.reads.facts(person)] == ["Alice likes green tea"]
    [secret] = await core.repo.reads.facts("discord:1:99")
    assert (secret.text, secret.subject_id, secret.shared) == ("Alice is pregnant", "alice", False)
    assert "p1" not in fake_llm.of("compact")[-1].prompt_text  # her shared facts not offered
    here = await core.replier.build_prompt(
        IncomingMessage(scope="discord:1:99", text="tea?", author="Alice", author_id="alice")
    )
    assert "pregnant" in here.messages[0]["content"]
    for scope in ("discord:1:10", "discord:1:30"):
        elsewhere = await core.replier.build_prompt(
            IncomingMessage(scope=scope, text="tea?", author="Alice", author_id="alice")
        )
        assert "pregnant" not in json.dumps(elsewhere.messages)
        assert "green tea" in elsewhere.messages[0]["content"]


async def test_facts_follow_a_user_id_never_a_display_name(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Two members called Sam speak in one public channel: a fact about "Sam" cannot say
    which of them it is about, so it follows neither; each Sam's prompts elsewhere stay clean."""
    fake_llm.responder = scripted(
        [[{"kind": "preference", "subject": "Sam", "text": "Sam wants this kept between us"}]]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    lines = [("Sam#u1", "keep this between us please " * 8), ("Sam#u2", "sure thing " * 10)]
    await _talk(core, clock, "discord:1:10", lines * 2, public=True)
    assert await core.repo.reads.facts("discord:1:user:u1") == []
    assert await core.repo.reads.facts("discord:1:user:u2") == []
    [fact] = await core.repo.reads.facts("discord:1:10")
    assert fact.subject_id == ""
    for user_id in ("u1", "u2"):
        prompt = await core.replier.build_prompt(
            IncomingMessage(scope="discord:1:30", text="hi", author="Sam", author_id=user_id)
        )
        assert "between us" not in json.dumps(prompt.messages)


async def test_nothing_learned_in_a_dm_leaves_it(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = scripted(
        [[{"kind": "profile", "subject": "Alice", "text": "Alice is moving to Osaka"}]]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await _talk(core, clock, "discord:dm:alice", [("Alice", "I am moving to Osaka soon " * 8)] * 4)
    assert [f.text for f in await core.repo.reads.facts("discord:dm:alice")] == [
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
    facts = {f.id: f for f in await core.repo.reads.facts("console:c")}
    assert facts[note.id].text == "standup is at 10"  # pinned: only people change it
    assert any(f.text == "standup moved to 11" for f in facts.values())


async def test_forget_reaches_person_facts_after_retention_and_a_platform_delete(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """Where a fact about a person came from is recorded (the scope keeps a record of the
    people it taught, each fact its source messages): forget finds the fact when its raw
    messages are gone with retention, and a message deleted on the platform takes the
    facts drawn from it along."""
    fake_llm.responder = scripted(
        [
            [{"kind": "preference", "subject": "Alice", "text": "Alice likes hojicha"}],
            [{"kind": "profile", "subject": "Bob", "text": "Bob lives in Sapporo"}],
        ]
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    scope, alice, bob = "discord:1:10", "discord:1:user:alice", "discord:1:user:bob"
    await _talk(core, clock, scope, [("Alice", "hojicha every afternoon " * 8)] * 4, public=True)
    assert [f.text for f in await core.repo.reads.facts(alice)] == ["Alice likes hojicha"]
    # Retention: the raw messages are gone, the fact about Alice is not.
    await core.repo.writes.trim_log_before(scope, f"{10**15}-0")
    assert await core.repo.reads.log_length(scope) == 0
    report = await core.admin.text.forget_text(scope, "hojicha")
    assert report.facts == 1 and await core.repo.reads.facts(alice) == []
    # A platform delete: the fact drawn from the deleted message goes with it.
    for i in range(4):
        clock.advance(timedelta(minutes=1))
        await core.intake.accept(
            IncomingMessage(
                scope=scope,
                text="I moved to Sapporo last spring " * 6,
                author="Bob",
                author_id="bob",
                platform_id=f"m{i}",
                audience=Audience.SERVER,
            )
        )
    [fact] = await core.repo.reads.facts(bob)
    assert fact.message_ids, "provenance recorded"
    assert (
        await core.admin.messages.forget_message(scope, "m0") == 1
    )  # one of the messages it came from
    assert await core.repo.reads.facts(bob) == []
