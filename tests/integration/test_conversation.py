"""The one message path every front door takes (store, decide, answer, deliver, remember),
on a real Redis and the fake model, with a fake sink as the platform."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from config.prompts import load_prompts
from memory_core.bootstrap import Core
from memory_core.errors import StoreError
from memory_core.models import IncomingMessage, Reply
from memory_core.service.conversation import Conversation, Turn
from memory_core.service.replies import Replier
from memory_core.service.streaming import STREAMING_MARK
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.reply_sink import FakeSink
from tests.helpers import CoreFactory

SCOPE = "discord:1:2"


def asked(text: str, *, addressed: bool = True) -> IncomingMessage:
    return IncomingMessage(
        scope=SCOPE, text=text, author="Alice", author_id="7", addressed=addressed
    )


async def roles_and_texts(core: Core) -> list[tuple[str, str]]:
    return [(e.role, e.text) for e in await core.repo.reads.all_entries(SCOPE)]


async def turn_for(conversation: Conversation, text: str) -> Turn:
    turn = await conversation.receive(asked(text))
    assert turn is not None
    return turn


async def test_an_answer_streams_is_finished_and_remembered(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    answer = "Standup is at ten, in the small room by the kitchen. " * 3
    fake_llm.responder = lambda request: answer if request.purpose == "reply" else None
    fake_llm.stream_piece_chars = 15
    core = await make_core()
    conversation = Conversation(core.intake, core.replier)
    sink = FakeSink(message_chars=2000)
    turn = await turn_for(conversation, "when is standup?")
    assert await conversation.answer(turn, sink, stream_interval_s=0.0)
    assert sink.shown == [answer.strip()]
    edits = [text for kind, text in sink.calls if kind == "edit"]
    assert len(edits) >= 2 and all(e.endswith(STREAMING_MARK) for e in edits[:-1])
    assert sink.typing_at_posts == [True] and sink.typed == 1  # typing while the model wrote
    assert await roles_and_texts(core) == [
        ("user", "when is standup?"),
        ("assistant", answer.strip()),
    ]


async def test_a_message_the_bot_is_not_asked_or_a_repeat_is_stored_once_and_not_answered(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    conversation = Conversation(core.intake, core.replier)
    assert await conversation.receive(asked("just chatting", addressed=False)) is None
    first = replace(asked("hello?"), platform_id="m1")
    assert await conversation.receive(first) is not None
    assert await conversation.receive(first) is None  # delivered twice: answered once
    assert fake_llm.of("reply") == []
    assert [text for _, text in await roles_and_texts(core)] == ["just chatting", "hello?"]


async def test_a_model_failure_is_the_apology_and_no_answer_is_remembered(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    fake_llm.fail_next(purposes=("reply",))
    core = await make_core()
    conversation = Conversation(core.intake, core.replier)
    sink = FakeSink(message_chars=2000)
    turn = await turn_for(conversation, "remember the 7th")
    assert await conversation.answer(turn, sink, stream_interval_s=0.0)
    assert sink.shown == [load_prompts("en").apology]
    assert await roles_and_texts(core) == [("user", "remember the 7th")]


class StoreFailsWhileAnswering:
    """The real replier, except that Redis goes away while the answer is written."""

    def __init__(self, replier: Replier) -> None:
        self.real = replier

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def reply(self, msg: IncomingMessage, **_: Any) -> Reply:
        raise StoreError("Redis went away")


async def test_a_store_failure_while_answering_is_the_apology_in_the_scopes_language(
    make_core: CoreFactory,
) -> None:
    core = await make_core()
    await core.admin.configure(SCOPE, language="ja")
    conversation = Conversation(core.intake, StoreFailsWhileAnswering(core.replier))  # type: ignore[arg-type]
    sink = FakeSink(message_chars=2000)
    turn = await turn_for(conversation, "what did we decide?")
    await conversation.answer(turn, sink, stream_interval_s=None)
    assert sink.shown == [load_prompts("ja").apology]
    assert await roles_and_texts(core) == [("user", "what did we decide?")]


async def test_an_answer_that_was_not_delivered_is_not_remembered(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    conversation = Conversation(core.intake, core.replier)
    refused = FakeSink(message_chars=2000, refuse_posts=5)
    turn = await turn_for(conversation, "are you there?")
    assert not await conversation.answer(turn, refused, stream_interval_s=0.0)
    assert len(fake_llm.of("reply")) == 1  # paid for, but nobody saw it
    closed = FakeSink(closed=True)
    turn = await turn_for(conversation, "and here?")
    assert not await conversation.answer(turn, closed, stream_interval_s=None)
    assert len(fake_llm.of("reply")) == 1  # nowhere to post: no model call
    assert closed.calls == [] and closed.typed == 0
    assert await roles_and_texts(core) == [("user", "are you there?"), ("user", "and here?")]


async def test_a_message_is_prepared_once_for_the_store_and_the_prompt(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """The turn carries the message as it was stored (validated, capped, counted): the
    prompt is built from the same, not from a second preparation."""
    core = await make_core()
    conversation = Conversation(core.intake, core.replier)
    prepared: list[str] = []
    prepare = core.intake.prepare

    def counted(msg: IncomingMessage, **options: Any) -> Any:
        prepared.append(msg.text)
        return prepare(msg, **options)

    core.intake.prepare = counted  # type: ignore[method-assign]
    turn = await turn_for(conversation, "what is for lunch?")
    assert await conversation.answer(turn, FakeSink(message_chars=2000), stream_interval_s=None)
    # Once for the question (the answer, stored after it, is prepared for itself).
    assert prepared.count("what is for lunch?") == 1 and len(prepared) == 2
    assert fake_llm.of("reply")[-1].messages[-1]["content"].endswith("what is for lunch?")
