"""The only part of memorybot that talks to Redis (the only one that imports redis:
``tests/unit/test_layout.py`` checks it): key names (``keys``), the Lua scripts, the
repository's parts the rest of the core takes (held by ``MemoryRepo``: ``reads``,
``writes``, ``steps``, ``messages``, ``ledger``), the I/O of the fleet (``queue``, ``spend``,
``ratelimit``, ``metrics``, ``heartbeats``: the decisions stay in ``memory_core.fleet``) and
of recall (``recall_reads``), what the server says of itself (``server_info``), the
connections (``open_store``; the hot path's own, ``lane``) and the embedded Valkey server.
Redis errors are translated into ``StoreError`` here, once (``redis_errors``)."""

from __future__ import annotations

from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.locks import LockHolder
from memory_core.store.metrics import MetricsStore
from memory_core.store.platform_state import PlatformState
from memory_core.store.queue import QueueStore
from memory_core.store.ratelimit import RateLog
from memory_core.store.recall_reads import RecallStore
from memory_core.store.records import PlaceCounts, PromptSnapshot, ScopeDump
from memory_core.store.repo import MemoryRepo
from memory_core.store.server import Store, open_store
from memory_core.store.server_info import ServerInfo
from memory_core.store.spend import SpendStore

__all__ = [
    "KeySchema",
    "LockHolder",
    "MemoryRepo",
    "MetricsStore",
    "PlaceCounts",
    "PlatformState",
    "PromptSnapshot",
    "QueueStore",
    "RateLog",
    "RecallStore",
    "ScopeDump",
    "ScopeKeys",
    "ServerInfo",
    "SpendStore",
    "Store",
    "open_store",
]
