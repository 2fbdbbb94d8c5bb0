"""A prompt's recall section: the recalled messages packed by score within its room, shown
in time order under the date they were said, each line costed from the token count stored
with its message."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory_core.calendar import zone
from memory_core.prompt.fence import fence
from memory_core.recall.index import Doc, Hit
from memory_core.text.tokens import TokenCounter

DATE_LINE = 8  # tokens of a "[2025-08-13]" line (and its newline) in the recall section


def _day(doc: Doc, tz: str) -> str:
    return datetime.fromtimestamp(doc.ms / 1000, tz=zone(tz)).date().isoformat()


def render_recalled(doc: Doc) -> str:
    """A recalled message (its date is on the line above it) or a day record."""
    if doc.kind == "day":
        return f"(summary of the day) {doc.text}"
    return f"{doc.author or 'someone'}: {doc.text}"


class RecallSection:
    """Packs recalled hits into a prompt's recall section (``counter``: the assembler's,
    which remembers what it counted); remembers what each author's name costs."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._author_tokens: dict[str, int] = {}

    def doc_cost(self, doc: Doc) -> int:
        """A recalled line's tokens, from the count stored with the message (tokenising
        hundreds of candidate lines per reply would cost more than the rest of assembly).
        Exact within a token: an over-estimate of two tokens a line left a tenth of the
        recall budget unused (about 150 of 1,800 tokens, some five messages)."""
        if doc.kind != "message" or not doc.tokens:
            return self.counter.count(render_recalled(doc)) + 1
        author = self._author_tokens.get(doc.author)
        if author is None:
            # "Name:" without the space: the space joins the text's first word ("Name:", " So").
            author = self.counter.count(f"{doc.author or 'someone'}:")
            if len(self._author_tokens) < 10_000:
                self._author_tokens[doc.author] = author
        return doc.tokens + author + 1  # +1 for the newline

    def hit_cost(self, hit: Hit) -> int:
        return sum(self.doc_cost(doc) for doc in hit.docs) + DATE_LINE

    def pack(
        self,
        heading: str,
        hits: Sequence[Hit],
        tz: str,
        budget: int,
        *,
        exclude: set[tuple[str, str]],
    ) -> tuple[str, int, list[tuple[str, Doc]]]:
        """Recalled messages by score within ``budget``, shown in time order under the date
        they were said (one date line per day, not per message: more memory per token).
        Each with where it was said (``Hit.scope``: "" the scope itself, or a thread's
        channel); ``exclude``: (scope, id) already shown. The section's text, its cost, and
        what it shows."""
        used = self.counter.count(heading) + 2
        picked: list[list[tuple[str, Doc]]] = []  # per hit taken, best first
        seen: set[tuple[str, str, int]] = set()
        days: set[str] = set()
        for hit in hits:
            docs = [
                (hit.scope, doc)
                for doc in hit.docs
                if (hit.scope, doc.id) not in exclude and (hit.scope, doc.id, doc.ms) not in seen
            ]
            if not docs:
                continue
            new_days = {_day(doc, tz) for _, doc in docs} - days
            cost = sum(self.doc_cost(doc) for _, doc in docs)
            cost += DATE_LINE * len(new_days)
            if used + cost > budget:
                continue  # a smaller hit further down may still fit
            seen.update((where, doc.id, doc.ms) for where, doc in docs)
            days |= new_days
            used += cost
            picked.append(docs)
        # The estimates are exact within a token a line: measure what was packed, and drop
        # the last hits taken (the lowest scored) in the rare case it came out over.
        while picked:
            chosen = [pair for docs in picked for pair in docs]
            text = self._render(heading, [doc for _, doc in chosen], tz)
            cost = self.counter.count(text) + 2
            if cost <= budget:
                return text, cost, chosen
            picked.pop()
        return "", 0, []

    @staticmethod
    def _render(heading: str, chosen: list[Doc], tz: str) -> str:
        lines: list[str] = [heading]
        current = ""
        for doc in sorted(chosen, key=lambda doc: (doc.ms, doc.id)):
            day = _day(doc, tz)
            if day != current:
                lines.append(f"[{day}]")
                current = day
            lines.append(fence(render_recalled(doc)))
        return "\n".join(lines)
