"""Prompt assembly under one token budget.

Order: persona -> how to use memory -> memory (today, overview or long/mid, the parent
channel's, facts) -> the working window (newest verbatim messages, with speakers) -> the new
message. Space is handed out by priority: the persona and the new message (cut to a cap),
then memory (at most half of what is left, a third when recall found something), then the
window and recalled messages (the recall section is packed by
:mod:`memory_core.prompt.recalled`). The total is measured with the same counter the budget
is stated in, and trimmed until it fits: the prompt never exceeds the budget, whatever the
history.
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
from memory_core.prompt.recalled import RecallSection, render_recalled
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
            (self.recalled_from[place] if place < len(self.recalled_from) else "", doc)
            for place, doc in enumerate(self.recalled)
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
class AlsoRead:
    """Another place's memory an answer reads and never writes (see
    ``IncomingMessage.also_reads``): its summaries and its facts, shown in one section of
    their own, so that nothing of it is mistaken for the asking place's own memory (its
    facts are not among the prompt's facts: ``/memory why`` and ``forget fact`` there name
    the asking place's)."""

    scope: str
    state: ScopeState
    facts: Sequence[Fact] = ()


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
    also_read: AlsoRead | None = None


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


# The summaries' share of what is left after the header and the new message: half when
# nothing was recalled; a quarter when something was, so that at small budgets the messages
# that match the new message are not crowded out by a summary written for no question in
# particular (on LoCoMo's development set at 1,500 tokens: a third instead of half took the
# recall section from about 330 to 490 tokens and evidence recall from 66% to 74%; a quarter,
# with the window's floor below, to 814 tokens and 82.4%). At 3,000 the summaries fit either
# way (their own caps, overview_tokens and the rest, are below a quarter).
MEMORY_SHARE = 2
MEMORY_SHARE_WITH_RECALL = 4
# The window's floor (memory.window_min_tokens) is at most an eighth of the budget: a small
# budget keeps room for what matches the question (400 of 1,500 tokens held the newest
# messages whatever was asked; 3,000 and more are untouched).
WINDOW_FLOOR_SHARE = 8


def render_fact(fact: Fact) -> str:
    who = f"{fact.subject}: " if fact.subject else ""
    when = f" ({fact.ts[:10]})" if fact.ts else ""
    pin = "pinned " if fact.pinned else ""
    return f"- [{pin}{fact.kind}] {who}{fact.text}{when}"


def order_facts(facts: Sequence[Fact]) -> list[Fact]:
    """Pinned notes first, then the newest (sorts are stable)."""
    newest_first = sorted(facts, key=lambda fact: fact.ts, reverse=True)
    return sorted(newest_first, key=lambda fact: not fact.pinned)


def _also_read_body(place: AlsoRead) -> str:
    """Another place's memory as one section: its latest day, its overview (or long-term
    and past-week tiers), then its facts, pinned first (the section is cut to its room)."""
    state = place.state
    tiers = state.overview or "\n".join(tier for tier in (state.long, state.mid) if tier)
    facts = "\n".join(render_fact(fact) for fact in order_facts(place.facts))
    return "\n\n".join(part for part in (state.short, tiers, facts) if part)


@dataclass(slots=True)
class _Draft:
    """What assembly has placed so far: the memory block's parts, tokens by section, and the
    facts, thread beginning and recalled messages they show."""

    parts: list[str] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    started: list[LogEntry] = field(default_factory=list)
    recalled: list[tuple[str, Doc]] = field(default_factory=list)


