"""The /memory commands, one implementation for every front door.

``parse_command`` turns text ("/memory forget fact f3") into a :class:`Command`; Discord
builds the same objects from its slash-command options. ``execute`` checks permission and
runs the core admin operation, returning a :class:`CommandResult` made of titled sections
that each platform renders its own way (plain text, Discord embeds, Slack blocks).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from bots.acting import ADMIN_ACTIONS as ADMIN_ACTIONS  # re-exported: the doors use both
from bots.acting import Actor as Actor
from bots.acting import refusal
from bots.why import Linker as Linker  # re-exported: what a door passes to run_command
from bots.why import links_for, render_why
from config.prompts import PromptSet, load_prompts
from memory_core.errors import InputError, PermissionDenied, UsageError
from memory_core.models import LANGUAGE_SETTINGS, MAX_FACT_CHARS, MODES, Fact
from memory_core.prompt.assembly import order_facts, render_fact
from memory_core.scopes import Scope
from memory_core.service.admin import MemoryAdmin, ScopeView
from memory_core.service.budget import SpendReport, parse_limit
from memory_core.service.forget_request import ForgetReport

Action = Literal[
    "show",
    "forget_all",
    "forget_me",
    "forget_me_everywhere",
    "forget_text",
    "forget_fact",
    "forget_message",
    "remember",
    "remember_me",
    "export",
    "pause",
    "resume",
    "config",
    "help",
    "why",
    "learn",
]
SHOW_SECTIONS = ("overview", "tiers", "facts", "stats")
CONFIG_KEYS = ("mode", "timezone", "language", "daily_tokens", "user_daily_tokens", "sources")
BUDGET_KEYS = ("daily_tokens", "user_daily_tokens")
CONFIRM_WORDS = ("confirm", "yes", "はい")

USAGE = """/memory show [overview|tiers|facts|stats]
/memory forget all | me | me everywhere | fact <id> | <text>
/memory remember <text> | me <text about you>
/memory export
/memory pause | resume
/memory config mode <mention|all|off> | timezone <Area/City> | language <auto|en|ja>
/memory config daily_tokens <N|off|default> | user_daily_tokens <N|off|default>
/memory config sources <on|off>
/memory why   (what the last answer here was based on)
/memory learn [days] | learn confirm | learn cancel | learn status   (the channel's past)"""
LEARN_STEPS = ("confirm", "cancel", "status")


@dataclass(frozen=True, slots=True)
class Command:
    action: Action
    arg: str = ""  # show: the section; forget: text, fact id or message id; remember: text
    key: str = ""  # config: mode | timezone | language; forget_message: its author's id
    confirmed: bool = False


@dataclass
class CommandResult:
    title: str
    sections: list[tuple[str, str]] = field(default_factory=list)  # (heading, body)
    file: tuple[str, bytes] | None = None  # (filename, content): export
    needs_confirm: bool = False  # forget all, asked without confirmation
    ok: bool = True

    def text(self) -> str:
        parts = [f"**{self.title}**"] if self.title else []
        for heading, body in self.sections:
            parts.append(f"{heading}\n{body}" if heading else body)
        return "\n\n".join(parts)


def _usage(problem: str) -> UsageError:
    return UsageError(f"{problem}\n\nUsage:\n{USAGE}")


def _quote(text: str, limit: int = 80) -> str:
    """User input echoed in an answer, cut so that a huge argument leaves it readable."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_command(text: str) -> Command:
    """Parse the words after ``/memory`` (the leading "/memory" or "memory" is optional)."""
    words = text.strip().split()
    if words and words[0].lower() in ("/memory", "memory"):
        words = words[1:]
    if not words:
        return Command("help")
    verb, rest = words[0].lower(), words[1:]
    rest_text = " ".join(rest)
    if verb in ("help", "-h", "--help"):
        return Command("help")
    if verb == "show":
        section = rest[0].lower() if rest else "overview"
        if section not in SHOW_SECTIONS or len(rest) > 1:
            raise _usage(f"unknown section {_quote(rest_text)} for /memory show")
        return Command("show", arg=section)
    if verb == "forget":
        if not rest:
            raise _usage("forget what? all, me, fact <id>, or some text")
        what = rest[0].lower()
        if what == "all" and len(rest) <= 2:
            confirmed = len(rest) == 2 and rest[1].lower() in CONFIRM_WORDS
            if len(rest) == 2 and not confirmed:
                raise _usage("/memory forget all takes only the word 'confirm' after it")
            return Command("forget_all", confirmed=confirmed)
        if what == "me" and len(rest) == 1:
            return Command("forget_me")
        if what == "me" and len(rest) == 2 and rest[1].lower() in ("everywhere", "全部"):
            return Command("forget_me_everywhere")
        if what == "fact":
            if len(rest) != 2:
                raise _usage("/memory forget fact needs one fact id (see /memory show facts)")
            return Command("forget_fact", arg=rest[1])
        return Command("forget_text", arg=rest_text)
    if verb == "remember":
        if not rest:
            raise _usage("remember what? e.g. /memory remember standup is at 10:00")
        if rest[0].lower() == "me":
            if len(rest) == 1:
                raise _usage("remember what about you? e.g. /memory remember me I am vegetarian")
            return Command("remember_me", arg=" ".join(rest[1:]))
        return Command("remember", arg=rest_text)
    if verb == "learn":
        return _learn_command(rest)
    if verb == "why":
        if rest:
            raise _usage("/memory why takes no arguments")
        return Command("why")
    if verb in ("export", "pause", "resume"):
        if rest:
            raise _usage(f"/memory {verb} takes no arguments")
        return Command(verb)  # type: ignore[arg-type]
    if verb == "config":
        if len(rest) != 2 or rest[0].lower() not in CONFIG_KEYS:
            raise _usage("config needs a setting and a value, e.g. /memory config mode all")
        key, value = rest[0].lower(), rest[1]
        if key == "mode" and value.lower() not in MODES:
            raise _usage(f"mode must be one of {', '.join(MODES)}")
        if key == "language" and value.lower() not in LANGUAGE_SETTINGS:
            raise _usage(f"language must be one of {', '.join(LANGUAGE_SETTINGS)}")
        if key in BUDGET_KEYS:
            try:
                parse_limit(value, setting=key)
            except InputError as exc:
                raise _usage(str(exc)) from exc
        if key == "sources" and value.lower() not in ("on", "off"):
            raise _usage("sources must be on or off")
        return Command("config", key=key, arg=value if key == "timezone" else value.lower())
    raise _usage(f"unknown /memory command {_quote(verb)}")


def _learn_command(rest: list[str]) -> Command:
    """``learn [days]``: read the past (arg: the days, "" for the default); ``learn confirm |
    cancel | status`` (key)."""
    if not rest:
        return Command("learn")
    if len(rest) == 1 and rest[0].lower() in LEARN_STEPS:
        return Command("learn", key=rest[0].lower())
    if len(rest) == 1 and rest[0].isdigit() and int(rest[0]) >= 1:
        return Command("learn", arg=str(int(rest[0])))
    raise _usage("learn takes a number of days (e.g. /memory learn 30), confirm, cancel or status")


async def execute(
    admin: MemoryAdmin,
    *,
    scope: str,
    command: Command,
    actor: Actor,
    language: str = "en",
    link: Linker | None = None,
) -> CommandResult:
    """Run one command for ``actor`` in ``scope``. Raises PermissionDenied, InputError.
    ``link``: the front door's links to its messages (``/memory why``).

    The checks every command shares are made here, once: who may act, and where
    (:func:`bots.acting.refusal`); then the command's own handler in :data:`HANDLERS` runs."""
    p = load_prompts(language)
    denied = refusal(actor, command)
    if denied is not None:
        key, values = denied
        raise PermissionDenied(p.say(key, **values))
    handler = HANDLERS.get(command.action)
    if handler is None:
        raise _usage(f"unknown /memory command {command.action!r}")
    return await handler(_Run(admin, scope, command, actor, p, link))


@dataclass(frozen=True, slots=True)
class _Run:
    """One command being run, allowed: what its handler reads."""

    admin: MemoryAdmin
    scope: str
    command: Command
    actor: Actor
    p: PromptSet
    link: Linker | None


async def _learn(run: _Run) -> CommandResult:
    # A door with a platform history (bots.learn_command) takes it before it comes here.
    return CommandResult(title=run.p.say("learn_not_here"))


async def _help(run: _Run) -> CommandResult:
    return CommandResult(title=run.p.say("usage_title"), sections=[("", USAGE)])


async def _why(run: _Run) -> CommandResult:
    record = await run.admin.why(run.scope)
    links = await links_for(record, run.link) if record else {}
    title, sections = render_why(
        record,
        viewer_id=run.actor.user_id,
        p=run.p,
        ttl_hours=run.admin.settings.memory.why_ttl_hours,
        links=links,
    )
    return CommandResult(title=title, sections=sections)


async def _show(run: _Run) -> CommandResult:
    section = run.command.arg or "overview"
    view = await run.admin.show(run.scope, user_id=run.actor.user_id, spend=section == "stats")
    return render_show(view, section, run.p)


async def _forget_all(run: _Run) -> CommandResult:
    p, scope = run.p, run.scope
    if not run.command.confirmed:
        return CommandResult(title=p.say("confirm_forget_all", scope=scope), needs_confirm=True)
    threads = len(await run.admin.requests.subtree(scope)) - 1
    await run.admin.place.forget_all(scope)
    if threads:
        return CommandResult(title=p.say("forgot_all_threads", scope=scope, threads=threads))
    return CommandResult(title=p.say("forgot_all", scope=scope))


async def _forget_me(run: _Run) -> CommandResult:
    """``forget me`` (here) and ``forget me everywhere``: the asker's messages and facts."""
    admin, actor, p = run.admin, run.actor, run.p
    everywhere = run.command.action == "forget_me_everywhere"
    forget = admin.person.forget_user_everywhere if everywhere else admin.person.forget_user
    report = await forget(run.scope, user_id=actor.user_id, name=actor.name)
    counts = {"messages": report.messages, "facts": report.facts, "tiers": report.summaries}
    if not report.places:
        return CommandResult(title=p.say("forgot_me", name=actor.name, scope=run.scope, **counts))
    title = p.say("forgot_me_places", name=actor.name, places=len(report.places), **counts)
    return CommandResult(title=title, sections=await _places_section(admin, report, p))


async def _forget_text(run: _Run) -> CommandResult:
    text = run.command.arg
    report = await run.admin.text.forget_text(run.scope, text)
    title = run.p.say(
        "forgot_text",
        text=text[:80],
        messages=report.messages,
        facts=report.facts,
        tiers=report.summaries,
    )
    result = CommandResult(title=title)
    if report.places:
        result.sections = await _places_section(run.admin, report, run.p)
    return result


async def _forget_message(run: _Run) -> CommandResult:
    """A message shortcut or context menu: "Forget this message"."""
    if await run.admin.messages.forget_message(run.scope, run.command.arg):
        return CommandResult(title=run.p.say("forgot_message"))
    return CommandResult(title=run.p.say("no_such_message"), ok=False)


async def _forget_fact(run: _Run) -> CommandResult:
    asked = run.command.arg
    target, fact_id = run.scope, asked
    if fact_id.startswith("me:"):  # a fact about the asker, kept guild-wide
        person = Scope.of(run.scope).person_scope(run.actor.user_id)
        target, fact_id = person.key if person else run.scope, fact_id[3:]
    if await run.admin.text.forget_fact(target, fact_id):
        return CommandResult(title=run.p.say("forgot_fact", id=asked[:80]))
    return CommandResult(title=run.p.say("no_such_fact", id=asked[:80]), ok=False)


async def _remember(run: _Run) -> CommandResult:
    fact = await run.admin.remember(run.scope, run.command.arg, by=run.actor.name)
    return CommandResult(title=run.p.say("remembered", id=fact.id, text=fact.text))


async def _remember_me(run: _Run) -> CommandResult:
    actor = run.actor
    fact = await run.admin.remember_me(
        run.scope, run.command.arg, user_id=actor.user_id, name=actor.name
    )
    key = "remembered_me" if fact.shared else "remembered"  # it follows them
    return CommandResult(title=run.p.say(key, id=fact.id, text=fact.text))


async def _export(run: _Run) -> CommandResult:
    data = await run.admin.export(run.scope)
    blob = json.dumps(data, ensure_ascii=False, indent=2).encode()
    name = "memory-" + run.scope.replace(":", "_") + ".json"
    title = run.p.say("exported", scope=run.scope, count=len(data["log"]))
    return CommandResult(title=title, file=(name, blob))


async def _pause(run: _Run) -> CommandResult:
    await run.admin.set_paused(run.scope, True)
    return CommandResult(title=run.p.say("paused_now", scope=run.scope))


async def _resume(run: _Run) -> CommandResult:
    await run.admin.set_paused(run.scope, False)
    return CommandResult(title=run.p.say("resumed", scope=run.scope))


async def _config(run: _Run) -> CommandResult:
    changes = await run.admin.configure(run.scope, **{run.command.key: run.command.arg})
    text = ", ".join(
        f"{k}={v or ('default' if k in BUDGET_KEYS else 'auto')}" for k, v in changes.items()
    )
    return CommandResult(title=run.p.say("configured", scope=run.scope, changes=text))


Handler = Callable[[_Run], Awaitable[CommandResult]]
# One handler per Action, run by execute (a test holds the two together).
HANDLERS: dict[Action, Handler] = {
    "show": _show,
    "forget_all": _forget_all,
    "forget_me": _forget_me,
    "forget_me_everywhere": _forget_me,
    "forget_text": _forget_text,
    "forget_fact": _forget_fact,
    "forget_message": _forget_message,
    "remember": _remember,
    "remember_me": _remember_me,
    "export": _export,
    "pause": _pause,
    "resume": _resume,
    "config": _config,
    "help": _help,
    "why": _why,
    "learn": _learn,
}


async def _places_section(
    admin: MemoryAdmin, report: ForgetReport, p: PromptSet
) -> list[tuple[str, str]]:
    """The places a forget reached, each with its counts, by the names people know."""
    names = await admin.place_names(list(report.places))
    lines = [
        p.say(
            "place_counts",
            place=place_label(place, names.get(place, "")),
            messages=done.messages,
            facts=done.facts,
            tiers=done.summaries,
        )
        for place, done in report.places.items()
    ]
    return [(p.say("heading_places"), "\n".join(lines))]


def pinned_note(author: str, text: str, link: str) -> str:
    """The note "Remember this" pins, on every door: the message quoted under its author's
    name, cut to leave its link room within a fact's length."""
    room = MAX_FACT_CHARS - len(link) - len(author) - 6
    quote = text if len(text) <= room else text[: max(0, room - 1)] + "…"
    return f"{author}: {quote}" + (f" ({link})" if link else "")


def fact_line(fact_id: str, fact: Fact, p: PromptSet) -> str:
    """One fact of /memory show: its id (what forget fact takes), kind, subject, text, date,
    and whether the rules learned it without a model."""
    line = f"`{fact_id}` {render_fact(fact)[2:]}"
    return f"{line} {p.say('fact_by_rules')}" if fact.source == "rules" else line


def place_label(scope: str, name: str = "") -> str:
    """A place as people know it: its name from the platform, else what it is."""
    place = Scope.of(scope)
    if name:
        return f"{name} (thread)" if place.is_thread and "thread" not in name else name
    match place.kind:
        case "thread":
            return f"a thread in {place.channel} ({place.thread})"
        case "dm":
            return "your DM with the bot"
        case "channel":
            return place.channel
        case "person":
            return "what is known about you"
    return scope


def render_show(view: ScopeView, section: str, p: PromptSet) -> CommandResult:
    """The sections of ``/memory show``, as (heading, body) pairs: the place's settings, then
    what ``section`` asks for (``overview`` is the summaries and the facts)."""
    result = CommandResult(title=p.say("title_show", scope=view.scope))
    result.sections.append(("", _settings_text(view, p)))
    if section in ("overview", "tiers"):
        result.sections += _summary_sections(view, section, p)
    if section in ("overview", "facts"):
        result.sections += _fact_sections(view, section, p)
    if section == "stats":
        result.sections += _stats_sections(view, p)
    if len(result.sections) == 1 and section != "stats":
        result.sections.append(("", p.say("no_memory")))
    return result


def _settings_text(view: ScopeView, p: PromptSet) -> str:
    """The place's size and settings: mode, time zone, language, budgets, sources, pause."""
    state = view.state
    info = [p.say("messages", count=view.messages)]
    info.append(p.say("mode", mode=view.mode, tz=view.timezone, lang=view.language))
    if state.daily_tokens or state.user_daily_tokens:
        info.append(
            p.say(
                "budget_limits",
                scope=_limit_text(state.daily_tokens, p),
                member=_limit_text(state.user_daily_tokens, p),
            )
        )
    if state.sources:
        info.append(p.say("sources_setting", value="on"))
    if state.paused:
        info.append(p.say("paused"))
    return "\n".join(info)


def _summary_sections(view: ScopeView, section: str, p: PromptSet) -> list[tuple[str, str]]:
    """``overview``: the overview (else the long and mid tiers); ``tiers``: every tier, the
    days and the weeks. Both: today's short summary and the last messages."""
    state, h = view.state, p.headings
    tiers: list[tuple[str, str]] = []
    if section == "overview" and state.overview:
        tiers.append((h["overview"], state.overview))
    else:
        tiers += [(h["long"], state.long), (h["mid"], state.mid)]
        if section == "tiers":
            tiers.append((h["overview"], state.overview))
    if state.short:
        tiers.append((p.say("heading_short_day", date=state.day), state.short))
    sections = [(head, body) for head, body in tiers if body]
    if section == "tiers" and view.days:
        days = "\n".join(f"[{d.day}] {d.summary}" for d in view.days)
        sections.append((p.say("heading_days"), days))
    if section == "tiers" and view.weeks:
        weeks = "\n".join(f"[{w.week}] {w.summary}" for w in view.weeks)
        sections.append((p.say("heading_weeks"), weeks))
    if view.recent:
        lines = [f"{e.author or e.role}: {e.text[:200]}" for e in view.recent[-5:]]
        sections.append((p.say("heading_recent"), "\n".join(lines)))
    return sections


def _fact_sections(view: ScopeView, section: str, p: PromptSet) -> list[tuple[str, str]]:
    """The place's facts, its threads' facts, and those about the asker (``me:`` ids)."""
    sections: list[tuple[str, str]] = []
    if view.facts:
        lines = [fact_line(f.id, f, p) for f in order_facts(view.facts)]
        sections.append((p.headings["facts"], "\n".join(lines)))
    elif section == "facts":
        sections.append((p.headings["facts"], p.say("no_facts")))
    if view.thread_facts:
        lines = [
            f"{fact_line(f.id, f, p)} ({place_label(thread)})" for thread, f in view.thread_facts
        ]
        sections.append((p.say("heading_thread_facts"), "\n".join(lines)))
    if view.about_you:
        lines = [fact_line(f"me:{f.id}", f, p) for f in order_facts(view.about_you)]
        sections.append((p.say("heading_about_you"), "\n".join(lines)))
    return sections


def _stats_sections(view: ScopeView, p: PromptSet) -> list[tuple[str, str]]:
    """``stats``: the counts and times of the place's memory, its learn, today's spend."""
    state = view.state
    stats = [
        f"messages: {view.messages} (unsummarised: {state.unsum_count}, "
        f"{state.unsum_tokens} tokens)",
        f"day: {state.day or '-'}; days: {len(view.days)}; weeks: {len(view.weeks)}; "
        f"facts: {len(view.facts)}",
        f"last rollover: {state.last_rollover or '-'}; tiers refreshed: {state.tiers_at or '-'}",
    ]
    if state.failures:
        stats.append(f"summary failures in a row: {state.failures}")
    learn = view.learn
    if learn is not None and learn.status:
        stats.append(
            p.say(
                "learn_status",
                place=learn.place,
                source=learn.source,
                status=learn.status,
                read=learn.read,
                new=learn.new,
                stored=learn.stored,
            )
        )
    sections = [(p.say("heading_stats"), "\n".join(stats))]
    if view.spend is not None:
        sections.append((p.say("heading_spend"), render_spend(view.spend, p)))
    return sections


def _limit_text(stored: str, p: PromptSet) -> str:
    """A budget override as /memory show says it."""
    if not stored:
        return p.say("budget_default")
    if stored == "off":
        return p.say("budget_off")
    return f"{int(stored):,}" if stored.isdigit() else stored[:20]


def render_spend(report: SpendReport, p: PromptSet) -> str:
    """Today's tokens against each limit: the channel's, the asker's own, the server's."""
    lines = []
    for line in report.lines:
        what = p.say(f"spend_{line.which}")
        if line.limit:
            lines.append(
                p.say(
                    "spend_line",
                    what=what,
                    spent=f"{line.spent:,}",
                    limit=f"{line.limit:,}",
                    resets=line.resets,
                )
            )
        else:
            lines.append(p.say("spend_line_nolimit", what=what, spent=f"{line.spent:,}"))
    if report.purposes:
        shown = ", ".join(f"{k} {v:,}" for k, v in report.purposes.items())
        lines.append(p.say("spend_purposes", purposes=shown))
    return "\n".join(lines)
