"""Block Kit, message and view validation of the fake Slack (as strict as Slack's documentation),
cursors and small helpers for messages and events.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from .models import (
    _ACTIONS_ELEMENTS,
    _BLOCK_ID_CHARS,
    _CONTEXT_ELEMENTS,
    _HEADER_TEXT_CHARS,
    _MAX_BLOCKS,
    _MAX_VIEW_BLOCKS,
    _MESSAGE_ONLY_BLOCK_TYPES,
    _MESSAGE_TEXT_CHARS,
    _SECTION_FIELD_CHARS,
    _SECTION_FIELDS,
    _SECTION_TEXT_CHARS,
    _STREAM_TEXT_CHARS,
    _UNCHECKED_BLOCK_TYPES,
    _VIEW_CALLBACK_ID_CHARS,
    _VIEW_PRIVATE_METADATA_CHARS,
)


def _text_object_ok(value: Any, *, limit: int, plain_only: bool = False) -> bool:
    if not isinstance(value, dict):
        return False
    kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    text = value.get("text")
    return value.get("type") in kinds and isinstance(text, str) and 0 < len(text) <= limit


def _block_ok(block: Any) -> bool:
    """One block against the Block Kit limits the bot's answers can reach."""
    if not isinstance(block, dict):
        return False
    if len(str(block.get("block_id", ""))) > _BLOCK_ID_CHARS:
        return False
    kind = block.get("type")
    if kind == "header":
        return _text_object_ok(block.get("text"), limit=_HEADER_TEXT_CHARS, plain_only=True)
    if kind == "section":
        text, fields = block.get("text"), block.get("fields")
        if text is None and not fields:
            return False
        if text is not None and not _text_object_ok(text, limit=_SECTION_TEXT_CHARS):
            return False
        if fields is None:
            return True
        return (
            isinstance(fields, list)
            and len(fields) <= _SECTION_FIELDS
            and all(_text_object_ok(f, limit=_SECTION_FIELD_CHARS) for f in fields)
        )
    if kind == "context":
        elements = block.get("elements")
        return (
            isinstance(elements, list)
            and 0 < len(elements) <= _CONTEXT_ELEMENTS
            and all(
                _text_object_ok(e, limit=_SECTION_TEXT_CHARS)
                or (isinstance(e, dict) and e.get("type") == "image")
                for e in elements
            )
        )
    if kind == "actions":
        elements = block.get("elements")
        return isinstance(elements, list) and 0 < len(elements) <= _ACTIONS_ELEMENTS
    return kind in _UNCHECKED_BLOCK_TYPES


def message_error(body: dict[str, Any]) -> str | None:
    """Why Slack would refuse to post this message (``no_text``, ``msg_too_long``,
    ``invalid_blocks``), or None."""
    if body.get("delete_original"):
        return None
    text, blocks = body.get("text"), body.get("blocks")
    markdown = body.get("markdown_text")
    if not text and not blocks and not body.get("attachments") and not markdown:
        return "no_text"
    if isinstance(text, str) and len(text) > _MESSAGE_TEXT_CHARS:
        return "msg_too_long"
    if isinstance(markdown, str) and len(markdown) > _STREAM_TEXT_CHARS:
        return "msg_too_long"  # markdown_text: at most 12,000 characters
    if blocks is not None and (
        not isinstance(blocks, list)
        or len(blocks) > _MAX_BLOCKS
        or not all(_block_ok(b) for b in blocks)
    ):
        return "invalid_blocks"
    return None


def event_subscription(event: Mapping[str, Any]) -> str:
    """The Events API subscription under which Slack delivers ``event`` (an inner event):
    its ``type``, but ``message.channels`` / ``message.groups`` / ``message.im`` /
    ``message.mpim`` for a ``message`` event, by its ``channel_type``."""
    kind = str(event.get("type", ""))
    if kind == "message":
        plural = {"channel": "channels", "group": "groups"}
        channel_type = str(event.get("channel_type", "channel"))
        return f"message.{plural.get(channel_type, channel_type)}"
    return kind


