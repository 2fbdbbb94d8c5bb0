"""What the last answer in a scope was based on (``/memory why``): one small JSON record
per scope, written when an answer is delivered, from what prompt assembly actually put in
within the budget (never re-derived, no model call), replaced by the next answer and kept
``memory.why_ttl_hours``.

The record quotes nothing: it names what the prompt held (a fact by its holder and id, a
message by its scope and stream id, a day record by its day) and the words are read again
when it is shown. So a forget reaches every record without finding them: what it removed is
simply not there to read (fact ids are never given twice, so an old id never shows a newer
fact). Any forget or edit in the scope also deletes its record
(:meth:`~memory_core.store.repo_writes.ScopeWrites.begin_forgets`), and the write is refused
if a forget started after the prompt was read.

The core stores platform ids only; a front door turns them into links when it is shown.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.errors import StoreError
from memory_core.models import Fact, IncomingMessage, LogEntry, Reply
from memory_core.prompt.assembly import Prompt
from memory_core.recall.documents import day_text
from memory_core.scopes import Scope
from memory_core.store.repo import MemoryRepo

log = logging.getLogger(__name__)

RECORD_VERSION = 2
MAX_FACTS = 30
MAX_RECALLED = 24
SNIPPET_CHARS = 200
FACT_CHARS = 200


@dataclass(frozen=True, slots=True)
class UsedFact:
    id: str
    text: str
    kind: str
    subject: str  # who it is about ("" = the channel)
    subject_id: str
    origin: str  # the scope it was learned in
    by: str  # who pinned it or said it
    ts: str  # when it was learned (ISO)
    pinned: bool
    personal: bool  # about the person who asked, from their own (guild-wide) facts


@dataclass(frozen=True, slots=True)
class UsedMessage:
    id: str  # the stream id ("" for a day summary)
    platform_id: str  # the platform's message id ("" where there is none: the console)
    ms: int  # when it was said
    author: str
    author_id: str
    snippet: str
    kind: str = "message"  # "message" | "day" (a recalled summary of a day)
    in_parent: bool = False  # said in the thread's channel (how it began; recall there)


@dataclass(frozen=True, slots=True)
class AnswerRecord:
    """A record as shown: what it names that still exists, read now."""

    at: str  # when the answer was given (ISO)
    kind: str  # the reply's kind: "llm" | "offline"
    asker_id: str
    asker: str
    tz: str = "UTC"  # the scope's timezone then: dates are shown in it
    sections: dict[str, int] = field(default_factory=dict)  # tokens by section
    facts: tuple[UsedFact, ...] = ()
    recalled: tuple[UsedMessage, ...] = ()  # best first


@dataclass(frozen=True, slots=True)
class _FactRef:
    holder: str  # the scope that holds the fact (the channel, or the asker's person scope)
    id: str
    personal: bool


@dataclass(frozen=True, slots=True)
class _DocRef:
    scope: str  # where it was said
    id: str  # stream id ("" for a day record)
    ms: int
    kind: str  # "message" | "day"
    day: str = ""  # a day record's day


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record as kept: names, no words (see the module docstring)."""

    at: str
    kind: str
    asker_id: str
    asker: str
    tz: str
    sections: dict[str, int]
    facts: tuple[_FactRef, ...]
    recalled: tuple[_DocRef, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": RECORD_VERSION,
                "at": self.at,
                "kind": self.kind,
                "asker_id": self.asker_id,
                "asker": self.asker,
                "tz": self.tz,
                "sections": self.sections,
                "facts": [[f.holder, f.id, int(f.personal)] for f in self.facts],
                "recalled": [[d.scope, d.id, d.ms, d.kind, d.day] for d in self.recalled],
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, raw: str) -> _Stored:
        data: dict[str, Any] = json.loads(raw)
        if data.get("v") != RECORD_VERSION:
            raise ValueError(f"record version {data.get('v')!r}")
        return cls(
            at=str(data.get("at", "")),
            kind=str(data.get("kind", "")),
            asker_id=str(data.get("asker_id", "")),
            asker=str(data.get("asker", "")),
            tz=str(data.get("tz", "UTC")),
            sections={str(k): int(v) for k, v in dict(data.get("sections", {})).items()},
            facts=tuple(_FactRef(str(h), str(i), bool(p)) for h, i, p in data.get("facts", [])),
            recalled=tuple(
                _DocRef(str(s), str(i), int(ms), str(k), str(d))
                for s, i, ms, k, d in data.get("recalled", [])
            ),
        )


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def build_record(msg: IncomingMessage, reply: Reply, prompt: Prompt, *, now: datetime) -> _Stored:
    """The record of ``reply`` from its prompt: what it held, by name."""
    used = prompt.used
    personal = {id(f) for f in used.personal}
    person = Scope.of(msg.scope).person_scope(msg.author_id)
    facts = tuple(
        _FactRef(
            holder=person.key if id(f) in personal and person else msg.scope,
            id=f.id,
            personal=id(f) in personal,
        )
        for f in used.facts[:MAX_FACTS]
    )
    parent = Scope.of(msg.scope).parent
    started = tuple(
        _DocRef(scope=parent.key, id=e.id, ms=e.ms, kind="message")
        for e in used.started
        if parent is not None and e.id  # (a first message memory lacks is not in its log)
    )
    recalled = started + tuple(
        _DocRef(scope=where or msg.scope, id=d.id, ms=d.ms, kind=d.kind, day=d.day)
        for where, d in used.recalled_pairs()[:MAX_RECALLED]
        if d.kind in ("message", "day")
    )
    return _Stored(
        at=now.isoformat(timespec="seconds"),
        kind=reply.kind,
        asker_id=msg.author_id,
        asker=msg.author[:120],
        tz=used.tz,
        sections=dict(prompt.sections),
        facts=facts,
        recalled=recalled,
    )


