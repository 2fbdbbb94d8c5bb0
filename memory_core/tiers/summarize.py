"""Summary calls: build the prompt, ask the summary model for JSON, check the answer, and
stand in with the extractive summary when the model is absent or answers garbage.

Two calls exist. ``compact`` folds new messages into the running summary of a day (it is
also what finishes a day at rollover) and extracts facts in the same call. ``refresh``
rewrites the week tier and the overview from the days list, and at a week boundary also the
finished week and the long-term tier: one call per rollover, not one per tier.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from config.prompts import PromptSet, load_prompts
from memory_core.calendar import zone
from memory_core.errors import LLMBadOutput, LLMOffline
from memory_core.llm.client import LLM, ChatMessage
from memory_core.models import FACT_KINDS, DaySummary, Fact, LogEntry
from memory_core.prompt.fence import fence
from memory_core.text.language import detect
from memory_core.text.sentences import split_sentences
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.extractive import SummaryItem, extractive_summary
from memory_core.tiers.stated import stated_facts

_CODE_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)
_FACT_ID = re.compile(r"^[fp]\d{1,9}$")  # f: the channel's facts; p: people's (aliases)


def render_entry(entry: LogEntry, tz: str, *, with_date: bool = True) -> str:
    """One log line as text: ``2025-08-13 15:30 Alice: text`` (the log-to-text conversion)."""
    when = entry.ts.astimezone(zone(tz))
    stamp = when.strftime("%Y-%m-%d %H:%M" if with_date else "%H:%M")
    return f"{stamp} {entry.author or entry.role}: {entry.text}"


def render_entries(entries: Sequence[LogEntry], tz: str) -> str:
    return "\n".join(render_entry(e, tz) for e in entries)


def parse_json_object(text: str) -> dict[str, object]:
    """The JSON object in a model's answer, tolerating code fences and chatter around it."""
    cleaned = _CODE_FENCE.sub("", text.strip())
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start < 0 or end <= start:
        raise LLMBadOutput("the summary answer holds no JSON object")
    try:
        value = json.loads(cleaned[start : end + 1])
    except json.JSONDecodeError as exc:
        raise LLMBadOutput(f"the summary answer is not valid JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise LLMBadOutput("the summary answer is not a JSON object")
    return value


@dataclass(frozen=True, slots=True)
class FactDraft:
    kind: str
    text: str
    subject: str = ""
    id: str = ""  # a known fact this one replaces (the model saw it was changed)
    # Filled in when the fact is routed, not by the model: who it is about (platform user id)
    # and the raw messages it was drawn from (provenance, so forgetting them reaches it).
    subject_id: str = ""
    message_ids: tuple[str, ...] = ()
    # Who made it: "summary" (the model, in the summary call) or "rules" (the rules of
    # memory_core.tiers.stated, when the extractive summary stands in; they know the
    # messages that said it, so those are its provenance).
    source: str = "summary"


@dataclass(frozen=True, slots=True)
class CompactOutcome:
    summary: str
    facts: list[FactDraft]
    degraded: bool  # the extractive stand-in wrote it


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    mid: str
    overview: str
    week: str = ""
    long: str = ""
    degraded: bool = False


@dataclass
class SummaryStats:
    llm: int = 0
    fallbacks: int = 0  # the model answered garbage: extractive stood in
    offline: int = 0
    forced: int = 0  # the model kept failing: extractive stood in
    by_reason: dict[str, int] = field(default_factory=dict)


class Summarizer:
    def __init__(self, llm: LLM, counter: TokenCounter) -> None:
        self.llm = llm
        self.counter = counter
        self.stats = SummaryStats()

    # -- helpers -----------------------------------------------------------------------
    def fit(self, text: str, max_tokens: int) -> str:
        """Cut an over-long model answer at a sentence boundary within ~1.5x its size,
        keeping the answer's own spacing and lines."""
        limit = int(max_tokens * 1.5)
        text = text.strip()
        if self.counter.count(text) <= limit:
            return text
        kept = candidate = ""
        japanese = detect(text) == "ja"
        for sentence in split_sentences(text, japanese=japanese, keep_spacing=True):
            candidate += sentence
            if self.counter.count(candidate.strip()) > limit:
                break
            kept = candidate.strip()
        return kept or self.counter.truncate(text, limit)

    def _extractive(self, items: Sequence[SummaryItem], max_tokens: int, lang: str) -> str:
        return extractive_summary(
            items, max_tokens=max_tokens, count_tokens=self.counter.count, language=lang
        )

    async def _ask_json(
        self, prompts: PromptSet, user_prompt: str, purpose: str, max_tokens: int
    ) -> dict[str, object]:
        messages: list[ChatMessage] = [
            {"role": "system", "content": prompts.summary_system},
            {"role": "user", "content": user_prompt},
        ]
        result = await self.llm.complete(
            messages,
            purpose="compact" if purpose == "compact" else "refresh",
            json_output=True,
            max_tokens=max_tokens,
        )
        return parse_json_object(result.text)

    def _note_fallback(self, reason: str) -> None:
        self.stats.fallbacks += 1
        self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1

    # -- compact -----------------------------------------------------------------------
    async def compact(
        self,
        *,
        day: str,
        previous: str,
        entries: Sequence[LogEntry],
        tz: str,
        lang: str,
        max_tokens: int,
        force_extractive: bool = False,
        known_facts: Sequence[Fact] = (),
    ) -> CompactOutcome:
        """Fold ``entries`` into ``previous`` (the day's running summary). ``known_facts`` are
        shown to the model so it can update one by id instead of repeating or contradicting it.

        Raises LLMUnavailable when the model could not be reached and ``force_extractive``
        is off: the caller decides between retrying later and standing in.
        """
        prompts = load_prompts(lang)
        if force_extractive or self.llm.offline:
            if force_extractive:
                self.stats.forced += 1
            else:
                self.stats.offline += 1
            return self._compact_extractive(previous, entries, max_tokens, lang)
        user_prompt = prompts.render(
            prompts.compact,
            day=day,
            previous=fence(previous),
            messages=fence(render_entries(entries, tz)),
            size=prompts.size(max_tokens),
            known_facts=fence(_render_known(known_facts)) or "-",
        )
        try:
            data = await self._ask_json(prompts, user_prompt, "compact", max_tokens * 3 + 400)
        except LLMOffline:
            self.stats.offline += 1
            return self._compact_extractive(previous, entries, max_tokens, lang)
        except LLMBadOutput as exc:
            self._note_fallback(str(exc))
            return self._compact_extractive(previous, entries, max_tokens, lang)
        summary = data.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            self._note_fallback("no summary field")
            return self._compact_extractive(previous, entries, max_tokens, lang)
        self.stats.llm += 1
        return CompactOutcome(
            summary=self.fit(summary, max_tokens),
            facts=_fact_drafts(data.get("facts")),
            degraded=False,
        )

    def _compact_extractive(
        self, previous: str, entries: Sequence[LogEntry], max_tokens: int, lang: str
    ) -> CompactOutcome:
        """The extractive summary, with the facts the messages state plainly (the rules of
        memory_core.tiers.stated): without a model, nothing else would learn them."""
        items = [SummaryItem(text=previous)] if previous.strip() else []
        items += [SummaryItem(text=e.text, speaker=e.author or e.role, when=e.ts) for e in entries]
        return CompactOutcome(
            summary=self._extractive(items, max_tokens, lang),
            facts=_stated_drafts(entries),
            degraded=True,
        )

    # -- refresh -----------------------------------------------------------------------
    async def refresh(
        self,
        *,
        days: Sequence[DaySummary],
        long: str,
        week: str,
        week_days: Sequence[DaySummary],
        lang: str,
        mid_tokens: int,
        overview_tokens: int,
        week_tokens: int,
        long_tokens: int,
        force_extractive: bool = False,
    ) -> RefreshOutcome:
        prompts = load_prompts(lang)
        weekly = bool(week and week_days)

        def fallback() -> RefreshOutcome:
            # Only computed when needed: it costs several extractive passes.
            return self._refresh_extractive(
                days,
                long,
                week_days if weekly else (),
                lang,
                mid_tokens,
                overview_tokens,
                week_tokens,
                long_tokens,
            )

        if force_extractive or self.llm.offline:
            if force_extractive:
                self.stats.forced += 1
            else:
                self.stats.offline += 1
            return fallback()
        sizes = {
            "mid": mid_tokens,
            "overview": overview_tokens,
            "week": week_tokens,
            "long": long_tokens,
        }
        user_prompt = _refresh_prompt(
            prompts,
            days=days,
            long=long,
            week=week if weekly else "",
            week_days=week_days,
            sizes=sizes,
        )
        budget = (mid_tokens + overview_tokens + (week_tokens + long_tokens if weekly else 0)) * 2
        try:
            data = await self._ask_json(prompts, user_prompt, "refresh", budget + 400)
        except LLMOffline:
            self.stats.offline += 1
            return fallback()
        except LLMBadOutput as exc:
            self._note_fallback(str(exc))
            return fallback()
        wanted = ("mid", "overview", *(("week", "long") if weekly else ()))
        return self._refresh_outcome(data, wanted, sizes, fallback)

    def _refresh_outcome(
        self,
        data: Mapping[str, object],
        wanted: Sequence[str],
        sizes: Mapping[str, int],
        fallback: Callable[[], RefreshOutcome],
    ) -> RefreshOutcome:
        """The tiers the model wrote, each fitted to its size; a field it left out or empty
        comes from the extractive ``fallback`` (and the outcome is degraded)."""
        values: dict[str, str] = {}
        missing = False
        for name in wanted:
            value = data.get(name)
            if isinstance(value, str) and value.strip():
                values[name] = self.fit(value, sizes[name])
            else:
                missing = True
        if missing:
            standin = fallback()
            for name in wanted:
                values.setdefault(name, getattr(standin, name))
        if missing:
            self._note_fallback("missing refresh fields")
        else:
            self.stats.llm += 1
        return RefreshOutcome(
            mid=values["mid"],
            overview=values["overview"],
            week=values.get("week", ""),
            long=values.get("long", ""),
            degraded=missing,
        )

    def _refresh_extractive(
        self,
        days: Sequence[DaySummary],
        long: str,
        week_days: Sequence[DaySummary],
        lang: str,
        mid_tokens: int,
        overview_tokens: int,
        week_tokens: int,
        long_tokens: int,
    ) -> RefreshOutcome:
        day_items = [SummaryItem(text=d.summary, when=_day_time(d.day)) for d in days]
        mid = self._extractive(day_items, mid_tokens, lang)
        week = long_text = ""
        if week_days:
            week_items = [SummaryItem(text=d.summary, when=_day_time(d.day)) for d in week_days]
            week = self._extractive(week_items, week_tokens, lang)
            long_items = ([SummaryItem(text=long)] if long else []) + [SummaryItem(text=week)]
            long_text = self._extractive(long_items, long_tokens, lang)
        base_long = long_text or long
        overview_items = ([SummaryItem(text=base_long)] if base_long else []) + day_items
        overview = self._extractive(overview_items, overview_tokens, lang)
        return RefreshOutcome(mid=mid, overview=overview, week=week, long=long_text, degraded=True)


def _render_known(facts: Sequence[Fact]) -> str:
    return "\n".join(
        f"{f.id} [{f.kind}] {f.subject + ': ' if f.subject else ''}{f.text}" for f in facts
    )


def _render_days(days: Sequence[DaySummary]) -> str:
    return "\n".join(f"[{d.day}] {d.summary}" for d in days)


def _day_time(day: str) -> datetime:
    return datetime.fromisoformat(day + "T12:00:00+00:00")


def _fact_drafts(raw: object) -> list[FactDraft]:
    """Facts from the model's JSON, with anything malformed dropped rather than trusted."""
    if not isinstance(raw, list):
        return []
    drafts: list[FactDraft] = []
    for item in raw[:20]:
        if not isinstance(item, dict):
            continue
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        kind = item.get("kind")
        kind = kind if isinstance(kind, str) and kind in FACT_KINDS else "note"
        subject = item.get("subject")
        subject = subject.strip()[:80] if isinstance(subject, str) else ""
        if subject.lower() in ("null", "none"):
            subject = ""
        fact_id = item.get("id")
        fact_id = fact_id if isinstance(fact_id, str) and _FACT_ID.match(fact_id) else ""
        drafts.append(FactDraft(kind=kind, text=text.strip()[:300], subject=subject, id=fact_id))
    return drafts


def _stated_drafts(entries: Sequence[LogEntry]) -> list[FactDraft]:
    """The facts ``entries`` state plainly, as drafts marked as the rules'."""
    return [
        FactDraft(
            kind=fact.kind,
            text=fact.text,
            subject=fact.subject,
            message_ids=fact.message_ids,
            source="rules",
        )
        for fact in stated_facts(entries)
    ]


def _refresh_prompt(
    prompts: PromptSet,
    *,
    days: Sequence[DaySummary],
    long: str,
    week: str,
    week_days: Sequence[DaySummary],
    sizes: Mapping[str, int],
) -> str:
    """The refresh call's user prompt; with ``week`` (a week boundary, "" otherwise) it also
    asks for the week's summary and the long-term tier."""
    week_block = week_fields = ""
    if week:
        week_block = prompts.render(
            prompts.week_block, week=week, week_days=fence(_render_days(week_days))
        )
        week_fields = prompts.render(
            prompts.week_fields,
            week_size=prompts.size(sizes["week"]),
            long_size=prompts.size(sizes["long"]),
        )
    return prompts.render(
        prompts.refresh,
        days=fence(_render_days(days)),
        long=fence(long),
        week_block=week_block,
        week_fields=week_fields,
        mid_size=prompts.size(sizes["mid"]),
        overview_size=prompts.size(sizes["overview"]),
    )
