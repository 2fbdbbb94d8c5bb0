"""What tests/integration/test_isolation.py does not cover: the answers people actually get.
For random interleavings of speakers across two guilds, a DM and Slack, with a model that
turns what each person says into facts about them (which travel their guild), the text of
``/memory show`` (every section, for every speaker) and of ``/memory export`` through
``run_command`` never holds anything said in another guild, workspace or DM, and "about
you" only ever lists the asker's own facts."""

from __future__ import annotations

import json
import random
import re
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bots.commands import Actor
from bots.frontdoor import run_command
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Scope
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.helpers import START, CoreFactory

SCOPES = ("discord:1:10", "discord:1:11", "discord:2:10", "discord:dm:7", "slack:T1:C1")
PEOPLE = {"7": "Ann", "8": "Ben", "9": "Cid"}
MARK = re.compile(r"mk[0-9a-z]+x")
LINE = re.compile(r"^\S+ \S+ ([A-Za-z]+): (.*)$", re.M)


def marker(scope: str, person: str, i: int) -> str:
    """A word that says where it was said and by whom, e.g. mkdiscord1p10u7n3x."""
    place = re.sub(r"[^0-9a-z]", "", scope.replace(":", "p"))
    return f"mk{place}u{person}n{i}x"


def said_in(mark: str) -> str:
    """The scope a marker was said in."""
    for scope in SCOPES:
        place = re.sub(r"[^0-9a-z]", "", scope.replace(":", "p"))
        if mark.startswith(f"mk{place}u"):
            return scope
    raise AssertionError(mark)


def profiling_model(request: RecordedRequest) -> str | None:
    """Summaries that quote the messages, and a preference fact about each speaker made of
    the words they said (so a leak of a person's facts shows up as foreign markers)."""
    if request.purpose != "compact":
        return None
    block = request.prompt_text.split("<messages>", 1)[-1].split("</messages>", 1)[0]
    facts = []
    for name, text in LINE.findall(block):
        words = " ".join(MARK.findall(text))
        if words:
            facts.append({"id": None, "kind": "preference", "subject": name, "text": words})
    summary = " ".join(MARK.findall(block)) or "nothing"
    return json.dumps({"summary": summary, "facts": facts})


def foreign(text: str, scope: str) -> list[str]:
    """Markers in ``text`` said outside ``scope``'s guild, workspace or DM."""
    return [
        m for m in MARK.findall(text) if not Scope.of(said_in(m)).same_boundary(Scope.of(scope))
    ]


async def answers(core: Core, scope: str, person: str) -> tuple[str, list[str]]:
    """Everything /memory shows ``person`` in ``scope``, and the lines of "about you"."""
    actor = Actor(user_id=person, name=PEOPLE[person], is_admin=True)
    texts: list[str] = []
    about_you: list[str] = []
    for command in ("show", "show tiers", "show facts", "show stats", "export"):
        result = await run_command(core, scope=scope, command=command, actor=actor)
        assert result.ok, result.text()
        texts.append(result.text())
        if result.file is not None:
            texts.append(result.file[1].decode())
        for heading, body in result.sections:
            if heading.startswith("About you"):
                about_you += body.splitlines()
    return "\n".join(texts), about_you


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(SCOPES), st.sampled_from(sorted(PEOPLE)), st.integers(0, 3)),
        min_size=6,
        max_size=40,
    ),
    seed=st.integers(0, 1000),
)
async def test_show_and_export_never_cross_a_boundary(
    make_core: CoreFactory, fake_llm: FakeOpenAI, plan: list[tuple[str, str, int]], seed: int
) -> None:
    """Random speakers in random places, compacted and rolled over by a model that
    profiles everyone: no /memory answer or export holds a word from another guild,
    workspace or DM, and "about you" holds only the asker's facts."""
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0},
    )
    await core.store.client.flushdb()
    fake_llm.responder = profiling_model  # type: ignore[assignment]
    rng = random.Random(seed)
    spoke: set[tuple[str, str]] = set()
    for i, (scope, person, hop) in enumerate(plan):
        if scope.startswith("discord:dm:"):
            person = scope.rsplit(":", 1)[1]  # a DM scope is its user's
        clock.advance(timedelta(hours=hop * 7, minutes=rng.randint(1, 50)))
        filler = " ".join(rng.choice(("plan", "tea", "trip", "code")) for _ in range(20))
        text = f"{marker(scope, person, i)} {filler}"
        await core.intake.accept(
            IncomingMessage(scope=scope, text=text, author=PEOPLE[person], author_id=person)
        )
        spoke.add((scope, person))
    clock.advance(timedelta(days=2))
    for scope in {s for s, _ in spoke}:
        await core.maintenance.maintain(scope)
    for scope in SCOPES:
        for person in PEOPLE:
            shown, about_you = await answers(core, scope, person)
            leaked = foreign(shown, scope)
            assert leaked == [], f"{scope} showed {PEOPLE[person]} words from {leaked}"
            own = Scope.of(scope).person_scope(person)
            mine = {f.text for f in await core.repo.reads.facts(own.key)} if own else set()
            for line in about_you:
                text = line.split(" ", 1)[1] if " " in line else line
                assert any(t in text for t in mine), f"{line!r} is not {PEOPLE[person]}'s fact"
