"""Scope strings: one memory per conversation place.

``discord:{guild}:{channel}``, ``discord:dm:{user}``, ``slack:{team}:{channel}``,
``slack:{team}:{channel}:{thread_ts}``, ``console:{name}``, and per-user facts within a
guild or workspace, ``discord:{guild}:user:{user}``. Memory never crosses the boundary
(the first two parts: platform and guild/workspace; a DM is its own boundary).
"""

from __future__ import annotations

import re

from memory_core.errors import InvalidScope

# No braces (they delimit the Redis hash tag), no whitespace, bounded length.
_SCOPE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,15}:[A-Za-z0-9_.:@-]{1,200}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")


def parse_scope(text: str) -> str:
    """Validate a full scope string, or turn a bare name into ``console:NAME``."""
    value = text.strip()
    if ":" not in value:
        if not _NAME_RE.match(value):
            raise InvalidScope(
                f"invalid scope name {text!r}: use letters, digits, '_', '.', '-' "
                "(or a full scope such as discord:GUILD:CHANNEL)"
            )
        return f"console:{value}"
    if not _SCOPE_RE.match(value) or value.endswith(":") or "::" in value:
        raise InvalidScope(
            f"invalid scope {text!r}: expected platform:id[:id...] with letters, digits and "
            "'_', '.', '-', '@' (for example console:team or discord:123:456)"
        )
    return value


def platform_of(scope: str) -> str:
    return scope.split(":", 1)[0]


def boundary_of(scope: str) -> str:
    """The guild/workspace (or DM, or console name) a scope belongs to."""
    parts = scope.split(":")
    if parts[0] == "console" or len(parts) < 3:
        return scope
    if parts[1] == "dm":
        return ":".join(parts[:3])
    return ":".join(parts[:2])


def same_boundary(a: str, b: str) -> bool:
    return boundary_of(a) == boundary_of(b)


def check_parent(scope: str, parent: str | None) -> str | None:
    """A thread may read its parent channel's long-term tiers, only inside one boundary."""
    if parent is None:
        return None
    parent = parse_scope(parent)
    if parent == scope:
        return None
    if not same_boundary(scope, parent) or boundary_of(scope) == scope:
        raise InvalidScope(f"scope {scope} cannot read {parent}: different guild or workspace")
    return parent


def user_scope(scope: str, user_id: str) -> str | None:
    """Where facts about one person live across a guild or workspace: ``discord:G:user:U``,
    ``slack:T:user:U``. None where they must not travel: DMs (nothing learned in a DM
    leaves it), the console, and user scopes themselves."""
    parts = scope.split(":")
    if not user_id or user_id == "bot" or len(parts) < 3 or "user" in parts[2:3]:
        return None
    if parts[0] == "discord" and parts[1] != "dm":
        return f"discord:{parts[1]}:user:{user_id}"
    if parts[0] == "slack" and not parts[2].startswith("D"):
        return f"slack:{parts[1]}:user:{user_id}"
    return None
