"""What memory costs in LLM calls: a 1,000-message replay with replies off makes at most 50
compaction calls plus at most 3 calls per rolled-over day; an answered message costs one call."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

from memory_core.clock import ManualClock
from memory_core.service.replay import read_lines, replay
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import NAMES, START, WORDS, CoreFactory


def write_transcript(path: Path, *, messages: int, days: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    per_day = messages // days
    with path.open("w", encoding="utf-8") as fh:
        for i in range(messages):
            day, slot = divmod(i, per_day)
            when = START + timedelta(days=day, minutes=slot * 7 + rng.randint(0, 5))
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 80)))
            line = {"ts": when.isoformat(), "user": rng.choice(NAMES), "text": words}
            fh.write(json.dumps(line) + "\n")


async def test_thousand_message_replay_call_budget(
    make_core: CoreFactory, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "chat.jsonl"
    write_transcript(path, messages=1000, days=10)
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    report = await replay(
        core, clock, read_lines(path), default_scope="console:replay", reply=False
    )
    assert report.stored == 1000 and not report.skipped
    rolled = sum(r.days_closed for r in core.maintenance.reports)
    assert rolled == 9
    compact, refresh = fake_llm.count("compact"), fake_llm.count("refresh")
    assert fake_llm.count("reply") == 0
    # Every summary call is accounted for: compaction within days, plus per rolled-over day
    # the rest of the day (one compaction) and one tier refresh.
    assert compact + refresh <= 50 + 3 * rolled, (compact, refresh)
    assert refresh <= rolled
    assert compact <= 50
    view = await core.admin.show("console:replay")
    assert view.messages == 1000 and len(view.days) == 7 and len(view.weeks) == 1


async def test_summary_prompts_do_not_grow_with_history(
    make_core: CoreFactory, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    """Incremental: each compaction reads the previous summary plus new messages only."""
    path = tmp_path / "chat.jsonl"
    write_transcript(path, messages=600, days=3)
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await replay(core, clock, read_lines(path), default_scope="g", reply=False)
    sizes = [len(r.prompt_text) for r in fake_llm.of("compact")]
    assert len(sizes) >= 6
    limit = core.settings.memory.compact_max_input_tokens * 6 + 8000  # chars, generous
    assert max(sizes) < limit
    assert max(sizes[len(sizes) // 2 :]) < 2 * max(sizes[: len(sizes) // 2])


async def test_one_model_call_per_answered_message(
    make_core: CoreFactory, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    """200 answered messages in one day: exactly one reply call each, and summaries in the
    background at most once per compaction batch (never per message)."""
    path = tmp_path / "chat.jsonl"
    write_transcript(path, messages=200, days=1)
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    report = await replay(core, clock, read_lines(path), default_scope="console:replay", reply=True)
    await core.drain()
    assert report.stored == 200
    assert fake_llm.count("reply") == 200
    # The log holds the 200 messages and the 200 answers; one compaction folds at least
    # compact_min_messages of them, and a day that rolls over (the replay crosses midnight)
    # costs one compaction of its rest and one tier refresh.
    logged = await core.repo.reads.log_length("console:replay")
    rolled = sum(r.days_closed for r in core.maintenance.reports)
    assert logged == 400 and rolled <= 1
    batch = core.settings.memory.compact_min_messages
    compact = fake_llm.count("compact")
    assert 0 < compact <= logged // batch + rolled, compact
    assert fake_llm.count("refresh") <= rolled
    others = fake_llm.count() - fake_llm.count("reply", "compact", "refresh", "embed")
    assert others == 0, sorted({r.purpose for r in fake_llm.requests})