def _view_error(view: Mapping[str, Any]) -> list[str]:
    """What Slack's views.publish refuses in a Home tab view, as the messages of its
    ``invalid_arguments`` answer (``[ERROR] ... [json-pointer:...]``); empty when valid."""
    errors: list[str] = []
    if view.get("type") != "home":
        errors.append("[ERROR] must be `home` [json-pointer:/view/type]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        errors.append("[ERROR] missing required field: blocks [json-pointer:/view]")
    else:
        if len(blocks) > _MAX_VIEW_BLOCKS:
            errors.append("[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]")
        for index, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if not _block_ok(block) or kind in _MESSAGE_ONLY_BLOCK_TYPES:
                errors.append(f"[ERROR] invalid block [json-pointer:/view/blocks/{index}]")
    limits = (
        ("private_metadata", _VIEW_PRIVATE_METADATA_CHARS),
        ("callback_id", _VIEW_CALLBACK_ID_CHARS),
    )
    for key, limit in limits:
        value = view.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            errors.append(f"[ERROR] must be at most {limit} characters [json-pointer:/view/{key}]")
    return errors


def _find_element(view: Mapping[str, Any], action_id: str) -> tuple[str, dict[str, Any]] | None:
    """The (block_id, element) of the interactive element ``action_id`` in a view's blocks:
    an actions block's elements, a section's accessory or an input's element."""
    for block in view.get("blocks") or ():
        if not isinstance(block, dict):
            continue
        candidates = list(block.get("elements") or ()) if block.get("type") == "actions" else []
        candidates += [block[key] for key in ("accessory", "element") if key in block]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    return None


def _ts_value(value: Any) -> Decimal | None:
    """A message timestamp (``"1700000000.000100"``) as a number, or None if it is not one."""
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() and number >= 0 else None


def _flag(value: Any) -> bool:
    """A boolean argument as Slack reads it (``true``/``1``; a query string carries text)."""
    return value is True or str(value).lower() in ("1", "true")


def _encode_cursor(ts: str) -> str:
    # Slack's cursors are opaque base64 (its history cursors decode to "next_ts:...").
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def _decode_cursor(cursor: str) -> Decimal | None:
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    prefix, _, ts = decoded.partition(":")
    return _ts_value(ts) if prefix == "next_ts" and ts else None


def _invalid_arguments(*messages: str) -> dict[str, Any]:
    # Slack's answer to arguments it cannot use, with what is wrong in response_metadata.
    return {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {"messages": list(messages)},
    }


def _in_window(
    message: Mapping[str, Any], *, oldest: Decimal, latest: Decimal, inclusive: bool
) -> bool:
    """Whether a message is between ``oldest`` and ``latest`` (the bounds themselves only
    when ``inclusive``)."""
    ts = _ts_value(message.get("ts"))
    if ts is None:
        return False
    if inclusive:
        return oldest <= ts <= latest
    return oldest < ts < latest


def _conversation_id(users: Sequence[str]) -> str:
    """The id of the DM (one user) or group DM (several) with ``users``: stable, so the
    same people always get the same conversation."""
    digest = hashlib.sha1(",".join(sorted(users)).encode()).hexdigest()[:10].upper()
    return ("D" if len(users) == 1 else "G") + digest


def _as_changed_message(event: Mapping[str, Any]) -> dict[str, Any]:
    """A message event as a message_changed event nests it: no channel, no event_ts."""
    keep = (
        "type",
        "subtype",
        "user",
        "text",
        "ts",
        "team",
        "client_msg_id",
        "blocks",
        "thread_ts",
        "files",
        "upload",
        "display_as_bot",
    )
    return {k: event[k] for k in keep if k in event}


def _changed_event(
    original: Mapping[str, Any],
    message: Mapping[str, Any],
    previous: Mapping[str, Any],
    event_ts: str,
) -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "message": dict(message),
        "previous_message": dict(previous),
        "channel": original["channel"],
        "channel_type": original.get("channel_type", "channel"),
        "ts": event_ts,
        "event_ts": event_ts,
    }


def _rich_text_blocks(text: str) -> list[dict[str, Any]]:
    # Real message events carry the text as a rich_text block too; apps that read blocks
    # instead of text should see the same content.
    return [
        {
            "type": "rich_text",
            "block_id": secrets.token_hex(3),
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
            ],
        }
    ]
