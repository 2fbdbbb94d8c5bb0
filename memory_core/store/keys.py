"""Every Redis key name memorybot uses is built here, and nowhere else.

All of one scope's keys share the hash tag ``{scope}``, so a Lua script or MULTI may touch
them together and the same code runs on Redis Cluster.

What the whole fleet shares (the activity index of every scope, the rollover queue and its
leases, the per-minute metrics, the LLM rate limit) is split into :data:`BUCKETS` buckets,
so that on a cluster no one shard takes every message's write. Bucket ``b``'s hash tag is a
short string whose cluster slot lies in the ``b``-th of :data:`BUCKETS` equal slot ranges,
and a scope belongs to the bucket of its own slot's range: the buckets spread over the
nodes like the slots do (a cluster splits its slots in ranges), and a scope's bucketed
write nearly always lands on the scope's own shard. On a single Redis every bucket is on
the one server and nothing else changes. Readers merge the buckets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from memory_core.scopes import Scope

BUCKETS = 64  # 256 slots each; 64 buckets split evenly enough over 3, 6 or 16 nodes
# Metrics are flushed every few seconds per process, not per message: fewer buckets (every
# fourth tag, still evenly spaced) keep a dashboard read of three days of minutes bounded.
METRIC_BUCKETS = 16


@cache
def bucket_tags(buckets: int = BUCKETS) -> tuple[str, ...]:
    """A hash tag per bucket, ``"b<i>.<n>"``: the first ``n`` whose slot falls in bucket
    ``i``'s range. Deterministic, so every process and release agrees."""
    tags: list[str] = []
    for i in range(buckets):
        n = 0
        while key_slot(f"b{i}.{n}".encode()) * buckets // REDIS_CLUSTER_HASH_SLOTS != i:
            n += 1
        tags.append(f"b{i}.{n}")
    return tuple(tags)


def bucket_of(scope: str, buckets: int = BUCKETS) -> int:
    """The bucket of a scope: the range its hash tag's slot falls in (a thread's is its
    channel's, the tag its keys share)."""
    tag = f"{{{Scope.of(scope).root.key}}}"
    return key_slot(tag.encode()) * buckets // REDIS_CLUSTER_HASH_SLOTS


@dataclass(frozen=True, slots=True)
class ScopeKeys:
    """The keys of one scope. A thread's keys share its channel's hash tag (``mb:{slack:T:C}/
    <thread_ts>:log``), so a channel and its threads are one slot: a Lua script reads the
    channel's settings while storing a thread's message, and writes the channel's record of
    its threads in the same step."""

    log: str  # Stream: every raw message
    state: str  # Hash: tiers, pointers, settings, counters
    days: str  # List of JSON day summaries, oldest first, at most days_max
    weeks: str  # List of JSON week summaries, oldest first, at most weeks_max
    episodes: str  # List of JSON day records (summary, topic, decisions, follow-ups), kept
    # for the retention period: what recall searches once a day has left the days list
    facts: str  # Hash: fact id -> JSON fact
    vectors: str  # Hash: log entry id -> base64 float16 embedding (when embeddings are on)
    forgets: str  # List of JSON forget requests written down before they are carried out
    done: str  # Set: markers of work done exactly once ("day:2025-08-13", "week:2025-08-11")
    people: str  # Set: the person scopes holding facts learned here (forget reaches them)
    ids: str  # Sorted set: platform id -> stream time (ms), the newest stored, so a message
    # (a platform's delivery, a replayed transcript line) is stored once
    lock: str  # String: the maintenance lock (SET NX PX)
    # String with a TTL: JSON of what the last answer's prompt used (/memory why); any forget
    # or edit in the scope deletes it, and forget all with every other key here
    why: str
    # Stream: the log being rewritten without the entries a forget removed (XDEL leaves
    # their bytes in the stream's nodes, and so in DUMP, RDB and AOF); transient
    log_rewrite: str
    # The subtree's own keys, under the root's name (a thread's point to its channel's):
    root_state: str  # the root's state: a thread inherits its settings
    threads: str  # Sorted set: thread scope -> last activity (ms), the root's threads
    # Sorted set, all scores 0: "<user id>|<thread id or ''>" for every place of the subtree
    # where a person spoke (forget me reaches those); read by prefix (ZRANGEBYLEX)
    speakers: str
    # Hash: what was forgotten in the subtree, so learning its past never brings it back:
    # "m:<digest of a platform message id>" -> 1, "u:<digest of a user id>" -> when that
    # person was forgotten (ms), "all" -> when everything was. Digests, never text. Not in
    # all(): a forget of everything keeps it (that is when it matters most).
    gone: str
    # Hash: thread id -> JSON of that thread's first message as its platform showed it, read
    # when memory lacks it (posted before the bot was there): context for the thread's
    # prompts, never memory; each entry expires, and any tombstone in the subtree deletes
    # the hash (memory_core.store.thread_starters)
    starters: str

    def all(self) -> tuple[str, ...]:
        """The scope's own keys (a channel's include its record of its threads and speakers;
        a thread's never its channel's)."""
        own = (
            self.log,
            self.state,
            self.days,
            self.weeks,
            self.episodes,
            self.facts,
            self.vectors,
            self.forgets,
            self.done,
            self.people,
            self.ids,
            self.lock,
            self.why,
            self.log_rewrite,
        )
        if self.root_state == self.state:
            return (*own, self.threads, self.speakers, self.starters)
        return own


