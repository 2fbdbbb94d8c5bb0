"""Compaction: today's unsummarised messages, oldest first and in chunks, summarised into
the scope's 'short' tier, with the facts the summary learned (the channel's in the same atomic
step; a person's in their own scope after it). Without the model (offline, a budget reached)
the facts are those the messages state plainly (memory_core.tiers.stated), merged the same
way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core import calendar
from memory_core.errors import LLMUnavailable
from memory_core.models import LogEntry, ScopeState
from memory_core.text.language import resolve
from memory_core.tiers.fact_routing import KnownFacts, speakers_of
from memory_core.tiers.facts import merge_ops
from memory_core.tiers.steps import Known, MaintenanceReport, StepPolicy, iso
from memory_core.tiers.summarize import FactDraft, Summarizer

READ_LIMIT = 5000  # entries read per step; a backlog is eaten in several steps


class Compactor:
    def __init__(self, *, summarizer: Summarizer, policy: StepPolicy) -> None:
        self.policy = policy  # the repo, settings and clock the steps share come with it
        self.repo = policy.repo
        self.settings = policy.settings
        self.clock = policy.clock
        self.summarizer = summarizer

    async def compact(
        self,
        scope: str,
        state: ScopeState,
        report: MaintenanceReport,
        *,
        final: bool,
        entries: list[LogEntry] | None = None,
    ) -> Known | None:
        if self.policy.waiting(state, report):
            return None
        settings = self.settings
        tz = self.policy.tz(state)
        if entries is None:
            end_ms = calendar.day_end_ms(state.day, tz)
            entries = await self.repo.reads.entries_after(
                scope, state.short_upto, before_ms=end_ms, limit=READ_LIMIT
            )
        candidates = entries if final else _drop_newest(entries, settings.compact_keep_tokens)
        chunk = take_oldest(candidates, settings.compact_max_input_tokens)
        if not chunk:
            return None
        lang = resolve(state.lang or settings.language, (e.text for e in chunk[-50:]))
        force = self.policy.force_extractive(scope, state)
        known = await self.known_facts(scope, state, chunk, force)
        try:
            outcome = await self.summarizer.compact(
                day=state.day,
                previous=state.short,
                entries=chunk,
                tz=tz,
                lang=lang,
                max_tokens=settings.short_tokens,
                force_extractive=force,
                known_facts=known.for_prompt(),
            )
        except LLMUnavailable as exc:
            return await self.policy.llm_failed(scope, state, exc, report)
        known = await self.merging_into(scope, state, chunk, known, outcome.facts)
        now_iso = iso(self.clock.now())
        channel_drafts, personal = known.route(outcome.facts, chunk)
        ops: list[list[str]] = []
        if channel_drafts:
            ops = merge_ops(
                known.channel,
                channel_drafts,
                now_iso=now_iso,
                facts_max=settings.facts_max,
                origin=scope,
            )
        after = await self.repo.steps.advance_short(
            scope,
            expected_upto=state.short_upto,
            expected_day=state.day,
            new_upto=chunk[-1].id,
            short=outcome.summary,
            tokens=sum(e.tokens for e in chunk),
            count=len(chunk),
            now_iso=now_iso,
            epoch=state.epoch,
            fact_ops=ops,
        )
        if after is None:
            return Known()  # someone else moved the scope on: read it again
        report.compactions += 1
        await self.learn_about_people(scope, state, known, personal, now_iso)
        return Known(state=after)

    async def learn_about_people(
        self,
        scope: str,
        state: ScopeState,
        known: KnownFacts,
        personal: Mapping[str, list[FactDraft]],
        now_iso: str,
    ) -> None:
        """The facts about people the summary learned, each merged into their own scope."""
        for person_scope, drafts in personal.items():
            before = known.people.get(person_scope, [])
            ops = merge_ops(
                before,
                drafts,
                now_iso=now_iso,
                facts_max=self.settings.facts_max,
                origin=scope,
                shared=True,
            )
            await self.repo.writes.apply_person_facts(
                person_scope, ops, before=before, origin=scope, epoch=state.epoch
            )

    async def known_facts(
        self, scope: str, state: ScopeState, chunk: Sequence[LogEntry], extractive: bool
    ) -> KnownFacts:
        """The facts a summary call may update: the channel's, and those about the people
        speaking in ``chunk`` who may carry facts across the guild or workspace."""
        if extractive or self.summarizer.llm.offline:
            speakers, public_speakers = speakers_of(scope, chunk)
            return KnownFacts(
                channel=[],
                people={},
                speakers=speakers,
                public_speakers=public_speakers,
                read=False,
            )
        return await self.read_known_facts(scope, state, chunk)

    async def merging_into(
        self,
        scope: str,
        state: ScopeState,
        chunk: Sequence[LogEntry],
        known: KnownFacts,
        drafts: Sequence[FactDraft],
    ) -> KnownFacts:
        """The facts ``drafts`` merge into: ``known``, unless the summary went without them
        (extractive) and its rules still found facts; those are read now, so a fact said
        again is confirmed, not learned twice. (The channel's are read whatever ``state``
        says: learning a past writes facts chunk by chunk from one state read before.)"""
        if known.read or not drafts:
            return known
        return await self.read_known_facts(scope, state, chunk, fresh=True)

    async def read_known_facts(
        self, scope: str, state: ScopeState, chunk: Sequence[LogEntry], *, fresh: bool = False
    ) -> KnownFacts:
        speakers, public_speakers = speakers_of(scope, chunk)
        channel = await self.repo.reads.facts(scope) if state.fact_seq or fresh else []
        people = await self.repo.reads.facts_of(sorted(set(public_speakers.values())))
        return KnownFacts(
            channel=channel,
            people={p: [f for f in facts if f.shared] for p, facts in people.items()},
            speakers=speakers,
            public_speakers=public_speakers,
        )


def _drop_newest(entries: Sequence[LogEntry], keep_tokens: int) -> list[LogEntry]:
    """All but the newest entries worth ``keep_tokens``: those stay verbatim for now."""
    kept = 0
    cut = len(entries)
    for i in range(len(entries) - 1, -1, -1):
        kept += entries[i].tokens
        if kept > keep_tokens:
            break
        cut = i
    return list(entries[:cut])


def take_oldest(entries: Sequence[LogEntry], max_tokens: int) -> list[LogEntry]:
    """The oldest entries within ``max_tokens`` (always at least one, however long)."""
    chunk: list[LogEntry] = []
    total = 0
    for entry in entries:
        if chunk and total + entry.tokens > max_tokens:
            break
        chunk.append(entry)
        total += entry.tokens
    return chunk
