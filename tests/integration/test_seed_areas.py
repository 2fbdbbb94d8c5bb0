"""The eleven areas the original design tested, against a real Redis and the fake LLM.

1 log-to-text conversion, 2 recent extraction, 3 date change detection, 4 days overflow past
7, 5 weeks cap at 52, 6 summary generation, 7 empty data, 8 LLM errors, 9 type/shape checks on
stored data, 10 data structure, 11 the whole flow.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.tiers.summarize import render_entries
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, conversation, feed

SMALL = {"compact_trigger_tokens": 150, "compact_min_messages": 5, "compact_keep_tokens": 40}


async def test_1_log_to_text_conversion(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await core.intake.accept(IncomingMessage(scope="t", text="We ship Friday", author="Alice"))
    clock.advance(timedelta(minutes=1))
    await core.intake.accept(
        IncomingMessage(scope="t", text="Noted", author="memorybot", role="assistant")
    )
    entries = await core.repo.reads.all_entries("console:t")
    assert render_entries(entries, "UTC").splitlines() == [
        "2025-08-11 09:00 Alice: We ship Friday",
        "2025-08-11 09:01 memorybot: Noted",
    ]


async def test_2_recent_extraction(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory={"window_tokens": 60})
    for i in range(30):
        clock.advance(timedelta(seconds=30))
        await core.intake.accept(IncomingMessage(scope="t", text=f"note {i}", author="Bob"))
    prompt = await core.replier.build_prompt(IncomingMessage(scope="t", text="?", author="Bob"))
    window = [m["content"] for m in prompt.messages[1:-1]]
    assert window, "the newest messages must be in the prompt"
    assert window[-1].endswith("note 29")
    numbers = [int(w.rsplit(" ", 1)[1]) for w in window]
    assert numbers == sorted(numbers) and numbers[0] > 0  # newest only, oldest first


async def test_3_date_change_detection_follows_the_scope_timezone(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(datetime(2025, 8, 13, 14, 0, tzinfo=UTC))  # 23:00 in Tokyo
    core = await make_core(clock=clock)
    await core.admin.configure("t", timezone="Asia/Tokyo")
    await core.intake.accept(IncomingMessage(scope="t", text="late night idea", author="Aki"))
    state = await core.repo.reads.state("console:t")
    clock.set(datetime(2025, 8, 13, 14, 59, tzinfo=UTC))  # 23:59 Tokyo: same day
    await core.intake.accept(IncomingMessage(scope="t", text="still today", author="Aki"))
    assert (await core.repo.reads.days("console:t")) == []
    clock.set(datetime(2025, 8, 13, 15, 1, tzinfo=UTC))  # 00:01 Tokyo, still the 13th in UTC
    await core.intake.accept(IncomingMessage(scope="t", text="new day", author="Aki"))
    days = await core.repo.reads.days("console:t")
    assert [d.day for d in days] == ["2025-08-13"]
    assert "late night idea" in days[0].summary and "still today" in days[0].summary
    assert "new day" not in days[0].summary
    assert (await core.repo.reads.state("console:t")).day == "2025-08-14"
    assert state.day == "2025-08-13"


async def test_4_days_overflow_past_seven(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await feed(core, clock, "t", conversation(START, days=10, per_day=3))
    days = [d.day for d in await core.repo.reads.days("console:t")]
    # Nine days were closed (the tenth is today); the list keeps the newest seven.
    expected = [(date(2025, 8, 11) + timedelta(days=i)).isoformat() for i in range(2, 9)]
    assert days == expected


async def test_5_weeks_cap_at_fifty_two(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)  # extractive summaries: fast
    messages = [
        (START + timedelta(weeks=w, hours=1), "Alice", f"week {w} topic number {w * 11}")
        for w in range(56)
    ]
    await feed(core, clock, "t", messages)
    weeks = await core.repo.reads.weeks("console:t")
    assert len(weeks) == 52
    assert weeks[-1].week == (date(2025, 8, 11) + timedelta(weeks=54)).isoformat()
    assert weeks[0].week == (date(2025, 8, 11) + timedelta(weeks=3)).isoformat()
    assert len({w.week for w in weeks}) == 52


async def test_6_summary_generation(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda req: (
        json.dumps(
            {
                "summary": "Alice and Bob planned the Osaka trip for 3 May.",
                "facts": [{"kind": "decision", "subject": None, "text": "Trip to Osaka on 3 May"}],
            }
        )
        if req.purpose == "compact"
        else None
    )
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    for i in range(12):
        clock.advance(timedelta(minutes=2))
        await core.intake.accept(
            IncomingMessage(scope="t", text=f"Osaka trip detail {i} " * 3, author="Alice")
        )
    state = await core.repo.reads.state("console:t")
    assert state.short == "Alice and Bob planned the Osaka trip for 3 May."
    assert state.short_upto, "the summarised pointer moved"
    request = fake_llm.of("compact")[0]
    assert "Osaka trip detail 0" in request.prompt_text
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.model == core.settings.llm.summary_model
    facts = await core.repo.reads.facts("console:t")
    assert [(f.kind, f.text, f.source) for f in facts] == [
        ("decision", "Trip to Osaka on 3 May", "summary")
    ]
    assert facts[0].message_ids, "facts carry provenance"


async def test_7_empty_data(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    core = await make_core()
    report = await core.maintenance.maintain("console:nobody")
    assert (report.compactions, report.days_closed, report.refreshes) == (0, 0, 0)
    view = await core.admin.show("nobody")
    assert view.messages == 0 and view.days == [] and view.facts == []
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="nobody", text="hello", author="Z")
    )
    assert "</memory>" not in prompt.messages[0]["content"]
    assert len(prompt.messages) == 2
    assert fake_llm.count() == 0


async def test_8_llm_errors_lose_nothing(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory={**SMALL, "retry_base_s": 60})
    fake_llm.fail_next(1, status=500, purposes=("compact",))
    for i in range(6):
        clock.advance(timedelta(seconds=10))
        await core.intake.accept(IncomingMessage(scope="t", text=f"fact {i} " * 12, author="A"))
    state = await core.repo.reads.state("console:t")
    assert state.short == "" and state.failures == 1 and state.retry_at > 0
    assert await core.repo.reads.log_length("console:t") == 6
    # During the back-off nothing is retried; after it, the next message catches up.
    clock.advance(timedelta(seconds=30))
    await core.intake.accept(IncomingMessage(scope="t", text="fact 6 " * 12, author="A"))
    assert fake_llm.count("compact") == 1
    clock.advance(timedelta(seconds=61))
    await core.intake.accept(IncomingMessage(scope="t", text="fact 7 " * 12, author="A"))
    state = await core.repo.reads.state("console:t")
    assert state.failures == 0 and "fact 0" in state.short
    # Garbage from the model: the extractive summary stands in at once.
    fake_llm.malformed_next(1, purposes=("compact",))
    for i in range(8, 16):
        clock.advance(timedelta(seconds=10))
        await core.intake.accept(IncomingMessage(scope="t", text=f"fact {i} " * 12, author="A"))
    assert core.summarizer.stats.fallbacks == 1
    assert await core.repo.reads.log_length("console:t") == 16
    # A failed reply is an apology; the user's message stays.
    fake_llm.fail_next(1, status=503, purposes=("reply",))
    reply = await converse(
        core, IncomingMessage(scope="t", text="are you there?", author="A", direct=True)
    )
    assert reply is not None and reply.kind == "apology"
    assert (await core.repo.reads.recent("console:t", 1))[0].text == "are you there?"


async def test_9_stored_data_has_the_right_types(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await feed(core, clock, "t", conversation(START, days=3, per_day=12))
    await core.admin.remember("t", "standup is at 10", by="Alice")
    k = core.store.keys.scope("console:t")
    raw = await core.repo.reads.raw_state("console:t")
    for field in ("unsum_tokens", "unsum_count", "msg_count", "last_ms", "refresh_seq"):
        assert raw[field].lstrip("-").isdigit(), field
    date.fromisoformat(raw["day"])
    datetime.fromisoformat(raw["tiers_at"])
    for blob in await core.store.client.lrange(k.days, 0, -1):
        day = json.loads(blob)
        assert set(day) == {
            "day",
            "summary",
            "messages",
            "degraded",
            "topic",
            "decisions",
            "follow_ups",
        }
        assert isinstance(day["decisions"], list) and isinstance(day["follow_ups"], list)
        date.fromisoformat(day["day"])
        assert isinstance(day["summary"], str) and day["summary"]
        assert isinstance(day["messages"], int) and day["messages"] > 0
    for blob in (await core.store.client.hgetall(k.facts)).values():
        fact = json.loads(blob)
        assert isinstance(fact["message_ids"], list) and isinstance(fact["pinned"], bool)
    for _, fields in await core.store.client.xrange(k.log):
        assert set(fields) == {"r", "a", "u", "t", "ts", "p", "k"}
        assert fields["r"] in ("user", "assistant") and fields["k"].isdigit()


async def test_10_data_structure(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=SMALL)
    await feed(core, clock, "discord:1:2", conversation(START, days=9, per_day=8))
    await core.admin.remember("discord:1:2", "pinned", by="x")
    k = core.store.keys.scope("discord:1:2")
    types = {key: await core.store.client.type(key) for key in k.all()}
    assert types[k.log] == "stream"
    assert types[k.state] == "hash"
    assert types[k.days] == "list" and types[k.weeks] == "list"
    assert types[k.facts] == "hash" and types[k.done] == "set"
    assert types[k.episodes] == "list"
    index = core.store.keys.scopes_index_of("discord:1:2")
    assert await core.store.client.type(index) == "zset"
    assert await core.store.client.zscore(index, "discord:1:2") > 0
    # Every key of the scope carries the scope's hash tag (Cluster-safe), and nothing else
    # of the scope exists outside the known key list, but for its spend days: the budget's
    # counters, kept apart from memory on purpose (forget all does not reset a budget).
    found = {x async for x in core.store.client.scan_iter(match="mb:*{discord:1:2}*")}
    spend = {x for x in found if x.startswith("mb:{discord:1:2}:spend:")}
    assert spend == {core.store.keys.spend_scope("discord:1:2", x[-10:]) for x in spend}
    assert found - spend <= set(k.all())
    done = await core.store.client.smembers(k.done)
    assert "week:2025-08-11" in done and "day:2025-08-11" in done


async def test_11_whole_flow_ten_days(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    count = await feed(core, clock, "team", conversation(START, days=10, per_day=40))
    view = await core.admin.show("team")
    assert view.messages == count == 400
    assert len(view.days) == 7
    assert [w.week for w in view.weeks] == ["2025-08-11"]
    assert view.state.mid.startswith("MID:") and view.state.overview.startswith("OV:")
    assert view.state.long.startswith("LONG:")
    assert view.state.day == "2025-08-20"  # today: below the compaction threshold so far
    assert view.state.refresh_pending is False
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="team", text="what happened?", author="Alice")
    )
    system = prompt.messages[0]["content"]
    assert view.state.overview[:50] in system
    assert prompt.tokens <= core.settings.memory.budget_tokens