@dataclass(frozen=True, slots=True)
class LearningKeys:
    """Learning a channel's past (:mod:`memory_core.store.learning`)."""

    job: str  # Hash: the learn's state (source, since, cursor, status, counts)
    # Sorted set: "<scope> <platform id>" -> its time (ms), the messages read and not stored yet
    staged: str
    texts: str  # Hash: the same member -> the message as JSON (deleted by any forget here)


@dataclass(frozen=True, slots=True)
class ServerKeys:
    """A guild's or workspace's own keys, under its hash tag (``mb:{server:discord:1}:...``)."""

    places: str  # Sorted set: root scope (channel, Slack DM) -> last activity (ms)
    parents: str  # Hash: thread id -> its channel's scope (a Discord thread not in cache)
    # Hash: "u:<digest of a user id>" -> when they asked to be forgotten everywhere (ms):
    # learning never brings back what they said before it
    gone: str


class KeySchema:
    def __init__(self, prefix: str = "mb") -> None:
        self.prefix = prefix
        self.buckets = BUCKETS
        self.metric_buckets = METRIC_BUCKETS
        self._tags = bucket_tags(BUCKETS)

    def bucket(self, scope: str) -> int:
        return bucket_of(scope, self.buckets)

    def _bucketed(self, bucket: int, name: str) -> str:
        return f"{self.prefix}:{{{self._tags[bucket % self.buckets]}}}:{name}"

    def scopes_index(self, bucket: int) -> str:
        """Sorted set: scope -> last activity (ms), for the scopes of one bucket."""
        return self._bucketed(bucket, "scopes")

    def scopes_index_of(self, scope: str) -> str:
        return self.scopes_index(self.bucket(scope))

    def all_scopes_indexes(self) -> list[str]:
        return [self.scopes_index(b) for b in range(self.buckets)]

    def _base(self, scope: Scope) -> str:
        base = f"{self.prefix}:{{{scope.root.key}}}"
        return f"{base}/{scope.thread}" if scope.thread else base

    def scope(self, scope: str | Scope) -> ScopeKeys:
        parsed = Scope.of(scope)
        base, root = self._base(parsed), self._base(parsed.root)
        return ScopeKeys(
            log=f"{base}:log",
            state=f"{base}:state",
            days=f"{base}:days",
            weeks=f"{base}:weeks",
            episodes=f"{base}:episodes",
            facts=f"{base}:facts",
            vectors=f"{base}:vec",
            forgets=f"{base}:forgets",
            done=f"{base}:done",
            people=f"{base}:people",
            ids=f"{base}:ids",
            lock=f"{base}:lock",
            why=f"{base}:why",
            log_rewrite=f"{base}:log-rewrite",
            root_state=f"{root}:state",
            threads=f"{root}:threads",
            speakers=f"{root}:speakers",
            gone=f"{root}:gone",
            starters=f"{root}:starters",
        )

    def learning(self, scope: str | Scope) -> LearningKeys:
        """The keys of learning a channel's past (its threads' too), under its hash tag."""
        root = self._base(Scope.of(scope).root)
        return LearningKeys(
            job=f"{root}:learn", staged=f"{root}:learn-staged", texts=f"{root}:learn-texts"
        )

    def server(self, server_key: str) -> ServerKeys:
        """The keys of a server (``discord:1``, ``slack:T1``: :attr:`Scope.server_key`)."""
        base = f"{self.prefix}:{{server:{server_key}}}"
        return ServerKeys(places=f"{base}:places", parents=f"{base}:parents", gone=f"{base}:gone")

    # Fleet-wide work sharing, per bucket: a bucket's queue and in-flight set share its hash
    # tag, so a claim moves a scope between them atomically, on Redis Cluster too.
    def fleet_queue(self, bucket: int) -> str:
        return self._bucketed(bucket, "queue")  # Sorted set: scope -> when it was queued

    def fleet_inflight(self, bucket: int) -> str:
        return self._bucketed(bucket, "inflight")  # Sorted set: scope -> lease expiry (ms)

    def fleet_sweep(self, slot: str) -> str:
        return f"{self.prefix}:{{fleet}}:sweep:{slot}"  # String: who enumerated this sweep

    @property
    def sweeps(self) -> str:
        return f"{self.prefix}:{{fleet}}:sweeps"  # Hash: job -> JSON of its last sweep

    @property
    def embedders(self) -> str:
        # Hash: embedding worker (host:pid) -> JSON of its backlog and lag, every few seconds
        return f"{self.prefix}:{{fleet}}:embedders"

    @property
    def recall_caches(self) -> str:
        """Hash: each bot process's recall index memory now (JSON), by process."""
        return f"{self.prefix}:{{fleet}}:recall_caches"

    def metrics(self, minute: str, bucket: int) -> str:
        """Hash: counter -> count, one per minute and metrics bucket (a process writes to
        its own bucket; readers add the buckets up)."""
        spread = self.buckets // self.metric_buckets
        return self._bucketed((bucket % self.metric_buckets) * spread, f"metrics:{minute}")

    def llm_rate(self, bucket: int) -> str:
        """Sorted set: one member per LLM request admitted by this bucket's allowance."""
        return self._bucketed(bucket, "llm-rate")

    def platform_rate(self, name: str) -> str:
        """Sorted set: one member per platform call admitted under one of the platform's
        limits (``name``: ``slack:T1:chat.update``, ``discord:post:123``...), fleet-wide.
        Named by a digest of ``name``: it expires within two of its windows, and names no
        workspace, channel or person meanwhile (an uninstall leaves nothing that does)."""
        digest = hashlib.blake2b(name.encode(), digest_size=10).hexdigest()
        return f"{self.prefix}:{{rate:{digest}}}"

    # Token spend, per local day. Not in ScopeKeys.all(): forgetting a scope's memory must
    # not reset its budget (the spend is the bill, not what was said).
    def spend_scope(self, scope: str, day: str) -> str:
        """Hash: tokens, prompt, completion, p:<purpose>, u:<member id>, n:<member id> (the
        member's display name, for the dashboard). Under the scope's own hash tag."""
        return f"{self._base(Scope.of(scope))}:spend:{day}"

    def spend_holds(self, scope: str) -> str:
        """Sorted set: the tokens held for replies in flight in a channel and its threads
        (under the channel's tag), scored by when each hold lapses."""
        return f"{self._base(Scope.of(scope).root)}:spend-holds"

    def server_holds(self, server: str) -> str:
        """Sorted set: the same for a guild's or workspace's limit, under its own tag."""
        return f"{self.prefix}:{{server:{server}}}:spend-holds"

    def spend_server(self, server: str, day: str) -> str:
        """Hash: tokens, s:<scope>. A guild's or workspace's day, under its own hash tag."""
        return f"{self.prefix}:{{server:{server}}}:spend:{day}"

    def spend_day(self, bucket: int, day: str) -> str:
        """Hash: scope -> tokens on that day, for the scopes of one bucket (the dashboard's
        per-day view merges the buckets; no one key takes every call's write)."""
        return self._bucketed(bucket, f"spend:{day}")

    @property
    def durability_mark(self) -> str:
        """String: a counter written just before WAITAOF, so the fsync it waits for covers
        every earlier write of this process (the embedded store's ``persist``)."""
        return f"{self.prefix}:durability-mark"

    def cache(self, namespace: str, item: str) -> str:
        """Platform lookups worth remembering for a while (Slack user names, ...)."""
        return f"{self.prefix}:cache:{namespace}:{item}"

    def seen(self, platform: str, event_id: str) -> str:
        """Marks an event id as handled, so a platform's retries are processed once."""
        return f"{self.prefix}:seen:{platform}:{event_id}"

    def scope_pattern(self, scope: str) -> str:
        """A SCAN pattern matching every key of one scope (used by checks, not the hot path):
        a channel's own keys, not its threads'."""
        base = self._base(Scope.of(scope))
        escaped = base.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")
        return f"{escaped}:*"

    def all_pattern(self) -> str:
        return f"{self.prefix}:*"
