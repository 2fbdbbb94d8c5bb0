"""Facts learned without a model, on a real Redis through the pipeline: offline, and while a
daily budget stops model calls, maintenance's compaction learns what people state plainly
("I'm vegetarian", 猫の名前はモチです, "we decided to ship on Friday") and nothing else; the facts
go where a model's would (a public speaker's person scope, the channel), show in /memory show
as the rules', and every forget reaches them. A model run learns only what the model says."""

from __future__ import annotations

from datetime import timedelta

from bots.commands import Actor, execute, parse_command
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience
from memory_core.service.past import PastMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, ListSource

CHANNEL = "discord:1:10"
SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0}
ALICE = Actor(user_id="alice", name="Alice", is_admin=False)
DAN = Actor(user_id="dan", name="Dan", is_admin=False)
ADMIN = Actor(user_id="ada", name="Ada", is_admin=True)
CHAT = [
    ("Alice", "Morning all! I'm vegetarian. My cat is called Mochi."),
    ("Bob", "Nice. Am I vegetarian? No idea, ha."),
    ("Carol", "Bob said he is vegetarian"),
    ("Bob", "I'm not vegetarian, I just like salad"),
    ("Alice", "if I were vegan I would miss cheese"),
    ("Bob", "ok, we decided to ship on Friday"),
    ("Alice", "I live in Osaka"),
    ("Dan", "私はベジタリアンです。猫の名前はモチです。"),
    ("Dan", "大阪に住んでいます"),
    ("Carol", "sounds good, see you all on Friday then"),
]


async def talk(
    core: Core, clock: ManualClock, scope: str, lines: list[tuple[str, str]], *, public: bool
) -> None:
    """``lines`` as (name, text), one a minute; the user id is the lower-cased name."""
    for name, text in lines:
        clock.advance(timedelta(minutes=1))
        await core.intake.accept(
            IncomingMessage(
                scope=scope,
                text=text,
                author=name,
                author_id=name.lower(),
                platform_id=f"m{clock.now().timestamp():.0f}",
                audience=Audience.SERVER if public else Audience.PRIVATE,
            )
        )
    await core.drain()


async def close_the_day(core: Core, clock: ManualClock, scope: str) -> None:
    """The next local day: maintenance compacts what is left of the day and closes it."""
    clock.advance(timedelta(days=1))
    await core.maintenance.maintain(scope)


async def run(core: Core, text: str, actor: Actor, scope: str = CHANNEL) -> str:
    result = await execute(core.admin, scope=scope, command=parse_command(text), actor=actor)
    return result.text()


async def texts(core: Core, scope: str) -> set[str]:
    return {fact.text for fact in await core.repo.reads.facts(scope)}


async def test_offline_facts_are_learned_routed_shown_and_forgotten_like_the_models(
    make_core: CoreFactory,
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory=SMALL)
    await talk(core, clock, CHANNEL, CHAT, public=True)
    await close_the_day(core, clock, CHANNEL)

    alice, dan = "discord:1:user:alice", "discord:1:user:dan"
    assert await texts(core, alice) == {
        "Alice is vegetarian",
        "Alice's cat is called Mochi",
        "Alice lives in Osaka",
    }
    assert await texts(core, dan) == {
        "Danはベジタリアンです",
        "Danの猫の名前はモチです",
        "Danは大阪に住んでいます",
    }
    # The question, the negation, the condition and the hearsay taught nothing.
    assert await texts(core, "discord:1:user:bob") == set()
    assert await texts(core, "discord:1:user:carol") == set()
    [decision] = await core.repo.reads.facts(CHANNEL)
    assert (decision.kind, decision.text, decision.subject_id) == (
        "decision",
        "Decided to ship on Friday",
        "",
    )
    said = {e.id: e.text for e in await core.repo.reads.all_entries(CHANNEL)}
    for fact in [decision, *await core.repo.reads.facts(alice), *await core.repo.reads.facts(dan)]:
        assert fact.source == "rules" and fact.origin == CHANNEL
        assert fact.message_ids and all(i in said for i in fact.message_ids)
    vegetarian = next(f for f in await core.repo.reads.facts(alice) if "vegetarian" in f.text)
    assert (vegetarian.kind, vegetarian.subject_id, vegetarian.shared) == ("profile", "alice", True)
    assert [said[i] for i in vegetarian.message_ids] == [CHAT[0][1]]

    # /memory show facts: the channel's, and to Alice hers, each marked as the rules'.
    shown = await run(core, "show facts", ALICE)
    assert "Decided to ship on Friday (2025-08-11) (learned without a model" in shown
    assert "`me:" in shown and "Alice lives in Osaka" in shown and "Dan" not in shown
    # A reply to Alice elsewhere in the guild knows her, as with a model's facts.
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="discord:1:30", text="dinner?", author="Alice", author_id="alice")
    )
    assert "Alice is vegetarian" in prompt.messages[0]["content"]

    # forget me, forget <text>, forget fact: as for every fact.
    assert "3 facts" in await run(core, "forget me", ALICE)
    assert await texts(core, alice) == set()
    await run(core, "forget Friday", ADMIN)
    assert await core.repo.reads.facts(CHANNEL) == []
    cat = next(f for f in await core.repo.reads.facts(dan) if "モチ" in f.text)
    await run(core, f"forget fact me:{cat.id}", DAN)
    assert await texts(core, dan) == {"Danはベジタリアンです", "Danは大阪に住んでいます"}


