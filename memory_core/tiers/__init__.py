"""Keeping memory: compaction of today's log into a summary, the day rollover, the week and
long-term refresh, the offline extractive summariser, facts and where they go, retention, and
the redaction of what was forgotten. ``Maintainer`` runs these steps for one scope."""

from __future__ import annotations

from memory_core.tiers.extractive import SummaryItem, extractive_summary
from memory_core.tiers.facts import merge_ops
from memory_core.tiers.maintenance import Maintainer, MaintenanceReport
from memory_core.tiers.summarize import FactDraft, Summarizer, SummaryStats

__all__ = [
    "FactDraft",
    "Maintainer",
    "MaintenanceReport",
    "Summarizer",
    "SummaryItem",
    "SummaryStats",
    "extractive_summary",
    "merge_ops",
]
