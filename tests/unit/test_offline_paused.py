"""The offline reply says whether the message it answers was remembered: not while memory
is paused. ``remembered`` is what the pipeline knows from storing it
(``IngestResult.stored``); without it, the scope's state as read for the reply decides (a
thread's carries its channel's pause). In English and Japanese."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from config.prompts import load_prompts
from memory_core.models import ScopeState
from memory_core.prompt.assembly import AssemblyInput, Prompt
from memory_core.service.offline import offline_reply
from memory_core.text.tokens import TokenCounter

SCOPE = "discord:1:2"


def reply(language: str, *, paused: bool, **remembered: Any) -> str:
    """The offline reply in a scope whose state is ``paused`` or not, nothing remembered."""
    data = AssemblyInput(
        scope=SCOPE,
        state=ScopeState(paused=paused),
        facts=[],
        recent=[],
        new_author="Alice",
        new_text="what did we decide?",
        now=datetime(2025, 8, 11, 9, 0, tzinfo=UTC),
        tz="UTC",
        language=language,
        bot_name="memorybot",
    )
    prompt = Prompt([], 0, 0, language=language)
    text, _ = offline_reply(data, prompt, TokenCounter(), max_chars=4000, **remembered)
    return text


@pytest.mark.parametrize("language", ["en", "ja"])
def test_while_paused_the_offline_reply_says_the_message_was_not_remembered(
    language: str,
) -> None:
    prompts = load_prompts(language)
    paused = reply(language, paused=True)
    assert paused.startswith(prompts.say("offline_paused"))
    assert prompts.offline_reply not in paused  # "Your message is remembered."
    assert "/memory resume" in paused
    live = reply(language, paused=False)
    assert live.startswith(prompts.offline_reply)


@pytest.mark.parametrize("language", ["en", "ja"])
def test_what_the_pipeline_knows_of_the_message_decides(language: str) -> None:
    """Paused just after the message was stored: it was remembered; a message not stored
    (paused when it came) in a scope resumed since: it was not."""
    prompts = load_prompts(language)
    stored = reply(language, paused=True, remembered=True)
    assert stored.startswith(prompts.offline_reply)
    not_stored = reply(language, paused=False, remembered=False)
    assert not_stored.startswith(prompts.say("offline_paused"))


def test_both_languages_say_it() -> None:
    assert "NOT remembered" in load_prompts("en").say("offline_paused")
    assert "記憶していません" in load_prompts("ja").say("offline_paused")
