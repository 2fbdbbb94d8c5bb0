"""Who the model calls made now are for: a tag in a context variable, set by the reply
path, the maintainer and the captioner, read by the budget's usage hook after each call
(:mod:`memory_core.fleet.spending`). A context variable, not an argument threaded through
every layer; background tasks started under a tag inherit it. Here, with no imports of the
layers above, so that the tiers and the service may both tag their work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpendTag:
    """Who the model calls made in this context are for."""

    scope: str
    member_id: str = ""
    member_name: str = ""
    tz: str = ""  # the scope's timezone when the tagger knows it ("" = look it up)


_TAG: ContextVar[SpendTag | None] = ContextVar("memorybot_spend_tag", default=None)


def tag_calls(tag: SpendTag | None) -> None:
    """Charge the model calls of the rest of this task (and of the tasks it starts) to
    ``tag``. The reply path uses this: each reply tags afresh before its model call."""
    _TAG.set(tag)


@contextlib.contextmanager
def charge_to(tag: SpendTag) -> Iterator[None]:
    """Charge the model calls made inside the block to ``tag``."""
    token = _TAG.set(tag)
    try:
        yield
    finally:
        _TAG.reset(token)


def current_tag() -> SpendTag | None:
    return _TAG.get()
