"""The assistant panel's pure parts (bots/slack/assistant.py): an assistant event's thread,
and the suggested prompts drawn from what memory holds (at most four, in the member's
language, never a fact about a person)."""

from __future__ import annotations

from typing import Any

import pytest

from bots.slack.assistant import Viewed, parse_thread, remembered_in, suggested_prompts
from config.prompts import load_prompts
from memory_core.models import Fact

TS = "1700000000.000100"


def started(**thread: Any) -> dict[str, Any]:
    base = {"user_id": "U1", "context": {"channel_id": "C1"}, "channel_id": "D1", "thread_ts": TS}
    return {"type": "assistant_thread_started", "assistant_thread": {**base, **thread}}


def test_an_assistant_event_names_its_thread() -> None:
    thread = parse_thread(started(), team_id="T1")
    assert thread is not None
    assert (thread.dm_scope, thread.thread_ts, thread.user_id) == ("slack:T1:D1", TS, "U1")
    assert thread.context == {"channel_id": "C1"}
    no_context = parse_thread(started(context=None), team_id="T1")
    assert no_context is not None and no_context.context == {}


@pytest.mark.parametrize(
    "thread",
    [
        {"channel_id": "C1"},  # an assistant thread lives in a DM
        {"channel_id": "D1:X"},
        {"thread_ts": "yesterday"},
        {"user_id": None},
    ],
)
def test_what_no_assistant_thread_sends_is_ignored(thread: dict[str, Any]) -> None:
    assert parse_thread(started(**thread), team_id="T1") is None
    assert parse_thread({"type": "assistant_thread_started"}, team_id="T1") is None


def fact(kind: str, text: str, *, ts: str = "2026-05-01", pinned: bool = False) -> Fact:
    return Fact(id="f1", kind=kind, text=text, ts=ts, pinned=pinned)


def test_prompts_come_from_what_is_decided_asked_or_noted_never_about_people() -> None:
    facts = [
        fact("decision", "Deploys happen on Thursdays", ts="2026-05-01"),
        fact("question", "Who owns the billing migration?", ts="2026-05-03"),
        fact("note", "Launch checklist lives in the wiki", pinned=True),
        fact("profile", "Bob lives in Lyon"),
        fact("preference", "Carol prefers tea"),
    ]
    remembered = remembered_in(facts, ["Q3 roadmap", " "])
    assert remembered == [
        ("note", "Launch checklist lives in the wiki"),
        ("question", "Who owns the billing migration?"),
        ("decision", "Deploys happen on Thursdays"),
        ("topic", "Q3 roadmap"),
    ]


def test_at_most_four_prompts_catching_up_on_the_viewed_channel_first() -> None:
    p = load_prompts("en")
    remembered = [("decision", "Deploys happen on Thursdays"), ("topic", "Q3 roadmap")] * 3
    prompts = suggested_prompts(
        p, viewed=Viewed(scope="slack:T1:C1", name="#general"), remembered=remembered
    )
    assert [m["message"] for m in prompts] == [
        "What has been going on in #general?",
        "What led to this decision: Deploys happen on Thursdays",
        "What was said about Q3 roadmap?",
        "What did we talk about last time?",
    ]
    assert all(set(m) == {"title", "message"} and len(m["title"]) <= 60 for m in prompts)


def test_with_nothing_remembered_the_prompts_are_general_in_the_members_language() -> None:
    english = suggested_prompts(load_prompts("en"), viewed=None, remembered=[])
    assert [m["message"] for m in english] == [
        "What did we talk about last time?",
        "What do you remember about me?",
        "What can you do?",
    ]
    japanese = suggested_prompts(load_prompts("ja"), viewed=None, remembered=[])
    assert japanese[0]["message"] == "前回は何を話しましたか？"


def test_a_long_fact_makes_a_short_title_and_a_whole_message() -> None:
    long = "We agreed " + "and then some more " * 20
    [prompt, *_] = suggested_prompts(load_prompts("en"), viewed=None, remembered=[("note", long)])
    assert len(prompt["title"]) == 60 and prompt["title"].endswith("…")
    assert prompt["message"].startswith("Tell me more about: We agreed")
