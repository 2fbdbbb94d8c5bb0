"""``memorybot replay`` as a user runs it (real processes, the test Redis): a transcript is
stored once however often it is replayed or interrupted, and bad files get clear answers."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import redis

from memory_core import calendar
from memory_core.models import DaySummary, LogEntry
from tests.helpers import START, spawn_memorybot

LOG = "mb:{console:r}:log"
STATE = "mb:{console:r}:state"
EPISODES = "mb:{console:r}:episodes"


async def memorybot(home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    proc = await spawn_memorybot(home, *args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def transcript(days: int, per_day: int) -> list[dict[str, Any]]:
    """Lines spread over the working hours (UTC) of ``days`` days, each text unique."""
    step = timedelta(hours=8) / per_day
    return [
        {
            "ts": (START + timedelta(days=d) + step * i).isoformat(),
            "user": ["Alice", "Bob", "Carol"][i % 3],
            "text": f"day {d} line {i}: the release plan and the budget review",
        }
        for d in range(days)
        for i in range(per_day)
    ]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def entries(url: str, key: str = LOG) -> list[LogEntry]:
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # replies are str
    return [LogEntry.from_stream(i, f) for i, f in client.xrange(key)]


def day_records(url: str, key: str = EPISODES) -> list[DaySummary]:
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # replies are str
    return [DaySummary.from_json(raw) for raw in client.lrange(key, 0, -1)]


def assert_each_day_counts_its_own_messages(url: str) -> None:
    """Every closed day appears once, and counts the messages dated that day, no more."""
    per_day = Counter(calendar.local_day(e.ts, "UTC") for e in entries(url))
    records = day_records(url)
    assert [r.day for r in records] == sorted({r.day for r in records})
    for record in records:
        assert record.messages == per_day[record.day], (record.day, record.messages)


async def test_replaying_a_file_twice_stores_each_line_once(
    tmp_path: Path, clean_redis: str
) -> None:
    lines = transcript(days=3, per_day=20)
    path = write(tmp_path / "chat.jsonl", lines)
    args = ("replay", str(path), "--scope", "r", "--no-reply", "--json")
    code, out, err = await memorybot(tmp_path, *args, REDIS_URL=clean_redis)
    assert code == 0, err
    assert json.loads(out)["stored"] == 60
    code, out, err = await memorybot(tmp_path, *args, REDIS_URL=clean_redis)
    assert code == 0, err
    again = json.loads(out)
    assert again["stored"] == 0 and again["duplicates"] == 60 and again["skipped"] == []
    texts = [e.text for e in entries(clean_redis)]
    assert texts == [line["text"] for line in lines]
    assert [r.day for r in day_records(clean_redis)] == ["2025-08-11", "2025-08-12"]
    assert_each_day_counts_its_own_messages(clean_redis)


async def test_a_replay_killed_half_way_and_run_again_stores_each_line_once(
    tmp_path: Path, clean_redis: str
) -> None:
    lines = transcript(days=6, per_day=400)
    path = write(tmp_path / "chat.jsonl", lines)
    args = ("replay", str(path), "--scope", "r", "--no-reply")
    proc = await spawn_memorybot(tmp_path, *args, env={"REDIS_URL": clean_redis})
    client = redis.Redis.from_url(clean_redis)
    while proc.returncode is None and client.xlen(LOG) < 1000:  # noqa: ASYNC110
        await asyncio.sleep(0.01)  # polls what is stored (another process): no event to wait on
    proc.kill()  # kill -9: no clean-up of any kind
    await proc.wait()
    assert 0 < client.xlen(LOG) < len(lines), "the kill landed half-way"
    code, _, err = await memorybot(tmp_path, *args, REDIS_URL=clean_redis)
    assert code == 0, err
    texts = [e.text for e in entries(clean_redis)]
    assert sorted(texts) == sorted(line["text"] for line in lines)  # each exactly once
    assert_each_day_counts_its_own_messages(clean_redis)


async def test_a_line_of_a_day_already_closed_is_reported_not_restamped(
    tmp_path: Path, clean_redis: str
) -> None:
    """A second transcript with an older line: it keeps its own time or is reported; it
    never lands (with the newest time) in another day's record."""
    first = transcript(days=3, per_day=5)
    path = write(tmp_path / "first.jsonl", first)
    args = ("--scope", "r", "--no-reply", "--json")
    assert (await memorybot(tmp_path, "replay", str(path), *args, REDIS_URL=clean_redis))[0] == 0
    newest = datetime.fromisoformat(first[-1]["ts"])
    late = [
        {"ts": (START + timedelta(hours=1, minutes=1)).isoformat(), "user": "Dan", "text": "old"},
        {"ts": (newest - timedelta(minutes=30)).isoformat(), "user": "Dan", "text": "same day"},
    ]
    path = write(tmp_path / "late.jsonl", late)
    code, out, err = await memorybot(tmp_path, "replay", str(path), *args, REDIS_URL=clean_redis)
    assert code == 0, err
    report = json.loads(out)
    assert report["stored"] == 1 and report["out_of_order"] >= 1
    [skipped] = report["skipped"]
    assert skipped["line"] == 1 and "2025-08-11" in skipped["reason"]
    assert "not stored" in skipped["reason"]
    stored = {e.text: e for e in entries(clean_redis)}
    assert "old" not in stored
    assert stored["same day"].ts == newest - timedelta(minutes=30)  # its own time
    assert_each_day_counts_its_own_messages(clean_redis)


