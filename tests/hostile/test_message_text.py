"""Chat messages are untrusted text from every front door: whatever a message holds (and
whoever its author claims to be), the pipeline stores it and answers, or says it is empty.
Lone surrogates, NULs and megabytes of text reach neither Redis nor the model as an
exception."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from memory_core.bootstrap import Core
from memory_core.errors import EmptyMessage
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.hostile.strategies import HUGE, NASTY, hostile_text

SCOPE = "discord:1:2"


async def send(core: Core, text: str, author: str = "Alice") -> str | None:
    """Store and answer one message; None when it is empty (the only refusal allowed)."""
    msg = IncomingMessage(scope=SCOPE, text=text, author=author, author_id=author[:40], direct=True)
    try:
        reply = await converse(core, msg)
    except EmptyMessage:
        assert not text.strip(), f"{text!r} is not empty"
        return None
    assert reply is not None
    assert reply.kind == "llm", reply
    assert reply.text.strip()
    return reply.text


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=hostile_text(max_size=300), author=hostile_text(max_size=30))
async def test_any_message_is_stored_and_answered(
    core: Core, fake_llm: FakeOpenAI, text: str, author: str
) -> None:
    """Arbitrary unicode as text and as author name: stored and answered by the model (the
    request it receives is valid JSON), or refused as empty."""
    before = await core.repo.reads.log_length(SCOPE)
    answer = await send(core, text, author or "someone")
    after = await core.repo.reads.log_length(SCOPE)
    if answer is None:
        assert after == before
        return
    assert after == before + 2  # the message and the answer
    json.dumps(fake_llm.requests[-1].body)


async def test_nasty_and_huge_messages_are_kept_within_the_cap(
    core: Core, fake_llm: FakeOpenAI
) -> None:
    """Each nasty string and two 120 kB messages: stored (huge ones cut to
    memory.max_message_chars with a note), answered, and the prompt within its budget."""
    for text in (*NASTY, *HUGE):
        await send(core, text)
    cap = core.settings.memory.max_message_chars
    for entry in await core.repo.reads.all_entries(SCOPE):
        assert len(entry.text) <= cap + 80, len(entry.text)
    budget = core.settings.memory.budget_tokens
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope=SCOPE, text=HUGE[1], author="Alice")
    )
    assert prompt.tokens <= budget
    assert len(fake_llm.of("reply")) == len(NASTY) + len(HUGE) - sum(not t.strip() for t in NASTY)


async def test_lone_surrogates_are_stored_as_replacement_characters(core: Core) -> None:
    """A JSON "\\ud800" escape decodes to a lone surrogate that UTF-8 cannot encode; the
    message is kept (the surrogate replaced), not lost to a UnicodeEncodeError."""
    await send(core, "before \ud800 after \udcff end", author="Bad\udc80Name")
    [entry, _answer] = await core.repo.reads.all_entries(SCOPE)
    assert entry.text.startswith("before ") and entry.text.endswith(" end")
    assert "\ud800" not in entry.text
    assert entry.author.startswith("Bad")
