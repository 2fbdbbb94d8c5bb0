"""The offline reply says whether the message it answers was remembered: not while memory
is paused. ``remembered`` is what the pipeline knows from storing it
(``IngestResult.stored``); without it, the scope's state as read for the reply decides (a
thread's carries its channel's pause). In English and Japanese."""

from __future__ import annotations

from typing import Any

import pytest

from config.prompts import load_prompts
from memory_core.models import ScopeState
from memory_core.prompt.assembly import Prompt
from memory_core.service.offline import offline_reply
from memory_core.store.records import PromptSnapshot
from memory_core.text.tokens import TokenCounter

SCOPE = "discord:1:2"


class Snapshots:
    """A repo that answers ``prompt_snapshot`` with one scope state, nothing remembered."""

    def __init__(self, *, paused: bool) -> None:
        self.state = ScopeState(paused=paused)

    async def prompt_snapshot(self, scope: str, *, recent: int) -> PromptSnapshot:
        return PromptSnapshot(state=self.state, facts=[], recent=[], parent_state=None)


async def reply(language: str, *, paused: bool, **remembered: Any) -> str:
    repo: Any = Snapshots(paused=paused)
    text, _ = await offline_reply(
        repo,
        TokenCounter(),
        SCOPE,
        Prompt([], 0, 0, language=language),
        zone_of=lambda scope, stored: "UTC",
        **remembered,
    )
    return text


@pytest.mark.parametrize("language", ["en", "ja"])
async def test_while_paused_the_offline_reply_says_the_message_was_not_remembered(
    language: str,
) -> None:
    prompts = load_prompts(language)
    paused = await reply(language, paused=True)
    assert paused.startswith(prompts.say("offline_paused"))
    assert prompts.offline_reply not in paused  # "Your message is remembered."
    assert "/memory resume" in paused
    live = await reply(language, paused=False)
    assert live.startswith(prompts.offline_reply)


@pytest.mark.parametrize("language", ["en", "ja"])
async def test_what_the_pipeline_knows_of_the_message_decides(language: str) -> None:
    """Paused just after the message was stored: it was remembered; a message not stored
    (paused when it came) in a scope resumed since: it was not."""
    prompts = load_prompts(language)
    stored = await reply(language, paused=True, remembered=True)
    assert stored.startswith(prompts.offline_reply)
    not_stored = await reply(language, paused=False, remembered=False)
    assert not_stored.startswith(prompts.say("offline_paused"))


def test_both_languages_say_it() -> None:
    assert "NOT remembered" in load_prompts("en").say("offline_paused")
    assert "記憶していません" in load_prompts("ja").say("offline_paused")