async def test_user_id_becomes_the_author_id_and_a_name_alone_stays_in_its_scope(
    tmp_path: Path, clean_redis: str
) -> None:
    lines = [
        {"ts": START.isoformat(), "user": "Alice", "text": "I like tea", "user_id": "U42"},
        {"ts": (START + timedelta(minutes=1)).isoformat(), "user": "Bob", "text": "I like jazz"},
    ]
    path = write(tmp_path / "chat.jsonl", lines)
    code, _, err = await memorybot(
        tmp_path, "replay", str(path), "--scope", "slack:T1:C1", "--no-reply", REDIS_URL=clean_redis
    )
    assert code == 0, err
    stored = entries(clean_redis, "mb:{slack:T1:C1}:log")
    assert [(e.author, e.author_id) for e in stored] == [("Alice", "U42"), ("Bob", "")]


async def test_a_binary_file_is_refused_line_by_line_without_a_traceback(
    tmp_path: Path, clean_redis: str
) -> None:
    path = tmp_path / "photo.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\n" * 3)
    for extra in ((), ("--strict",)):
        code, _, err = await memorybot(
            tmp_path, "replay", str(path), "--scope", "r", *extra, REDIS_URL=clean_redis
        )
        assert code == 1, (extra, err)
        assert "Traceback" not in err and "UnicodeDecodeError" not in err
        where = f"{path}:line 1:" if extra else f"skipped {path}:1:"
        assert f"{where} not UTF-8" in err, err
    assert redis.Redis.from_url(clean_redis).dbsize() == 0


async def test_a_bom_is_accepted_and_a_far_future_line_is_refused(
    tmp_path: Path, clean_redis: str
) -> None:
    good = transcript(days=1, per_day=2)
    future = {"ts": "9999-12-31T23:59:59+00:00", "user": "Eve", "text": "from the future"}
    path = tmp_path / "chat.jsonl"
    body = "".join(json.dumps(line) + "\n" for line in [good[0], future, good[1]])
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    code, _, err = await memorybot(
        tmp_path, "replay", str(path), "--scope", "r", "--strict", REDIS_URL=clean_redis
    )
    assert code == 1 and "Traceback" not in err
    assert f"{path}:line 2:" in err and "future" in err and "line 1:" not in err
    code, out, err = await memorybot(
        tmp_path, "replay", str(path), "--scope", "r", "--json", REDIS_URL=clean_redis
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["stored"] == 2 and [s["line"] for s in report["skipped"]] == [2]
    state = redis.Redis.from_url(clean_redis, decode_responses=True).hgetall(STATE)
    assert state["day"] == "2025-08-11"
    only_future = write(tmp_path / "future.jsonl", [future])
    code, _, err = await memorybot(
        tmp_path, "replay", str(only_future), "--scope", "r", REDIS_URL=clean_redis
    )
    assert code == 1 and "future" in err and "Traceback" not in err


async def test_a_huge_bad_value_is_cut_in_the_reason(tmp_path: Path, clean_redis: str) -> None:
    path = write(
        tmp_path / "big.jsonl",
        [{"ts": START.isoformat(), "user": "a", "text": "b", "role": "r" * 3_000_000}],
    )
    code, out, err = await memorybot(
        tmp_path, "replay", str(path), "--scope", "r", REDIS_URL=clean_redis
    )
    assert code == 1 and f"skipped {path}:1: " in err and '"role"' in err
    assert len(out) + len(err) < 2_000