async def test_said_again_in_a_private_channel_it_is_one_fact_that_stays_there(
    make_core: CoreFactory,
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory=SMALL)
    private = "discord:1:99"
    day = [("Alice", "btw I'm vegetarian."), ("Bob", "noted, thanks " * 6)] * 2
    await talk(core, clock, private, day, public=False)
    await close_the_day(core, clock, private)
    await talk(core, clock, private, day[:2], public=False)
    await close_the_day(core, clock, private)
    [fact] = await core.repo.reads.facts(private)
    assert (fact.text, fact.subject_id, fact.shared) == ("Alice is vegetarian", "alice", False)
    assert len(fact.message_ids) == 3  # said three times, learned once
    assert fact.seen[:10] > fact.ts[:10]  # confirmed the day after it was learned
    assert await core.repo.reads.facts("discord:1:user:alice") == []
    # A message deleted on the platform takes the fact it said along.
    for platform_id in sorted({e.platform_id for e in await core.repo.reads.all_entries(private)}):
        await core.admin.messages.forget_message(private, platform_id)
    assert await core.repo.reads.facts(private) == []


async def test_a_budget_stopped_run_learns_them_and_a_model_run_only_what_the_model_says(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL, budget={"daily_tokens": 10})
    clock.set(START - timedelta(hours=1))
    spent = await converse(
        core,
        IncomingMessage(scope=CHANNEL, text="hello", author="Ada", author_id="ada", direct=True),
    )
    assert spent is not None and spent.kind == "llm"
    await talk(core, clock, CHANNEL, CHAT, public=True)
    assert fake_llm.count("compact") == 0 and core.summarizer.stats.forced > 0
    assert "Alice is vegetarian" in await texts(core, "discord:1:user:alice")
    assert await texts(core, CHANNEL) == {"Decided to ship on Friday"}

    # The next day the model is back: it found no fact (the fake's answer), so none is
    # learned, whatever was said.
    clock.set(START + timedelta(days=1, hours=1))
    await core.maintenance.maintain(CHANNEL)
    before = await texts(core, "discord:1:user:erin")
    await talk(core, clock, CHANNEL, [("Erin", "I love green tea. " * 6)] * 3, public=True)
    await close_the_day(core, clock, CHANNEL)
    assert fake_llm.count("compact") > 0
    assert before == set() and await texts(core, "discord:1:user:erin") == set()


async def test_a_channels_past_learned_offline_brings_its_stated_facts_once(
    make_core: CoreFactory,
) -> None:
    """Learning a past summarises it day by day, extractively offline: what was stated
    plainly on several of its days is learned once, dated when it was said."""
    now = START + timedelta(days=10)
    core = await make_core(clock=ManualClock(now), offline=True)
    past = [
        PastMessage(
            scope=CHANNEL,
            platform_id=f"p{day}{n}",
            ts=START + timedelta(days=day, minutes=n),
            text=text,
            author=name,
            author_id=name.lower(),
            audience=Audience.SERVER,
        )
        for day in (0, 3)
        for n, (name, text) in enumerate(CHAT)
    ]
    assert (await core.learner.read(ListSource(CHANNEL, past), days=30)).new == len(past)
    assert (await core.learner.store_read(CHANNEL)).status == "done"
    alice = await core.repo.reads.facts("discord:1:user:alice")
    assert sorted(f.text for f in alice) == [
        "Alice is vegetarian",
        "Alice lives in Osaka",
        "Alice's cat is called Mochi",
    ]
    [vegetarian] = [f for f in alice if "vegetarian" in f.text]
    platform_ids = {e.id: e.platform_id for e in await core.repo.reads.all_entries(CHANNEL)}
    assert [platform_ids[i] for i in vegetarian.message_ids] == ["p00", "p30"]
    assert vegetarian.source == "rules"
    assert (vegetarian.ts[:10], vegetarian.seen[:10]) == ("2025-08-11", "2025-08-14")
    assert [f.text for f in await core.repo.reads.facts(CHANNEL)] == ["Decided to ship on Friday"]
