"""Prompt assembly under one token budget.

Order: persona -> how to use memory -> memory (today, overview or long/mid, the parent
channel's, facts) -> the working window (newest verbatim messages, with speakers) -> the new
message. Space is handed out by priority: the persona and the new message (cut to a cap),
then memory (at most half of what is left, a third when recall found something), then the
window and recalled messages. The total is measured with the
same counter the budget is stated in, and trimmed until it fits: the prompt never exceeds the
budget, whatever the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from config.prompts import PromptSet, load_prompts
from config.settings import MemorySettings
from memory_core.calendar import zone
from memory_core.models import Fact, LogEntry, ScopeState
from memory_core.prompt.fence import fence
from memory_core.recall.index import Doc, Hit
from memory_core.scopes import Scope
from memory_core.text.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter

PLACES = {"discord": "Discord", "slack": "Slack", "console": "terminal"}


@dataclass(frozen=True, slots=True)
class PromptUse:
    """What of memory made it into a prompt within the budget (what ``/memory why`` shows),
    taken from assembly itself rather than re-derived."""

    facts: tuple[Fact, ...] = ()
    personal: tuple[Fact, ...] = ()  # of ``facts``, those about the person asking (their own)
    recalled: tuple[Doc, ...] = ()  # by the score of their hit, best first
    # Where each of ``recalled`` was said ("" = the scope itself; a thread also recalls
    # from its channel).
    recalled_from: tuple[str, ...] = ()
    started: tuple[LogEntry, ...] = ()  # a thread: how it began, in its channel
    epoch: int = 0  # the scope's epoch when its memory was read
    sources: bool = False  # the scope's source-line setting, as read then
    tz: str = "UTC"  # the scope's timezone: the dates of what was recalled

    def recalled_pairs(self) -> list[tuple[str, Doc]]:
        """(where it was said, "" for the scope itself; the document) of ``recalled``."""
        return [
            (self.recalled_from[i] if i < len(self.recalled_from) else "", doc)
            for i, doc in enumerate(self.recalled)
        ]


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: list[dict[str, str]]
    tokens: int
    budget: int
    sections: dict[str, int] = field(default_factory=dict)  # tokens by section, for reports
    window_messages: int = 0
    language: str = "en"
    used: PromptUse = field(default_factory=PromptUse)


@dataclass(frozen=True, slots=True)
class AssemblyInput:
    scope: str
    state: ScopeState
    facts: Sequence[Fact]
    recent: Sequence[LogEntry]  # newest first; may include the new message (excluded by id)
    new_author: str
    new_text: str
    now: datetime
    tz: str
    language: str
    bot_name: str
    parent_state: ScopeState | None = None
    exclude_id: str = ""
    recalled: Sequence[Hit] = ()  # from the recall index, best first
    personal: Sequence[Fact] = ()  # facts about the person asking that may be used here
    # A thread: how it began in its channel, oldest first (the channel's messages before
    # it, its first message, the bot's answer to it: the last are the most needed).
    thread_start: Sequence[LogEntry] = ()


def _stamp(entry_ts: datetime, tz: str, today: str) -> str:
    local = entry_ts.astimezone(zone(tz))
    if local.date().isoformat() == today:
        return local.strftime("%H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def render_window_line(entry: LogEntry, tz: str, today: str) -> dict[str, str]:
    if entry.role == "assistant":
        return {"role": "assistant", "content": entry.text}
    return {
        "role": "user",
        "content": f"[{_stamp(entry.ts, tz, today)}] {entry.author or 'someone'}: {entry.text}",
    }


DATE_LINE = 8  # tokens of a "[2025-08-13]" line (and its newline) in the recall section
# The summaries' share of what is left after the header and the new message: half when
# nothing was recalled; a third when something was, so that at small budgets the messages
# that match the new message are not crowded out by a summary written for no question in
# particular (on LoCoMo's development set at 1,500 tokens the recall section went from about
# 330 to 490 tokens, evidence recall from 66% to 74%; at 3,000 the summaries fit either way).
MEMORY_SHARE = 2
MEMORY_SHARE_WITH_RECALL = 3


def _day(doc: Doc, tz: str) -> str:
    return datetime.fromtimestamp(doc.ms / 1000, tz=zone(tz)).date().isoformat()


def render_recalled(doc: Doc) -> str:
    """A recalled message (its date is on the line above it) or a day record."""
    if doc.kind == "day":
        return f"(summary of the day) {doc.text}"
    return f"{doc.author or 'someone'}: {doc.text}"


def render_fact(fact: Fact) -> str:
    who = f"{fact.subject}: " if fact.subject else ""
    when = f" ({fact.ts[:10]})" if fact.ts else ""
    pin = "pinned " if fact.pinned else ""
    return f"- [{pin}{fact.kind}] {who}{fact.text}{when}"


def order_facts(facts: Sequence[Fact]) -> list[Fact]:
    """Pinned notes first, then the newest (sorts are stable)."""
    newest_first = sorted(facts, key=lambda f: f.ts, reverse=True)
    return sorted(newest_first, key=lambda f: not f.pinned)


class PromptAssembler:
    def __init__(self, counter: TokenCounter, settings: MemorySettings) -> None:
        self.counter = counter.remembering()
        self.settings = settings
        self._author_tokens: dict[str, int] = {}

    def _section(self, heading: str, body: str, limit: int) -> str:
        if not body.strip() or limit <= 0:
            return ""
        text = f"## {heading}\n{fence(body.strip())}"
        return self.counter.truncate(text, limit)

    def assemble(self, data: AssemblyInput) -> Prompt:
        s = self.settings
        count = self.counter.count
        budget = s.budget_tokens
        prompts = load_prompts(data.language)
        today = data.now.astimezone(zone(data.tz)).date().isoformat()
        header = self._header(prompts, data, today)

        # 1. Fixed cost: the system message (header only for now) and the new message.
        fixed = REPLY_PRIMING + 2 * MESSAGE_OVERHEAD + count(header)
        rules_whole = fixed <= budget // 2
        if not rules_whole:  # a tiny budget: the header must give way too
            header = self.counter.truncate(
                header, budget // 2 - REPLY_PRIMING - 2 * MESSAGE_OVERHEAD
            )
            fixed = REPLY_PRIMING + 2 * MESSAGE_OVERHEAD + count(header)
        stamp = data.now.astimezone(zone(data.tz)).strftime("%H:%M")
        new_line = f"[{stamp}] {data.new_author or 'someone'}: {data.new_text}"
        new_cap = max(1, min(s.new_message_tokens, budget - fixed - 1))
        new_content = self.counter.truncate(new_line, new_cap)
        remaining = budget - fixed - count(new_content)

        # 2. Memory: at most half of what is left, by priority; none unless the whole of the
        # rules that say memory is data comes before it.
        share = MEMORY_SHARE_WITH_RECALL if data.recalled else MEMORY_SHARE
        memory_room = remaining // share if rules_whole else 0
        memory_parts, sections, facts_used = self._memory(prompts, data, memory_room)
        remaining -= sum(sections.values()) + 16  # the <memory> tags and separators
        # A thread's beginning, in its channel: what a follow-up there is about.
        start_room = min(s.thread_start_tokens, remaining // 4) if rules_whole else 0
        start_text, started = self._thread_start(prompts, data, today, start_room)
        if start_text:
            memory_parts.append(start_text)
            sections["thread_start"] = self.counter.count(start_text) + 2
            remaining -= sections["thread_start"]

        # 3. The working window (newest verbatim messages) and recalled messages share what
        # is left. Recall gets its share only when something matched the new message, and
        # never squeezes the window below its floor.
        recall_need = sum(self._hit_cost(h) for h in data.recalled)
        recall_cap = min(s.recall_tokens, recall_need, max(0, remaining - s.window_min_tokens))
        window, window_ids, used = self._window(
            data, today, min(s.window_tokens, remaining - recall_cap)
        )
        recall_room = remaining - used if rules_whole else 0
        parent = Scope.of(data.scope).parent
        shown = {("", i) for i in window_ids} | {
            (parent.key if parent else "", e.id) for e in started
        }
        recall_text, recall_cost, recalled = self._recall(prompts, data, recall_room, exclude=shown)
        if recall_text:
            memory_parts.append(recall_text)
            sections["recall"] = recall_cost
        if recall_cost < recall_cap:
            # Recall used less than it reserved: give the rest back to the window.
            window, window_ids, used = self._window(
                data, today, min(s.window_tokens, remaining - recall_cost)
            )
        memory_block = ""
        if memory_parts:
            memory_block = "<memory>\n" + "\n\n".join(memory_parts) + "\n</memory>"
        system = header + ("\n\n" + memory_block if memory_block else "")

        messages = [{"role": "system", "content": system}, *window]
        messages.append({"role": "user", "content": new_content})
        total = self.counter.count_messages(messages)
        # 4. Exact measurement, and trimming if the parts did not add up exactly.
        cut = False
        while total > budget:
            if len(messages) > 2:
                messages.pop(1)  # the oldest window message
            else:
                cut = True
                system = self.counter.truncate(system, count(system) // 2)
                messages[0]["content"] = system
                if not system:
                    messages[-1]["content"] = self.counter.truncate(
                        messages[-1]["content"], budget - REPLY_PRIMING - 2 * MESSAGE_OVERHEAD
                    )
            total = self.counter.count_messages(messages)
        sections["system"] = count(header)
        sections["window"] = sum(MESSAGE_OVERHEAD + count(m["content"]) for m in messages[1:-1])
        sections["new_message"] = count(messages[-1]["content"])
        return Prompt(
            messages=messages,
            tokens=total,
            budget=budget,
            sections=sections,
            window_messages=len(messages) - 2,
            language=prompts.language,
            used=self._used(data, facts_used, recalled, started, system if cut else None),
        )

    @staticmethod
    def _used(
        data: AssemblyInput,
        facts: list[Fact],
        recalled: list[tuple[str, Doc]],
        started: list[LogEntry],
        cut_system: str | None,
    ) -> PromptUse:
        """What made it in; after the system message was cut (a tiny budget), only what is
        still in it."""
        if cut_system is not None:
            facts = [f for f in facts if fence(render_fact(f)) in cut_system]
            recalled = [(s, d) for s, d in recalled if fence(render_recalled(d)) in cut_system]
            started = [e for e in started if fence(e.text) in cut_system]
        personal = {id(f) for f in data.personal}
        return PromptUse(
            facts=tuple(facts),
            personal=tuple(f for f in facts if id(f) in personal),
            recalled=tuple(d for _, d in recalled),
            recalled_from=tuple(s for s, _ in recalled),
            started=tuple(started),
            epoch=data.state.epoch,
            sources=data.state.sources,
            tz=data.tz,
        )

    def _thread_start(
        self, prompts: PromptSet, data: AssemblyInput, today: str, budget: int
    ) -> tuple[str, list[LogEntry]]:
        """How a thread began, within ``budget``: the newest first (the answer to its first
        message, that message, then the channel before it), shown oldest first."""
        if not data.thread_start or budget <= 0:
            return "", []
        heading = f"## {prompts.headings['thread_start']}"
        used = self.counter.count(heading) + 4  # the heading and the fence
        taken: list[tuple[LogEntry, str]] = []
        for entry in reversed(data.thread_start):
            line = f"[{_stamp(entry.ts, data.tz, today)}] {entry.author or 'someone'}: {entry.text}"
            cost = self.counter.count(line) + 1
            if used + cost > budget:
                if not taken and budget - used > 8:  # the newest alone is too long: its start
                    taken.append((entry, self.counter.truncate(line, budget - used)))
                break
            taken.append((entry, line))
            used += cost
        if not taken:
            return "", []
        taken.reverse()
        body = "\n".join(line for _, line in taken)
        return f"{heading}\n{fence(body)}", [entry for entry, _ in taken]

    def _window(
        self, data: AssemblyInput, today: str, budget: int
    ) -> tuple[list[dict[str, str]], set[str], int]:
        """The newest messages within ``budget``, oldest first, with their ids and cost."""
        count = self.counter.count
        window: list[dict[str, str]] = []
        ids: set[str] = set()
        used = 0
        for entry in data.recent:
            if entry.id == data.exclude_id:
                continue
            line = render_window_line(entry, data.tz, today)
            cost = MESSAGE_OVERHEAD + count(line["content"])
            if used + cost > budget:
                if not window and budget - used > MESSAGE_OVERHEAD + 8:
                    # The newest message alone is too long: keep its beginning.
                    line["content"] = self.counter.truncate(
                        line["content"], budget - used - MESSAGE_OVERHEAD
                    )
                    window.append(line)
                    ids.add(entry.id)
                    used = budget
                break
            window.append(line)
            ids.add(entry.id)
            used += cost
        window.reverse()
        return window, ids, used

    def _doc_cost(self, doc: Doc) -> int:
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

    def _hit_cost(self, hit: Hit) -> int:
        return sum(self._doc_cost(d) for d in hit.docs) + DATE_LINE

    def _recall(
        self,
        prompts: PromptSet,
        data: AssemblyInput,
        budget: int,
        *,
        exclude: set[tuple[str, str]],
    ) -> tuple[str, int, list[tuple[str, Doc]]]:
        """Recalled messages by score within ``budget``, shown in time order under the date
        they were said (one date line per day, not per message: more memory per token).
        Each with where it was said (``Hit.scope``: "" the scope itself, or a thread's
        channel); ``exclude``: (scope, id) already shown."""
        heading = f"## {prompts.headings['recall']}"
        used = self.counter.count(heading) + 2
        picked: list[list[tuple[str, Doc]]] = []  # per hit taken, best first
        seen: set[tuple[str, str, int]] = set()
        days: set[str] = set()
        for hit in data.recalled:
            docs = [
                (hit.scope, d)
                for d in hit.docs
                if (hit.scope, d.id) not in exclude and (hit.scope, d.id, d.ms) not in seen
            ]
            if not docs:
                continue
            new_days = {_day(d, data.tz) for _, d in docs} - days
            cost = sum(self._doc_cost(d) for _, d in docs)
            cost += DATE_LINE * len(new_days)
            if used + cost > budget:
                continue  # a smaller hit further down may still fit
            seen.update((s, d.id, d.ms) for s, d in docs)
            days |= new_days
            used += cost
            picked.append(docs)
        # The estimates are exact within a token a line: measure what was packed, and drop
        # the last hits taken (the lowest scored) in the rare case it came out over.
        while picked:
            chosen = [pair for docs in picked for pair in docs]
            text = self._render_recall(heading, [d for _, d in chosen], data.tz)
            cost = self.counter.count(text) + 2
            if cost <= budget:
                return text, cost, chosen
            picked.pop()
        return "", 0, []

    @staticmethod
    def _render_recall(heading: str, chosen: list[Doc], tz: str) -> str:
        lines: list[str] = [heading]
        current = ""
        for doc in sorted(chosen, key=lambda d: (d.ms, d.id)):
            day = _day(doc, tz)
            if day != current:
                lines.append(f"[{day}]")
                current = day
            lines.append(fence(render_recalled(doc)))
        return "\n".join(lines)

    def _header(self, prompts: PromptSet, data: AssemblyInput, today: str) -> str:
        platform = Scope.of(data.scope).platform
        place = PLACES.get(platform, platform)
        persona = prompts.render(prompts.persona, bot_name=data.bot_name, place=place)
        rules = prompts.render(prompts.memory_rules, today=today)
        return f"{persona}\n\n{rules}"

    def _memory(
        self, prompts: PromptSet, data: AssemblyInput, limit: int
    ) -> tuple[list[str], dict[str, int], list[Fact]]:
        h = prompts.headings
        state = data.state
        candidates: list[tuple[str, str, str]] = []  # (section name, heading, body)
        if state.short:
            today = data.now.astimezone(zone(data.tz)).date().isoformat()
            label = h["short"] if state.day == today else h["day"]
            candidates.append(("short", prompts.render(label, date=state.day), state.short))
        as_of = f" ({h['updated']} {state.tiers_at[:10]})" if state.tiers_at else ""
        if state.overview:
            candidates.append(("overview", h["overview"] + as_of, state.overview))
        else:
            if state.mid:
                candidates.append(("mid", h["mid"] + as_of, state.mid))
            if state.long:
                candidates.append(("long", h["long"] + as_of, state.long))
        parent = data.parent_state
        if parent is not None:
            body = parent.overview or "\n".join(x for x in (parent.long, parent.mid) if x)
            if body:
                candidates.append(("parent", h["parent"], body))
        parts: list[str] = []
        sections: dict[str, int] = {}
        left = limit
        for name, heading, body in candidates:
            text = self._section(heading, body, left)
            if not text:
                continue
            cost = self.counter.count(text) + 2
            parts.append(text)
            sections[name] = cost
            left -= cost
        facts_limit = min(self.settings.facts_prompt_tokens, left)
        all_facts = [*data.facts, *data.personal]
        taken: list[Fact] = []
        if all_facts and facts_limit > 0:
            lines: list[str] = []
            used = self.counter.count(h["facts"]) + 4
            for fact in order_facts(all_facts):
                line = fence(render_fact(fact))
                cost = self.counter.count(line) + 1
                if used + cost > facts_limit:
                    break
                lines.append(line)
                taken.append(fact)
                used += cost
            if lines:
                text = f"## {h['facts']}\n" + "\n".join(lines)
                parts.append(text)
                sections["facts"] = self.counter.count(text)
        return parts, sections, taken
