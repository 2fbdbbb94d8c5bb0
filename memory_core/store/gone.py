"""How what was forgotten is recognised without keeping it: a digest of a platform message
id or a user id, written where a forget happens and read by learning
(:mod:`memory_core.store.learning`). A digest keeps no text of the message; the ids
themselves are not secret (anyone in the channel sees them), so it is not meant to hide
them, only to hold nothing else."""

from __future__ import annotations

import hashlib

_KEY = b"memorybot gone v1"  # a label (not a secret): these digests are memorybot's own


def _digest(value: str) -> str:
    return hashlib.blake2b(value.encode("utf-8", "replace"), digest_size=12, key=_KEY).hexdigest()


def gone_message(platform_id: str) -> str:
    """The field that says a message with this platform id was forgotten."""
    return f"m:{_digest(platform_id)}"


def gone_person(user_id: str) -> str:
    """The field that says this person was forgotten (its value: when)."""
    return f"u:{_digest(user_id)}"