class PromptAssembler:
    def __init__(self, counter: TokenCounter, settings: MemorySettings) -> None:
        self.counter = counter.remembering()
        self.settings = settings
        self.recall = RecallSection(self.counter)

    def _section(self, heading: str, body: str, limit: int) -> str:
        if not body.strip() or limit <= 0:
            return ""
        text = f"## {heading}\n{fence(body.strip())}"
        return self.counter.truncate(text, limit)

    def assemble(self, data: AssemblyInput) -> Prompt:
        budget = self.settings.budget_tokens
        prompts = load_prompts(data.language)
        today = data.now.astimezone(zone(data.tz)).date().isoformat()
        # 1. Fixed cost: the system message (header only for now) and the new message.
        header, fixed, rules_whole = self._fitted_header(self._header(prompts, data, today), budget)
        new_content = self._new_message(data, budget - fixed)
        remaining = budget - fixed - self.counter.count(new_content)
        # 2. Memory: at most half of what is left, by priority; none unless the whole of the
        # rules that say memory is data comes before it. Then a thread's beginning.
        draft, remaining = self._memory_and_start(prompts, data, today, remaining, rules_whole)
        # 3. The working window (newest verbatim messages) and recalled messages share what
        # is left.
        window = self._window_and_recall(prompts, data, today, draft, remaining, rules_whole)
        memory_block = ""
        if draft.parts:
            memory_block = "<memory>\n" + "\n\n".join(draft.parts) + "\n</memory>"
        system = header + ("\n\n" + memory_block if memory_block else "")
        messages = [
            {"role": "system", "content": system},
            *window,
            {"role": "user", "content": new_content},
        ]
        # 4. Exact measurement, and trimming if the parts did not add up exactly.
        total, cut = self._trimmed(messages, budget)
        count = self.counter.count
        draft.sections["system"] = count(header)
        draft.sections["window"] = sum(
            MESSAGE_OVERHEAD + count(message["content"]) for message in messages[1:-1]
        )
        draft.sections["new_message"] = count(messages[-1]["content"])
        return Prompt(
            messages=messages,
            tokens=total,
            budget=budget,
            sections=draft.sections,
            window_messages=len(messages) - 2,
            language=prompts.language,
            used=self._used(data, draft, messages[0]["content"] if cut else None),
        )

    def _fitted_header(self, header: str, budget: int) -> tuple[str, int, bool]:
        """The header, the fixed cost with it (priming, the system message and the new
        message's overhead), and whether the header is whole: a tiny budget (the fixed cost
        over half of it) cuts the header too."""
        overhead = REPLY_PRIMING + 2 * MESSAGE_OVERHEAD
        fixed = overhead + self.counter.count(header)
        if fixed <= budget // 2:
            return header, fixed, True
        header = self.counter.truncate(header, budget // 2 - overhead)
        return header, overhead + self.counter.count(header), False

    def _new_message(self, data: AssemblyInput, room: int) -> str:
        """The new message's line, cut to its cap and to the ``room`` the fixed cost left."""
        stamp = data.now.astimezone(zone(data.tz)).strftime("%H:%M")
        line = f"[{stamp}] {data.new_author or 'someone'}: {data.new_text}"
        return self.counter.truncate(line, max(1, min(self.settings.new_message_tokens, room - 1)))

    def _memory_and_start(
        self, prompts: PromptSet, data: AssemblyInput, today: str, remaining: int, whole: bool
    ) -> tuple[_Draft, int]:
        """The memory sections and a thread's beginning within what ``remaining`` allows
        (nothing unless the rules are ``whole``), and what is left after them."""
        share = MEMORY_SHARE_WITH_RECALL if data.recalled else MEMORY_SHARE
        draft = self._memory(prompts, data, remaining // share if whole else 0)
        remaining -= sum(draft.sections.values()) + 16  # the <memory> tags and separators
        # A thread's beginning, in its channel: what a follow-up there is about.
        start_room = min(self.settings.thread_start_tokens, remaining // 4) if whole else 0
        start_text, draft.started = self._thread_start(prompts, data, today, start_room)
        if start_text:
            draft.parts.append(start_text)
            draft.sections["thread_start"] = self.counter.count(start_text) + 2
            remaining -= draft.sections["thread_start"]
        return draft, remaining

    def _window_and_recall(
        self,
        prompts: PromptSet,
        data: AssemblyInput,
        today: str,
        draft: _Draft,
        remaining: int,
        whole: bool,
    ) -> list[dict[str, str]]:
        """The window's messages, with the recalled ones added to ``draft``. Recall gets its
        share only when something matched the new message, and never squeezes the window
        below its floor; what it reserved and did not use goes back to the window."""
        settings = self.settings
        recall_need = sum(self.recall.hit_cost(hit) for hit in data.recalled)
        floor = min(settings.window_min_tokens, settings.budget_tokens // WINDOW_FLOOR_SHARE)
        recall_cap = min(settings.recall_tokens, recall_need, max(0, remaining - floor))
        window, window_ids, used = self._window(
            data, today, min(settings.window_tokens, remaining - recall_cap)
        )
        recall_room = remaining - used if whole else 0
        parent = Scope.of(data.scope).parent
        shown = {("", entry_id) for entry_id in window_ids} | {
            (parent.key if parent else "", entry.id) for entry in draft.started
        }
        recall_text, recall_cost, draft.recalled = self._recall(
            prompts, data, recall_room, exclude=shown
        )
        if recall_text:
            draft.parts.append(recall_text)
            draft.sections["recall"] = recall_cost
        if recall_cost < recall_cap:
            window, _, _ = self._window(
                data, today, min(settings.window_tokens, remaining - recall_cost)
            )
        return window

    def _trimmed(self, messages: list[dict[str, str]], budget: int) -> tuple[int, bool]:
        """``messages`` trimmed (in place) until they fit ``budget``: the oldest window
        messages first, then the system message halved, and the new message cut when nothing
        else is left. Their total, and whether the system message was cut."""
        total = self.counter.count_messages(messages)
        cut = False
        while total > budget:
            if len(messages) > 2:
                messages.pop(1)  # the oldest window message
            else:
                cut = True
                system = messages[0]["content"]
                system = self.counter.truncate(system, self.counter.count(system) // 2)
                messages[0]["content"] = system
                if not system:
                    messages[-1]["content"] = self.counter.truncate(
                        messages[-1]["content"], budget - REPLY_PRIMING - 2 * MESSAGE_OVERHEAD
                    )
            total = self.counter.count_messages(messages)
        return total, cut

    @staticmethod
    def _used(data: AssemblyInput, draft: _Draft, cut_system: str | None) -> PromptUse:
        """What made it in; after the system message was cut (a tiny budget), only what is
        still in it."""
        facts, recalled, started = draft.facts, draft.recalled, draft.started
        if cut_system is not None:
            facts = [fact for fact in facts if fence(render_fact(fact)) in cut_system]
            recalled = [
                (where, doc) for where, doc in recalled if fence(render_recalled(doc)) in cut_system
            ]
            started = [entry for entry in started if fence(entry.text) in cut_system]
        personal = {id(fact) for fact in data.personal}
        return PromptUse(
            facts=tuple(facts),
            personal=tuple(fact for fact in facts if id(fact) in personal),
            recalled=tuple(doc for _, doc in recalled),
            recalled_from=tuple(where for where, _ in recalled),
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

    def _recall(
        self,
        prompts: PromptSet,
        data: AssemblyInput,
        budget: int,
        *,
        exclude: set[tuple[str, str]],
    ) -> tuple[str, int, list[tuple[str, Doc]]]:
        """The recall section within ``budget`` (see :meth:`RecallSection.pack`)."""
        heading = f"## {prompts.headings['recall']}"
        return self.recall.pack(heading, data.recalled, data.tz, budget, exclude=exclude)

    def _header(self, prompts: PromptSet, data: AssemblyInput, today: str) -> str:
        platform = Scope.of(data.scope).platform
        place = PLACES.get(platform, platform)
        persona = prompts.render(prompts.persona, bot_name=data.bot_name, place=place)
        rules = prompts.render(prompts.memory_rules, today=today)
        return f"{persona}\n\n{rules}"

    def _memory(self, prompts: PromptSet, data: AssemblyInput, limit: int) -> _Draft:
        """The memory sections by priority within ``limit`` tokens, the facts last."""
        draft = _Draft()
        left = limit
        for name, heading, body in self._memory_candidates(prompts, data):
            text = self._section(heading, body, left)
            if not text:
                continue
            cost = self.counter.count(text) + 2
            draft.parts.append(text)
            draft.sections[name] = cost
            left -= cost
        facts_limit = min(self.settings.facts_prompt_tokens, left)
        all_facts = [*data.facts, *data.personal]
        if all_facts and facts_limit > 0:
            text, draft.facts = self._facts_section(prompts, all_facts, facts_limit)
            if text:
                draft.parts.append(text)
                draft.sections["facts"] = self.counter.count(text)
        return draft

    @staticmethod
    def _memory_candidates(prompts: PromptSet, data: AssemblyInput) -> list[tuple[str, str, str]]:
        """(section name, heading, body) of the scope's summaries and its channel's, by
        priority."""
        headings = prompts.headings
        state = data.state
        candidates: list[tuple[str, str, str]] = []
        if state.short:
            today = data.now.astimezone(zone(data.tz)).date().isoformat()
            label = headings["short"] if state.day == today else headings["day"]
            candidates.append(("short", prompts.render(label, date=state.day), state.short))
        as_of = f" ({headings['updated']} {state.tiers_at[:10]})" if state.tiers_at else ""
        if state.overview:
            candidates.append(("overview", headings["overview"] + as_of, state.overview))
        else:
            if state.mid:
                candidates.append(("mid", headings["mid"] + as_of, state.mid))
            if state.long:
                candidates.append(("long", headings["long"] + as_of, state.long))
        parent = data.parent_state
        if parent is not None:
            body = parent.overview or "\n".join(tier for tier in (parent.long, parent.mid) if tier)
            if body:
                candidates.append(("parent", headings["parent"], body))
        if data.also_read is not None:
            body = _also_read_body(data.also_read)
            if body:
                candidates.append(("also_read", headings["also_read"], body))
        return candidates

    def _facts_section(
        self, prompts: PromptSet, facts: list[Fact], limit: int
    ) -> tuple[str, list[Fact]]:
        """The facts section within ``limit`` tokens (pinned first, then the newest), and the
        facts in it."""
        heading = prompts.headings["facts"]
        lines: list[str] = []
        taken: list[Fact] = []
        used = self.counter.count(heading) + 4
        for fact in order_facts(facts):
            line = fence(render_fact(fact))
            cost = self.counter.count(line) + 1
            if used + cost > limit:
                break
            lines.append(line)
            taken.append(fact)
            used += cost
        if not lines:
            return "", []
        return f"## {heading}\n" + "\n".join(lines), taken
