"""What the last answer in a scope was based on (``/memory why``): one small JSON record
per scope, written when an answer is delivered, from what prompt assembly actually put in
within the budget (never re-derived, no model call), replaced by the next answer and kept
``memory.why_ttl_hours``.

The core stores platform ids only; a front door turns them into links when the record is
shown. Forgetting reaches the record like everything else: any forget or edit in the scope
deletes it (:meth:`~memory_core.store.repo_writes.ScopeWrites.begin_forget`), the write is
refused if a forget started after the prompt was read, and a fact is shown only while it
still exists.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from memory_core.errors import StoreError
from memory_core.models import Fact, IncomingMessage, Reply
from memory_core.prompt.assembly import Prompt
from memory_core.scopes import user_scope
from memory_core.store.repo import MemoryRepo

log = logging.getLogger(__name__)

RECORD_VERSION = 1
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


@dataclass(frozen=True, slots=True)
class AnswerRecord:
    at: str  # when the answer was given (ISO)
    kind: str  # the reply's kind: "llm" | "offline"
    asker_id: str
    asker: str
    tz: str = "UTC"  # the scope's timezone then: dates are shown in it
    sections: dict[str, int] = field(default_factory=dict)  # tokens by section
    facts: tuple[UsedFact, ...] = ()
    recalled: tuple[UsedMessage, ...] = ()  # best first

    def to_json(self) -> str:
        data = asdict(self)
        data["v"] = RECORD_VERSION
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> AnswerRecord:
        data: dict[str, Any] = json.loads(raw)
        return cls(
            at=str(data.get("at", "")),
            kind=str(data.get("kind", "")),
            asker_id=str(data.get("asker_id", "")),
            asker=str(data.get("asker", "")),
            tz=str(data.get("tz", "UTC")),
            sections={str(k): int(v) for k, v in dict(data.get("sections", {})).items()},
            facts=tuple(UsedFact(**f) for f in data.get("facts", [])),
            recalled=tuple(UsedMessage(**m) for m in data.get("recalled", [])),
        )


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def build_record(
    repo: MemoryRepo, msg: IncomingMessage, reply: Reply, prompt: Prompt, *, now: datetime
) -> AnswerRecord:
    """The record of ``reply`` from its prompt. Recalled messages are looked up by stream id
    for their platform ids (one round trip); one no longer in the log is left out."""
    used = prompt.used
    personal = {id(f) for f in used.personal}
    facts = tuple(_used_fact(f, id(f) in personal, msg.scope) for f in used.facts[:MAX_FACTS])
    docs = used.recalled[:MAX_RECALLED]
    entries = {e.id: e for e in await repo.entries_by_ids(msg.scope, [d.id for d in docs if d.id])}
    recalled: list[UsedMessage] = []
    for doc in docs:
        if doc.kind == "day":
            recalled.append(
                UsedMessage("", "", doc.ms, "", "", _cut(doc.text, SNIPPET_CHARS), kind="day")
            )
        elif (entry := entries.get(doc.id)) is not None:
            recalled.append(
                UsedMessage(
                    id=entry.id,
                    platform_id=entry.platform_id,
                    ms=doc.ms,
                    author=entry.author,
                    author_id=entry.author_id,
                    snippet=_cut(entry.text, SNIPPET_CHARS),
                )
            )
    return AnswerRecord(
        at=now.isoformat(timespec="seconds"),
        kind=reply.kind,
        asker_id=msg.author_id,
        asker=msg.author[:120],
        tz=used.tz,
        sections=dict(prompt.sections),
        facts=facts,
        recalled=tuple(recalled),
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


async def record_answer(
    repo: MemoryRepo, msg: IncomingMessage, reply: Reply, *, now: datetime, ttl_hours: int
) -> bool:
    """Keep what a delivered answer used; whether it was stored (refused when something
    was forgotten in the scope since its prompt was read). Apologies record nothing."""
    prompt = reply.prompt
    if not isinstance(prompt, Prompt) or reply.kind not in ("llm", "offline"):
        return False
    record = await build_record(repo, msg, reply, prompt, now=now)
    stored = await repo.put_answer_record(
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
    """The scope's record, with only the facts that still exist (a fact forgotten since, here
    or in its person's own scope, is not shown)."""
    raw = await repo.answer_record(scope)
    if raw is None:
        return None
    try:
        record = AnswerRecord.from_json(raw)
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("the /memory why record of %s is unreadable; ignored: %s", scope, exc)
        return None
    if not record.facts:
        return record
    person = user_scope(scope, record.asker_id)
    holders = sorted({scope, *([person] if person else [])})
    alive = {
        (holder, f.id) for holder, facts in (await repo.facts_of(holders)).items() for f in facts
    }
    kept = tuple(
        f for f in record.facts if (person if f.personal and person else scope, f.id) in alive
    )
    return AnswerRecord(
        at=record.at,
        kind=record.kind,
        asker_id=record.asker_id,
        asker=record.asker,
        tz=record.tz,
        sections=record.sections,
        facts=kept,
        recalled=record.recalled,
    )
