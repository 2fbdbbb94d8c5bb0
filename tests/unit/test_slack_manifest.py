"""The Slack app manifest asks for exactly the bot scopes memorybot uses, and docs/slack.md
says why for each: a scope nothing uses is a permission a workspace grants for nothing.

What is used is read from the code (every ``client.<method>(`` call in ``bots/slack/``) and from the
manifest's own event subscriptions and slash command; a Web API method this table does not
know fails the test until its scope is written down here, in the manifest and in the docs.
"""

from __future__ import annotations

import re

from tests.helpers import ROOT, SLACK_MANIFEST, slack_bot_scopes, slack_manifest_list

DOCS = ROOT / "docs" / "slack.md"

# Web API method (as slack_sdk names it) -> the bot scopes it needs here.
METHOD_SCOPES: dict[str, set[str]] = {
    "auth_test": set(),
    "issue_new_wss_url": set(),  # apps.connections.open: the app-level token's connections:write
    "chat_postMessage": {"chat:write"},
    "chat_update": {"chat:write"},
    # A streamed answer (slack.stream_replies): chat:write, like any message of the app.
    "chat_startStream": {"chat:write"},
    "chat_appendStream": {"chat:write"},
    "chat_stopStream": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},  # a /memory answer its response_url refused
    "users_info": {"users:read"},
    # For app_mention events, which come from public and private channels (a DM or a group
    # DM is private by its channel type already): channels:read and groups:read; and for
    # whose a DM is, where a shortcut or /memory runs (the app's own DM or one between
    # people): im:read.
    "conversations_info": {"channels:read", "groups:read", "im:read"},
    "conversations_open": {"im:write"},  # a 1:1 DM for the export
    "files_upload_v2": {"files:write"},
    "chat_getPermalink": set(),  # /memory why and source lines: Slack asks for no scope
    "views_publish": set(),  # the App Home tab: no scope
    # The assistant panel. setStatus takes chat:write (Slack's reference; assistant:write
    # too, for now); the prompts and the title, assistant:write.
    "assistant_threads_setStatus": {"chat:write"},
    "assistant_threads_setSuggestedPrompts": {"assistant:write"},
    "assistant_threads_setTitle": {"assistant:write"},
    # Whether a member may read the channel they view in the assistant panel: a private
    # channel's members (groups:read), a guest's public channel (channels:read).
    "conversations_members": {"channels:read", "groups:read"},
}

EVENT_SCOPES: dict[str, str] = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
    "channel_deleted": "channels:read",
    "group_deleted": "groups:read",
    "channel_left": "channels:read",
    "group_left": "groups:read",
    "member_left_channel": "channels:read",  # (and groups:read for private channels)
}
# Events that need no scope (a dict of their own: the manifest's scopes are a set of those above).
NO_SCOPE_EVENTS = {
    "app_home_opened",
    "app_uninstalled",
    "tokens_revoked",
    "assistant_thread_started",  # (the assistant view's, with assistant:write)
    "assistant_thread_context_changed",
}


def documented_scopes() -> set[str]:
    """The scopes in the first column of docs/slack.md's "| scope | why |" table."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("| scope | why |", 1)[1].split("\n\n", 1)[0]
    scopes: set[str] = set()
    for row in table.splitlines()[2:]:
        first_cell = row.strip().strip("|").split("|")[0]
        scopes |= set(re.findall(r"`([\w:.-]+)`", first_cell))
    return scopes


def used_methods() -> set[str]:
    calls: set[str] = set()
    for path in (ROOT / "bots" / "slack").rglob("*.py"):
        calls |= set(re.findall(r"client\.([a-z]+_[A-Za-z0-9_]+)\(", path.read_text("utf-8")))
    return calls


def needed_scopes() -> set[str]:
    methods = used_methods()
    unknown = methods - METHOD_SCOPES.keys()
    assert not unknown, f"add the scopes of {sorted(unknown)} to METHOD_SCOPES"
    scopes = set().union(*(METHOD_SCOPES[m] for m in methods))
    events = set(slack_manifest_list("bot_events")) - NO_SCOPE_EVENTS
    scopes |= {EVENT_SCOPES[event] for event in events}
    if "slash_commands:" in SLACK_MANIFEST.read_text(encoding="utf-8"):
        scopes.add("commands")
    return scopes


def test_the_manifest_asks_for_exactly_the_scopes_the_code_uses() -> None:
    scopes = slack_bot_scopes()
    assert len(scopes) == len(set(scopes)), scopes
    assert set(scopes) == needed_scopes()


def test_docs_explain_every_scope_of_the_manifest() -> None:
    assert documented_scopes() == set(slack_bot_scopes())
