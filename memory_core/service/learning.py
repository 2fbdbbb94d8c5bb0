"""Learning a channel's past: what was said before the bot arrived (or while it was away),
read from the platform's history or an export (:mod:`memory_core.service.past`), kept, and
stored as if it had been heard live, oldest first.

A learn has two steps, so its cost is seen before it is spent:

1. :meth:`Learner.read` reads the source a page at a time and keeps each page's new messages
   with the source's cursor after it (a learn stopped by a restart, a failure or
   :meth:`cancel` resumes after the last page kept). Nothing is learned yet and no model is
   called. It leaves out what memory holds already (by platform id, so live traffic, a
   second learn and an import never double a message) and what was forgotten in the place
   (a message removed by a forget or a delete, a person forgotten, everything before a
   "forget all"), and reports what it found: messages, days, and the tokens summarising
   them will take.
2. :meth:`Learner.store` stores what was read. In each place, what was said before the day
   its memory began is put before its memory (its raw messages before the first, its days
   summarised into day records and weeks: :mod:`memory_core.tiers.past_days`); what was said
   from that day on is stored as live messages are, each in its own day (one whose day is
   closed already is counted, not stored in another day).

Any forget in a place drops what a learn of it has read and not stored (the next learn reads
it again, without what went).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import EmptyMessage, InputError
from memory_core.models import Attachment, IncomingMessage
from memory_core.recall.index import RecallIndex
from memory_core.scopes import Audience, Scope
from memory_core.service.intake import Intake
from memory_core.service.past import LearnRefused, PastMessage, PastSource
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.store.gone import Ledger
from memory_core.store.learning import LearningStore, Staged, staged_member
from memory_core.store.ledger import ErasureLedger
from memory_core.store.repo_reads import ScopeReads
from memory_core.tiers.past_days import PastDays, PastReport

log = logging.getLogger(__name__)

STORE_BATCH = 2000  # kept messages read back per step of storing
PUT_TRIES = 5  # a step that meets a forget is done again, against what is left, this often
# A summary call's own tokens beside the messages it reads (instructions, the summary so
# far, known facts, the answer): per chunk, and per week for its consolidation.
CALL_OVERHEAD_TOKENS = 1200


@dataclass
class LearnProgress:
    """Where a learn of one place is (kept in Redis; what the doors and the CLI show)."""

    place: str
    source: str = ""
    status: str = ""  # reading, read, storing, done, cancelled; "" = no learn
    days: int = 0  # how far back it reads
    read: int = 0  # messages the source gave
    new: int = 0  # kept to learn
    known: int = 0  # memory holds them already
    forgotten: int = 0  # forgotten here: never learned again
    skipped: int = 0  # other bots, system messages
    stored: int = 0
    not_stored: int = 0  # their day was closed already (said while memory ran)
    day_records: int = 0
    weeks: int = 0
    first_ms: int = 0  # the oldest and newest kept
    last_ms: int = 0
    estimate_tokens: int = 0  # what summarising the kept messages will take
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_job(cls, place: str, job: dict[str, str]) -> LearnProgress:
        number = {
            name: int(job.get(name, 0) or 0)
            for name in (
                "days read new known forgotten skipped stored not_stored day_records weeks "
                "first_ms last_ms estimate_tokens"
            ).split()
        }
        return cls(
            place=place,
            source=job.get("source", ""),
            status=job.get("status", ""),
            notes=json.loads(job.get("notes") or "[]"),
            **number,
        )

    @property
    def span_days(self) -> int:
        """Days between the oldest message kept and the newest, both counted."""
        if not self.first_ms:
            return 0
        return (self.last_ms - self.first_ms) // 86_400_000 + 1


Progress = Callable[[LearnProgress], Awaitable[None] | None]


class Learner:
    def __init__(
        self,
        *,
        intake: Intake,
        maintenance: MaintenanceScheduler,
        reads: ScopeReads,
        ledger: ErasureLedger,
        store: LearningStore,
        clock: Clock,
        recall: RecallIndex | None = None,
    ) -> None:
        self.intake = intake  # the place's own days' messages, stored as any message
        self.maintenance = maintenance
        self.reads = reads
        self.store = store
        self.ledger = ledger  # what was forgotten: never learned again
        self.clock = clock
        self.recall = recall
        self.settings = intake.settings
        self.past_days = PastDays(maintenance.maintainer, store)

    async def status(self, place: str) -> LearnProgress:
        return LearnProgress.from_job(place, await self.store.job(_root(place)))

    async def cancel(self, place: str) -> bool:
        """Stop a learn of ``place`` at its next page, dropping what it read and did not
        store. Whether one was running."""
        root = _root(place)
        job = await self.store.job(root)
        if job.get("status") not in ("reading", "read", "storing"):
            return False
        await self.store.drop(root)
        await self.store.set_job(root, {"status": "cancelled", "source": job.get("source", "")})
        return True

    # -- 1. reading ----------------------------------------------------------------------
    async def read(
        self, source: PastSource, *, days: int | None, progress: Progress | None = None
    ) -> LearnProgress:
        """Read ``days`` of the place's past (None: all of it, as an export holds it),
        resuming a learn of the same source and days that stopped; keep what is new.
        Nothing is learned yet."""
        if days is not None and days < 1:
            raise InputError("learn how many days? give 1 or more")
        root = _root(source.place)
        job = await self.store.job(root)
        cursor = ""
        resuming = (
            job.get("status") in ("reading", "read")
            and job.get("source") == source.name
            and int(job.get("days", 0)) == (days or 0)
        )
        if resuming:
            cursor = job.get("cursor", "")
            since_ms = int(job["since_ms"])
            if job["status"] == "read":
                return await self._estimated(root)
        else:
            since_ms = await self._since_ms(root, days) if days else 0
            await self.store.begin(
                root,
                {
                    "source": source.name,
                    "status": "reading",
                    "days": days or 0,
                    "since_ms": since_ms,
                },
            )
        await self.ledger.adopt_server(root)  # (the people forgotten across its server)
        gone = await self.ledger.read(root)
        notes: list[str] = json.loads(job.get("notes") or "[]") if resuming else []
        async for page in source.pages(calendar.from_ms(since_ms), cursor):
            if (await self.store.job(root)).get("status") != "reading":
                return await self.status(root)  # cancelled (or a forget dropped it)
            messages = [m for m in page.messages if _within(m, root)]
            known = await self.store.stored_already([(m.scope, m.platform_id) for m in messages])
            for note in page.notes:
                if note not in notes:
                    notes.append(note)
            while True:  # kept only as checked against the ledger as it is when kept
                kept, forgotten = _keep(messages, known, gone, since_ms)
                done = await self.store.stage(
                    root,
                    kept,
                    cursor=page.cursor,
                    counts={
                        "read": len(page.messages),
                        "new": len(kept),
                        "known": sum(known),
                        "forgotten": forgotten,
                        "skipped": page.skipped,
                    },
                    ledger_version=gone.version,
                )
                if done >= 0:
                    break
                gone = await self.ledger.read(root)  # something was forgotten meanwhile
            if not done:
                return await self.status(root)  # a forget dropped it, or it was cancelled
            if page.notes:
                await self.store.set_job(root, {"notes": json.dumps(notes)})
            if progress is not None:
                await _tell(progress, await self.status(root))
        nothing_new = not await self.store.staged_count(root)
        await self.store.set_job(root, {"status": "done" if nothing_new else "read", "cursor": ""})
        return await self._estimated(root)

    async def _since_ms(self, root: str, days: int) -> int:
        """Where reading ``days`` back starts: the beginning of that day in the place's
        timezone, so every day read is whole. (A learn that began mid-day would leave that
        day's morning to a later, longer learn, which could then not store it: the day's
        record is made by then.)"""
        state = await self.reads.state(root)
        tz = state.tz or self.settings.memory.timezone
        first_day = calendar.local_day(self.clock.now() - timedelta(days=days), tz)
        return calendar.to_ms(calendar.day_start(first_day, tz))

    async def _estimated(self, root: str) -> LearnProgress:
        """The learn's figures, with what summarising its kept messages will take."""
        staged = await self.store.all_staged(root)
        settings = self.settings.memory
        tokens = 0
        days: set[tuple[str, str]] = set()
        tz = settings.timezone
        for item in staged:
            message = _from_json(item.data)
            days.add((message.scope, calendar.local_day_ms(item.ts_ms, tz)))
            tokens += self.intake.counter.count(message.text) + 8  # (its date and author)
        chunks = len(days) + tokens // max(1, settings.compact_max_input_tokens)
        weeks = len({(scope, calendar.week_of(day, settings.week_start)) for scope, day in days})
        estimate = tokens + (chunks + weeks) * CALL_OVERHEAD_TOKENS if staged else 0
        fields: dict[str, str | int] = {"estimate_tokens": estimate}
        if staged:
            fields |= {"first_ms": staged[0].ts_ms, "last_ms": max(s.ts_ms for s in staged)}
        await self.store.set_job(root, fields)
        return await self.status(root)

    # -- 2. storing ----------------------------------------------------------------------
    async def store_read(self, place: str, *, progress: Progress | None = None) -> LearnProgress:
        """Store what a finished read kept (see the module's text)."""
        root = _root(place)
        job = await self.store.job(root)
        if job.get("status") == "done":
            return await self.status(root)  # (stored already, or nothing was new)
        if job.get("status") not in ("read", "storing"):
            raise LearnRefused(
                f"nothing read to learn in {root}: learn reads the past first"
                + (f" (its last learn is {job['status']})" if job.get("status") else "")
            )
        await self.store.set_job(root, {"status": "storing"})
        # What it read is checked again where it is written: the ledger of its place, with
        # the people forgotten across its server since it read them.
        await self.ledger.adopt_server(root)
        by_scope: dict[str, list[tuple[Staged, PastMessage]]] = {}
        for item in await self.store.all_staged(root):
            by_scope.setdefault(item.member.split(" ", 1)[0], []).append(
                (item, _from_json(item.data))
            )
        for scope in sorted(by_scope, key=lambda s: (s != root, s)):  # the channel first
            items = sorted(by_scope[scope], key=lambda pair: (pair[0].ts_ms, pair[1].platform_id))
            await self._store_scope(root, scope, items, progress)
        await self.store.set_job(root, {"status": "done"})
        done = await self.status(root)
        await self.store.drop_staged(root)
        return done

    async def _store_scope(
        self,
        root: str,
        scope: str,
        items: list[tuple[Staged, PastMessage]],
        progress: Progress | None,
    ) -> None:
        state = await self.reads.state(scope)
        tz = state.tz or self.settings.memory.timezone
        # The day the place's memory began: its past ends before it. Worked out once per
        # learn and kept with it (once the past is put in place, the log begins earlier).
        kept = (await self.store.job(root)).get(f"began:{scope}")
        if kept:
            cutoff_day = kept
        else:
            first = await self.store.first_entry(scope)
            now_ms = calendar.to_ms(self.clock.now())
            cutoff_day = calendar.local_day_ms(min(first[1] if first else now_ms, now_ms), tz)
            await self.store.set_job(root, {f"began:{scope}": cutoff_day})
        cutoff_ms = calendar.to_ms(calendar.day_start(cutoff_day, tz))
        past = [(s, m) for s, m in items if s.ts_ms < cutoff_ms]
        later = [(s, m) for s, m in items if s.ts_ms >= cutoff_ms]
        if past:
            await self._store_past(root, scope, past, cutoff_day, tz)
            if progress is not None:
                await _tell(progress, await self.status(root))
        stored = not_stored = forgotten = 0
        for staged, message in later:
            try:
                result = await self.intake.accept(_incoming(message), hold=False, own_day=True)
            except EmptyMessage:
                result = None
            if result is not None and result.outcome == "day_closed":
                not_stored += 1
            elif result is not None and result.outcome == "forgotten":
                forgotten += 1  # forgotten since it was read
            elif result is not None and result.stored and result.outcome != "duplicate":
                stored += 1
            await self.store.unstage(root, [staged.member])
        await self.store.count(
            root, {"stored": stored, "not_stored": not_stored, "forgotten": forgotten}
        )
        if later:
            await self.maintenance.schedule(scope)  # its days closed, as any place's
        worker = self.recall.worker if self.recall is not None else None
        if worker is not None:
            worker.look_through(scope)  # the learned messages' vectors, in the background
        if progress is not None:
            await _tell(progress, await self.status(root))

    async def _store_past(
        self,
        root: str,
        scope: str,
        past: list[tuple[Staged, PastMessage]],
        cutoff_day: str,
        tz: str,
    ) -> None:
        """The messages before the place's first day, put before its memory, then their days
        summarised. Again after a crash half-way: those put in place already (their ids are
        noted with them, in one step) are not put again, and their days are summarised (a
        day summarised already is not: its record is marked)."""
        fields_of: list[tuple[int, dict[str, str], PastMessage]] = []
        thread = Scope.of(scope).thread
        held = await self.store.stored_already([(scope, m.platform_id) for _, m in past])
        for (staged, message), stored in zip(past, held, strict=True):
            if stored:
                continue
            try:
                prepared = self.intake.prepare(_incoming(message))
            except EmptyMessage:
                continue
            fields = {
                "r": message.role,
                "a": message.author,
                "u": message.author_id,
                "t": prepared.text,
                "ts": str(staged.ts_ms),
                "p": message.platform_id,
                "k": str(prepared.tokens),
            }
            if message.audience.lets_facts_out:
                fields["v"] = "1"
            fields_of.append((staged.ts_ms, fields, message))
        for _ in range(PUT_TRIES):
            # Checked against the ledger as it is now, and put in place only while it is
            # still so (the script compares its version): a forget meanwhile, again.
            ledger = await self.ledger.read(scope)
            kept = [
                (ts_ms, fields, message)
                for ts_ms, fields, message in fields_of
                if ledger.keeps(scope, message.platform_id, message.author_id, ts_ms, fields["t"])
            ]
            speakers = sorted(
                {f"{m.author_id}|{thread}" for _, _, m in kept if m.role == "user" and m.author_id}
            )
            entries = [(ts_ms, fields) for ts_ms, fields, _ in kept]
            ids = await self.store.prepend(
                scope, entries, ledger_version=ledger.version, speakers=speakers
            )
            if ids is not None:
                break
        else:
            raise LearnRefused(f"{scope}: things kept being forgotten while it was learned")
        if entries and not ids:
            raise LearnRefused(
                f"{scope} kept changing while its past was put in place: run learn again"
            )
        await self.store.count(root, {"stored": len(ids), "forgotten": len(fields_of) - len(kept)})
        cutoff_ms = calendar.to_ms(calendar.day_start(cutoff_day, tz))
        for _ in range(PUT_TRIES):
            # The summaries are written only while nothing was forgotten since their messages
            # were read (the epoch, compared where they are written); else read again.
            epoch = (await self.reads.state(scope)).epoch
            put = await self.store.entries_between(scope, past[0][0].ts_ms, cutoff_ms)
            report = await self.past_days.summarise(scope, put, cutoff_day=cutoff_day, epoch=epoch)
            if report is not None:
                break
        else:
            report = PastReport()
            log.warning("%s: its past's summaries kept meeting forgets: left to maintenance", scope)
        await self.store.unstage(root, [staged.member for staged, _ in past])
        await self.store.count(root, {"day_records": report.days, "weeks": report.weeks})
        await self.maintenance.schedule(scope)  # mid and overview made again with the past in


