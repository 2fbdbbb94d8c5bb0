"""Forget means gone: after forget, the text is in none of the scope's keys."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from memory_core import calendar
from memory_core.clock import ManualClock
from memory_core.models import Fact, IncomingMessage
from memory_core.scopes import Audience
from memory_core.service.forget_request import ForgetRequest
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, default_answer
from tests.helpers import (
    START,
    CoreFactory,
    all_keys,
    conversation,
    feed,
    forget_counters_only,
    key_values,
    scope_values,
    until,
)

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
    await core.intake.accept(
        IncomingMessage(
            scope=SCOPE,
            text=f"my login is {SECRET.upper()} ok?",
            author="Bob",
            author_id="bob",
            audience=Audience.SERVER,
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
    state = await core.repo.reads.state(SCOPE)
    days = await core.repo.reads.days(SCOPE)
    facts = await core.repo.reads.facts(SCOPE)
    # The secret really spread: raw log, a day summary, the week tier, facts.
    assert any(SECRET.lower() in d.summary.lower() for d in days)
    assert SECRET.lower() in (state.mid + state.overview).lower()
    people = await core.repo.reads.facts("discord:1:user:bob")  # facts about Bob travel the guild
    assert sum(SECRET.lower() in f.text.lower() for f in [*facts, *people]) == 2

    report = await core.admin.text.forget_text(SCOPE, SECRET.lower())

    after = await scope_values(core, SCOPE) + await scope_values(core, "discord:1:user:bob")
    assert not present(after, SECRET), [v for v in after if SECRET.lower() in v.lower()]
    assert report.messages == 1 and report.facts == 2 and report.days >= 1
    assert any(f.text == "Alice likes tea" for f in await core.repo.reads.facts(SCOPE))
    assert await core.repo.reads.log_length(SCOPE) == 30  # only the one message went
    # It stays gone through later summaries.
    prompt = await core.replier.build_prompt(IncomingMessage(scope=SCOPE, text="x", author="Q"))
    assert SECRET.lower() not in json.dumps(prompt.messages).lower()


async def test_forget_during_a_summary_in_flight_stays_forgotten(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    core.maintenance.background = True
    for i in range(6):
        clock.advance(timedelta(minutes=1))
        await core.intake.accept(
            IncomingMessage(scope=SCOPE, text=f"{SECRET} line {i} " * 4, author="Bob")
        )
    fake_llm.delay = 1.0
    clock.advance(timedelta(minutes=1))
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="more " * 30, author="Bob"))
    # The compaction is now waiting on the (slow) model: its request has arrived. (Waited
    # for, not slept on: how long maintenance takes to get there varies, on a cluster more.)
    await until(lambda: fake_llm.count("compact") >= 1)
    await core.admin.text.forget_text(SCOPE, SECRET)
    await core.drain()
    assert not present(await scope_values(core, SCOPE), SECRET)


async def test_forget_me_removes_only_that_person(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, _ = await _memory_with_secret(make_core, fake_llm)
    log_before = await core.repo.reads.all_entries(SCOPE)
    bob_count = sum(e.author_id == "bob" for e in log_before)
    assert await core.repo.reads.facts("discord:1:user:bob")  # what the guild knows about Bob
    report = await core.admin.person.forget_user(SCOPE, user_id="bob", name="Bob")
    log_after = await core.repo.reads.all_entries(SCOPE)
    assert report.messages == bob_count > 0
    assert all(e.author_id != "bob" for e in log_after)
    assert len(log_after) == len(log_before) - bob_count
    assert await core.repo.reads.facts("discord:1:user:bob") == []
    facts = await core.repo.reads.facts(SCOPE)
    assert all(f.subject_id != "bob" for f in facts)
    # Alice's own note stays, although it names Bob: it is hers, not his.
    assert {f.text for f in facts} >= {"Alice likes tea", f"note: Bob's is {SECRET}"}
    # Summary sentences that repeat what he said are gone ("Bob's login is ...").
    state = await core.repo.reads.state(SCOPE)
    days = await core.repo.reads.days(SCOPE)
    for text in (state.short, state.mid, state.long, state.overview, *(d.summary for d in days)):
        assert SECRET.lower() not in text.lower()


async def test_forget_all_and_forget_fact(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    core, _ = await _memory_with_secret(make_core, fake_llm)
    await core.admin.remember("discord:1:3", "other channel note", by="x")
    tea = next(f for f in await core.repo.reads.facts(SCOPE) if f.text == "Alice likes tea")
    assert await core.admin.text.forget_fact(SCOPE, tea.id)
    assert not await core.admin.text.forget_fact(SCOPE, tea.id)
    assert all(f.id != tea.id for f in await core.repo.reads.facts(SCOPE))
    texts = [e.text for e in await core.repo.reads.all_entries(SCOPE)]
    bob = "discord:1:user:bob"
    assert any(f.origin == SCOPE for f in await core.repo.reads.facts(bob))
    await core.admin.remember_me("discord:1:3", "Bob plays the cello", user_id="bob", name="Bob")

    await core.admin.place.forget_all(SCOPE)

    # Only the forget generation and the fact counter are left of the scope: no text of it
    # anywhere in Redis. (And its token spend, kept so that a forget does not reset the
    # budget: counts, no names.)
    left = await scope_values(core, SCOPE, memory_only=True)
    assert forget_counters_only(left, core, SCOPE), left
    assert dict(zip(left[1::2], left[2::2], strict=True))["epoch"] == "2"
    spend = [v for v in await scope_values(core, SCOPE) if v.startswith("n:")]
    assert spend == []
    assert SCOPE not in [s for s, _ in await core.repo.reads.scopes()]
    assert not await core.repo.reads.scope_exists(SCOPE)
    everything = [v for key in await all_keys(core) for v in await key_values(core, key)]
    for text in [*texts, SECRET]:
        assert not present(everything, text), text
    # What was learned elsewhere stays: the other channel, and what Bob pinned there.
    assert [f.text for f in await core.repo.reads.facts("discord:1:3")] == ["other channel note"]
    assert [f.text for f in await core.repo.reads.facts(bob)] == ["Bob plays the cello"]


async def test_forget_all_during_a_summary_in_flight_stays_forgotten(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """The epoch survives forget all: a summary computed from the forgotten messages while
    they were being deleted is refused, not written into the empty scope."""
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    core.maintenance.background = True
    for i in range(6):
        clock.advance(timedelta(minutes=1))
        await core.intake.accept(
            IncomingMessage(
                scope=SCOPE,
                text=f"{SECRET} line {i} " * 4,
                author="Bob",
                author_id="bob",
                audience=Audience.SERVER,
            )
        )
    fake_llm.delay = 1.0
    clock.advance(timedelta(minutes=1))
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="more " * 30, author="Bob"))
    # The compaction is now waiting on the (slow) model: its request has arrived. (Waited
    # for, not slept on: how long maintenance takes to get there varies, on a cluster more.)
    await until(lambda: fake_llm.count("compact") >= 1)
    await core.admin.place.forget_all(SCOPE)
    # Someone says something new before the model answers: the scope is alive again, on the
    # same day, from an empty log, exactly what the in-flight summary expects to find.
    await core.intake.accept(
        IncomingMessage(scope=SCOPE, text="hello again", author="Alice", author_id="alice")
    )
    await core.drain()
    state = await core.repo.reads.state(SCOPE)
    assert SECRET.lower() not in state.short.lower()
    everything = [v for key in await all_keys(core) for v in await key_values(core, key)]
    assert not present(everything, SECRET)


# -- edits: the edited text replaces the stored one; what the edit removed is forgotten ---------

EDITED = "my login is [removed] ok?"


async def _memory_with_an_edited_secret(make_core: CoreFactory, fake_llm: FakeOpenAI):  # type: ignore[no-untyped-def]
    """Like _memory_with_secret, but the secret message has a platform id, and facts name
    it as their source (provenance) without quoting it."""
    fake_llm.responder = quoting_llm
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await feed(core, clock, SCOPE, conversation(START, days=1, per_day=10))
    clock.advance(timedelta(minutes=5))
    sent_at = clock.now()
    await core.intake.accept(
        IncomingMessage(
            scope=SCOPE,
            text=f"my login is {SECRET.upper()} ok?",
            author="Bob",
            author_id="bob",
            ts=sent_at,
            platform_id="m-secret",
        )
    )
    await feed(core, clock, SCOPE, conversation(START + timedelta(days=1), days=2, per_day=10))
    [entry] = [e for e in await core.repo.reads.all_entries(SCOPE) if e.platform_id == "m-secret"]
    drawn = Fact(id="", kind="profile", text="Bob shared how he logs in", message_ids=[entry.id])
    await core.repo.writes.put_fact(SCOPE, drawn)
    await core.repo.writes.put_fact(
        "discord:1:user:bob",
        Fact(id="", kind="profile", text="Bob logs in daily", origin=SCOPE, message_ids=[entry.id]),
    )
    await core.admin.remember(SCOPE, "Alice likes tea", by="Alice")
    return core, entry, sent_at


async def test_an_edit_replaces_the_message_and_forgets_what_it_removed(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, entry, sent_at = await _memory_with_an_edited_secret(make_core, fake_llm)
    assert present(await scope_values(core, SCOPE), SECRET)
    assert any(SECRET.lower() in d.summary.lower() for d in await core.repo.reads.days(SCOPE))
    length = await core.repo.reads.log_length(SCOPE)
    active = dict(await core.repo.reads.scopes())[SCOPE]

    assert await core.admin.messages.edit_message(SCOPE, "m-secret", EDITED, when=sent_at)

    after = await scope_values(core, SCOPE) + await scope_values(core, "discord:1:user:bob")
    assert not present(after, SECRET), [v for v in after if SECRET.lower() in v.lower()]
    copies = [e for e in await core.repo.reads.all_entries(SCOPE) if e.platform_id == "m-secret"]
    assert [(e.text, e.author, e.author_id, e.ts) for e in copies] == [
        (EDITED, "Bob", "bob", entry.ts)
    ]
    assert await core.repo.reads.log_length(SCOPE) == length
    assert dict(await core.repo.reads.scopes())[SCOPE] == active  # an edit is no new activity
    facts = [f.text for f in await core.repo.reads.facts(SCOPE)]
    assert "Bob shared how he logs in" not in facts and "Alice likes tea" in facts
    assert [f.text for f in await core.repo.reads.facts("discord:1:user:bob")] == []
    state = await core.repo.reads.state(SCOPE)
    assert state.unsum_count == len(await core.repo.reads.entries_after(SCOPE, state.short_upto))


async def test_an_edit_that_changes_nothing_or_an_unknown_message_is_a_no_op(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, entry, sent_at = await _memory_with_an_edited_secret(make_core, fake_llm)
    before = await scope_values(core, SCOPE)
    # Platforms send updates for embeds and unfurls: the same text changes nothing.
    assert not await core.admin.messages.edit_message(SCOPE, "m-secret", entry.text, when=sent_at)
    assert not await core.admin.messages.edit_message(SCOPE, "never-stored", "hello", when=sent_at)
    assert not await core.admin.messages.edit_message(
        SCOPE, "m-secret", entry.text
    )  # no hint: a scan
    assert sorted(await scope_values(core, SCOPE)) == sorted(before)  # SCAN order varies


async def test_a_short_word_edited_away_redacts_no_summary(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, entry, sent_at = await _memory_with_an_edited_secret(make_core, fake_llm)
    days = await core.repo.reads.days(SCOPE)
    state = await core.repo.reads.state(SCOPE)
    edited = entry.text.replace(" ok?", " fine?")  # "ok" is no needle
    assert await core.admin.messages.edit_message(SCOPE, "m-secret", edited, when=sent_at)
    assert await core.repo.reads.days(SCOPE) == days
    assert (await core.repo.reads.state(SCOPE)).mid == state.mid


async def test_an_interrupted_edit_is_finished_once(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, entry, sent_at = await _memory_with_an_edited_secret(make_core, fake_llm)
    assert await core.admin.messages.edit_message(SCOPE, "m-secret", EDITED, when=sent_at)
    assert await core.repo.writes.pending_forgets(SCOPE) == []  # finished: nothing left pending
    # A crash after the request was written down: maintenance runs it again, twice even.
    request = ForgetRequest(
        kind="edit",
        text="my login is [gone] ok?",
        platform_id="m-secret",
        entry_ids=tuple(e.id for e in await core.repo.reads.all_entries(SCOPE) if e.text == EDITED),
        author="Bob",
        author_id="bob",
        ts_ms=calendar.to_ms(sent_at),
    )
    await core.repo.writes.begin_forget(SCOPE, request.to_json())
    assert await core.admin.requests.resume(SCOPE) == 1
    await core.repo.writes.begin_forget(SCOPE, request.to_json())
    assert await core.admin.requests.resume(SCOPE) == 1
    copies = [e for e in await core.repo.reads.all_entries(SCOPE) if e.platform_id == "m-secret"]
    assert [(e.text, e.ts) for e in copies] == [("my login is [gone] ok?", entry.ts)]
    assert not (await core.repo.reads.state(SCOPE)).forgets_pending


async def test_an_edit_while_paused_forgets_the_old_text_and_stores_nothing_new(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core, _, sent_at = await _memory_with_an_edited_secret(make_core, fake_llm)
    length = await core.repo.reads.log_length(SCOPE)
    await core.admin.set_paused(SCOPE, True)
    assert await core.admin.messages.edit_message(SCOPE, "m-secret", EDITED, when=sent_at)
    assert not present(await scope_values(core, SCOPE), SECRET)
    assert [
        e for e in await core.repo.reads.all_entries(SCOPE) if e.platform_id == "m-secret"
    ] == []
    assert await core.repo.reads.log_length(SCOPE) == length - 1


async def test_counters_stay_right_when_messages_arrive_during_a_forget(
    make_core: CoreFactory,
) -> None:
    """A forget re-derives the scope's counters from the log; messages stored at the same
    moment are counted, not overwritten (one atomic step, no read-modify-write)."""
    core = await make_core(memory={"compact_trigger_tokens": 10**6})
    scope = "console:busy"

    async def say(i: int) -> None:
        await core.intake.accept(IncomingMessage(scope=scope, text=f"note {i}", author="A"))

    for i in range(20):
        await say(i)
    for round_ in range(5):
        await asyncio.gather(
            core.admin.text.forget_text(scope, f"note {round_}"),
            *(say(100 * (round_ + 1) + i) for i in range(30)),
        )
    state = await core.repo.reads.state(scope)
    log = await core.repo.reads.all_entries(scope)
    assert state.msg_count == len(log)
    assert state.unsum_count == len(log)  # nothing summarised in this test
    assert state.unsum_tokens == sum(e.tokens for e in log)
    assert not state.forgets_pending and await core.repo.writes.pending_forgets(scope) == []


async def test_an_edit_keeps_who_could_see_the_message(make_core: CoreFactory) -> None:
    # Stored again as edited, the message stays public: what it teaches about a person may
    # still travel, as it could before the edit.
    core = await make_core()
    said = IncomingMessage(
        scope=SCOPE,
        text="draft",
        author="Bob",
        author_id="u2",
        platform_id="p9",
        audience=Audience.SERVER,
    )
    await core.intake.accept(said)
    assert await core.admin.messages.edit_message(SCOPE, "p9", "final")
    [entry] = await core.repo.reads.all_entries(SCOPE)
    assert (entry.text, entry.public) == ("final", True)
