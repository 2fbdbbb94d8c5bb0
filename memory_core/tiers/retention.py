"""Retention as pure time maths: which raw messages have outlived ``retention_days`` and may
be trimmed from a scope's log, and whether a trim is due. No Redis here: maintenance applies
the answer (an XTRIM MINID) in its own atomic steps."""

from __future__ import annotations

from memory_core.models import ScopeState

DAY_MS = 86_400_000


def trim_target(state: ScopeState, *, now_ms: int, retention_days: int) -> tuple[str, int]:
    """The XTRIM MINID that drops raw messages older than the setting, never unsummarised
    ones (the log is summarised up to ``short_upto``), and its time; ("", 0) for none."""
    if not state.short_upto:
        return "", 0
    cutoff = now_ms - retention_days * DAY_MS
    ms, _, seq = state.short_upto.partition("-")
    if cutoff <= int(ms):
        return str(cutoff), cutoff
    return f"{ms}-{int(seq or 0) + 1}", int(ms) + 1  # everything summarised has expired


def trim_due(state: ScopeState, *, now_ms: int, retention_days: int) -> bool:
    """Summarised raw messages passed retention and are still here (checked at most once a
    day a scope: a quiet scope closes no more days, so this is how it gets trimmed)."""
    minid, target_ms = trim_target(state, now_ms=now_ms, retention_days=retention_days)
    if not minid:
        return False
    cutoff = now_ms - retention_days * DAY_MS
    oldest_left = max(state.created_ms, state.trimmed_ms)
    return oldest_left < target_ms and cutoff - state.trimmed_ms > DAY_MS
