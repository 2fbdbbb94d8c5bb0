"""Running memory for many scopes: the scheduler (each scope's midnight, the weekly
consolidation), the fleet queue with leases, the shared rate limit, the pacing of platform
calls, and the metrics the dashboard and `memorybot doctor` read. It is handed what to run;
it never calls up into the service layer."""

from __future__ import annotations

from memory_core.fleet.metrics import Metrics, read_minutes, totals
from memory_core.fleet.pacing import Allowance, Pacing
from memory_core.fleet.queue import FleetQueue
from memory_core.fleet.ratelimit import FleetRateLimiter
from memory_core.fleet.scheduler import RolloverScheduler

__all__ = [
    "Allowance",
    "FleetQueue",
    "FleetRateLimiter",
    "Metrics",
    "Pacing",
    "RolloverScheduler",
    "read_minutes",
    "totals",
]
