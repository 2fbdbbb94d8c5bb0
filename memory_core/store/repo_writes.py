"""The writes to one scope's memory that admin operations make (forget, facts, edits,
retention, import), and facts about a person written to their own scope: a part of
:class:`~memory_core.store.repo.MemoryRepo`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.errors import StoreError
from memory_core.models import DaySummary, Fact, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.gone import VERSION, gone_message
from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.pipelines import atomic_pipeline
from memory_core.store.records import ScopeDump
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.repo_reads import ScopeReads
from memory_core.store.scripts import run_script


@translates_redis_errors
class ScopeWrites:
    def __init__(self, client: Any, keys: KeySchema, *, reads: ScopeReads) -> None:
        self.client = client  # untyped, as the reads' (see ScopeReads)
        self.keys = keys
        self.reads = reads  # whether a scope holds anything before an import writes it

    def k(self, scope: str) -> ScopeKeys:
        return self.keys.scope(scope)

    async def apply_person_facts(
        self,
        person: str,
        ops: Sequence[Sequence[str]],
        *,
        before: Sequence[Fact],
        origin: str,
        epoch: int,
    ) -> None:
        """Facts about a person learned in ``origin``, written to their own scope.

        The origin records the person first, so that forgetting in it finds these facts. The
        person's scope is another hash slot, so this cannot be one atomic step with the
        summary that made the facts: if a forget moved the origin's epoch meanwhile (it may
        have swept the person's facts before these landed), they are taken back."""
        if not ops:
            return
        await self.note_person(origin, person)
        k = self.k(person)
        payload = json.dumps([list(op) for op in ops], ensure_ascii=False)
        made = await run_script(self.client, "write_facts", [k.state, k.facts], [payload])
        if int(await self.client.hget(self.k(origin).state, "epoch") or 0) == epoch:
            return
        old = {f.id: f for f in before}
        undo = [["del", str(fact_id), ""] for fact_id in made or []]
        undo += [
            ["upd", op[1], old[op[1]].to_json()] for op in ops if op[0] == "upd" and op[1] in old
        ]
        payload = json.dumps(undo, ensure_ascii=False)
        await run_script(self.client, "write_facts", [k.state, k.facts], [payload])

    async def note_person(self, origin: str, person: str) -> None:
        """Record that ``person``'s scope holds facts learned in ``origin`` (a thread's
        channel then holds the thread: a forget in the channel reaches those facts)."""
        k = self.k(origin)
        pipe = await atomic_pipeline(self.client)
        pipe.sadd(k.people, person)
        if Scope.of(origin).is_thread:
            pipe.zadd(k.threads, {origin: 0}, nx=True)
        await pipe.execute()

    async def set_fields(self, scope: str, values: Mapping[str, str | int]) -> None:
        await self.client.hset(self.k(scope).state, mapping=dict(values))

    async def bump_epoch(self, scope: str) -> int:
        return int(await self.client.hincrby(self.k(scope).state, "epoch", 1))

    async def begin_forget(self, scope: str, request: str) -> None:
        """Write a forget down (and move the epoch) before doing any of it."""
        await self.begin_forgets([(scope, request)])

    async def begin_forgets(self, requests: Sequence[tuple[str, str]]) -> None:
        """Write forgets down in several places (scope, request) before doing any of them:
        one atomic step per subtree (a channel and its threads share a slot), so a forget
        over many places that a crash interrupts is finished in each by its maintenance."""
        by_root: dict[str, list[tuple[str, str]]] = {}
        for scope, request in requests:
            by_root.setdefault(Scope.of(scope).root.key, []).append((scope, request))
        for group in by_root.values():
            pipe = await atomic_pipeline(self.client)
            for scope, request in group:
                k = self.k(scope)
                pipe.rpush(k.forgets, request)
                pipe.hincrby(k.state, "epoch", 1)
                pipe.hset(k.state, "forgets_pending", 1)
                pipe.delete(k.why)  # what the last answer used may be what goes
            await pipe.execute()

    async def begin_forget_at(self, scope: str, request: str, *, epoch: int) -> bool:
        """:meth:`begin_forget`, only if the scope's epoch is still ``epoch`` and no forget
        is pending (background work decided on what it read then). Whether it was written."""
        k = self.k(scope)
        written = await run_script(
            self.client, "begin_forget_at", [k.forgets, k.state], [request, str(epoch)]
        )
        return bool(written)

    async def end_forget(self, scope: str, request: str | None) -> None:
        """Cross a finished forget off (``None``: just settle the flag with the list)."""
        k = self.k(scope)
        await run_script(self.client, "end_forget", [k.forgets, k.state], [request or ""])

    async def resync_counters(self, scope: str) -> None:
        """Re-derive the unsummarised counters and the message count from the log (after
        deleting messages), atomically with any message stored meanwhile."""
        k = self.k(scope)
        await run_script(self.client, "resync_counters", [k.state, k.log], [])

    # -- what the last answer used (/memory why) ----------------------------------------
    async def put_answer_record(self, scope: str, record: str, *, ttl_ms: int, epoch: int) -> bool:
        """Keep what an answer used, replacing the previous record, for ``ttl_ms``; refused
        (False) if anything was forgotten since its prompt was read at ``epoch``."""
        k = self.k(scope)
        written = await run_script(
            self.client,
            "put_answer_record",
            [k.state, k.forgets, k.why],
            [record, str(max(1, ttl_ms)), str(epoch)],
        )
        return bool(written)

    async def answer_record(self, scope: str) -> str | None:
        raw = await self.client.get(self.k(scope).why)
        return None if raw is None else str(raw)

    async def drop_answer_record(self, scope: str) -> None:
        await self.client.delete(self.k(scope).why)

    async def pending_forgets(self, scope: str) -> list[str]:
        return [str(x) for x in await self.client.lrange(self.k(scope).forgets, 0, -1)]

    async def put_fact(self, scope: str, fact: Fact) -> Fact:
        """Store a new fact under a fresh id (ids come from the scope's own counter)."""
        k = self.k(scope)
        seq = await self.client.hincrby(k.root_state, "fact_seq", 1)  # unique in the subtree
        fact.id = f"f{seq}"
        pipe = await atomic_pipeline(self.client)
        pipe.hset(k.facts, fact.id, fact.to_json())
        if k.root_state != k.state:
            pipe.hset(k.state, "fact_seq", seq)
            pipe.zadd(k.threads, {scope: 0}, nx=True)  # the channel holds its thread
        await pipe.execute()
        return fact

    async def replace_fact(self, scope: str, fact: Fact) -> None:
        await self.client.hset(self.k(scope).facts, fact.id, fact.to_json())

    async def delete_facts(self, scope: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return int(await self.client.hdel(self.k(scope).facts, *ids))

    async def delete_entries(
        self, scope: str, ids: Sequence[str], *, tombstone: bool = True
    ) -> int:
        """Delete raw messages, and their embeddings with them, and those of the messages
        right after them (embedded with a deleted one as context: made again without it).
        ``tombstone``: each deleted message's platform ids (every posted part of an answer)
        go into the erasure ledger in the same step, so no writer brings them back (an edit,
        which stores the message again under its id, passes False)."""
        if not ids:
            return 0
        k = self.k(scope)
        look = self.client.pipeline(transaction=False)
        for entry_id in ids:
            look.xrange(k.log, min=f"({entry_id}", max="+", count=1)
            look.xrange(k.log, min=entry_id, max=entry_id)
        found = await look.execute()
        following = [after[0][0] for after in found[0::2] if after]
        platform_ids = [
            p
            for itself in found[1::2]
            for _, fields in itself[:1]
            for p in (fields.get("p", ""), *fields.get("x", "").split())
            if p
        ]
        pipe = await atomic_pipeline(self.client)
        pipe.xdel(k.log, *ids)
        pipe.hdel(k.vectors, *ids, *following)
        if tombstone and platform_ids:
            pipe.hset(k.gone, mapping={gone_message(p): 1 for p in platform_ids})
            pipe.hincrby(k.gone, VERSION, 1)
        deleted, *_ = await pipe.execute()
        if deleted:
            await self.rewrite_log(scope)
        return int(deleted)

    async def rewrite_log(self, scope: str, *, slice_size: int = 1000) -> bool:
        """Rewrite the scope's log without the entries deleted from it: XDEL only flags an
        entry, and its bytes stay in the stream's node (and in every DUMP, RDB snapshot,
        AOF rewrite and replica of it) until the whole node goes. A slice at a time, so a
        big log never holds Redis for long; the last step is atomic and takes in what was
        stored meanwhile. Whether it was done (False: the log kept losing entries to other
        forgets meanwhile, three times; the next forget rewrites it)."""
        k = self.k(scope)
        for _ in range(3):
            last, done = "", False
            while not done:
                last, finished = await run_script(
                    self.client, "rewrite_log_slice", [k.log, k.log_rewrite], [last, slice_size]
                )
                last, done = str(last), bool(int(finished))
            if await run_script(self.client, "rewrite_log_finish", [k.log, k.log_rewrite], [last]):
                return True
        return False

    async def release_platform_id(self, scope: str, platform_id: str) -> None:
        """Let a platform message be stored again (its edited text replaces the old entry)."""
        await self.client.zrem(self.k(scope).ids, platform_id)

    async def trim_log_before(self, scope: str, minid: str) -> int:
        """Drop raw messages with ids below ``minid`` (retention), and their vectors with
        them in the same atomic step; then the log is rewritten without what was trimmed
        (a trim, like XDEL, leaves the bytes of a partly trimmed node behind)."""
        if not minid:
            return 0
        k = self.k(scope)
        keys = [k.log, k.vectors, k.ids]
        trimmed = int(await run_script(self.client, "trim_log", keys, [minid]))
        if trimmed:
            await self.rewrite_log(scope)
        return trimmed

    async def replace_days(self, scope: str, days: Sequence[DaySummary]) -> None:
        await self._replace_list(self.k(scope).days, [d.to_json() for d in days])

    async def replace_episodes(self, scope: str, episodes: Sequence[DaySummary]) -> None:
        await self._replace_list(self.k(scope).episodes, [d.to_json() for d in episodes])

    async def replace_weeks(self, scope: str, weeks: Sequence[WeekSummary]) -> None:
        await self._replace_list(self.k(scope).weeks, [w.to_json() for w in weeks])

    async def _replace_list(self, key: str, values: Sequence[str]) -> None:
        pipe = await atomic_pipeline(self.client)
        pipe.delete(key)
        if values:
            pipe.rpush(key, *values)
        await pipe.execute()

    async def forget_scope(self, scope: str) -> int:
        """Delete every key of the scope and its index entry; the epoch moves on (it is the
        only thing left), so nothing computed from the old memory can be written back."""
        k = self.k(scope)
        keys = [k.state, *(key for key in k.all() if key != k.state)]
        deleted = await run_script(self.client, "forget_scope", keys, [])
        await self.client.zrem(self.keys.scopes_index_of(scope), scope)
        place = Scope.of(scope)
        if place.server_key is not None and not place.is_thread:
            await self.client.zrem(self.keys.server(place.server_key).places, scope)
        elif place.is_thread:  # its channel no longer holds it
            await self.client.zrem(k.threads, scope)
            if place.server_key is not None:
                await self.client.hdel(self.keys.server(place.server_key).parents, place.thread)
        return int(deleted)

    async def purge(self, scopes: Sequence[str], *, server_key: str, days: Sequence[str]) -> int:
        """Every key of ``scopes`` (their state's counters too) and their token spend on
        ``days``, and the server's own keys (its places, its threads' channels, its spend):
        what is left of a server the bot was removed from, once its memory is forgotten.
        One atomic step per hash tag; returns how many keys went."""
        groups: dict[str, list[str]] = {}
        for scope in scopes:
            k = self.k(scope)
            tag = Scope.of(scope).root.key
            groups.setdefault(tag, []).extend(k.all())
            groups[tag] += [self.keys.spend_scope(scope, day) for day in days]
        server = self.keys.server(server_key)
        groups[server_key] = [
            server.places,
            server.parents,
            *(self.keys.spend_server(server_key, day) for day in days),
        ]
        deleted = 0
        for keys in groups.values():
            for start in range(0, len(keys), 500):
                deleted += int(await self.client.delete(*keys[start : start + 500]))
        for scope in scopes:
            await self.client.zrem(self.keys.scopes_index_of(scope), scope)
        return deleted

    async def note_speaker(self, scope: str, user_id: str) -> None:
        """Record ``user_id`` among the places of the scope's subtree where they have
        memory (as a message of theirs does), so that forget me finds it."""
        place = Scope.of(scope)
        k = self.k(scope)
        pipe = await atomic_pipeline(self.client)
        pipe.zadd(k.speakers, {f"{user_id}|{place.thread}": 0})
        if place.is_thread:
            pipe.zadd(k.threads, {scope: 0}, nx=True)
        await pipe.execute()
        if place.server_key is not None:  # a place with no message yet is in its server too
            places = self.keys.server(place.server_key).places
            await self.client.zadd(places, {place.root.key: 0}, nx=True)

    async def forget_speaker(self, scope: str, user_id: str) -> None:
        """``user_id`` no longer has anything said in ``scope`` (forget me there)."""
        place = Scope.of(scope)
        await self.client.zrem(self.k(scope).speakers, f"{user_id}|{place.thread}")

    async def restore(self, scope: str, dump: ScopeDump, *, last_activity_ms: int) -> None:
        """Write a dump into an empty scope (import)."""
        k = self.k(scope)
        if await self.reads.scope_exists(scope):
            raise StoreError(
                f"scope {scope} already has memory; forget it first or import elsewhere"
            )
        pipe = await atomic_pipeline(self.client)
        if dump.state:
            pipe.hset(k.state, mapping=dump.state)
        for entry in dump.log:
            fields: dict[Any, Any] = {
                "r": entry.role,
                "a": entry.author,
                "u": entry.author_id,
                "t": entry.text,
                "ts": str(int(entry.ts.timestamp() * 1000)),
                "p": entry.platform_id,
                "k": str(entry.tokens),
            }
            pipe.xadd(k.log, fields, id=entry.id)
        if dump.days:
            pipe.rpush(k.days, *[d.to_json() for d in dump.days])
        if dump.weeks:
            pipe.rpush(k.weeks, *[w.to_json() for w in dump.weeks])
        if dump.episodes:
            pipe.rpush(k.episodes, *[d.to_json() for d in dump.episodes])
        for fact in dump.facts:
            pipe.hset(k.facts, fact.id, fact.to_json())
        if dump.done:
            pipe.sadd(k.done, *dump.done)
        # Its place in the tree: who spoke here (forget me finds them), a thread's channel.
        place = Scope.of(scope)
        speakers = {e.author_id for e in dump.log if e.role == "user" and e.author_id}
        if speakers:
            pipe.zadd(k.speakers, {f"{u}|{place.thread}": 0 for u in speakers})
        if place.is_thread:
            pipe.zadd(k.threads, {scope: last_activity_ms})
        seq = int(dump.state.get("fact_seq") or 0)
        if seq and k.root_state != k.state:  # a thread's fact ids come from its channel's
            pipe.hget(k.root_state, "fact_seq")
            *_, root_seq = await pipe.execute()
            if int(root_seq or 0) < seq:
                await self.client.hset(k.root_state, "fact_seq", seq)
        else:
            await pipe.execute()
        # The index and the server live in other hash slots: outside the scope's transaction.
        await self.client.zadd(self.keys.scopes_index_of(scope), {scope: last_activity_ms})
        if place.server_key is not None and not place.person:
            places = self.keys.server(place.server_key).places
            await self.client.zadd(places, {place.root.key: last_activity_ms})