async def record_answer(
    repo: MemoryRepo, msg: IncomingMessage, reply: Reply, *, now: datetime, ttl_hours: int
) -> bool:
    """Keep what a delivered answer used; whether it was stored (refused when something
    was forgotten in the scope since its prompt was read). Apologies record nothing."""
    prompt = reply.prompt
    if not isinstance(prompt, Prompt) or reply.kind not in ("llm", "offline"):
        return False
    record = build_record(msg, reply, prompt, now=now)
    stored = await repo.writes.put_answer_record(
        msg.scope, record.to_json(), ttl_ms=ttl_hours * 3_600_000, epoch=prompt.used.epoch
    )
    if not stored:
        log.info("the record of an answer in %s was dropped: memory was forgotten", msg.scope)
    return stored


async def remember_basis(
    repo: MemoryRepo, msg: IncomingMessage, reply: Reply, *, now: datetime, ttl_hours: int
) -> None:
    """After an answer is delivered: record what it used (a store failure costs only the
    record, logged)."""
    try:
        await record_answer(repo, msg, reply, now=now, ttl_hours=ttl_hours)
    except StoreError as exc:
        log.warning("no /memory why record in %s: %s", msg.scope, exc)


async def read_record(repo: MemoryRepo, scope: str) -> AnswerRecord | None:
    """The scope's record as it can be shown now: the facts, messages and day records it
    names that still exist, with their words as they are now."""
    raw = await repo.writes.answer_record(scope)
    if raw is None:
        return None
    try:
        stored = _Stored.from_json(raw)
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("the /memory why record of %s is unreadable; ignored: %s", scope, exc)
        return None
    return AnswerRecord(
        at=stored.at,
        kind=stored.kind,
        asker_id=stored.asker_id,
        asker=stored.asker,
        tz=stored.tz,
        sections=stored.sections,
        facts=await _facts(repo, stored.facts, scope),
        recalled=await _recalled(repo, stored.recalled, scope),
    )


async def _facts(repo: MemoryRepo, refs: tuple[_FactRef, ...], scope: str) -> tuple[UsedFact, ...]:
    holders = sorted({ref.holder for ref in refs})
    alive = {
        (holder, fact.id): fact
        for holder, facts in (await repo.reads.facts_of(holders)).items()
        for fact in facts
    }
    return tuple(
        _used_fact(fact, ref.personal, scope)
        for ref in refs
        if (fact := alive.get((ref.holder, ref.id))) is not None
    )


def _used_fact(fact: Fact, personal: bool, scope: str) -> UsedFact:
    return UsedFact(
        id=fact.id,
        text=_cut(fact.text, FACT_CHARS),
        kind=fact.kind,
        subject=fact.subject[:120],
        subject_id=fact.subject_id,
        origin=fact.origin or scope,  # a channel's own facts were learned in it
        by=fact.by[:120],
        ts=fact.ts,
        pinned=fact.pinned,
        personal=personal,
    )


async def _recalled(
    repo: MemoryRepo, refs: tuple[_DocRef, ...], scope: str
) -> tuple[UsedMessage, ...]:
    entries: dict[tuple[str, str], LogEntry] = {}
    days: dict[tuple[str, str], str] = {}
    for place in sorted({ref.scope for ref in refs}):
        ids = [r.id for r in refs if r.scope == place and r.kind == "message" and r.id]
        entries.update({(place, e.id): e for e in await repo.reads.entries_by_ids(place, ids)})
        if any(r.scope == place and r.kind == "day" for r in refs):
            days.update({(place, d.day): day_text(d) for d in await repo.reads.episodes(place)})
    out: list[UsedMessage] = []
    for ref in refs:
        if ref.kind == "day":
            if text := days.get((ref.scope, ref.day), ""):
                out.append(UsedMessage("", "", ref.ms, "", "", _cut(text, SNIPPET_CHARS), "day"))
        elif (entry := entries.get((ref.scope, ref.id))) is not None:
            out.append(
                UsedMessage(
                    id=entry.id,
                    platform_id=entry.platform_id,
                    ms=ref.ms,
                    author=entry.author,
                    author_id=entry.author_id,
                    snippet=_cut(entry.text, SNIPPET_CHARS),
                    in_parent=ref.scope != scope,
                )
            )
    return tuple(out)
