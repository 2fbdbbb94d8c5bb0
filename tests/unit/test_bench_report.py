"""The benchmark report is written from a run's saved figures: docs/benchmarks.json gives
back docs/benchmarks.md, and what a reader must be told (a prompt past any context window,
a load rate that was not held, a section that needs Redis) is said."""

from __future__ import annotations

import json
from pathlib import Path

from memorybot_bench.report import write_from_json, write_report

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_published_report_is_what_its_figures_give(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    write_from_json(DOCS / "benchmarks.json", out)
    assert out.read_text(encoding="utf-8") == (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert (tmp_path / "img" / "bench-llm-cost.png").stat().st_size > 10_000


def test_shortfalls_are_said(tmp_path: Path) -> None:
    results = json.loads((DOCS / "benchmarks.json").read_text(encoding="utf-8"))
    results["load"].update(rate_per_s=200, achieved_rate_per_s=120.0)
    results["redis_memory"] = {"skipped": "needs a real Redis: run with REDIS_URL set"}
    big = {"memory": "full history", "history": 20000, "prompt_tokens": 590_000}
    results["prompt_growth"].append(big)
    write_report(results, tmp_path / "b.md")
    text = (tmp_path / "b.md").read_text(encoding="utf-8")
    assert "The offered 200 messages/s was not held: 120.0 messages/s were sent" in text
    assert "Not measured: needs a real Redis" in text
    assert "590,000 tokens) is past a 128,000-token context window" in text
    results["load"].update(achieved_rate_per_s=199.0)
    write_report(results, tmp_path / "c.md")
    assert "was not held" not in (tmp_path / "c.md").read_text(encoding="utf-8")


def test_a_run_on_the_embedded_store_is_written_without_the_side_by_side(tmp_path: Path) -> None:
    """On the embedded store (no REDIS_URL) there is no external Redis to set it beside: the
    run has no ``embedded_pipeline`` figures, and its report leaves that table out."""
    results = json.loads((DOCS / "benchmarks.json").read_text(encoding="utf-8"))
    assert results["embedded_pipeline"] is not None
    write_report(results, tmp_path / "redis.md")
    assert "### The embedded store beside Redis" in (tmp_path / "redis.md").read_text("utf-8")
    results["embedded_pipeline"] = None
    write_report(results, tmp_path / "embedded.md")
    text = (tmp_path / "embedded.md").read_text(encoding="utf-8")
    assert "### The embedded store beside Redis" not in text
    assert "## 2. LLM calls and tokens per 100 channel messages" in text
