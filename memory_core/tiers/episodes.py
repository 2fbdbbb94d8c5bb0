"""Episode records for finished days (topic, decisions, follow-ups), made at rollover from
the day's summary and the facts learned that day: no extra LLM call. Recall searches them
once a day has left the seven-day list."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.models import DaySummary, Fact
from memory_core.text.language import detect
from memory_core.text.sentences import split_sentences

_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:[\w .'-]{1,40}:\s+)?")
_DECISION = re.compile(
    r"\b(decid\w*|agree\w*|will|plan\w*|deadline|must|going to|let's)\b"
    r"|決定|決め|決ま|予定|約束|締め切り|することに",
    re.I,
)
MAX_ITEMS = 5


def _sentences(text: str) -> list[str]:
    sentences = split_sentences(text, japanese=detect(text) == "ja")
    return [s for s in sentences if len(s) > 3]


def episode(
    day: str, summary: str, *, messages: int, degraded: bool, facts: Sequence[Fact]
) -> DaySummary:
    sentences = _sentences(summary)
    topic = _PREFIX.sub("", sentences[0])[:120] if sentences else ""
    learned = [f for f in facts if f.ts.startswith(day)]
    decisions = [f.text for f in learned if f.kind == "decision"]
    decisions += [s for s in sentences if _DECISION.search(s) and s not in decisions]
    follow_ups = [f.text for f in learned if f.kind == "question"]
    follow_ups += [s for s in sentences if s.endswith(("?", "？")) and s not in follow_ups]
    return DaySummary(
        day=day,
        summary=summary,
        messages=messages,
        degraded=degraded,
        topic=topic,
        decisions=tuple(decisions[:MAX_ITEMS]),
        follow_ups=tuple(follow_ups[:MAX_ITEMS]),
    )
