"""``memorybot eval year``: a year of a busy channel, offline. Do facts said months ago still
reach the prompt once their raw messages have expired?

A multi-party transcript of our own (deterministic: a fixed seed): every day of a year, tens
of lines of everyday talk by five people, and a few dozen facts planted across it, each said
once (a preference, a pet's name, a decision, a place, a date). The channel keeps its raw
messages for ``retention_days`` (30 here, so most facts live only in day records, summaries
and facts by the end); the transcript is replayed with its times driving the clock (days
close and weeks consolidate as in real use), then each fact is asked about the day after the
year ends and the prompt a reply would get is checked for the fact's answer. Reported by the
fact's age. Memory is built offline (extractive summaries, no key), as in ``eval locomo``.

Nothing here is keyed to the recall code: the questions are asked as a person would.
"""

from __future__ import annotations

import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.llm.client import OfflineLLM
from memory_core.models import IncomingMessage
from memorybot_bench.locomo_scoring import memory_text

START = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)  # a Monday
PEOPLE = ("Aiko", "Ben", "Chloe", "Dev", "Erin")
SCOPE = "console:year"


@dataclass(frozen=True, slots=True)
class Planted:
    day: int  # the day of the year it is said (0 = the first)
    speaker: str
    said: str
    question: str
    answer: str  # a word the prompt must hold


PLANTED = (
    Planted(
        4,
        "Erin",
        "I'm allergic to peanuts, so no satay for me please",
        "What is Erin allergic to?",
        "peanuts",
    ),
    Planted(
        18,
        "Ben",
        "My dog is called Biscuit, he turned three today",
        "What is Ben's dog called?",
        "Biscuit",
    ),
    Planted(
        33,
        "Chloe",
        "We decided to hold the team retreat in Lisbon this year",
        "Where is the team retreat?",
        "Lisbon",
    ),
    Planted(
        47,
        "Dev",
        "I just moved to Sapporo, the snow here is unreal",
        "Where did Dev move to?",
        "Sapporo",
    ),
    Planted(
        61,
        "Aiko",
        "My sister Hana is visiting from Kyoto next week",
        "What is Aiko's sister's name?",
        "Hana",
    ),
    Planted(
        76,
        "Erin",
        "I started learning the cello, lessons are on Thursdays",
        "What instrument is Erin learning?",
        "cello",
    ),
    Planted(
        90,
        "Ben",
        "The billing service will move to Postgres, we agreed on that",
        "What database will the billing service use?",
        "Postgres",
    ),
    Planted(
        104,
        "Chloe",
        "My favourite author is Ursula Le Guin, I reread Earthsea every winter",
        "Who is Chloe's favourite author?",
        "Guin",
    ),
    Planted(119, "Dev", "I'm vegetarian since last spring", "Is Dev vegetarian?", "vegetarian"),
    Planted(
        133,
        "Aiko",
        "The office wifi network is now called Falcon-5G",
        "What is the office wifi network called?",
        "Falcon",
    ),
    Planted(
        148,
        "Erin",
        "My daughter Mila starts school in September",
        "What is Erin's daughter's name?",
        "Mila",
    ),
    Planted(
        162,
        "Ben",
        "We chose Grafana for the new dashboards",
        "What did we choose for the new dashboards?",
        "Grafana",
    ),
    Planted(
        177,
        "Chloe",
        "I run the Berlin marathon in September, training is brutal",
        "Which marathon does Chloe run?",
        "Berlin",
    ),
    Planted(
        191,
        "Dev",
        "My cat is named Mochi, she sleeps on my keyboard",
        "What is Dev's cat called?",
        "Mochi",
    ),
    Planted(
        205,
        "Aiko",
        "The quarterly audit is scheduled for November 3rd",
        "When is the quarterly audit?",
        "November",
    ),
    Planted(
        220,
        "Erin",
        "I switched to a standing desk from Fjordline",
        "Which standing desk did Erin get?",
        "Fjordline",
    ),
    Planted(
        234,
        "Ben",
        "I'm training for my pilot licence on weekends",
        "What is Ben training for?",
        "pilot",
    ),
    Planted(
        248,
        "Chloe",
        "Our on-call rotation moves to PagerDuty next month",
        "Where does the on-call rotation move?",
        "PagerDuty",
    ),
    Planted(
        263,
        "Dev",
        "My brother Ravi got married in Goa last weekend",
        "Where did Dev's brother get married?",
        "Goa",
    ),
    Planted(
        277,
        "Aiko",
        "I can't drink coffee anymore, only matcha",
        "What does Aiko drink instead of coffee?",
        "matcha",
    ),
    Planted(
        292,
        "Erin",
        "We renamed the project from Atlas to Meridian",
        "What is the project called now?",
        "Meridian",
    ),
    Planted(306, "Ben", "My new bike is a green Brompton", "What bike does Ben have?", "Brompton"),
    Planted(
        321,
        "Chloe",
        "The design review moved to Tuesdays at 11",
        "When is the design review?",
        "Tuesdays",
    ),
    Planted(
        335,
        "Dev",
        "I'm learning Portuguese before the Lisbon trip",
        "What language is Dev learning?",
        "Portuguese",
    ),
    Planted(
        350,
        "Aiko",
        "My birthday is on the 14th of February",
        "When is Aiko's birthday?",
        "February",
    ),
)

