"""One reply has limits: a deadline that covers every retry and every streamed piece, and a
length cap, each ending the answer with a marker in the bot's language. The user's message
is stored whatever happens, and so is the (cut) answer that was sent.

Timing bounds are generous on purpose (machines are noisy): with a 1 s deadline a reply must
end well within 10 s, where the unbounded paths took 12 s to a minute.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from config.prompts import load_prompts
from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage, Reply
from memorybot_testkit.converse import converse_streamed
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.helpers import CoreFactory

DEADLINE_S = 1.0
BOUND_S = 10.0
SCOPE = "console:limits"


def answer_with(text: str) -> Any:
    return lambda request: text if request.purpose == "reply" else None


async def ask(core: Core, *, streamed: bool, shown: list[str] | None = None) -> Reply:
    async def progress(text: str) -> None:
        if shown is not None:
            shown.append(text)

    reply = await converse_streamed(
        core,
        IncomingMessage(scope=SCOPE, text="tell me everything", author="Alice", direct=True),
        progress if streamed else None,
    )
    assert reply is not None
    return reply


async def stored_texts(core: Core) -> list[str]:
    return [e.text for e in (await core.admin.show(SCOPE, recent=100)).recent]


async def test_a_slow_stream_ends_at_the_deadline_with_what_it_has(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """One piece a second for 40 s, under a per-request timeout of 3 s that never trips:
    the reply ends at the deadline with the pieces so far and the marker, and is stored."""
    answer = " ".join(f"w{i:02d}" for i in range(40))
    fake_llm.responder = answer_with(answer)
    fake_llm.stream_piece_chars = 4
    fake_llm.stream_piece_delay = 1.0
    core = await make_core(llm={"timeout_s": 3.0, "reply_deadline_s": DEADLINE_S})
    shown: list[str] = []
    started = time.monotonic()
    reply = await ask(core, streamed=True, shown=shown)
    assert time.monotonic() - started < BOUND_S
    marker = load_prompts("en").say("reply_cut_slow")
    assert reply.kind == "llm"
    assert reply.text.startswith("w00") and reply.text.endswith(marker), reply.text
    assert shown and shown[0] == "w00 "
    assert await stored_texts(core) == ["tell me everything", reply.text]


@pytest.mark.parametrize(
    ("streamed", "llm"),
    [
        # Each attempt times out after 3 s and is retried 4 times: 15 s without a deadline.
        (False, {"timeout_s": 3.0, "max_retries": 4}),
        # A stream that never starts, under a 12 s per-request timeout.
        (True, {"timeout_s": 12.0}),
    ],
    ids=["retries", "stream"],
)
async def test_a_model_too_slow_to_say_anything_is_an_apology_at_the_deadline(
    make_core: CoreFactory, fake_llm: FakeOpenAI, streamed: bool, llm: dict[str, Any]
) -> None:
    fake_llm.slow = {"reply": 60.0}
    core = await make_core(llm={**llm, "reply_deadline_s": DEADLINE_S})
    started = time.monotonic()
    reply = await ask(core, streamed=streamed)
    assert time.monotonic() - started < BOUND_S
    assert reply.kind == "apology" and reply.text == load_prompts("en").apology
    assert await stored_texts(core) == ["tell me everything"]


@pytest.mark.parametrize(
    ("streamed", "language"), [(False, "en"), (True, "ja")], ids=["complete-en", "stream-ja"]
)
async def test_a_huge_answer_is_cut_at_the_cap_with_a_marker_and_stored_cut(
    make_core: CoreFactory, fake_llm: FakeOpenAI, streamed: bool, language: str
) -> None:
    """A 1 MB answer: the reply, every streamed edit and what is stored stay within
    bot.reply_max_chars, ending with the marker in the scope's language; a stream is not
    read past the cap."""
    cap = 1000
    answer = "All work and no play makes memorybot a dull bot. " * 21_000
    assert len(answer) > 1_000_000
    fake_llm.responder = answer_with(answer)
    fake_llm.stream_piece_chars = 500
    core = await make_core(bot={"reply_max_chars": cap}, memory={"language": language})
    shown: list[str] = []
    reply = await ask(core, streamed=streamed, shown=shown)
    marker = load_prompts(language).say("reply_cut_long")
    assert reply.kind == "llm"
    assert len(reply.text) <= cap and reply.text.endswith(marker)
    assert reply.text.startswith("All work and no play")
    assert await stored_texts(core) == ["tell me everything", reply.text]
    assert all(len(text) <= cap for text in shown)
    if streamed:
        assert shown
        # Pieces read: few (counted in tokens, the stream's usage chunk never read), not 1 MB.
        assert core.llm.stats.of("reply").completion_tokens <= 4 * 500 // 3


def _streamed(request: RecordedRequest) -> bool:
    return bool(request.body.get("stream"))


async def test_the_length_cap_and_the_deadline_hold_for_every_reply_in_a_row(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """After a cut reply the next one is normal: nothing carries over between replies."""
    fake_llm.responder = answer_with("x" * 5000)
    core = await make_core(bot={"reply_max_chars": 1000})
    first = await ask(core, streamed=True)
    fake_llm.responder = answer_with("short and sweet")
    second = await ask(core, streamed=True)
    assert len(first.text) <= 1000 and second.text == "short and sweet"
    assert all(_streamed(r) for r in fake_llm.of("reply"))
