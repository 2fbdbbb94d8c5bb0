"""The first messages of threads as their platform shows them, kept for a while beside the
threads' memory when memory lacks them (posted before the bot was there): each is read from
the platform once, then from here at each reply in its thread.

Context, never memory: not in any log, summary, fact, recall index or export, and never
answered to or counted. One hash per subtree (:attr:`ScopeKeys.starters`, under the
channel's hash tag): the thread's id -> JSON of its first message (or of none: the platform
showed none memory would keep, so it is not asked again), with when it expires. What keeps
a forget holds here too:

- it is written only while the subtree's erasure ledger is at the version it was checked
  against (a forget since then refuses it, in the same atomic step);
- any tombstone written in the subtree's ledger deletes the whole hash in the same step
  (``ledger_later``), and a forget of everything deletes it with the channel's keys;
- what is read is handed over with the ledger, so the caller checks it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memory_core.calendar import from_ms, to_ms
from memory_core.models import ThreadStarter
from memory_core.scopes import Scope
from memory_core.store.gone import Ledger
from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script


@dataclass(frozen=True, slots=True)
class KnownStarter:
    """What is kept of a thread's first message: it (None: the platform showed none)."""

    starter: ThreadStarter | None


@translates_redis_errors
class StarterStore:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client  # untyped, as the other parts' (see ScopeReads)
        self.keys = keys

    async def read(self, thread: str, *, now_ms: int) -> tuple[KnownStarter | None, Ledger]:
        """What is kept of ``thread``'s first message (None: nothing, or expired), with the
        subtree's ledger as it is now (its server's people included), in one round trip."""
        place = Scope.of(thread)
        k = self.keys.scope(place.root.key)
        look = self.client.pipeline(transaction=False)
        look.hget(k.starters, place.thread)
        look.hgetall(k.gone)
        if place.server_key is not None:
            look.hgetall(self.keys.server(place.server_key).gone)
        raw, own, *server = await look.execute()
        return _decoded(raw, now_ms), Ledger.of(own, server[0] if server else None)

    async def keep(
        self,
        thread: str,
        starter: ThreadStarter | None,
        *,
        until_ms: int,
        now_ms: int,
        version: str,
    ) -> bool:
        """Keep ``thread``'s first message (None: the platform showed none) until
        ``until_ms``, only if the subtree's ledger is still at ``version``; whether it was."""
        place = Scope.of(thread)
        k = self.keys.scope(place.root.key)
        record: dict[str, Any] = {"exp": until_ms}
        if starter is not None:
            record |= {
                "p": starter.platform_id,
                "ts": to_ms(starter.ts),
                "t": starter.text,
                "a": starter.author,
                "u": starter.author_id,
                "r": starter.role,
            }
        kept = await run_script(
            self.client,
            "keep_starter",
            [k.gone, k.starters],
            [
                place.thread,
                json.dumps(record, ensure_ascii=False),
                version,
                max(1, until_ms - now_ms),
            ],
        )
        return bool(kept)

    async def drop(self, place: str, thread_id: str) -> None:
        """Forget what is kept of the first message of ``place``'s thread ``thread_id``
        (the message with that platform id, edited or deleted on the platform)."""
        await self.client.hdel(self.keys.scope(Scope.of(place).root.key).starters, thread_id)


def _decoded(raw: str | None, now_ms: int) -> KnownStarter | None:
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        if int(record["exp"]) <= now_ms:
            return None
        if "p" not in record:
            return KnownStarter(None)
        return KnownStarter(
            ThreadStarter(
                platform_id=str(record["p"]),
                ts=from_ms(int(record["ts"])),
                text=str(record["t"]),
                author=str(record["a"]),
                author_id=str(record["u"]),
                role="assistant" if record.get("r") == "assistant" else "user",
            )
        )
    except (ValueError, TypeError, KeyError):
        return None  # not a record this module wrote: read from the platform again
