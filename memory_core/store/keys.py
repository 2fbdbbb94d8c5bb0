"""Every Redis key name memorybot uses is built here, and nowhere else.

All of one scope's keys share the hash tag ``{scope}``, so a Lua script or MULTI may touch
them together and the same code runs on Redis Cluster.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass


@dataclass(frozen=True, slots=True)
class ScopeKeys:
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

    def all(self) -> tuple[str, ...]:
        return astuple(self)


class KeySchema:
    def __init__(self, prefix: str = "mb") -> None:
        self.prefix = prefix
        self.scopes_index = f"{prefix}:scopes"  # Sorted set: scope -> last activity (ms)

    def scope(self, scope: str) -> ScopeKeys:
        base = f"{self.prefix}:{{{scope}}}"
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
        )

    # Fleet-wide work sharing. One hash tag for all of it, so a claim moves a scope between
    # the queue and the in-flight set atomically, on Redis Cluster too.
    @property
    def fleet_queue(self) -> str:
        return f"{self.prefix}:{{fleet}}:queue"  # Sorted set: scope -> when it was queued

    @property
    def fleet_inflight(self) -> str:
        return f"{self.prefix}:{{fleet}}:inflight"  # Sorted set: scope -> lease expiry (ms)

    def fleet_sweep(self, slot: str) -> str:
        return f"{self.prefix}:{{fleet}}:sweep:{slot}"  # String: who enumerated this sweep

    @property
    def sweeps(self) -> str:
        return f"{self.prefix}:{{fleet}}:sweeps"  # Hash: job -> JSON of its last sweep

    def metrics(self, minute: str) -> str:
        return f"{self.prefix}:metrics:{minute}"  # Hash: counter -> count, one per minute

    @property
    def llm_rate(self) -> str:
        return f"{self.prefix}:{{fleet}}:llm-rate"  # Sorted set: one member per LLM request

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
        """A SCAN pattern matching every key of one scope (used by checks, not the hot path)."""
        escaped = scope.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")
        return f"{self.prefix}:{{{escaped}}}:*"

    def all_pattern(self) -> str:
        return f"{self.prefix}:*"
