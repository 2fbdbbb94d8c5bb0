"""Facts: merging what a summary call extracted into what a scope already knows.

A fact that says the same thing again is kept once (and counts as confirmed); a fact about
the same subject and kind that is close but different replaces the old text (newest wins)
and keeps the old one in its history, so "Alice prefers tea" followed by "Alice prefers
coffee now" leaves one fact. Every fact records the raw messages it was drawn from, so that
forgetting or deleting a message reaches the facts made of it. When a scope holds
``facts_max`` facts, a new one evicts the unpinned fact confirmed least recently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from memory_core.models import Fact, LogEntry
from memory_core.text.normalise import normalise as text_normalise
from memory_core.tiers.summarize import FactDraft

_WORD = re.compile(r"\w+", re.U)
SIMILAR = 0.5  # trigram overlap above which two facts about one subject are "the same fact"
HISTORY_MAX = 5
PROVENANCE_MAX = 50  # message ids kept per fact


def normalise(text: str) -> str:
    """A fact's words as a reader sees them (see memory_core.text.normalise)."""
    return " ".join(_WORD.findall(text_normalise(text)))


def _trigrams(text: str) -> set[str]:
    norm = normalise(text).replace(" ", "")
    return {norm[i : i + 3] for i in range(max(1, len(norm) - 2))}


def similarity(a: str, b: str) -> float:
    ta, tb = _trigrams(a), _trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def _content(text: str) -> set[str]:
    """Words worth matching on: longer words, and pairs of characters of unspaced scripts."""
    out: set[str] = set()
    for word in normalise(text).split():
        if word.isascii():
            if len(word) >= 4:
                out.add(word)
        else:
            out.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
    return out


def provenance(text: str, subject_id: str, chunk: Sequence[LogEntry]) -> tuple[str, ...]:
    """The messages of ``chunk`` a fact was drawn from, as well as we can tell without
    asking the model: its subject's messages (everyone's when the subject is unknown) that
    share words with it; all of those when none does."""
    people = [e for e in chunk if e.role == "user"]
    if subject_id:
        people = [e for e in people if e.author_id == subject_id] or people
    words = _content(text)
    matching = [e for e in people if words & _content(e.text)]
    chosen = matching or people or list(chunk)
    return tuple(e.id for e in chosen)[-PROVENANCE_MAX:]


def merge_ops(
    existing: Sequence[Fact],
    drafts: Sequence[FactDraft],
    *,
    now_iso: str,
    facts_max: int,
    origin: str = "",
    shared: bool = False,
) -> list[list[str]]:
    """Operations for the fact scripts: ["new", "", json], ["upd", id, json], ["del", id, ""].

    ``shared``: the facts may follow their subject across the guild or workspace (they go
    to the person's own scope, learned where everyone could see)."""
    ops: list[list[str]] = []
    known = {normalise(f.text): f for f in existing}
    by_id = {f.id: f for f in existing}
    live = {f.id: f for f in existing}  # what is left after the ops so far
    for draft in drafts:
        norm = normalise(draft.text)
        if not norm:
            continue
        same = known.get(norm)
        if same is not None:
            if same.id in live and (same.seen[:10] != now_iso[:10] or _moves(same, origin)):
                confirmed = _confirmed(same, draft, now_iso, origin)
                ops.append(["upd", same.id, confirmed.to_json()])
                known[norm] = live[same.id] = confirmed
            continue
        # The model named the fact it changes; otherwise find the same fact by its wording.
        rival = by_id.get(draft.id) if draft.id else None
        if rival is None:
            rival = _closest(list(live.values()), draft)
        if rival is not None and not rival.pinned and rival.id in live:
            updated = _rewritten(rival, draft, now_iso, origin=origin, shared=shared)
            ops.append(["upd", rival.id, updated.to_json()])
            known[norm] = live[rival.id] = updated
            continue
        if len(live) + sum(op[0] == "new" for op in ops) >= facts_max:
            victim = _least_confirmed(live.values())
            if victim is None:
                continue  # everything is pinned: a pinned note is never pushed out
            ops.append(["del", victim.id, ""])
            del live[victim.id]
        fact = _learned(draft, now_iso, origin=origin, shared=shared)
        ops.append(["new", "", fact.to_json()])
        known[norm] = fact
    return ops


def _rewritten(rival: Fact, draft: FactDraft, now_iso: str, *, origin: str, shared: bool) -> Fact:
    """``rival`` with the draft's new text. Learned again elsewhere (a person's fact, in
    another channel): it now belongs to that place alone, with only what was said there; the
    old text is not kept, so forgetting either place leaves nothing of it behind."""
    moved = _moves(rival, origin)
    return Fact(
        id=rival.id,
        kind=draft.kind if rival.kind == "question" else rival.kind,
        text=draft.text,
        subject=rival.subject,
        source=draft.source,
        by=draft.subject or rival.by,
        ts=now_iso,
        message_ids=[*([] if moved else rival.message_ids), *draft.message_ids][-PROVENANCE_MAX:],
        pinned=False,
        history=[] if moved else [*rival.history, rival.text][-HISTORY_MAX:],
        origin=origin or rival.origin,
        subject_id=rival.subject_id or draft.subject_id,
        shared=rival.shared and shared,
        seen=now_iso,
    )


def _learned(draft: FactDraft, now_iso: str, *, origin: str, shared: bool) -> Fact:
    """A new fact from the draft (its id is given when it is written)."""
    return Fact(
        id="",
        kind=draft.kind,
        text=draft.text,
        subject=draft.subject,
        source=draft.source,
        by=draft.subject,
        ts=now_iso,
        message_ids=list(draft.message_ids),
        origin=origin,
        subject_id=draft.subject_id,
        shared=shared,
        seen=now_iso,
    )


def _moves(fact: Fact, origin: str) -> bool:
    """Whether a fact learned in another place is being learned again in ``origin``."""
    return bool(origin and fact.origin and fact.origin != origin)


def _confirmed(fact: Fact, draft: FactDraft, now_iso: str, origin: str) -> Fact:
    """The same fact said again: remember when, and that these messages say it too (said
    in another place: it belongs there now, with those messages only)."""
    if _moves(fact, origin):
        return replace(
            fact, message_ids=list(draft.message_ids), seen=now_iso, origin=origin, history=[]
        )
    ids = [*fact.message_ids, *(i for i in draft.message_ids if i not in fact.message_ids)]
    return replace(fact, message_ids=ids[-PROVENANCE_MAX:], seen=now_iso)


def _least_confirmed(facts: Iterable[Fact]) -> Fact | None:
    candidates = [f for f in facts if not f.pinned]
    if not candidates:
        return None
    return min(candidates, key=lambda f: (f.seen or f.ts, f.id))


def _closest(existing: Sequence[Fact], draft: FactDraft) -> Fact | None:
    best: Fact | None = None
    best_score = SIMILAR
    for fact in existing:
        if fact.kind != draft.kind or normalise(fact.subject) != normalise(draft.subject):
            continue
        score = similarity(fact.text, draft.text)
        if score >= best_score:
            best, best_score = fact, score
    return best
