"""The hot path's write: storing one message, and noting where it was said (the activity
index, the place in its server's tree, the speaker among its subtree's), in one round trip.
A part of :class:`~memory_core.store.repo.MemoryRepo`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from memory_core.errors import StoreError
from memory_core.models import IngestResult
from memory_core.scopes import Scope
from memory_core.store.gone import Ledger, gone_message, gone_person
from memory_core.store.keys import KeySchema
from memory_core.store.lane import FastLane
from memory_core.store.redis_errors import redis_errors_translated, translates_redis_errors
from memory_core.store.scripts import SCRIPTS, SHAS

log = logging.getLogger("memory_core.store.repo")  # the repository's lines keep one name

# Platform ids remembered per scope to store each message once: the newest this many (a
# sorted set of ~100 bytes an id, so at most ~10 MB for a scope that big; its log is bigger).
PLATFORM_IDS_MAX = 100_000


async def _ingest_round_trip(
    client: Any,
    lane: FastLane | None,
    where: _Where,
    args: list[Any],
    ts_ms: int,
    *,
    side: bool,
    by_source: bool = False,
) -> tuple[Any, list[BaseException]]:
    """The ingest script and its side writes (``side``: the scope's entry in the activity
    index, its place in its server's tree), in one round trip: on one Redis, one script that
    makes them too; on a cluster the commands at once (the side keys' slots may be on other
    shards, and a shard that is down must not fail a message stored on a live one).
    ``lane``: the store's own connection for this (one server; none on a cluster).
    Returns the script's reply and the side writes' errors; the script's own error is
    raised. (A function, not a method: the class's error translation would turn the
    NoScriptError its caller retries on into a StoreError.)"""
    head = ("EVAL", SCRIPTS["ingest"]) if by_source else ("EVALSHA", SHAS["ingest"])
    cluster = lane is None and isinstance(client, RedisCluster)
    if not cluster:
        keys = where.keys + where.side_keys if side else where.keys
        script = (*head, len(keys), *keys, *args, *(where.side_args if side else ()))
        if lane is not None:  # one server, by the hot path's own connection
            return await lane.call(*script, spin=True), []
        return await client.execute_command(*script), []
    script = (*head, len(where.keys), *where.keys, *args)
    result, *rest = await asyncio.gather(
        client.execute_command(*script),
        *(client.execute_command(*command) for command in (where.commands(ts_ms) if side else [])),
        return_exceptions=True,
    )
    if isinstance(result, BaseException):
        raise result
    return result, [r for r in rest if isinstance(r, BaseException)]


@dataclass(frozen=True, slots=True)
class _Where:
    """What storing a message needs of its scope's name, worked out once per scope: the
    script's keys; where the message is noted as it is stored (the scope in the activity
    index; in a server, its channel among the server's places and a thread's channel)."""

    keys: tuple[str, ...]  # log, state, ids, root state, threads, speakers, ledger
    side_keys: tuple[str, ...]  # index[, places[, parents]]
    side_args: tuple[str, str, str]  # scope, channel, thread (as the ingest script takes them)
    thread_key: str  # the scope's name when it is a thread, else ""
    thread: str

    def commands(self, ts_ms: int) -> list[tuple[Any, ...]]:
        """The side writes as commands of their own (a cluster)."""
        scope, root, thread = self.side_args
        out: list[tuple[Any, ...]] = [("ZADD", self.side_keys[0], ts_ms, scope)]
        if len(self.side_keys) > 1:
            out.append(("ZADD", self.side_keys[1], ts_ms, root))
        if len(self.side_keys) > 2:
            out.append(("HSET", self.side_keys[2], thread, root))
        return out


# Scopes whose _Where is kept (a few hundred bytes each); past it, worked out again.
WHERE_CACHED = 20_000
# A message older than the newest forgotten text is checked against the ledger's texts and
# written only while the ledger is still as checked; a ledger changing all the time (forgets
# in a burst) is checked again this many times before the store gives up on the message.
RECHECKS = 8
LEDGERS_CACHED = 256  # subtrees whose ledger is kept while current (a learn's, an import's)


@translates_redis_errors
class MessageIngest:
    def __init__(
        self,
        client: Any,
        keys: KeySchema,
        *,
        lane: FastLane | None = None,
        ledger: Callable[[str], Awaitable[Ledger]] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.lane = lane  # the store's own connection (one server; none on a cluster)
        self._where: dict[str, _Where] = {}
        # Reads a subtree's erasure ledger (ErasureLedger.read): what a message older than
        # the newest forgotten text is checked against.
        self.ledger = ledger
        self._ledgers: dict[str, Ledger] = {}

    async def ingest(
        self,
        scope: str,
        *,
        ts_ms: int,
        role: str,
        author: str,
        author_id: str,
        text: str,
        platform_id: str,
        tokens: int,
        day: str,
        place_name: str = "",
        held: bool = False,
        own_day_end_ms: int = 0,
        public: bool = False,
        touch_index: bool = True,
        reply_to: str = "",
        audience: str = "",
        answers: str = "",
        also_ids: Sequence[str] = (),
        ledger: Ledger | None = None,
    ) -> IngestResult:
        """Store one message, and note where it was said: one round trip. ``held``: a
        message held while the store was away and stored late, which must not be stored
        twice (it may have been stored before the connection broke). A non-empty
        ``platform_id`` is stored once (``outcome`` "duplicate" the next time).
        ``own_day_end_ms`` (a replayed transcript line): the end of the message's own day;
        the message is refused (``outcome`` "day_closed") rather than counted in a later day.
        ``touch_index=False``: an edited message stored again, which is no new activity.
        ``reply_to``, ``answers``: the bot's answer, to this user id and this platform
        message. ``audience``: the place's. ``also_ids``: the platform ids of the answer's
        other posted parts (each known as stored; a delete of any forgets the answer).

        Nothing forgotten is stored (``outcome`` "forgotten"): the erasure ledger is checked
        in the same step (:mod:`memory_core.store.gone`). ``ledger``: the one the caller
        checked the message against already (a learn), used while it is current."""
        where = self._where.get(scope) or self._where_of(scope)
        speaker = f"{author_id}|{where.thread}" if role == "user" and author_id else ""
        args = [
            ts_ms,
            role,
            author,
            author_id,
            text,
            platform_id,
            tokens,
            day,
            where.thread_key,
            place_name,
            "1" if held else "",
            own_day_end_ms or "",
            PLATFORM_IDS_MAX,
            "1" if public else "",
            speaker,
            reply_to,
            audience,
            answers,
            gone_person(author_id) if author_id else "",
            gone_message(platform_id) if platform_id else "",
            ledger.version if ledger is not None else "",
            " ".join(p for p in also_ids if p),
        ]
        for _ in range(RECHECKS):
            result = await self._store(scope, where, args, ts_ms, side=touch_index)
            if len(result) < 11 or str(result[9]) != "recheck":
                return _ingest_result(result)
            # Said before a text was forgotten: its text against the ledger as it is now.
            version = str(result[10])
            if ledger is None or ledger.version != version:
                ledger = await self._read_ledger(scope, version)
            if ledger.forgotten_text(text, ts_ms):
                return _ingest_result([*result[:9], "forgotten"])
            args[20] = ledger.version
        raise StoreError(f"could not store a message in {scope}: its forgets kept changing")

    async def _read_ledger(self, scope: str, version: str) -> Ledger:
        """The subtree's ledger at ``version`` or later (the last one read, while current:
        a learn stores thousands of past messages against one)."""
        root = Scope.of(scope).root.key
        known = self._ledgers.get(root)
        if known is not None and known.version == version:
            return known
        if self.ledger is None:
            raise StoreError("the message store was built without its erasure ledger")
        read = await self.ledger(root)
        if len(self._ledgers) >= LEDGERS_CACHED:
            self._ledgers.clear()
        self._ledgers[root] = read
        return read

    async def _store(
        self, scope: str, where: _Where, args: list[Any], ts_ms: int, *, side: bool
    ) -> Any:
        """The script's reply. By the script's hash; when the server does not know it
        (restarted, failed over), by its source, which also caches it there."""
        with redis_errors_translated("could not store the message"):
            try:
                result, side_errors = await _ingest_round_trip(
                    self.client, self.lane, where, args, ts_ms, side=side
                )
            except NoScriptError:
                result, side_errors = await _ingest_round_trip(
                    self.client, self.lane, where, args, ts_ms, side=side, by_source=True
                )
        if side_errors:
            # Stored all the same: the message is not lost (nor stored twice by a retry);
            # the scope's next message writes its index and tree entries.
            log.warning(
                "message stored in %s, but not its entries in the scopes index or its "
                "server's tree: %s",
                scope,
                side_errors[0],
            )
        return result

    def _where_of(self, scope: str) -> _Where:
        place = Scope.of(scope)
        k = self.keys.scope(scope)
        side: tuple[str, ...] = (self.keys.scopes_index_of(place.key),)
        if place.server_key is not None and not place.person:
            server = self.keys.server(place.server_key)
            side += (server.places,)
            if place.is_thread:
                side += (server.parents,)
        where = _Where(
            keys=(k.log, k.state, k.ids, k.root_state, k.threads, k.speakers, k.gone),
            side_keys=side,
            side_args=(place.key, place.root.key, place.thread),
            thread_key=place.key if place.is_thread else "",
            thread=place.thread,
        )
        if len(self._where) >= WHERE_CACHED:
            self._where.clear()
        self._where[scope] = where
        return where


def _ingest_result(result: Sequence[Any]) -> IngestResult:
    """The ingest script's reply, typed."""
    entry_id, unsum_tokens, unsum_count, day_now, tz, mode, lang, retry_at, paused = result[:9]
    outcome = str(result[9]) if len(result) > 9 else ""
    return IngestResult(
        stored=not int(paused) and outcome not in ("day_closed", "forgotten"),
        id=str(entry_id),
        state_day=str(day_now),
        tz=str(tz),
        mode=str(mode),
        lang=str(lang),
        unsum_tokens=int(unsum_tokens),
        unsum_count=int(unsum_count),
        retry_at=int(retry_at),
        outcome=outcome,
    )
