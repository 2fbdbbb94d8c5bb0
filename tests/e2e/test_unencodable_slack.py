"""Text that UTF-8 cannot carry, through the Slack front door: the real Bolt app (signed
HTTP requests) against the fake Slack. A JSON body may escape a lone surrogate
(``"\\ud800"``: half of an emoji cut in two by a client or an integration); Bolt parses it
into a ``str`` no UTF-8 encoder takes. The message is kept, that half character shown as
U+FFFD, and the bot goes on answering."""

from __future__ import annotations

import pytest

from tests.slack_harness import C1, Harness

pytestmark = pytest.mark.fake("slack")

CUT_EMOJI = "\ud83d"  # the first half of U+1F600's UTF-16 pair, alone


async def test_a_lone_surrogate_in_an_event_is_stored_repaired_and_answered(
    http: Harness,
) -> None:
    slack = http
    await slack.say(f"order a café au lait {CUT_EMOJI} for the 3pm sync")
    await slack.mention("what did I order?")
    [answer] = await slack.replies(1)
    assert (answer.text or "").startswith("ACK:")
    entries = await slack.core.repo.reads.all_entries(f"slack:T1:{C1}")
    said = [e.text for e in entries if "au lait" in e.text]
    assert said == ["order a café au lait \ufffd for the 3pm sync"]
    # The model was asked with the repaired text, the café itself untouched.
    [request] = [r for r in slack.llm.requests if r.purpose == "reply"]
    asked = "\n".join(str(m["content"]) for m in request.messages)
    assert "café au lait \ufffd" in asked
