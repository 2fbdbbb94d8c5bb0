"""Forget means gone: after forget, the text is in none of the scope's keys."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, CoreFactory
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, default_answer
from tests.helpers import all_keys, conversation, feed, key_values, scope_values

SCOPE = "discord:1:2"
SECRET = "Hunter2-Password"
SMALL = {"compact_trigger_tokens": 150, "compact_min_messages": 4, "compact_keep_tokens": 30}


def quoting_llm(request: RecordedRequest) -> str:
    """A model that repeats secrets in summaries and facts, the worst case for forget."""
    answer = json.loads(default_answer(request)) if request.purpose != "reply" else None
    if answer is None:
        return default_answer(request)
    if SECRET.lower() in request.prompt_text.lower():
        for field in answer:
            if isinstance(answer[field], str):
                answer[field] += f" Bob's login is {SECRET}."
        if request.purpose == "compact":
            answer["facts"] = [{"kind": "profile", "subject": "Bob", "text": f"Bob uses {SECRET}"}]
    return json.dumps(answer)


def present(values: list[str], needle: str) -> bool:
    return any(needle.lower() in v.lower() for v in values)


async def _memory_with_secret(make_core: CoreFactory, fake_llm: FakeOpenAI):  # type: ignore[no-untyped-def]
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    # A channel the whole guild can see: facts about Bob may follow him across the guild.
    await feed(core, clock, SCOPE, conversation(START, days=1, per_day=10), public=True)
    clock.advance(timedelta(minutes=5))
    await core.pipeline.ingest(
        IncomingMessage(
            scope=SCOPE,
            text=f"my login is {SECRET.upper()} ok?",
            author="Bob",
            author_id="bob",
            public=True,
        )
    )
    await feed(
        core, clock, SCOPE, conversation(START + timedelta(days=1), days=2, per_day=10), public=True
    )
    await core.admin.remember(SCOPE, f"note: Bob's is {SECRET}", by="Alice")
    await core.admin.remember(SCOPE, "Alice likes tea", by="Alice")
    return core, clock


async def test_forget_text_removes_it_from_every_key(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, _ = await _memory_with_secret(make_core, fake_llm)
    before = await scope_values(core, SCOPE)
    assert present(before, SECRET)
    state = await core.repo.state(SCOPE)
    days = await core.repo.days(SCOPE)
    facts = await core.repo.facts(SCOPE)
    # The secret really spread: raw log, a day summary, the week tier, facts.
    assert any(SECRET.lower() in d.summary.lower() for d in days)
    assert SECRET.lower() in (state.mid + state.overview).lower()
    people = await core.repo.facts("discord:1:user:bob")  # facts about Bob travel the guild
    assert sum(SECRET.lower() in f.text.lower() for f in [*facts, *people]) == 2

    report = await core.admin.forget_text(SCOPE, SECRET.lower())

    after = await scope_values(core, SCOPE) + await scope_values(core, "discord:1:user:bob")
    assert not present(after, SECRET), [v for v in after if SECRET.lower() in v.lower()]
    assert report.messages == 1 and report.facts == 2 and report.days >= 1
    assert any(f.text == "Alice likes tea" for f in await core.repo.facts(SCOPE))
    assert await core.repo.log_length(SCOPE) == 30  # only the one message went
    # It stays gone through later summaries.
    prompt = await core.pipeline.build_prompt(IncomingMessage(scope=SCOPE, text="x", author="Q"))
    assert SECRET.lower() not in json.dumps(prompt.messages).lower()


async def test_forget_during_a_summary_in_flight_stays_forgotten(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    core.pipeline.background = True
    for i in range(6):
        clock.advance(timedelta(minutes=1))
        await core.pipeline.ingest(
            IncomingMessage(scope=SCOPE, text=f"{SECRET} line {i} " * 4, author="Bob")
        )
    fake_llm.delay = 0.3
    clock.advance(timedelta(minutes=1))
    await core.pipeline.ingest(IncomingMessage(scope=SCOPE, text="more " * 30, author="Bob"))
    await asyncio.sleep(0.1)  # the compaction is now waiting on the (slow) model
    assert fake_llm.count("compact") >= 1
    await core.admin.forget_text(SCOPE, SECRET)
    await core.pipeline.drain()
    assert not present(await scope_values(core, SCOPE), SECRET)


async def test_forget_me_removes_only_that_person(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, _ = await _memory_with_secret(make_core, fake_llm)
    log_before = await core.repo.all_entries(SCOPE)
    bob_count = sum(e.author_id == "bob" for e in log_before)
    assert await core.repo.facts("discord:1:user:bob")  # what the guild knows about Bob
    report = await core.admin.forget_user(SCOPE, user_id="bob", name="Bob")
    log_after = await core.repo.all_entries(SCOPE)
    assert report.messages == bob_count > 0
    assert all(e.author_id != "bob" for e in log_after)
    assert len(log_after) == len(log_before) - bob_count
    assert await core.repo.facts("discord:1:user:bob") == []
    facts = await core.repo.facts(SCOPE)
    assert all(f.subject_id != "bob" for f in facts)
    # Alice's own note stays, although it names Bob: it is hers, not his.
    assert {f.text for f in facts} >= {"Alice likes tea", f"note: Bob's is {SECRET}"}
    # Summary sentences that repeat what he said are gone ("Bob's login is ...").
    state = await core.repo.state(SCOPE)
    days = await core.repo.days(SCOPE)
    for text in (state.short, state.mid, state.long, state.overview, *(d.summary for d in days)):
        assert SECRET.lower() not in text.lower()


async def test_forget_all_and_forget_fact(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    core, _ = await _memory_with_secret(make_core, fake_llm)
    await core.admin.remember("discord:1:3", "other channel note", by="x")
    tea = next(f for f in await core.repo.facts(SCOPE) if f.text == "Alice likes tea")
    assert await core.admin.forget_fact(SCOPE, tea.id)
    assert not await core.admin.forget_fact(SCOPE, tea.id)
    assert all(f.id != tea.id for f in await core.repo.facts(SCOPE))
    texts = [e.text for e in await core.repo.all_entries(SCOPE)]
    bob = "discord:1:user:bob"
    assert any(f.origin == SCOPE for f in await core.repo.facts(bob))
    await core.admin.remember_me("discord:1:3", "Bob plays the cello", user_id="bob", name="Bob")

    await core.admin.forget_all(SCOPE)

    # Only the forget generation is left of the scope: no text of it anywhere in Redis.
    assert await scope_values(core, SCOPE) == [f"mb:{{{SCOPE}}}:state", "epoch", "2"]
    assert SCOPE not in [s for s, _ in await core.repo.scopes()]
    assert not await core.repo.scope_exists(SCOPE)
    everything = [v for key in await all_keys(core) for v in await key_values(core, key)]
    for text in [*texts, SECRET]:
        assert not present(everything, text), text
    # What was learned elsewhere stays: the other channel, and what Bob pinned there.
    assert [f.text for f in await core.repo.facts("discord:1:3")] == ["other channel note"]
    assert [f.text for f in await core.repo.facts(bob)] == ["Bob plays the cello"]


async def test_forget_all_during_a_summary_in_flight_stays_forgotten(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """The epoch survives forget all: a summary computed from the forgotten messages while
    they were being deleted is refused, not written into the empty scope."""
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    core.pipeline.background = True
    for i in range(6):
        clock.advance(timedelta(minutes=1))
        await core.pipeline.ingest(
            IncomingMessage(
                scope=SCOPE,
                text=f"{SECRET} line {i} " * 4,
                author="Bob",
                author_id="bob",
                public=True,
            )
        )
    fake_llm.delay = 0.3
    clock.advance(timedelta(minutes=1))
    await core.pipeline.ingest(IncomingMessage(scope=SCOPE, text="more " * 30, author="Bob"))
    await asyncio.sleep(0.1)  # the compaction is now waiting on the (slow) model
    assert fake_llm.count("compact") >= 1
    await core.admin.forget_all(SCOPE)
    # Someone says something new before the model answers: the scope is alive again, on the
    # same day, from an empty log, exactly what the in-flight summary expects to find.
    await core.pipeline.ingest(
        IncomingMessage(scope=SCOPE, text="hello again", author="Alice", author_id="alice")
    )
    await core.pipeline.drain()
    state = await core.repo.state(SCOPE)
    assert SECRET.lower() not in state.short.lower()
    everything = [v for key in await all_keys(core) for v in await key_values(core, key)]
    assert not present(everything, SECRET)
