"""Replaying a transcript (JSON lines) through the conversation, its timestamps driving the
clock.

Line shape: ``{"ts": "2025-08-13T15:30:00+09:00", "user": "Alice", "text": "...",
"role": "user"|"assistant", "scope": "console:team", "id": "m-1", "user_id": "U42"}``
(role, scope, id and user_id optional). Days and weeks roll over as they would have, because
maintenance runs at each message's time.

* ``id``: the line's identity (a string or an integer), e.g. the platform's message id.
  Without it the identity is scope + time + author + text. A line is stored once however
  often the file is replayed (again after a crash, or twice by mistake): the identity is the
  entry's platform id, and the store refuses a platform id it already holds.
* ``user_id``: the person's id on the platform; it becomes the message's author id, so facts
  about them reach their guild- or workspace-wide memory as for live messages. Without it
  the author id is left empty: the name stands for a person within that scope only, and
  nothing learned about them leaves it (a replayed place counts as private).
* A line older than the newest message of its scope keeps its own time and is counted as out
  of order; if its day has already been closed it is not stored but reported (see
  ``closed_day_reason``).
* The file must be UTF-8 (a byte order mark is fine); times must lie between 1970 and a day
  from now. Every bad line is reported with its number and a reason cut to a readable length.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from memory_core import calendar
from memory_core.clock import ManualClock
from memory_core.errors import EmptyMessage, InputError, ReplayLineError, StoreUnavailable
from memory_core.models import IncomingMessage, IngestResult
from memory_core.scopes import parse_scope
from memory_core.service.conversation import Conversation, Turn
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.service.streaming import KeptAnswer

log = logging.getLogger(__name__)

FIELDS = frozenset({"ts", "user", "text", "role", "scope", "id", "user_id"})
FUTURE_SLACK = timedelta(days=1)  # clock skew and time zones; later than that is a typo
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)  # stream ids count milliseconds since 1970
MAX_ID_CHARS = 200
SHOWN_CHARS = 60  # of a bad value quoted in a reason
MAX_REASON_CHARS = 240
OUTAGE_WAIT_S = 60.0  # how long a replay waits for Redis to come back before it gives up


class Replayable(Protocol):
    """What a replay runs on (a core): the conversation every message takes, its
    maintenance, and waiting for the background work to finish."""

    conversation: Conversation
    maintenance: MaintenanceScheduler

    async def drain(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplayLine:
    line_no: int
    ts: datetime
    user: str
    text: str
    role: str
    scope: str | None
    id: str = ""  # the line's own identity, if the file gives one
    user_id: str = ""  # the author's platform id, if the file gives one


@dataclass
class ReplayReport:
    lines: int = 0
    stored: int = 0
    duplicates: int = 0  # lines stored by an earlier replay: not stored again
    forgotten: int = 0  # lines memory was told to forget (the erasure ledger): not stored
    replies: int = 0
    apologies: int = 0
    skipped: list[ReplayLineError] = field(default_factory=list)
    out_of_order: int = 0  # lines older than the newest message of their scope
    scopes: set[str] = field(default_factory=set)


def shown(value: Any) -> str:
    """A value for a reason: repr, cut to a readable length (a 3 MB value is not echoed)."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}… ({len(text):,} characters)"


