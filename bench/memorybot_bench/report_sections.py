"""The report's later sections (Redis memory, recall, load, LoCoMo, Redis Cluster) and the
Markdown table they all use; report.py puts them together with the first four."""

from __future__ import annotations

from typing import Any


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def load_table(load: dict[str, Any]) -> str:
    return table(
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


def load_shortfall(load: dict[str, Any]) -> list[str]:
    if load["achieved_rate_per_s"] >= 0.95 * load["rate_per_s"]:
        return []
    return [
        f"The offered {load['rate_per_s']} messages/s was not held: {load['achieved_rate_per_s']} "
        "messages/s were sent while sending (the generator, the bot and the fake model share one "
        "process here, so this is a ceiling of this machine and process, not of Redis).",
        "",
    ]


def recall_table(rows: list[dict[str, Any]]) -> str:
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
    return table(headings, [[r.get(f, "-") for f in fields] for r in rows])


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


def locomo_section(locomo: dict[str, Any] | None) -> list[str]:
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
        table(["budget", "", "evidence-turn recall", "prompt tokens max", *cats.values()], rows),
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
        table(["conversation", *heads], rows),
        "",
    ]


PHASE_UNITS = {"ingest": "msgs/s", "sweep": "scopes/s", "replies": "replies/s"}


def cluster_section(cluster: dict[str, Any]) -> list[str]:
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
        table(
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


def redis_memory_table(rm: dict[str, Any]) -> str:
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
    return table(
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


def over_context(growth: list[dict[str, Any]]) -> list[str]:
    """A sentence for each memory whose prompt no 128k-context model would take."""
    over = [r for r in growth if r["prompt_tokens"] > CONTEXT_WINDOW]
    return [
        f"At {r['history']:,} messages the {r['memory']} prompt ({r['prompt_tokens']:,} tokens) "
        f"is past a {CONTEXT_WINDOW:,}-token context window: a real model would refuse it.\n"
        for r in over
    ]
