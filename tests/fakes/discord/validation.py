"""REST plumbing of the fake Discord: API errors (50035 Invalid Form Body...), the embed limits
check, a call's body and parameters, routes, failure rules, interaction state and small helpers.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from aiohttp import web

from .models import (
    EMBED_FIELD_LIMITS,
    JSON,
    MAX_EMBED_AUTHOR_NAME,
    MAX_EMBED_FIELD_NAME,
    MAX_EMBED_FIELD_VALUE,
    MAX_EMBED_FIELDS,
    MAX_EMBED_FOOTER_TEXT,
    MAX_EMBEDS,
    MAX_EMBEDS_TOTAL_CHARS,
    FakeInteraction,
    RouteKind,
    UploadedFile,
)

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------------------------
# Internal helpers
# --------------------------------------------------------------------------------------------


class _ApiError(Exception):
    """Raised by route handlers; becomes a Discord-shaped JSON error response."""

    def __init__(self, status: int, code: int, message: str, *, errors: JSON | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body: JSON = {"message": message, "code": code}
        if errors is not None:
            self.body["errors"] = errors


def _form_error(field_name: str, code: str, message: str) -> _ApiError:
    """Discord's "Invalid Form Body" error (code 50035) for one field."""
    return _form_error_at((field_name,), code, message)


def _form_error_at(path: Sequence[str | int], code: str, message: str) -> _ApiError:
    """Invalid Form Body for a nested field: Discord nests ``errors`` along the path
    (``embeds.0.fields.1.value``), list indexes as string keys."""
    errors: JSON = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        errors = {str(key): errors}
    return _ApiError(400, 50035, "Invalid Form Body", errors=errors)


def _too_long(path: Sequence[str | int], limit: int) -> _ApiError:
    return _form_error_at(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def _validate_embeds(embeds: Sequence[Any]) -> None:
    """Refuse what Discord refuses: each documented embed limit, then the 6,000 total."""
    if len(embeds) > MAX_EMBEDS:
        raise _too_long(("embeds",), MAX_EMBEDS)
    total = 0
    for index, embed in enumerate(embeds):
        if not isinstance(embed, dict):
            raise _form_error_at(
                ("embeds", index),
                "MODEL_TYPE_CONVERT",
                "Only dictionaries may be used in a ModelType",
            )
        for key, limit in EMBED_FIELD_LIMITS.items():
            text = str(embed.get(key) or "")
            if len(text) > limit:
                raise _too_long(("embeds", index, key), limit)
            total += len(text)
        fields = embed.get("fields") or []
        if len(fields) > MAX_EMBED_FIELDS:
            raise _too_long(("embeds", index, "fields"), MAX_EMBED_FIELDS)
        for position, embed_field in enumerate(fields):
            for key, limit in (("name", MAX_EMBED_FIELD_NAME), ("value", MAX_EMBED_FIELD_VALUE)):
                text = str(embed_field.get(key) or "")
                if len(text) > limit:
                    raise _too_long(("embeds", index, "fields", position, key), limit)
                total += len(text)
        for part, key, limit in (
            ("footer", "text", MAX_EMBED_FOOTER_TEXT),
            ("author", "name", MAX_EMBED_AUTHOR_NAME),
        ):
            text = str((embed.get(part) or {}).get(key) or "")
            if len(text) > limit:
                raise _too_long(("embeds", index, part, key), limit)
            total += len(text)
    if total > MAX_EMBEDS_TOTAL_CHARS:
        raise _form_error_at(
            ("embeds",),
            "MAX_EMBED_SIZE_EXCEEDED",
            f"Embed size exceeds maximum size of {MAX_EMBEDS_TOTAL_CHARS}",
        )


@dataclass
class _Body:
    json: Any
    files: list[UploadedFile]
    # multipart field name -> file, so "attachments": [{"id": n}] can be matched to files[n]
    files_by_field: dict[str, UploadedFile]


@dataclass
class _Call:
    request: web.Request
    params: dict[str, str]
    body: _Body

    def int_param(self, name: str) -> int:
        return int(self.params[name])

    @property
    def payload(self) -> JSON:
        if isinstance(self.body.json, dict):
            return self.body.json
        return {}


_Handler: TypeAlias = Callable[[_Call], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    kind: RouteKind
    handler: _Handler
    auth: bool


@dataclass
class _FailureRule:
    kind: RouteKind
    remaining: int
    status: int
    body: JSON
    headers: Callable[[], dict[str, str]]
    route: str | None = None  # a route template (fail_route): only its requests
    resource: str | None = None  # and of those, only for this top-level resource

    def matches(self, kind: RouteKind, route: str, resource: str) -> bool:
        if self.route is not None:
            return self.route == route and self.resource in (None, resource)
        return self.kind in (kind, "any")


@dataclass
class _InteractionState:
    interaction: FakeInteraction
    deadline: float | None
    # loop time after which the token no longer works for follow-ups and @original
    token_expires_at: float = float("inf")
    response_type: int | None = None
    original_message_id: int | None = None
    component_message_id: int | None = None
    modal: JSON | None = None


def _valid_chat_input_name(name: str) -> bool:
    """Discord's CHAT_INPUT naming rule, ``^[-_'\\p{L}\\p{N}\\p{sc=Deva}\\p{sc=Thai}]{1,32}$``
    with the lowercase variant of every letter that has one."""
    if not 1 <= len(name) <= 32:
        return False
    for char in name:
        if char != char.lower():
            return False  # a letter with a lowercase variant must use it
        if char in "-_'":
            continue
        if unicodedata.category(char)[0] in "LN":
            continue
        if "\u0900" <= char <= "\u097f" or "\u0e00" <= char <= "\u0e7f":  # Devanagari, Thai
            continue
        return False
    return True


def _guess_content_type(filename: str) -> str:
    import mimetypes

    return mimetypes.guess_type(filename)[0] or "application/octet-stream"


async def _read_body(request: web.Request) -> _Body:
    """Decode a JSON or multipart (``payload_json`` + ``files[n]``) request body."""
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        payload: Any = {}
        raw_payload = form.get("payload_json")
        if isinstance(raw_payload, str):
            payload = json.loads(raw_payload)
        descriptions: dict[str, str | None] = {}
        if isinstance(payload, dict):
            for attachment in payload.get("attachments") or []:
                if isinstance(attachment, dict):
                    descriptions[str(attachment.get("id"))] = attachment.get("description")
        files: list[UploadedFile] = []
        by_field: dict[str, UploadedFile] = {}
        for name, value in form.items():
            if isinstance(value, web.FileField):
                index = name.removeprefix("files[").removesuffix("]")
                upload = UploadedFile(
                    filename=value.filename,
                    data=value.file.read(),
                    content_type=value.content_type,
                    description=descriptions.get(index),
                )
                files.append(upload)
                by_field[name] = upload
        return _Body(json=payload, files=files, files_by_field=by_field)
    raw = await request.read()
    if not raw:
        return _Body(json=None, files=[], files_by_field={})
    try:
        decoded = json.loads(raw)
    except ValueError:
        raise _ApiError(400, 50109, "The request body contains invalid JSON.") from None
    return _Body(json=decoded, files=[], files_by_field={})