# Everyday talk around the facts: none of the answers' words.
CHATTER = (
    "morning all",
    "anyone up for lunch",
    "the build is green again",
    "reviewing the PR now",
    "that meeting could have been an email",
    "coffee break in five",
    "nice work on the release",
    "I'll take a look after standup",
    "the tests are flaky today",
    "who has the notes",
    "let's sync tomorrow",
    "ship it",
    "back from the dentist",
    "pushing a fix",
    "thanks",
    "the deploy went fine",
    "can someone pair on this",
    "looks good to me",
    "rebasing",
    "it's raining again",
    "the train was late",
    "weekend plans anyone",
    "ok sounds good",
    "the docs need an update",
    "merged",
    "I'm out tomorrow afternoon",
    "good question",
    "let me check the logs",
    "on it",
    "the staging box is slow",
    "lunch was great",
)


@dataclass
class YearReport:
    days: int
    per_day: int
    retention_days: int
    budget: int
    messages: int
    reached: list[tuple[Planted, int, bool]]  # the fact, its age in days, reached
    seconds: float = 0.0

    def by_age(self) -> list[dict[str, Any]]:
        buckets = ((0, 30), (31, 90), (91, 180), (181, 366))
        out = []
        for low, high in buckets:
            inside = [ok for _, age, ok in self.reached if low <= age <= high]
            if inside:
                out.append(
                    {"age_days": f"{low}-{high}", "planted": len(inside), "reached": sum(inside)}
                )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "lines_per_day": self.per_day,
            "retention_days": self.retention_days,
            "budget": self.budget,
            "messages": self.messages,
            "planted": len(self.reached),
            "reached": sum(ok for _, _, ok in self.reached),
            "by_age": self.by_age(),
            "missed": [
                {"day": p.day, "age_days": age, "question": p.question, "answer": p.answer}
                for p, age, ok in self.reached
                if not ok
            ],
            "seconds": round(self.seconds, 1),
        }


def transcript(days: int, per_day: int, seed: int = 11) -> list[tuple[datetime, str, str]]:
    """(time, speaker, text): ``per_day`` lines a day over working hours, the planted facts
    among them on their days."""
    rng = random.Random(seed)
    planted = {p.day: p for p in PLANTED if p.day < days}
    lines: list[tuple[datetime, str, str]] = []
    for day in range(days):
        base = START + timedelta(days=day)
        fact_at = rng.randrange(per_day) if day in planted else -1
        for i in range(per_day):
            when = base + timedelta(minutes=(600 * i) // per_day)
            if i == fact_at:
                fact = planted[day]
                lines.append((when, fact.speaker, fact.said))
            else:
                lines.append((when, rng.choice(PEOPLE), rng.choice(CHATTER)))
    return lines


async def evaluate_year(
    settings: Settings,
    *,
    days: int = 365,
    per_day: int = 30,
    retention_days: int = 30,
    budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> YearReport:
    """Replay the year into a private scope, ask about every planted fact, check the prompts."""
    memory = settings.memory.model_copy(
        update={"retention_days": retention_days}
        | ({"budget_tokens": budget} if budget is not None else {})
    )
    store: dict[str, Any] = {"key_prefix": f"mbyear{secrets.token_hex(4)}"}
    scratch = None
    if settings.store.redis_url is None:
        scratch = Path(tempfile.mkdtemp(prefix="memorybot-year-"))
        store["data_dir"] = scratch
    run = settings.model_copy(
        update={"memory": memory, "store": settings.store.model_copy(update=store)}
    )
    started = time.perf_counter()
    lines = transcript(days, per_day)
    clock = ManualClock(lines[0][0])
    core = await build_core(run, clock=clock, llm=OfflineLLM(), background=False)
    report = YearReport(
        days=days,
        per_day=per_day,
        retention_days=retention_days,
        budget=run.memory.budget_tokens,
        messages=len(lines),
        reached=[],
    )
    try:
        for n, (when, speaker, text) in enumerate(lines):
            clock.set(when)
            await core.intake.accept(
                IncomingMessage(
                    scope=SCOPE, text=text, author=speaker, author_id=speaker.lower(), ts=when
                )
            )
            if progress is not None and n % 500 == 0:
                progress(n, len(lines))
        asked = START + timedelta(days=days, hours=10)
        clock.set(asked)
        await core.maintenance.maintain(SCOPE)  # the last day closed, as by the next morning
        if core.recall is not None:
            await core.recall.embed_backlog(SCOPE)
        for fact in (p for p in PLANTED if p.day < days):
            msg = IncomingMessage(scope=SCOPE, text=fact.question, author="Zoe", ts=asked)
            prompt = await core.replier.build_prompt(msg)
            shown = "\n".join(memory_text(prompt)).lower()
            report.reached.append((fact, days - fact.day, fact.answer.lower() in shown))
    finally:
        await core.discard()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report
