"""An export loaded into memory brings back nothing forgotten: before it is written, its
messages are checked against the place's erasure ledger (:mod:`memory_core.store.gone`) as
a live message would be, and what was made of the ones left out goes with them, as a forget
would have taken it: the summary sentences that quote them or hold a forgotten text, the
facts drawn from them, about a forgotten person or holding a forgotten text.
"""

from __future__ import annotations

from dataclasses import replace

from memory_core.calendar import to_ms
from memory_core.models import TIER_FIELDS, LogEntry, WeekSummary
from memory_core.service.forget_request import redact_day
from memory_core.store.gone import Ledger, gone_person
from memory_core.store.records import ScopeDump
from memory_core.tiers.redact import redact_quotes, without_sentences


def without_forgotten(dump: ScopeDump, ledger: Ledger, *, scope: str) -> tuple[ScopeDump, int]:
    """``dump`` without what ``ledger`` says was forgotten; and how many messages went."""
    kept: list[LogEntry] = []
    dropped: list[LogEntry] = []
    for entry in dump.log:
        said = to_ms(entry.ts)
        keeps = ledger.keeps(
            scope, entry.platform_id, entry.author_id, said, entry.text, also_ids=entry.parts
        )
        (kept if keeps else dropped).append(entry)
    if not dropped and not ledger.texts and not ledger.people:
        return dump, 0  # nothing was ever forgotten here: the export as it is
    quotes = [e.text for e in dropped]
    gone_ids = {e.id for e in dropped}

    def clean(text: str) -> str:
        # A summary is newer than what it summarises: any text forgotten here goes from it.
        text = redact_quotes(text, quotes)
        if not ledger.forgotten_text(text, 0):
            return text
        return without_sentences(text, lambda sentence: ledger.forgotten_text(sentence, 0))

    state = dict(dump.state)
    for name in TIER_FIELDS:
        if state.get(name):
            state[name] = clean(state[name])
    facts = [
        f
        for f in dump.facts
        if not gone_ids.intersection(f.message_ids)
        and not (f.subject_id and gone_person(f.subject_id) in ledger.people)
        and not any(ledger.forgotten_text(t, 0) for t in (f.text, f.subject, *f.history))
    ]
    cleaned = replace(
        dump,
        state=state,
        log=kept,
        days=[redact_day(d, clean) for d in dump.days],
        episodes=[redact_day(d, clean) for d in dump.episodes],
        weeks=[WeekSummary(w.week, clean(w.summary), w.days, w.degraded) for w in dump.weeks],
        facts=facts,
    )
    return cleaned, len(dropped)
