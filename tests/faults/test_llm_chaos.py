"""An hour of traffic with 30% of LLM calls failing (500s, 429s with Retry-After, timeouts,
garbage): no message is lost, summaries catch up afterwards, and people get a short
apology only when their own reply failed."""

from __future__ import annotations

import random
from datetime import timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import NAMES, START, WORDS, CoreFactory


async def test_an_hour_of_llm_chaos(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    fake_llm.chaos = 0.3
    fake_llm.chaos_timeout_s = 1.0
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        llm={"timeout_s": 0.5, "max_retries": 0},
        memory={
            "compact_trigger_tokens": 150,
            "compact_min_messages": 4,
            "compact_keep_tokens": 20,
            "retry_base_s": 20,
            "summary_attempts": 100,
        },
    )
    rng = random.Random(5)
    sent: dict[str, list[str]] = {}
    apologies = answered = 0
    for i in range(600):  # one message every 6 seconds for an hour, over 20 channels
        clock.set(START + timedelta(seconds=6 * i))
        scope = f"console:c{i % 20}"
        text = f"m{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 20)))
        asks = i % 5 == 0
        reply = await converse(
            core, IncomingMessage(scope=scope, text=text, author=rng.choice(NAMES), direct=asks)
        )
        sent.setdefault(scope, []).append(text)
        if reply is not None:
            answered += 1
            if reply.kind == "apology":
                apologies += 1
                assert len(reply.text) < 200
    failed_replies = sum(1 for r in fake_llm.faulted if r.purpose == "reply")
    assert answered == 120
    assert apologies == failed_replies > 0  # an apology exactly when one's own reply failed
    assert any(r.purpose != "reply" for r in fake_llm.faulted)  # summaries were hit too
    # Not one message lost.
    for scope, texts in sent.items():
        stored = [e.text for e in await core.repo.reads.all_entries(scope) if e.role == "user"]
        assert stored == texts, scope
    # The LLM recovers; summaries catch up, for the hour and for the day that ended.
    fake_llm.chaos = 0.0
    clock.set(START + timedelta(days=1, hours=1))
    await core.scheduler.sweep(force=True)
    for scope in sent:
        state = await core.repo.reads.state(scope)
        assert state.failures == 0 and not state.refresh_pending, scope
        days = await core.repo.reads.days(scope)
        assert [d.day for d in days] == ["2025-08-11"], scope
        assert days[0].messages == len(await core.repo.reads.all_entries(scope)), scope