def _cut(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"


def parse_line(line_no: int, raw: str, *, now: datetime | None = None) -> ReplayLine:
    """One line, or a ReplayLineError naming it. ``now``: the real time (not the replay
    clock), so a line dated later than a day from now is refused."""
    try:
        return _parse(line_no, raw, (now or datetime.now(UTC)) + FUTURE_SLACK)
    except ReplayLineError as exc:
        if len(exc.reason) <= MAX_REASON_CHARS:
            raise
        raise ReplayLineError(line_no, _cut(exc.reason)) from exc


def _parse(line_no: int, raw: str, latest: datetime) -> ReplayLine:
    # A byte order mark opens files saved by Windows editors (and files concatenated from
    # them): it is not part of the JSON.
    raw = raw.removeprefix("\ufeff")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ReplayLineError(line_no, f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise ReplayLineError(line_no, f"not valid JSON ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise ReplayLineError(line_no, 'expected a JSON object like {"ts": ..., "user": ...}')
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        names = ", ".join(shown(name) for name in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise ReplayLineError(
            line_no, f"unknown field(s) {names}{more}; known: {', '.join(sorted(FIELDS))}"
        )
    ts = _time(line_no, data.get("ts"), latest)
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
        raise ReplayLineError(line_no, f'"role" must be "user" or "assistant", not {shown(role)}')
    return ReplayLine(
        line_no,
        ts,
        user.strip(),
        text,
        role,
        _scope(line_no, data.get("scope")),
        id=_identifier(line_no, "id", data.get("id"), numbers=True),
        user_id=_identifier(line_no, "user_id", data.get("user_id"), numbers=False),
    )


def _time(line_no: int, ts_raw: object, latest: datetime) -> datetime:
    if not isinstance(ts_raw, str):
        raise ReplayLineError(line_no, '"ts" is missing: give an ISO-8601 time with an offset')
    try:
        ts = datetime.fromisoformat(ts_raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ReplayLineError(line_no, f'"ts" {shown(ts_raw)} is not an ISO-8601 time') from exc
    if ts.tzinfo is None:
        raise ReplayLineError(
            line_no, f'"ts" {shown(ts_raw)} has no UTC offset (e.g. 2025-08-13T15:30:00+09:00)'
        )
    # One line dated 9999 would move its scope's day there for good (it never rolls over
    # again), so a time past tomorrow is a mistake to fix, not a message to keep.
    if ts > latest:
        raise ReplayLineError(
            line_no,
            f'"ts" {shown(ts_raw)} is in the future (later than a day from now): '
            "a transcript records the past",
        )
    if ts < EARLIEST:
        raise ReplayLineError(line_no, f'"ts" {shown(ts_raw)} is before 1970')
    return ts


def _scope(line_no: int, scope_raw: object) -> str | None:
    if scope_raw is None:
        return None
    if not isinstance(scope_raw, str):
        raise ReplayLineError(line_no, '"scope" must be a string')
    try:
        return parse_scope(scope_raw)
    except InputError as exc:
        raise ReplayLineError(
            line_no,
            f'"scope" {shown(scope_raw)} is not a scope: give console:NAME, '
            "discord:GUILD:CHANNEL or slack:TEAM:CHANNEL (letters, digits, '_', '.', '-', '@')",
        ) from exc


def _identifier(line_no: int, name: str, value: object, *, numbers: bool) -> str:
    if value is None:
        return ""
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    kind = "a non-empty string or a number" if numbers else "a non-empty string"
    if not isinstance(value, str) or not value.strip():
        raise ReplayLineError(line_no, f'"{name}" must be {kind}, not {shown(value)}')
    if len(value) > MAX_ID_CHARS:
        raise ReplayLineError(
            line_no, f'"{name}" is {len(value):,} characters long; at most {MAX_ID_CHARS}'
        )
    return value.strip()


def line_identity(line: ReplayLine, scope: str) -> str:
    """What makes a line the same line in another replay: its "id", or else its scope, time
    (the instant, whatever the offset is written as), author and text."""
    if line.id:
        return line.id
    key = json.dumps([scope, calendar.to_ms(line.ts), line.user, line.text], ensure_ascii=False)
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"replay:{digest[:32]}"


def _decode(line_no: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start]
        raise ReplayLineError(
            line_no,
            f"not UTF-8 text (byte 0x{byte:02x} at byte {exc.start + 1} of the line): "
            "save the file as UTF-8",
        ) from exc


def count_lines(path: Path) -> int:
    """Non-blank lines (for the progress bar), whatever bytes they hold."""
    try:
        with path.open("rb") as handle:
            return sum(1 for raw in handle if raw.strip())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc


def read_lines(
    path: Path, *, now: datetime | None = None
) -> Iterator[ReplayLine | ReplayLineError]:
    """Each non-blank line, parsed, or the error that says what is wrong with it. Read as
    bytes and decoded line by line, so a file that is not UTF-8 is reported, not a crash."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield parse_line(line_no, _decode(line_no, raw), now=now)
            except ReplayLineError as exc:
                yield exc


def validate_all(
    path: Path, *, now: datetime | None = None
) -> tuple[list[ReplayLine], list[ReplayLineError]]:
    good: list[ReplayLine] = []
    bad: list[ReplayLineError] = []
    for item in read_lines(path, now=now):
        (bad if isinstance(item, ReplayLineError) else good).append(item)  # type: ignore[arg-type]
    return good, bad


# Redis going away mid-replay (a restart, a failover): waited out, then a clear error. The
# store classes translate redis-py's connection errors and timeouts into StoreUnavailable.
OUTAGE = (StoreUnavailable,)


def closed_day_reason(line: ReplayLine, scope: str, open_day: str) -> str:
    """Why a line older than its scope's newest message was not stored.

    It cannot keep its own place: the stream id must never go backwards (day maths on ids),
    so it would be stored at the newest message's time, and if that is a later day than its
    own (or its own day is closed already: day records are written once), it would be
    counted in that other day's record. Such a line is reported instead, so no day is
    inflated; a line older than the newest message but of the same, still open day is stored
    with its own time (and counted as out of order)."""
    return (
        f"out of order: {line.ts.isoformat()} is older than what {scope} already holds "
        f"(it is on {open_day or 'a later day'}); that day is closed, so the line was not "
        "stored (replay transcripts in time order, or into a new scope)"
    )


async def replay(
    core: Replayable,
    clock: ManualClock,
    lines: Iterable[ReplayLine | ReplayLineError],
    *,
    default_scope: str,
    reply: bool,
    on_line: Callable[[ReplayReport], None] | None = None,
    outage_wait_s: float = OUTAGE_WAIT_S,
) -> ReplayReport:
    """Feed the lines through the conversation in order. Bad lines are skipped and reported;
    lines stored by an earlier replay are counted, not stored again. If Redis goes away the
    replay waits for it (up to ``outage_wait_s`` seconds at a time), its clock held at the
    line being stored, so every day is closed with its own messages; past that,
    StoreUnavailable says to run the same replay again."""
    report = ReplayReport()
    # A replay imports history in one process: its maintenance needs no fleet lock (every
    # write is a compare-and-set), and a lock left behind by a replay that died during a
    # summary must not keep the replay run again from closing days.
    maintenance = core.maintenance
    locked, maintenance.lock = maintenance.lock, False
    try:
        for item in lines:
            report.lines += 1
            if isinstance(item, ReplayLineError):
                report.skipped.append(item)
            else:
                await _replay_line(
                    core.conversation, clock, item, default_scope, reply, report, outage_wait_s
                )
            if on_line:
                on_line(report)
        await core.drain()
    finally:
        maintenance.lock = locked
    return report


async def _replay_line(
    conversation: Conversation,
    clock: ManualClock,
    item: ReplayLine,
    default_scope: str,
    reply: bool,
    report: ReplayReport,
    outage_wait_s: float,
) -> None:
    if item.ts > clock.now():
        clock.set(item.ts)  # the clock never runs backwards; an older line keeps its ts
    scope = item.scope or default_scope
    msg = IncomingMessage(
        scope=scope,
        text=item.text,
        author=item.user,
        # Without a user id the name stands for a person in this scope only: an empty id
        # keeps what is learned about them from travelling to a guild-wide person scope.
        author_id=item.user_id,
        ts=item.ts,
        role="assistant" if item.role == "assistant" else "user",
        platform_id=line_identity(item, scope),
        direct=True,
    )
    try:
        result, retried = await _store(conversation, msg, item.line_no, outage_wait_s)
    except EmptyMessage as exc:
        report.skipped.append(ReplayLineError(item.line_no, str(exc)))
        return
    report.scopes.add(scope)
    # A duplicate on a retry was stored by this replay's own attempt that the outage cut
    # short (the store succeeded, the answer or the summary after it did not).
    if result.outcome == "duplicate" and not retried:
        report.duplicates += 1
        return  # not answered again: the answer was stored with it (or never will be)
    if result.outcome == "forgotten":
        report.forgotten += 1
        return
    if result.outcome == "day_closed":
        report.out_of_order += 1
        report.skipped.append(
            ReplayLineError(item.line_no, closed_day_reason(item, scope, result.state_day))
        )
        return
    report.out_of_order += int(result.outcome == "older")
    report.stored += int(result.stored)
    if reply and result.stored and item.role == "user" and not conversation.replier.llm.offline:
        await _answer(conversation, Turn(message=msg, stored=result), report)


async def _store(
    conversation: Conversation, msg: IncomingMessage, line_no: int, wait_s: float
) -> tuple[IngestResult, bool]:
    """Store one line (and run the maintenance it makes due), waiting out an outage;
    (the result, whether it took more than one attempt). Retrying is safe: the line's
    identity is stored with it, so a line the outage interrupted after it was written comes
    back as a duplicate."""
    loop = asyncio.get_running_loop()
    deadline = 0.0
    delay = 0.1
    attempt = 0
    while True:
        try:
            intake = conversation.intake
            if intake.held:  # an answer held in an outage is stored first, in order
                await intake.wait_held(max(0.0, deadline - loop.time()) if deadline else wait_s)
            return await intake.accept(msg, hold=False, own_day=True), attempt > 0
        except OUTAGE as exc:
            now = loop.time()
            if not deadline:
                deadline = now + wait_s
                log.error(
                    "Redis is unreachable at line %d (%s): waiting up to %.0fs for it",
                    line_no,
                    exc,
                    wait_s,
                )
            if now >= deadline:
                raise StoreUnavailable(
                    f"Redis has been unreachable for {wait_s:.0f}s at line {line_no} "
                    f"({str(exc).rstrip('.')}). "
                    "The lines before it are stored, once each: run the same replay again "
                    "to continue (lines already stored are skipped)"
                ) from exc
            await asyncio.sleep(min(delay, deadline - now))  # back-off until Redis answers
            delay = min(2.0, delay * 2)
            attempt += 1


async def _answer(conversation: Conversation, turn: Turn, report: ReplayReport) -> None:
    """Answer a replayed line as a door would (written, delivered, then remembered), the
    answer kept by the replay rather than posted anywhere."""
    delivered = await conversation.answer(turn, KeptAnswer(), stream_interval_s=None)
    kind = delivered.reply.kind if delivered.reply is not None else "apology"
    if kind == "llm":
        report.replies += 1
    elif kind == "apology":
        report.apologies += 1
