"""A forget holds against the past: ``/memory forget <text>`` in a Slack channel, then
``/memory learn`` of that channel's history, through the real Bolt app against the fake Slack
and a real Redis. The older message that says the text was never in memory; it is not
learned, and the learn counts it as forgotten."""

from __future__ import annotations

import pytest

from tests.fakes.slack import ResponseUrlPost
from tests.helpers import scope_values
from tests.slack_harness import (
    ALICE,
    BOB,
    C1,
    CAROL,
    SCOPE,
    Harness,
    block_texts,
    entries,
    learn,
    past_ts,
)

pytestmark = pytest.mark.fake("slack")

SECRET = "zebrafalcon42"
HISTORY = [
    (BOB, "standup moves to ten"),
    (CAROL, "the release is on Friday"),
    (ALICE, "the launch code is zebrafalcon42"),
    (BOB, "lunch at the usual place"),
    (CAROL, "docs are in the wiki"),
]


def shown(response: ResponseUrlPost) -> str:
    return f"{response.text or ''}\n{block_texts(response)}"


async def test_a_forgotten_text_is_not_learned_from_older_history(learning: Harness) -> None:
    slack = learning
    slack.fake.add_history(
        C1,
        [
            slack.fake.message_event(text=text, user_id=user, channel_id=C1, ts=past_ts(n))
            for n, (user, text) in enumerate(HISTORY)
        ],
    )
    assert await entries(slack.core) == []  # memory holds nothing of the past yet

    forgot = await slack.command(f"forget {SECRET}")
    assert f'Forgot "{SECRET}"' in shown(forgot), shown(forgot)

    found = await learn(slack, "learn 30", "Found ")
    assert found.startswith(f"Found 4 new messages in {SCOPE}"), found
    assert "1 forgotten here" in found, found
    done = await learn(slack, "learn confirm", "Learned ")
    assert done.startswith(f"Learned 4 messages of {SCOPE}") and "day records" in done, done
    await slack.bot.drain()

    kept = [text for _, text in HISTORY if SECRET not in text]
    assert [e.text for e in await entries(slack.core)] == kept
    days = await slack.core.repo.reads.days(SCOPE)
    assert days and all(SECRET not in d.summary.casefold() for d in days), days
    # Nowhere in the channel's keys (day records, tiers, facts, recall, the ledger itself).
    values = await scope_values(slack.core, SCOPE, memory_only=True)
    assert "standup moves to ten" in "\n".join(values)
    assert not [v for v in values if SECRET in v.casefold()]
    memory = shown(await slack.command("show"))
    assert "the release is on Friday" in memory
    assert SECRET not in memory.casefold() and "launch code" not in memory
