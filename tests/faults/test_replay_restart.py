"""Redis restarts (AOF on) in the middle of ``memorybot replay`` (a real process): every line
ends up stored once and every day is closed with its own date; an outage the replay cannot
wait out is a clear error, and the same replay run again finishes the job."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis

from memory_core import calendar
from memory_core.models import DaySummary, LogEntry
from memorybot_testkit.redis_servers import LocalRedis, free_port
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, default_answer
from tests.helpers import START, spawn_memorybot

AOF = ("--appendonly", "yes", "--appendfsync", "always")
LOG = "mb:{console:r}:log"
EPISODES = "mb:{console:r}:episodes"
DAYS = 5
PER_DAY = 6


def write_transcript(path: Path) -> list[str]:
    step = timedelta(hours=8) / PER_DAY
    lines = [
        {
            "ts": (START + timedelta(days=d) + step * i).isoformat(),
            "user": ["Alice", "Bob"][i % 2],
            "text": f"day {d} line {i}: we talk about the garden",
        }
        for d in range(DAYS)
        for i in range(PER_DAY)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return [str(line["text"]) for line in lines]


def check_memory(url: str, texts: list[str]) -> None:
    """Each line once (replies beside them), each finished day once with its own date,
    counting the messages of that day and no other."""
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # replies are str
    stored = [LogEntry.from_stream(i, f) for i, f in client.xrange(LOG)]
    users = [e.text for e in stored if e.role == "user"]
    assert sorted(users) == sorted(texts)
    per_day = Counter(calendar.local_day(e.ts, "UTC") for e in stored)
    records = [DaySummary.from_json(raw) for raw in client.lrange(EPISODES, 0, -1)]
    expected = [calendar.local_day(START + timedelta(days=d), "UTC") for d in range(DAYS - 1)]
    assert [r.day for r in records] == expected
    for record in records:
        assert record.messages == per_day[record.day], (record.day, record.messages)


async def read_stderr_until(stream: asyncio.StreamReader, needle: str, seen: list[str]) -> None:
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"memorybot ended without saying {needle!r}: {''.join(seen)}")
        seen.append(line)
        if needle in line:
            return


async def test_a_redis_restart_mid_replay_closes_every_day_with_its_own_date(
    tmp_path: Path,
) -> None:
    """Redis stops while the reply to a line of day 1 is being written, and comes back once
    memorybot says it is waiting for it. The replay clock must not run ahead meanwhile."""
    port = free_port()
    server = LocalRedis(port, extra=AOF)
    restarted: LocalRedis | None = None
    stopped = asyncio.Event()

    def responder(request: RecordedRequest) -> str:
        last = str(request.messages[-1].get("content", ""))
        if request.purpose == "reply" and "day 1 line 2:" in last:
            server.proc.terminate()  # SIGTERM: Redis fsyncs its AOF and exits
            server.proc.wait(10)
            stopped.set()
        return default_answer(request)

    path = tmp_path / "chat.jsonl"
    texts = write_transcript(path)
    try:
        async with FakeOpenAI(responder=responder) as llm:
            proc = await spawn_memorybot(
                tmp_path,
                "replay",
                str(path),
                "--scope",
                "r",
                env={"REDIS_URL": server.url, "OPENAI_BASE_URL": llm.base_url},
            )
            assert proc.stderr is not None and proc.stdout is not None
            seen: list[str] = []
            await asyncio.wait_for(
                read_stderr_until(proc.stderr, "Redis is unreachable", seen), timeout=60
            )
            assert stopped.is_set()
            restarted = LocalRedis(port, extra=(*AOF, "--dir", server.dir))
            _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
            err_text = "".join(seen) + err.decode()
            assert proc.returncode == 0, err_text
            assert "Traceback" not in err_text
        check_memory(restarted.url, texts)
    finally:
        if restarted is not None:
            restarted.stop()
        server.stop()


async def test_an_outage_during_a_summary_is_a_clear_error_and_the_replay_resumes(
    tmp_path: Path,
) -> None:
    """Redis stops while day 2 is being summarised and stays away longer than the replay
    waits: a clear error (exit 2, no traceback); run again, the replay finishes the job."""
    port = free_port()
    server = LocalRedis(port, extra=AOF)
    restarted: LocalRedis | None = None

    def responder(request: RecordedRequest) -> str:
        day_2 = request.purpose == "compact" and "day 2 line" in request.prompt_text
        if day_2 and server.proc.poll() is None:
            server.proc.terminate()
            server.proc.wait(10)
        return default_answer(request)

    path = tmp_path / "chat.jsonl"
    texts = write_transcript(path)
    args = ("replay", str(path), "--scope", "r", "--no-reply", "--outage-wait", "1")
    try:
        async with FakeOpenAI(responder=responder) as llm:
            env = {"REDIS_URL": server.url, "OPENAI_BASE_URL": llm.base_url}
            proc = await spawn_memorybot(tmp_path, *args, env=env)
            _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
            first = err.decode()
            assert server.proc.poll() is not None, "Redis was stopped during a summary"
            assert proc.returncode == 2, first
            assert "Traceback" not in first
            assert "run the same replay again" in first
            restarted = LocalRedis(port, extra=(*AOF, "--dir", server.dir))
            proc = await spawn_memorybot(tmp_path, *args, env=env)
            _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
            assert proc.returncode == 0, err.decode()
        check_memory(restarted.url, texts)
    finally:
        if restarted is not None:
            restarted.stop()
        server.stop()
