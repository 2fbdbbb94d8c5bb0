"""Recall on a real Redis: the right past messages reach the prompt, nothing irrelevant
does, and forgotten or expired text is never recalled."""

from __future__ import annotations

import json
from datetime import timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, CoreFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import conversation, feed

OLD = [
    (
        "Maria",
        "I found a lovely cafe called Blue Heron near the river, the cardamom buns are great",
    ),
    ("Tom", "Nice, we should go there after the Friday standup"),
    ("Maria", "Yes!"),
]


def recalled(system: str) -> str:
    """The recall section of a system prompt (summaries elsewhere may quote messages too)."""
    return system.split("## Recalled from earlier", 1)[1] if "## Recalled" in system else ""


async def _history(make_core: CoreFactory, **kw: object):  # type: ignore[no-untyped-def]
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, **kw)
    for i, (who, text) in enumerate(OLD):
        clock.set(START + timedelta(minutes=i))
        await core.pipeline.ingest(IncomingMessage(scope="team", text=text, author=who))
    # Weeks of unrelated chatter push the cafe far out of the window.
    await feed(
        core, clock, "console:team", conversation(START + timedelta(days=1), days=20, per_day=30)
    )
    clock.set(START + timedelta(days=22))
    return core, clock


async def test_a_question_recalls_the_old_message_with_its_date(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(
            scope="team", text="What was the name of the cafe Maria mentioned?", author="Tom"
        )
    )
    system = prompt.messages[0]["content"]
    assert "Blue Heron" in system
    assert "[2025-08-11]\nMaria: I found a lovely cafe" in system
    assert prompt.sections.get("recall", 0) > 0
    assert prompt.tokens <= core.settings.memory.budget_tokens


async def test_a_short_answer_comes_with_the_question_it_answers(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="team", text="Did we go after the Friday standup?", author="Tom")
    )
    system = prompt.messages[0]["content"]
    assert "after the Friday standup" in system
    assert "Maria: Yes!" in system  # the short reply right after it, for context


async def test_nothing_irrelevant_is_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="team", text="Any thoughts on quantum chromodynamics?", author="Tom")
    )
    assert "recall" not in prompt.sections


async def test_forgotten_text_is_never_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    question = IncomingMessage(scope="team", text="Which cafe near the river?", author="Tom")
    assert "Blue Heron" in json.dumps((await core.pipeline.build_prompt(question)).messages)
    await core.admin.forget_text("team", "Blue Heron")
    assert "Blue Heron" not in json.dumps((await core.pipeline.build_prompt(question)).messages)


async def test_other_scopes_are_not_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="other", text="What was the name of the cafe?", author="Tom")
    )
    assert "Blue Heron" not in json.dumps(prompt.messages)


async def test_a_question_about_a_day_recalls_that_day(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="team", text="What did Maria talk about on August 11?", author="T")
    )
    assert "Blue Heron" in prompt.messages[0]["content"]


async def test_japanese_recall(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    await core.pipeline.ingest(
        IncomingMessage(
            scope="jp", text="来月の社員旅行は箱根の温泉旅館に決まりました", author="さくら"
        )
    )
    await feed(
        core, clock, "console:jp", conversation(START + timedelta(days=1), days=10, per_day=30)
    )
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="jp", text="社員旅行はどこに行くんだっけ？", author="たろう")
    )
    assert "箱根の温泉旅館" in prompt.messages[0]["content"]


async def test_days_past_retention_are_recalled_from_their_day_record(
    make_core: CoreFactory,
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"retention_days": 2})
    for i, (who, text) in enumerate(OLD):
        clock.set(START + timedelta(minutes=i))
        await core.pipeline.ingest(IncomingMessage(scope="team", text=text, author=who))
    for day in range(1, 6):  # the fleet rolls over every night; raw messages expire
        clock.set(START + timedelta(days=day, hours=1))
        await core.pipeline.ingest(
            IncomingMessage(scope="team", text=f"day {day} chat", author="X")
        )
        await core.scheduler.sweep()
    assert all("Blue Heron" not in e.text for e in await core.repo.all_entries("console:team"))
    episodes = await core.repo.episodes("console:team")
    assert episodes[0].day == "2025-08-11" and "Blue Heron" in episodes[0].summary
    prompt = await core.pipeline.build_prompt(
        IncomingMessage(scope="team", text="Which cafe did Maria find near the river?", author="T")
    )
    assert "(summary of the day)" in prompt.messages[0]["content"]
    assert "Blue Heron" in prompt.messages[0]["content"]


async def test_embeddings_find_by_meaning_and_are_stored_for_the_fleet(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """With an embedding model, a message that shares no word with the question is still
    recalled (the fake model gives "feline" and "cat" one meaning); vectors live in Redis so
    another process reuses them; forget removes them."""
    clock = ManualClock(START)
    settings = {"llm": {"embedding_model": "fake-embed"}}
    core = await make_core(clock=clock, **settings)
    await core.pipeline.ingest(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )
    await feed(
        core, clock, "console:pets", conversation(START + timedelta(days=1), days=8, per_day=30)
    )
    question = IncomingMessage(scope="pets", text="Any feline news?", author="Q")
    prompt = await core.pipeline.build_prompt(question)
    assert "Mel: We adopted a cat named Bailey" in recalled(prompt.messages[0]["content"])
    assert fake_llm.count("embed") >= 2  # the messages, then the question
    k = core.store.keys.scope("console:pets")
    assert await core.store.client.hlen(k.vectors) == await core.repo.log_length("console:pets")
    # A second process reuses the stored vectors: only the question is embedded.
    other = await make_core(clock=clock, **settings)
    before = fake_llm.count("embed")
    again = await other.pipeline.build_prompt(question)
    assert "Mel: We adopted a cat named Bailey" in recalled(again.messages[0]["content"])
    assert fake_llm.count("embed") == before + 1
    await core.admin.forget_text("pets", "Bailey")
    assert not [
        v
        for v in await core.store.client.hkeys(k.vectors)
        if v not in {e.id for e in await core.repo.all_entries("console:pets")}
    ]
    # With the embedding model down, recall falls back to words and replies still work.
    fake_llm.down = True
    assert (await core.pipeline.build_prompt(question)).tokens > 0
