"""The offline reply (no LLM configured): say so, say whether the message was remembered
(not while memory is paused), and show what is remembered here, with up to
:data:`RECALLED_SHOWN` older messages that recall found for the question (recall ran while
the prompt was built: no extra work). What it showed is what ``/memory why`` lists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from config.prompts import load_prompts
from memory_core import calendar
from memory_core.prompt.assembly import Prompt, PromptUse, render_fact
from memory_core.prompt.recalled import render_recalled
from memory_core.scopes import parse_scope
from memory_core.store.repo import MemoryRepo
from memory_core.text.tokens import TokenCounter

RECALLED_SHOWN = 3
RECENT_SHOWN = 5
FACTS_SHOWN = 5


async def offline_reply(
    repo: MemoryRepo,
    counter: TokenCounter,
    scope: str,
    prompt: Prompt,
    *,
    zone_of: Callable[[str, str], str],
    remembered: bool | None = None,
) -> tuple[str, Prompt]:
    """The offline reply's text, and ``prompt`` narrowed to what that text shows (its
    sections' sizes, its facts and recalled messages). ``zone_of(scope, stored)``: the
    timezone its times are shown in. ``remembered``: whether the message answered was
    stored (``IngestResult.stored``: False while memory is paused here); None: as the
    scope's state says now (paused here or in its channel: not remembered)."""
    prompts = load_prompts(prompt.language)
    scope = parse_scope(scope)
    snapshot = await repo.prompt_snapshot(scope, recent=RECENT_SHOWN)
    state = snapshot.state
    if remembered is None:
        remembered = not state.paused  # a thread's state carries its channel's pause
    tz = zone_of(scope, state.tz)
    headings = prompts.headings
    parts = [prompts.offline_reply if remembered else prompts.say("offline_paused")]
    sections: dict[str, int] = {}
    for name, heading, body in (
        ("overview", headings["overview"], state.overview),
        ("short", prompts.render(headings["day"], date=state.day), state.short),
    ):
        if body:
            parts.append(f"{heading}:\n{counter.truncate(body, 200)}")
            sections[name] = counter.count(parts[-1])
    facts = snapshot.facts[-FACTS_SHOWN:]
    if facts:
        parts.append(f"{headings['facts']}:\n" + "\n".join(render_fact(fact) for fact in facts))
        sections["facts"] = counter.count(parts[-1])
    recent = {entry.id for entry in snapshot.recent}
    pairs = [
        (where, doc)
        for where, doc in prompt.used.recalled_pairs()
        if doc.kind == "message" and (where or doc.id not in recent)
    ][:RECALLED_SHOWN]
    recalled = [doc for _, doc in pairs]
    if recalled:
        lines = []
        for doc in sorted(recalled, key=lambda doc: (doc.ms, doc.id)):
            when = calendar.from_ms(doc.ms).astimezone(calendar.zone(tz)).strftime("%Y-%m-%d")
            lines.append(f"[{when}] {counter.truncate(render_recalled(doc), 60)}")
        parts.append(f"{headings['recall']}:\n" + "\n".join(lines))
        sections["recall"] = counter.count(parts[-1])
    if snapshot.recent:
        lines = []
        for entry in reversed(snapshot.recent):
            when = entry.ts.astimezone(calendar.zone(tz)).strftime("%m-%d %H:%M")
            lines.append(f"[{when}] {entry.author}: {counter.truncate(entry.text, 40)}")
        heading = prompts.render(prompts.offline_recent, count=state.msg_count)
        parts.append(heading + "\n" + "\n".join(lines))
        sections["window"] = counter.count(parts[-1])
    if len(parts) == 1:
        parts.append(prompts.offline_nothing)
    used = PromptUse(
        facts=tuple(facts),
        recalled=tuple(recalled),
        recalled_from=tuple(where for where, _ in pairs),
        epoch=prompt.used.epoch,
        sources=prompt.used.sources,
        tz=prompt.used.tz,
    )
    return "\n\n".join(parts), replace(prompt, sections=sections, used=used)
