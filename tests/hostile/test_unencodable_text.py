"""Text that UTF-8 cannot carry, from a door: Discord and Slack deliver UTF-8 JSON, but a
``"\\ud800"`` escape in it decodes to a lone surrogate, and so does a byte that was not
UTF-8 read with ``surrogateescape``. Every encoder on the way (Redis, the model's request,
the sentence encoder that recall embeds the question with) fails on one. The core repairs
it where a message's text is made (``stored_text``): the message is stored with U+FFFD in
its place, answered, and recalled; nothing raises UnicodeEncodeError."""

from __future__ import annotations

import json

import pytest

from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI

SCOPE = "discord:1:2"
UNENCODABLE = (
    "lone \ud800 high",
    "lone \udfff low",
    "caf\udce9 au lait",  # a Latin-1 byte through surrogateescape
    "\ude00\ud83d reversed pair",
    "\ud800",
)


@pytest.mark.parametrize("text", UNENCODABLE)
async def test_a_lone_surrogate_is_stored_as_u_fffd_and_answered(
    meaning_core: Core, fake_llm: FakeOpenAI, text: str
) -> None:
    await converse(
        meaning_core,
        IncomingMessage(scope=SCOPE, text="we talked about café au lait", author="Bob"),
    )
    msg = IncomingMessage(scope=SCOPE, text=text, author="Alice", author_id="U1", direct=True)
    reply = await converse(meaning_core, msg)
    assert reply is not None and reply.kind == "llm", reply
    entries = await meaning_core.repo.reads.all_entries(SCOPE)
    stored = entries[-2].text  # then the answer
    assert stored == "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    stored.encode("utf-8")
    json.dumps(fake_llm.requests[-1].body, ensure_ascii=False).encode("utf-8")
    assert "\ufffd" in fake_llm.of("reply")[-1].prompt_text  # what the model was asked


async def test_an_edit_with_a_lone_surrogate_is_stored_repaired(meaning_core: Core) -> None:
    """A message edited on its platform goes through the same text rule."""
    msg = IncomingMessage(scope=SCOPE, text="first words", author="Alice", platform_id="m1")
    await meaning_core.intake.accept(msg)
    await meaning_core.admin.messages.edit_message(SCOPE, "m1", "second \ud800 words")
    [entry] = await meaning_core.repo.reads.all_entries(SCOPE)
    assert entry.text == "second \ufffd words"
