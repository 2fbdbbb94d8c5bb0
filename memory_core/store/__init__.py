"""The only part of the core that talks to Redis: key names (``keys``), the Lua scripts, the
repository the rest of the core uses (``MemoryRepo``), the connections (``open_store``; the
hot path's own, ``lane``) and the embedded Valkey server. Redis errors are translated into
``StoreError`` here, once."""

from __future__ import annotations

from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.locks import LockHolder
from memory_core.store.platform_state import PlatformState
from memory_core.store.records import PlaceCounts, PromptSnapshot, ScopeDump
from memory_core.store.repo import MemoryRepo
from memory_core.store.server import Store, open_store

__all__ = [
    "KeySchema",
    "LockHolder",
    "MemoryRepo",
    "PlaceCounts",
    "PlatformState",
    "PromptSnapshot",
    "ScopeDump",
    "ScopeKeys",
    "Store",
    "open_store",
]