def _keep(
    messages: list[PastMessage], known: list[bool], gone: Ledger, since_ms: int
) -> tuple[list[Staged], int]:
    """Of a page's messages, those to keep (new, in the window, not forgotten), and how many
    were left out as forgotten."""
    kept: list[Staged] = []
    forgotten = 0
    for message, held in zip(messages, known, strict=True):
        ts_ms = calendar.to_ms(message.ts)
        if held or ts_ms < since_ms:
            continue
        if not gone.keeps(
            message.scope, message.platform_id, message.author_id, ts_ms, message.text
        ):
            forgotten += 1
            continue
        kept.append(
            Staged(
                member=staged_member(message.scope, message.platform_id),
                ts_ms=ts_ms,
                data=_to_json(message),
            )
        )
    return kept, forgotten


async def _tell(progress: Progress, now: LearnProgress) -> None:
    maybe = progress(now)
    if maybe is not None:
        await maybe


def _root(place: str) -> str:
    return Scope.of(place).root.key


def _within(message: PastMessage, root: str) -> bool:
    """A source only hands over its own place's messages; one outside is a source's bug,
    never stored elsewhere."""
    if Scope.of(message.scope).root.key == root and message.platform_id:
        return True
    log.warning("a source gave a message of %s while learning %s: left out", message.scope, root)
    return False


