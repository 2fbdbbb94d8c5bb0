"""Fencing untrusted text (messages, summaries, facts) before it goes into a prompt."""

from __future__ import annotations

import re

# "</" anywhere, and the opening tags config/prompts/*.toml wrap untrusted text in: their
# "<" gets a backslash. (Other markup, "<b>", "<img ...>", stays as it was written.)
_FENCE_TAG = re.compile(
    r"<(?=/|(?:memory|messages|previous|known_facts|days|long|week)\b)", re.IGNORECASE
)


def fence(text: str) -> str:
    """Keep untrusted text inside its tags: it can neither close a tag such as </messages>
    nor open one of ours such as <memory> (which would make a second block look real)."""
    return _FENCE_TAG.sub("<\\\\", text)
