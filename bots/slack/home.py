"""The App Home tab as Block Kit: what memorybot keeps about the member who opens it in
this workspace (each place with its counts, the facts that follow them) and the buttons
that forget them in one place or everywhere, each asked again before it is done. Pure
functions: a core ``MemberView`` in, a ``home`` view out."""

from __future__ import annotations

import json
from typing import Any

from bots.commands import CommandResult
from bots.slack.blocks import SECTION_CHARS, button, result_blocks, section
from bots.slack.text import escape
from memory_core.models import Fact
from memory_core.scopes import Scope
from memory_core.service import MemberView

Block = dict[str, Any]

HOME_FORGET_HERE = "memory_home_forget_here"
HOME_FORGET_EVERYWHERE = "memory_home_forget_everywhere"
HOME_CONFIRM = "memory_home_confirm"
HOME_CANCEL = "memory_home_cancel"
MAX_HOME_BLOCKS = 100  # Slack's limit for a view
PLACES_SHOWN = 30
FACTS_SHOWN = 20


def place_mrkdwn(scope: str) -> str:
    """A place as Slack shows it: ``<#C123>`` renders as the channel's name for whoever may
    see it (and as "private channel" for whoever may not)."""
    place = Scope.of(scope)
    if place.is_dm:
        return "your DM with memorybot" + (" (a thread)" if place.is_thread else "")
    if place.is_thread:
        return f"a thread in <#{place.channel}>"
    return f"<#{place.channel}>"


def _fact_line(fact: Fact) -> str:
    return f"• {escape(fact.text[:300])}"


def home_view(
    view: MemberView,
    *,
    anchor: str,
    asking: tuple[str, str] | None = None,
    notice: CommandResult | None = None,
) -> dict[str, Any]:
    """The home tab. ``anchor``: a place of the workspace (the app's DM with the member),
    where "forget me everywhere" runs; ``asking``: (what, scope) of a forget to confirm
    ("here" in one place, "everywhere"); ``notice``: the answer of one just done."""
    blocks: list[Block] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": "What memorybot keeps about you", "emoji": True},
        },
        section(
            "In this workspace, by where it was said. Only you see this page. "
            "What the bot answered you goes with what you said."
        ),
    ]
    if notice is not None:
        blocks += result_blocks(notice)
    if asking is not None:
        what, scope = asking
        question = (
            f"Forget you in {place_mrkdwn(scope)}: your messages, the bot's answers to you and "
            "what was learned about you there, and what is known about you across the "
            "workspace? It cannot be undone."
            if what == "here"
            else "Forget you everywhere in this workspace: every channel, thread and DM where "
            "you spoke, the bot's answers to you, and what is known about you? It cannot be "
            "undone."
        )
        value = json.dumps({"what": what, "scope": scope})
        blocks += [
            section(f"*{question}*"[:SECTION_CHARS]),
            {
                "type": "actions",
                "block_id": "memory_home_confirm",
                "elements": [
                    button("Forget me", HOME_CONFIRM, value, style="danger"),
                    button("Cancel", HOME_CANCEL, value),
                ],
            },
        ]
    blocks.append({"type": "divider"})
    if not view.places and not view.facts:
        blocks.append(section("Nothing: memorybot keeps nothing you said in this workspace."))
    for place in view.places[:PLACES_SHOWN]:
        counts = f"{place.messages} message{'s' if place.messages != 1 else ''}"
        if place.facts:
            counts += f", {place.facts} fact{'s' if place.facts != 1 else ''} about you"
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"{place_mrkdwn(place.scope)}: {counts}"},
                "accessory": button("Forget me here", HOME_FORGET_HERE, place.scope),
            }
        )
    if len(view.places) > PLACES_SHOWN:
        more = len(view.places) - PLACES_SHOWN
        blocks.append(section(f"…and {more} more places ('Forget me everywhere' reaches them)."))
    if view.facts:
        lines = "\n".join(_fact_line(f) for f in view.facts[:FACTS_SHOWN])
        blocks.append(section(f"*Known about you across the workspace*\n{lines}"[:SECTION_CHARS]))
    if view.places or view.facts:
        blocks.append(
            {
                "type": "actions",
                "block_id": "memory_home_everywhere",
                "elements": [
                    button("Forget me everywhere", HOME_FORGET_EVERYWHERE, anchor, style="danger")
                ],
            }
        )
    return {"type": "home", "blocks": blocks[:MAX_HOME_BLOCKS]}