def _incoming(message: PastMessage) -> IncomingMessage:
    return IncomingMessage(
        scope=message.scope,
        text=message.text,
        author=message.author,
        author_id=message.author_id,
        ts=message.ts,
        role=message.role,
        platform_id=message.platform_id,
        place_name=message.place_name,
        audience=message.audience,
        attachments=message.attachments,
    )


def _to_json(message: PastMessage) -> str:
    return json.dumps(
        {
            "s": message.scope,
            "p": message.platform_id,
            "ts": message.ts.isoformat(),
            "t": message.text,
            "a": message.author,
            "u": message.author_id,
            "r": message.role,
            "v": message.audience.value,
            "n": message.place_name,
            "f": [[a.name, a.kind, a.size, a.description, a.url] for a in message.attachments],
        },
        ensure_ascii=False,
    )


def _from_json(raw: str) -> PastMessage:
    data = json.loads(raw)
    return PastMessage(
        scope=data["s"],
        platform_id=data["p"],
        ts=datetime.fromisoformat(data["ts"]),
        text=data["t"],
        author=data["a"],
        author_id=data["u"],
        role="assistant" if data["r"] == "assistant" else "user",
        audience=Audience(data["v"]),
        place_name=data["n"],
        attachments=tuple(
            Attachment(name=n, kind=k, size=s, description=d, url=u) for n, k, s, d, u in data["f"]
        ),
    )
