"""Facts: merging what a summary call extracted into what the scope already knows.

A fact that says the same thing again is kept once; a fact about the same subject and kind
that is close but different replaces the old text (newest wins) and keeps the old one in its
history, so "Alice prefers tea" followed by "Alice prefers coffee now" leaves one fact.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from memory_core.models import Fact
from memory_core.summarize import FactDraft

_WORD = re.compile(r"\w+", re.U)
SIMILAR = 0.5  # trigram overlap above which two facts about one subject are "the same fact"
HISTORY_MAX = 5


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(text))


def _trigrams(text: str) -> set[str]:
    norm = normalise(text).replace(" ", "")
    return {norm[i : i + 3] for i in range(max(1, len(norm) - 2))}


def similarity(a: str, b: str) -> float:
    ta, tb = _trigrams(a), _trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def merge_ops(
    existing: Sequence[Fact],
    drafts: Sequence[FactDraft],
    *,
    now_iso: str,
    message_ids: Sequence[str],
    facts_max: int,
    origin: str = "",
) -> list[list[str]]:
    """Operations for the compaction script: ["new", "", json] or ["upd", id, json]."""
    ops: list[list[str]] = []
    known = {normalise(f.text): f for f in existing}
    by_id = {f.id: f for f in existing}
    room = max(0, facts_max - len(existing))
    for draft in drafts:
        norm = normalise(draft.text)
        if not norm or norm in known:
            continue
        # The model named the fact it changes; otherwise find the same fact by its wording.
        rival = by_id.get(draft.id) if draft.id else None
        if rival is None:
            rival = _closest(existing, draft)
        if rival is not None and not rival.pinned:
            history = [*rival.history, rival.text][-HISTORY_MAX:]
            updated = Fact(
                id=rival.id,
                kind=draft.kind if rival.kind == "question" else rival.kind,
                text=draft.text,
                subject=rival.subject,
                source="summary",
                by=draft.subject or rival.by,
                ts=now_iso,
                message_ids=[*rival.message_ids, *message_ids][-20:],
                pinned=False,
                history=history,
                origin=rival.origin or origin,
            )
            ops.append(["upd", rival.id, updated.to_json()])
            known[norm] = updated
            continue
        if room <= 0:
            continue
        room -= 1
        fact = Fact(
            id="",
            kind=draft.kind,
            text=draft.text,
            subject=draft.subject,
            source="summary",
            by=draft.subject,
            ts=now_iso,
            message_ids=list(message_ids)[-20:],
            origin=origin,
        )
        ops.append(["new", "", fact.to_json()])
        known[norm] = fact
    return ops


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
