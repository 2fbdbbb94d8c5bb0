"""Block Kit for /memory answers: a header, a section per (heading, body), within Slack's
limits (50 blocks a message, 3,000 characters a section, 150 a header), and the buttons
that confirm ``forget all``. Pure functions: dicts in, dicts out."""

from __future__ import annotations

from typing import Any

from bots.commands import CommandResult
from bots.slack.text import escape
from memory_core.text.chunks import split_message

Block = dict[str, Any]

MAX_BLOCKS = 50
SECTION_CHARS = 3000
HEADER_CHARS = 150
FALLBACK_CHARS = 3000  # the notification text that goes with blocks

FORGET_ALL_CONFIRM = "memory_forget_all_confirm"
FORGET_ALL_CANCEL = "memory_forget_all_cancel"

CANCELLED = "Cancelled: nothing was forgotten."
TRUNCATED = "More than fits in one message: `/memory export` has all of it."


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _title_block(title: str) -> Block:
    if len(title) <= HEADER_CHARS:
        return {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": True}}
    # Long titles (a confirmation question, a refusal) read better as bold text than cut.
    return section(f"*{escape(title)}*"[:SECTION_CHARS])


def result_blocks(result: CommandResult) -> list[Block]:
    """The blocks of a /memory answer. Bodies longer than a section continue in the next
    one; past 50 blocks the last one says where to find the rest."""
    blocks: list[Block] = [_title_block(result.title)] if result.title else []
    for heading, body in result.sections:
        text = f"*{escape(heading)}*\n{escape(body)}" if heading else escape(body)
        blocks += [section(chunk) for chunk in split_message(text, SECTION_CHARS)]
    if len(blocks) > MAX_BLOCKS:
        note = {"type": "context", "elements": [{"type": "mrkdwn", "text": TRUNCATED}]}
        blocks = [*blocks[: MAX_BLOCKS - 1], note]
    return blocks


def fallback_text(result: CommandResult) -> str:
    """Plain text that goes with the blocks (notifications, clients without Block Kit)."""
    return shortened(escape(result.text()).replace("**", "*"))


def shortened(text: str) -> str:
    """``text`` within what Slack takes as a message's plain text."""
    return text if len(text) <= FALLBACK_CHARS else text[: FALLBACK_CHARS - 1] + "…"


def button(text: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": text, "emoji": True},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def confirm_blocks(result: CommandResult, scope: str) -> list[Block]:
    """``forget all`` asked without confirmation: the question and two buttons. The scope
    rides in the buttons' value; the click handler checks it against where it was clicked."""
    return [
        section(escape(result.title)[:SECTION_CHARS]),
        {
            "type": "actions",
            "block_id": "memory_forget_all",
            "elements": [
                button("Forget everything", FORGET_ALL_CONFIRM, scope, style="danger"),
                button("Cancel", FORGET_ALL_CANCEL, scope),
            ],
        },
    ]
