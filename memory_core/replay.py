"""Replaying a transcript (JSON lines) through the pipeline, its timestamps driving the clock.

Line shape: ``{"ts": "2025-08-13T15:30:00+09:00", "user": "Alice", "text": "...",
"role": "user"|"assistant", "scope": "console:team"}`` (role and scope optional). Days and
weeks roll over as they would have, because maintenance runs at each message's time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memory_core.clock import ManualClock
from memory_core.errors import EmptyMessage, InputError, ReplayLineError
from memory_core.models import IncomingMessage
from memory_core.pipeline import MemoryPipeline
from memory_core.scopes import parse_scope


@dataclass(frozen=True, slots=True)
class ReplayLine:
    line_no: int
    ts: datetime
    user: str
    text: str
    role: str
    scope: str | None


@dataclass
class ReplayReport:
    lines: int = 0
    stored: int = 0
    replies: int = 0
    apologies: int = 0
    skipped: list[ReplayLineError] = field(default_factory=list)
    out_of_order: int = 0
    scopes: set[str] = field(default_factory=set)


def parse_line(line_no: int, raw: str) -> ReplayLine:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ReplayLineError(line_no, f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise ReplayLineError(line_no, f"not valid JSON ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise ReplayLineError(line_no, 'expected a JSON object like {"ts": ..., "user": ...}')
    unknown = set(data) - {"ts", "user", "text", "role", "scope"}
    if unknown:
        raise ReplayLineError(line_no, f"unknown field(s) {', '.join(sorted(unknown))}")
    ts_raw = data.get("ts")
    if not isinstance(ts_raw, str):
        raise ReplayLineError(line_no, '"ts" is missing: give an ISO-8601 time with an offset')
    try:
        ts = datetime.fromisoformat(ts_raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ReplayLineError(line_no, f'"ts" {ts_raw!r} is not an ISO-8601 time') from exc
    if ts.tzinfo is None:
        raise ReplayLineError(
            line_no, f'"ts" {ts_raw!r} has no UTC offset (e.g. 2025-08-13T15:30:00+09:00)'
        )
    user = data.get("user")
    if not isinstance(user, str) or not user.strip():
        raise ReplayLineError(line_no, '"user" must be a non-empty string')
    text = data.get("text")
    if not isinstance(text, str):
        raise ReplayLineError(line_no, '"text" must be a string')
    if not text.strip():
        raise ReplayLineError(line_no, '"text" is empty: there is nothing to remember')
    role = data.get("role", "user")
    if role not in ("user", "assistant"):
        raise ReplayLineError(line_no, f'"role" must be "user" or "assistant", not {role!r}')
    scope_raw = data.get("scope")
    scope: str | None = None
    if scope_raw is not None:
        if not isinstance(scope_raw, str):
            raise ReplayLineError(line_no, '"scope" must be a string')
        try:
            scope = parse_scope(scope_raw)
        except InputError as exc:
            raise ReplayLineError(line_no, str(exc)) from exc
    return ReplayLine(line_no, ts, user.strip(), text, role, scope)


def read_lines(path: Path) -> Iterator[ReplayLine | ReplayLineError]:
    """Each non-blank line, parsed, or the error that says what is wrong with it."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield parse_line(line_no, raw)
            except ReplayLineError as exc:
                yield exc


def validate_all(path: Path) -> tuple[list[ReplayLine], list[ReplayLineError]]:
    good: list[ReplayLine] = []
    bad: list[ReplayLineError] = []
    for item in read_lines(path):
        (bad if isinstance(item, ReplayLineError) else good).append(item)  # type: ignore[arg-type]
    return good, bad


async def replay(
    pipeline: MemoryPipeline,
    clock: ManualClock,
    lines: Iterable[ReplayLine | ReplayLineError],
    *,
    default_scope: str,
    reply: bool,
    on_line: Callable[[ReplayReport], None] | None = None,
) -> ReplayReport:
    """Feed the lines through the pipeline in order. Bad lines are skipped and reported."""
    report = ReplayReport()
    for item in lines:
        report.lines += 1
        if isinstance(item, ReplayLineError):
            report.skipped.append(item)
            if on_line:
                on_line(report)
            continue
        if item.ts < clock.now():
            report.out_of_order += 1  # the clock never runs backwards; the message keeps its ts
        else:
            clock.set(item.ts)
        scope = item.scope or default_scope
        msg = IncomingMessage(
            scope=scope,
            text=item.text,
            author=item.user,
            author_id=item.user,
            ts=item.ts,
            role="assistant" if item.role == "assistant" else "user",
            direct=True,
        )
        try:
            result = await pipeline.ingest(msg)
        except EmptyMessage as exc:
            report.skipped.append(ReplayLineError(item.line_no, str(exc)))
            continue
        report.scopes.add(scope)
        report.stored += int(result.stored)
        if reply and item.role == "user" and not pipeline.llm.offline:
            answer = await pipeline.reply(msg, exclude_id=result.id)
            if answer.kind == "llm":
                report.replies += 1
            elif answer.kind == "apology":
                report.apologies += 1
        if on_line:
            on_line(report)
    await pipeline.drain()
    return report
