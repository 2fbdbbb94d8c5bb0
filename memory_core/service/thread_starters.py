"""A thread's first message that memory lacks (posted before the bot was there), for the
thread's prompt: read from the platform through its front door once, then kept beside the
thread's memory for a day (:mod:`memory_core.store.thread_starters`), so that each reply
there does not ask the platform again.

It is context, not something said to the bot: never stored in the log, so it is never
summarised, recalled, exported or answered. What was forgotten stays out of it: it is
checked against the subtree's erasure ledger when it is read from the platform and each
time it is used (a forgotten message, its author forgotten, a forgotten text in it, the
channel or thread forgotten), and any forget in the subtree drops what is kept.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from memory_core.calendar import to_ms
from memory_core.clock import Clock
from memory_core.errors import ContextUnavailable
from memory_core.models import LogEntry, StarterSource, ThreadStarter
from memory_core.store.gone import Ledger
from memory_core.store.thread_starters import StarterStore
from memory_core.text.attachments import stored_text

log = logging.getLogger(__name__)

KEPT_MS = 24 * 3_600_000  # how long a first message read from the platform is kept


class ThreadStarters:
    def __init__(self, store: StarterStore, *, clock: Clock, max_chars: int) -> None:
        self.store = store
        self.clock = clock
        self.max_chars = max_chars  # as a stored message's text (memory.max_message_chars)

    async def starter(self, thread: str, source: StarterSource) -> LogEntry | None:
        """The first message of ``thread`` as the platform shows it (None: none to show),
        read through ``source`` only when nothing is kept of it."""
        now_ms = to_ms(self.clock.now())
        known, ledger = await self.store.read(thread, now_ms=now_ms)
        if known is not None:
            starter = known.starter
        else:
            try:
                fetched = await source.fetch()
            except ContextUnavailable as exc:  # asked again at the next reply
                log.info("thread %s: its first message could not be read: %s", thread, exc)
                return None
            starter = self._as_kept(fetched)
            if starter is not None and not _keeps(ledger, thread, starter):
                starter = None  # forgotten: kept as none, never its text
            await self.store.keep(
                thread, starter, until_ms=now_ms + KEPT_MS, now_ms=now_ms, version=ledger.version
            )
        if starter is None or not _keeps(ledger, thread, starter):
            return None
        return LogEntry(
            id="",  # not in memory's log
            ts=starter.ts,
            role=starter.role,
            author=starter.author,
            author_id=starter.author_id,
            text=starter.text,
            tokens=0,
            platform_id=starter.platform_id,
        )

    def _as_kept(self, starter: ThreadStarter | None) -> ThreadStarter | None:
        """Its text as a stored message's would be: files as their lines, capped."""
        if starter is None:
            return None
        text, _ = stored_text(starter.text, self.max_chars, starter.attachments)
        return replace(starter, text=text, attachments=()) if text else None


def _keeps(ledger: Ledger, thread: str, starter: ThreadStarter) -> bool:
    return ledger.keeps(
        thread, starter.platform_id, starter.author_id, to_ms(starter.ts), starter.text
    )
