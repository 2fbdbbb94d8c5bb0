"""What a forget removes, written down before any of it is done: :class:`ForgetRequest`
(its matching rules for messages, facts and summary sentences, and its JSON form, kept in the
scope until the forget is carried out) and :class:`ForgetReport`, what one removed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from memory_core.models import DaySummary, Fact, LogEntry
from memory_core.tiers.redact import contains, redact, redact_quotes


@dataclass
class ForgetReport:
    """What a forget removed; over several places (a channel and its threads, a member's
    server), the totals and each place's own report in ``places``."""

    messages: int = 0
    facts: int = 0
    tiers: list[str] = field(default_factory=list)
    days: int = 0
    weeks: int = 0
    places: dict[str, ForgetReport] = field(default_factory=dict)

    @property
    def summaries(self) -> int:
        """Summaries changed: tiers, days and weeks."""
        return len(self.tiers) + self.days + self.weeks

    def add(self, scope: str, report: ForgetReport) -> None:
        """Count ``report`` (one place's) in the totals and list it."""
        self.messages += report.messages
        self.facts += report.facts
        self.tiers += report.tiers  # a tier of each place it changed
        self.days += report.days
        self.weeks += report.weeks
        self.places[scope] = report

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ForgetRequest:
    """What to forget, written down before any of it is done, so a forget that a crash
    interrupts is finished later (a forgotten text stays forgotten).

    Forgetting a person or a message never matches a name inside text: it goes by platform
    user id (or, where a place has no ids, such as the console or a replay without
    ``user_id``, by the exact author name), and it reaches summaries and facts through what
    was said (``quotes``) and where facts came from (``entry_ids``). A person's forget takes
    the bot's answers to them too (they repeat what was asked)."""

    kind: str  # "text" | "user" | "message" | "edit" | "all"
    text: str = ""  # "edit": the message's new text
    user_id: str = ""
    # "user": the author's name, exactly, for lines that carry no user id (a replay or an
    # import without ``user_id``, where a name stands for a person within the place)
    name: str = ""
    platform_id: str = ""
    entry_ids: tuple[str, ...] = ()  # the raw messages it removes, found before removing any
    quotes: tuple[str, ...] = ()  # their texts: summary sentences that repeat them go too
    # "message": the deleted text's specific words; "edit": what the edit took out. Summary
    # sentences and facts that contain one go (a day's decisions repeat a number unquoted).
    needles: tuple[str, ...] = ()
    ts_ms: int = 0  # "message", "edit": the message's original send time (to find it fast)
    # "edit": who wrote the message (its new text is stored as theirs)
    author: str = ""
    author_id: str = ""
    role: str = "user"
    public: bool = False  # "edit": the message was said where everyone could see it

    def drop_entry(self, entry: LogEntry) -> bool:
        if entry.id in self.entry_ids or self.kind == "all":
            return True
        if self.kind == "text":
            return contains(entry.text, self.text)
        if self.kind in ("message", "edit"):
            return bool(self.platform_id) and self.platform_id in entry.platform_ids
        if self.kind != "user":
            return False
        if entry.role == "assistant":  # the bot's answers to them go with what they said
            return bool(self.user_id) and entry.reply_to == self.user_id
        if self.user_id and entry.author_id == self.user_id:
            return True
        # A line with no user id (a replay, an import) stands for its author by exact name.
        return bool(self.name) and not entry.author_id and entry.author == self.name

    def drop_fact(self, fact: Fact, removed: set[str]) -> bool:
        if self.kind == "all" or removed.intersection(fact.message_ids):
            return True  # made from a removed message
        if self.kind == "text":
            return any(contains(t, self.text) for t in (fact.text, fact.subject, *fact.history))
        if self.kind == "user":
            if self.user_id and fact.subject_id == self.user_id:
                return True
            named = bool(self.name) and fact.subject.casefold() == self.name.casefold()
            return named and not fact.subject_id
        # "message", "edit": drawn from it (above), or repeating what went; an edited fact
        # that still holds is learned again from the new text.
        return any(contains(t, n) for n in self.needles for t in (fact.text, *fact.history))

    def redact(self, text: str) -> str:
        """A summary without what this forget removes."""
        if self.kind == "text":  # and what quotes the messages it removed
            return redact(redact_quotes(text, self.quotes), [self.text])
        if self.kind == "edit":  # what stayed in the message may stay in the summaries
            return redact(text, self.needles)
        return redact(redact_quotes(text, self.quotes), self.needles)

    @property
    def redacts(self) -> bool:
        return bool(self.text if self.kind == "text" else self.quotes or self.needles)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> ForgetRequest:
        """The request as :meth:`to_json` wrote it, with every field."""
        data = json.loads(raw)
        return cls(
            kind=str(data["kind"]),
            text=str(data["text"]),
            user_id=str(data["user_id"]),
            name=str(data["name"]),
            platform_id=str(data["platform_id"]),
            entry_ids=tuple(str(x) for x in data["entry_ids"]),
            quotes=tuple(str(x) for x in data["quotes"]),
            needles=tuple(str(x) for x in data["needles"]),
            ts_ms=int(data["ts_ms"]),
            author=str(data["author"]),
            author_id=str(data["author_id"]),
            role=str(data["role"]),
            public=bool(data["public"]),
        )


def redact_day(day: DaySummary, redact_text: Callable[[str], str]) -> DaySummary:
    """A day record without the sentences a forget reaches."""

    def keep(items: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(x for x in (redact_text(i) for i in items) if x)

    return replace(
        day,
        summary=redact_text(day.summary),
        topic=redact_text(day.topic),
        decisions=keep(day.decisions),
        follow_ups=keep(day.follow_ups),
    )
