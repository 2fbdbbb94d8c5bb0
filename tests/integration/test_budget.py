"""Daily token budgets on a real Redis and the fake model: a reached limit answers with a
notice and makes no model call; summaries fall back to the extractive summariser until the
scope's next local day; the spend is shown, reset by the day, kept by forget."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from bots.commands import Actor, execute, parse_command
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.errors import PermissionDenied, UsageError
from memory_core.models import IncomingMessage, Reply
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, conversation, feed

SCOPE = "discord:1:2"
ADMIN = Actor(user_id="1", name="Ada", is_admin=True)
MEMBER = Actor(user_id="2", name="Max", is_admin=False)


def said(text: str, *, by: Actor = ADMIN, scope: str = SCOPE) -> IncomingMessage:
    return IncomingMessage(
        scope=scope, text=text, author=by.name, author_id=by.user_id, direct=True
    )


async def command(core: Core, text: str, *, by: Actor = ADMIN, scope: str = SCOPE) -> str:
    result = await execute(core.admin, scope=scope, command=parse_command(text), actor=by)
    return result.text()


async def answer(core: Core, text: str, *, by: Actor = ADMIN, scope: str = SCOPE) -> Reply:
    reply = await converse(core, said(text, by=by, scope=scope))
    assert reply is not None
    return reply


async def test_a_reached_channel_budget_answers_with_a_notice_and_no_model_call(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    with pytest.raises(PermissionDenied):
        await command(core, "config daily_tokens 10", by=MEMBER)
    await command(core, "config timezone Asia/Tokyo")
    assert "daily_tokens=10" in await command(core, "config daily_tokens 10")
    first = await answer(core, "hello there, what is new?")
    assert first.kind == "llm"
    second = await answer(core, "and one more question")
    assert second.kind == "budget"
    assert "this channel's daily token budget" in second.text and "10 tokens" in second.text
    assert "00:00 Asia/Tokyo" in second.text
    assert fake_llm.count("reply") == 1
    # The message itself is stored; the notice is not conversation.
    texts = [e.text for e in await core.repo.reads.recent(SCOPE, 10)]
    assert "and one more question" in texts and second.text not in texts
    assert core.metrics.counts["budget_refusals:scope"] == 1
    shown = await command(core, "show")
    assert "daily token budget: 10; per member: default" in shown


async def test_show_stats_gives_the_spend_against_each_limit(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"user_daily_tokens": 100_000, "servers": {"discord:1": 7000}})
    await answer(core, "hello there", by=MEMBER)
    spent = sum(
        r["prompt_tokens"] + r["completion_tokens"]
        for r in (fake_llm_usage(request) for request in fake_llm.of("reply"))
    )
    stats = await command(core, "show stats", by=MEMBER)
    assert f"this channel: {spent:,} tokens today (no limit)" in stats
    assert f"you: {spent:,} / 100,000 tokens today, resets 00:00 UTC" in stats
    assert f"this server: {spent:,} / 7,000 tokens today, resets 00:00 UTC" in stats
    assert f"by purpose: reply {spent:,}" in stats
    # Another member sees their own figure, never Max's.
    other = await command(core, "show stats", by=Actor(user_id="3", name="Eve", is_admin=False))
    assert "you: 0 / 100,000" in other


def fake_llm_usage(request: object) -> dict[str, int]:
    from tests.fakes.openai_server import RecordedRequest, default_answer, fake_usage

    assert isinstance(request, RecordedRequest)
    return fake_usage(request, default_answer(request))


async def test_a_member_over_their_budget_is_refused_while_others_are_answered(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await command(core, "config user_daily_tokens 10")
    assert (await answer(core, "first from Max", by=MEMBER)).kind == "llm"
    refused = await answer(core, "second from Max", by=MEMBER)
    assert refused.kind == "budget" and "your daily token budget" in refused.text
    assert (await answer(core, "Ada asks", by=ADMIN)).kind == "llm"
    assert fake_llm.count("reply") == 2


async def test_a_server_budget_holds_across_its_channels_and_not_in_another_guild(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"server_daily_tokens": 10, "servers": {"discord:9": 0}})
    assert (await answer(core, "in channel two", scope="discord:1:2")).kind == "llm"
    refused = await answer(core, "in channel three", scope="discord:1:3")
    assert refused.kind == "budget" and "this server's daily token budget" in refused.text
    # discord:9 is exempt by name; discord:5 has its own, unspent, budget.
    assert (await answer(core, "another guild", scope="discord:9:2")).kind == "llm"
    assert (await answer(core, "yet another guild", scope="discord:5:2")).kind == "llm"
    assert fake_llm.count("reply") == 3


async def test_a_new_local_day_resets_the_budget(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """(A member's budget: the channel's also pays for the summaries that close yesterday
    at the first message of today.)"""
    clock = ManualClock(START)
    core = await make_core(clock=clock, budget={"user_daily_tokens": 10})
    assert (await answer(core, "morning")).kind == "llm"
    assert (await answer(core, "noon")).kind == "budget"
    clock.set(START.replace(hour=23, minute=59))
    assert (await answer(core, "before midnight")).kind == "budget"
    clock.set(START + timedelta(days=1))
    assert (await answer(core, "the next day")).kind == "llm"
    assert fake_llm.count("reply") == 2


async def test_off_and_default_undo_a_channel_limit(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"daily_tokens": 10})
    await answer(core, "spend it")
    assert (await answer(core, "refused")).kind == "budget"
    await command(core, "config daily_tokens off")
    assert (await answer(core, "no limit here")).kind == "llm"
    await command(core, "config daily_tokens default")
    assert (await answer(core, "the default again")).kind == "budget"
    with pytest.raises(UsageError, match="daily_tokens takes a number of tokens"):
        parse_command("config daily_tokens lots")


async def test_a_streamed_reply_is_counted_from_the_usage_chunk(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    shown: list[str] = []

    async def progress(text: str) -> None:
        shown.append(text)

    msg = said("tell me a long story")
    stored = await core.intake.accept(msg)
    reply = await core.replier.reply(msg, exclude_id=stored.id, on_progress=progress)
    assert reply.kind == "llm" and shown
    (request,) = fake_llm.of("reply")
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    usage = fake_llm_usage(request)
    day = await core.budget.ledger.scope_day(SCOPE, START.date().isoformat())
    assert day["prompt"] == usage["prompt_tokens"]
    assert day["completion"] == usage["completion_tokens"]
    assert day["u:1"] == day["tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_summaries_are_extractive_while_the_budget_is_reached_then_the_model_again(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    memory = {"compact_trigger_tokens": 100, "compact_min_messages": 5}
    core = await make_core(clock=clock, memory=memory, budget={"daily_tokens": 10})
    clock.set(START - timedelta(hours=1))
    assert (await answer(core, "spend the day's budget")).kind == "llm"
    await feed(core, clock, SCOPE, conversation(START, days=1, per_day=30))
    await core.drain()
    state = await core.repo.reads.state(SCOPE)
    assert state.short, "the day is summarised all the same"
    assert fake_llm.count("compact", "refresh") == 0
    assert core.summarizer.stats.forced > 0
    # The next local day: the day closes with the model's help.
    clock.set(START + timedelta(days=1, hours=1))
    await core.maintenance.maintain(SCOPE)
    assert fake_llm.count("compact", "refresh") > 0


async def test_forget_me_drops_the_members_spend_and_forget_all_keeps_the_budget(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await answer(core, "Max speaks", by=MEMBER)
    await answer(core, "Ada speaks")
    await command(core, "config daily_tokens 10")
    day = START.date().isoformat()
    key = core.store.keys.spend_scope(SCOPE, day)
    client = core.store.client
    assert await client.hget(key, "u:2") and await client.hget(key, "n:2") == "Max"
    await command(core, "forget me", by=MEMBER)
    fields = await client.hgetall(key)
    assert "u:2" not in fields and "n:2" not in fields and "u:1" in fields
    tokens = int(fields["tokens"])
    await command(core, "forget all confirm")
    fields = await client.hgetall(key)
    assert int(fields["tokens"]) == tokens and not [f for f in fields if f.startswith("n:")]
    assert (await core.repo.reads.state(SCOPE)).daily_tokens == "10"
    refused = await answer(core, "after the forget")
    assert refused.kind == "budget"


async def test_reader_api_gives_days_top_scopes_and_members(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await answer(core, "one", by=MEMBER)
    await answer(core, "two", scope="discord:1:3")
    await answer(core, "three", scope="discord:1:3")
    clock.set(START + timedelta(days=1))
    await answer(core, "next day", scope="console:x")
    ledger = core.budget.ledger
    first, second = START.date().isoformat(), (START + timedelta(days=1)).date().isoformat()
    days = dict(await ledger.fleet_days([first, second]))
    top = await ledger.top_scopes(first)
    assert [scope for scope, _ in top] == ["discord:1:3", SCOPE]
    assert days[first] == sum(tokens for _, tokens in top)
    assert dict(await ledger.top_scopes(second)) == {"console:x": days[second]}
    (max_,) = await ledger.members(SCOPE, first)
    assert (max_.member_id, max_.name) == ("2", "Max") and max_.tokens == top[1][1]


async def test_calls_without_a_tag_are_not_charged(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """A prompt dry run or a benchmark's call belongs to nobody's budget."""
    core = await make_core()
    await core.llm.complete([{"role": "user", "content": "hi"}], purpose="reply")
    assert await core.budget.ledger.top_scopes(START.date().isoformat()) == []


async def test_a_stream_without_a_usage_chunk_is_counted_with_our_tokenizer(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """An endpoint that refuses stream_options (llm.stream_usage off): the prompt and the
    answer are counted with cl100k, so the budget still holds."""
    core = await make_core(llm={"stream_usage": False})

    async def progress(text: str) -> None:
        return None

    msg = said("tell me a long story")
    stored = await core.intake.accept(msg)
    reply = await core.replier.reply(msg, exclude_id=stored.id, on_progress=progress)
    (request,) = fake_llm.of("reply")
    assert "stream_options" not in request.body
    day = await core.budget.ledger.scope_day(SCOPE, START.date().isoformat())
    assert day["completion"] == core.counter.count(reply.text)
    assert day["prompt"] == core.counter.count_messages(request.messages)


async def test_captions_wait_while_the_budget_is_reached_and_are_counted_otherwise(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    from tests.captions_data import VISION, Image, message

    core = await make_core(llm=VISION, budget={"daily_tokens": 10})
    await core.intake.accept(message(Image().attachment(), pid="m1"))
    assert len(fake_llm.of("caption")) == 1
    day = await core.budget.ledger.scope_day(SCOPE, START.date().isoformat())
    assert day["p:caption"] == day["tokens"] > 10 and day["u:u1"] == day["tokens"]
    await core.intake.accept(message(Image().attachment(), pid="m2"))
    assert len(fake_llm.of("caption")) == 1  # the budget is spent: no second caption call
    [text] = [e.text for e in await core.repo.reads.all_entries(SCOPE) if e.platform_id == "m2"]
    assert "caption: " not in text and "p.png" in text


async def test_the_notice_and_the_stats_speak_japanese_in_a_japanese_channel(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(budget={"daily_tokens": 10})
    await command(core, "config language ja")
    await command(core, "config timezone Asia/Tokyo")
    await answer(core, "こんにちは、今日の予定は？")
    refused = await answer(core, "もう一つ質問があります")
    assert refused.kind == "budget"
    assert "このチャンネルの1日のトークン予算（10 トークン）" in refused.text
    assert "00:00 Asia/Tokyo にリセットされます" in refused.text
    result = await execute(
        core.admin, scope=SCOPE, command=parse_command("show stats"), actor=ADMIN, language="ja"
    )
    assert "/ 10 トークン、00:00 Asia/Tokyo にリセット" in result.text()


async def test_embeddings_are_on_the_scopes_bill_not_a_members(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """With an embedding model on the endpoint, the messages' vectors (made in the
    background) and the question's are charged to the scope: they are memory's work, not
    the asker's. Each message arrives in its own task, as a door's event does."""
    core = await make_core(llm={"embedding_model": "fake-embed"})
    for i in range(3):
        msg = IncomingMessage(scope=SCOPE, text=f"note {i}: the deploy is on Friday", author="Max")
        await asyncio.create_task(core.intake.accept(msg))
    await core.drain()
    reply = await asyncio.create_task(answer(core, "when is the deploy?"))
    await core.drain()
    assert reply.kind == "llm" and fake_llm.count("embed") >= 2  # the messages, the question
    counters = await core.budget.ledger.scope_day(SCOPE, START.date().isoformat())
    assert counters["p:embed"] > 0
    assert counters["tokens"] == counters["p:embed"] + counters["p:reply"]
    assert counters["u:" + ADMIN.user_id] == counters["p:reply"]
