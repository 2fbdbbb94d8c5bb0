"""/metrics: a :class:`~bots.dashboard.health.HealthReport` exposed by ``prometheus-client``.

The figures are read from Redis (asynchronously) for each scrape, so the exposition is built
per request: a :class:`~prometheus_client.registry.CollectorRegistry` of its own (never the
library's global one, which would add this process's own metrics and be shared by every app
in the process) with one collector over that report, encoded as the scraper asked
(:func:`~prometheus_client.exposition.choose_encoder`: the text format 0.0.4 by default,
OpenMetrics when Prometheus asks for it). The library formats and escapes; this module only
says which figure is which metric.

Every series is a gauge: the *_total figures are sums over a window of the fleet's per-minute
buckets ("messages in the last 60 minutes"), not counters since a start, and HELP says which
window.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from bots.dashboard.health import (
    BUDGET_LIMITS,
    MAINTENANCE,
    REPLY_KINDS,
    SUMMARY_KINDS,
    HealthReport,
)


def _gauge(
    name: str, help_text: str, samples: list[tuple[dict[str, str], float]]
) -> GaugeMetricFamily:
    """A gauge with its samples; the label names are the first sample's (all share them)."""
    labels = list(samples[0][0]) if samples else []
    family = GaugeMetricFamily(name, help_text, labels=labels)
    for values, value in samples:
        family.add_metric([values[label] for label in labels], value)
    return family


class ReportCollector(Collector):
    """The figures of one report, as memorybot_* gauges."""

    def __init__(self, report: HealthReport) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        yield from self._activity()
        yield from self._llm()
        yield from self._store()
        yield from self._recall()
        stamps: list[tuple[dict[str, str], float]] = []
        for sweep in self.report.sweeps:
            try:
                stamps.append(({"job": sweep.job}, datetime.fromisoformat(sweep.at).timestamp()))
            except ValueError:
                continue
        yield _gauge("memorybot_last_sweep_timestamp_seconds", "When each job last swept.", stamps)

    @property
    def _window(self) -> str:
        return f"in the last {self.report.minutes} minutes (sum of the fleet's per-minute buckets)"

    def _activity(self) -> Iterator[Metric]:
        s, window = self.report.sums, self._window
        yield _gauge(
            "memorybot_window_minutes",
            "Window the *_total figures cover.",
            [({}, self.report.minutes)],
        )
        yield _gauge(
            "memorybot_messages_total", f"Messages stored {window}.", [({}, s["messages"])]
        )
        yield _gauge(
            "memorybot_replies_total",
            f"Replies by kind {window}.",
            [({"kind": k}, s[f"replies_{k}"]) for k in REPLY_KINDS],
        )
        yield _gauge(
            "memorybot_budget_refusals_total",
            f"Replies refused by a daily token budget, by the limit reached {window}.",
            [({"limit": k}, s[f"budget_refusals:{k}"]) for k in BUDGET_LIMITS],
        )
        yield _gauge(
            "memorybot_summaries_total",
            f"Summaries by who wrote them (llm, fallback: the extractive stand-in after "
            f"failures, offline: no model configured) {window}.",
            [({"by": k}, s[f"summaries_{k}"]) for k in SUMMARY_KINDS],
        )
        yield _gauge(
            "memorybot_maintenance_total",
            f"Memory maintenance work by kind {window}.",
            [({"work": k}, s[k]) for k, _ in MAINTENANCE],
        )

    def _llm(self) -> Iterator[Metric]:
        llm, window = self.report.llm, self._window
        yield _gauge(
            "memorybot_llm_calls_total",
            f"LLM calls by purpose {window}.",
            [({"purpose": u.purpose}, u.calls) for u in llm],
        )
        yield _gauge(
            "memorybot_llm_failures_total",
            f"LLM calls that failed, by purpose {window}.",
            [({"purpose": u.purpose}, u.failures) for u in llm],
        )
        yield _gauge(
            "memorybot_llm_tokens_total",
            f"LLM tokens by purpose and kind {window}.",
            [
                ({"purpose": u.purpose, "kind": kind}, tokens)
                for u in llm
                for kind, tokens in (
                    ("prompt", u.prompt_tokens),
                    ("completion", u.completion_tokens),
                )
            ],
        )
        yield _gauge(
            "memorybot_llm_seconds_total",
            f"Time spent in LLM calls, by purpose {window}.",
            [({"purpose": u.purpose}, u.ms / 1000) for u in llm],
        )

    def _store(self) -> Iterator[Metric]:
        report = self.report
        yield _gauge("memorybot_scopes", "Scopes in the scopes index.", [({}, report.scopes)])
        if report.redis_used_bytes is not None:
            yield _gauge(
                "memorybot_redis_used_memory_bytes",
                "Memory Redis uses (INFO memory used_memory; summed over cluster nodes).",
                [({}, report.redis_used_bytes)],
            )
        e = report.embedding
        yield _gauge(
            "memorybot_embedding_workers",
            "Embedding worker processes reporting (one beside each bot process with the local "
            "model).",
            [({}, e.get("workers", 0))],
        )
        yield _gauge(
            "memorybot_embedding_backlog_messages",
            "Messages stored but not embedded yet (recall finds them by words meanwhile).",
            [({}, e.get("backlog", 0))],
        )
        yield _gauge(
            "memorybot_embedding_lag_seconds",
            "How long the oldest message not embedded yet has waited (the largest of the workers).",
            [({}, e.get("lag_s", 0.0))],
        )

    def _recall(self) -> Iterator[Metric]:
        r, s, window = self.report.recall, self.report.sums, self._window
        for name, help_text, value in (
            (
                "memorybot_recall_index_processes",
                "Bot processes reporting their recall indexes (every 10 s).",
                r.get("processes", 0),
            ),
            (
                "memorybot_recall_index_bytes",
                "Memory the recall indexes hold now, summed over the bot processes (each "
                "bounded by its memory.recall_cache_mb).",
                r.get("bytes", 0),
            ),
            (
                "memorybot_recall_index_limit_bytes",
                "The processes' memory.recall_cache_mb, summed, in bytes.",
                r.get("limit_bytes", 0),
            ),
            (
                "memorybot_recall_index_scopes",
                "Scopes whose recall index is in memory now, summed over the bot processes.",
                r.get("scopes", 0),
            ),
            (
                "memorybot_recall_index_evictions_total",
                f"Recall indexes dropped to stay under memory.recall_cache_mb {window}.",
                s["recall_evictions"],
            ),
            (
                "memorybot_recall_index_builds_total",
                f"Recall indexes built whole (a first search, after an eviction or a forget) "
                f"{window}.",
                s["recall_builds"],
            ),
            (
                "memorybot_recall_index_build_seconds_total",
                f"Time those builds took (off the event loop) {window}.",
                s["recall_build_ms"] / 1000,
            ),
        ):
            yield _gauge(name, help_text, [({}, value)])


def exposition(report: HealthReport, accept: str | None) -> tuple[bytes, str]:
    """The report encoded as a scraper with this Accept header asked: (body, content type)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(report))
    encode, content_type = choose_encoder(accept or "")
    return encode(registry), content_type
