"""``memorybot bench ...``: performance, measured next to what it should be compared with.

``bots/cli/main.py`` adds these with ``register(bench_app)``. The harnesses are the
``memorybot_bench`` package (bench/ in the repository, a distribution of its own that the
``bench`` extra installs), imported only when a benchmark runs: other commands need no extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bots.cli.common import err, fail, print_json, progress_bar, run, say, settings

Measure = Callable[[Callable[[int], None]], Awaitable[dict[str, Any]]]


def register(bench_app: typer.Typer) -> None:
    bench_app.command("ingest")(ingest)
    bench_app.command("rollover")(rollover)
    bench_app.command("recall")(recall)
    bench_app.command("load")(load)
    bench_app.command("cluster")(cluster)
    bench_app.command("all")(all_benchmarks)
    bench_app.command("report")(report)


def _measure(label: str, total: int, as_json: bool, measure: Measure) -> dict[str, Any]:
    """Run one benchmark with a progress bar on stderr; print JSON if asked, else return."""

    async def go() -> dict[str, Any]:
        with progress_bar(quiet=as_json) as progress:
            task = progress.add_task(label, total=total)
            return await measure(lambda n: progress.update(task, completed=n))

    result = run(go())
    if as_json:
        print_json(result)
    return result


# What the `bench` extra installs, by the module a command imports: the benchmarks
# themselves, the plots and the alternatives memorybot is compared with.
HARNESSES = {"memorybot_bench": "memorybot-bench", "memorybot_testkit": "memorybot-testkit"}
PLOTS = {"matplotlib": "matplotlib"}
ALTERNATIVES = {"langchain_classic": "langchain-classic", "langchain_openai": "langchain-openai"}


def bench_extra(command: str, needs: dict[str, str] | None = None) -> None:
    """Stop with the pip install to run if a module of the `bench` extra is missing, before
    any work (a missing one would otherwise surface as a traceback, minutes in).
    ``command`` as the user typed it after ``memorybot``."""
    needs = {**HARNESSES, **(needs or {})}
    missing = [dist for module, dist in needs.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise fail(
            f"memorybot {command} needs {', '.join(missing)} (the bench extra): "
            "install it with: pip install -e '.[bench]'",
            2,
        )


def ingest(
    ctx: typer.Context,
    scopes: Annotated[int, typer.Option("--scopes", min=1)] = 1,
    messages: Annotated[int, typer.Option("--messages", min=1)] = 2000,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Pipeline time per message without the LLM, next to a Redis PING."""
    bench_extra("bench ingest")
    from memorybot_bench.harness import bench_ingest

    s = settings(ctx)
    r = _measure(
        "ingest",
        messages,
        as_json,
        lambda p: bench_ingest(s, scopes=scopes, messages=messages, progress=p),
    )
    if not as_json:
        say(
            f"{r['messages']} messages over {r['scopes']} scopes on {r['store']}:\n"
            f"  ingest p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
            f"{r['msgs_per_s']:.0f} msgs/s\n"
            f"  prompt assembly p50 {r['assemble_p50_ms']:.3f} ms, "
            f"p99 {r['assemble_p99_ms']:.3f} ms\n"
            f"  Redis PING {r['redis_ping_ms']:.3f} ms quiet, {r['ping_during_run_ms']:.3f} ms "
            f"during the run (ingest p50 = {r['p50_over_ping']}x the quiet PING)\n"
            + (
                f"  PING by the connection messages are stored by: {r['lane_ping_ms']:.3f} ms\n"
                if r.get("lane_ping_ms")
                else ""
            )
            + f"  background embedding ({r['embedding']}): {r['embedded']} embedded, "
            f"{r['embed_msgs_per_s']:.0f} msgs/s, lag p50 {r['embed_lag_p50_s']:.2f} s, "
            f"max {r['embed_lag_max_s']:.2f} s, caught up {r['embed_catch_up_s']:.2f} s "
            "after the last message"
        )


def rollover(
    ctx: typer.Context,
    scopes: Annotated[int, typer.Option("--scopes", min=1)] = 10000,
    idle: Annotated[int, typer.Option("--idle", min=0, help="Idle scopes (must cost 0).")] = 1000,
    latency_ms: Annotated[float, typer.Option("--latency-ms", min=0)] = 200.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 32,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A day's rollover over many scopes, with a stand-in model of set latency."""
    bench_extra("bench rollover")
    from memorybot_bench.harness import bench_rollover

    s = settings(ctx)
    r = _measure(
        "rollover",
        scopes,
        as_json,
        lambda p: bench_rollover(
            s,
            scopes=scopes,
            idle=idle,
            latency_ms=latency_ms,
            concurrency=concurrency,
            progress=p,
        ),
    )
    if not as_json:
        say(
            f"{r['rolled_over']} scopes rolled over in {r['seconds']}s at concurrency "
            f"{concurrency} with a {latency_ms:.0f} ms model: {r['scopes_per_s']} scopes/s "
            f"(ideal {r['ideal_scopes_per_s']}); {r['llm_calls_per_scope']} LLM calls per "
            f"scope; {r['idle_scopes']} idle scopes queued: {r['queued'] - r['rolled_over']}.\n"
            f"Overhead outside the model: {r['overhead_ms_per_scope']} ms per scope."
        )


def recall(
    ctx: typer.Context,
    sizes: Annotated[
        str, typer.Option("--sizes", help="Messages per scope, e.g. 1000,100000")
    ] = "1000,10000,100000",
    queries: Annotated[int, typer.Option("--queries", min=1)] = 100,
    scopes: Annotated[
        int, typer.Option("--scopes", min=1, help="Spread each size's messages over this many.")
    ] = 1,
    cache_mb: Annotated[
        int | None,
        typer.Option("--cache-mb", min=1, help="memory.recall_cache_mb for the run."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Recall query latency and memory as a scope grows (or many scopes)."""
    bench_extra("bench recall")
    from memorybot_bench.recall_bench import bench_recall

    try:
        counts = [int(x) for x in sizes.split(",") if x.strip()]
    except ValueError as exc:
        raise fail(f"--sizes {sizes!r}: give numbers like 1000,10000", 1) from exc
    s = settings(ctx)
    r = _measure(
        "recall",
        queries * len(counts),
        as_json,
        lambda p: bench_recall(
            s, sizes=counts, queries=queries, scopes=scopes, cache_mb=cache_mb, progress=p
        ),
    )
    if not as_json:
        for row in r["sizes"]:
            peak = row["peak_rss_mb"]
            say(
                f"{row['messages']:>8} messages in {row['scopes']} scope(s): first query "
                f"{row['first_query_ms']:.0f} ms (builds the index), then p50 "
                f"{row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms; rebuild "
                f"{row['rebuild_ms']:.0f} ms; event loop stalled at most "
                f"{row['loop_stall_build_ms']:.1f} ms building, "
                f"{row['loop_stall_query_ms']:.1f} ms querying\n"
                f"          index {row['index_mb']} MB for {row['messages_cached']} messages "
                f"cached ({row['index_bytes_per_message']} bytes each; cache "
                f"{row['cache_mb']} MB, {row['evictions']} evictions); process "
                f"{row['rss_before_mb']} MB before, peak {peak} MB"
            )


def load(
    ctx: typer.Context,
    rate: Annotated[int, typer.Option("--rate", min=1, help="Messages per second.")] = 200,
    scopes: Annotated[int, typer.Option("--scopes", min=1)] = 1000,
    seconds: Annotated[int, typer.Option("--seconds", min=1)] = 600,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A steady stream of messages on loopback: lost messages, latency, memory over time."""
    bench_extra("bench load")
    from memorybot_bench.load import load_run

    s = settings(ctx)
    r = _measure(
        "load",
        seconds,
        as_json,
        lambda p: load_run(s, rate=rate, scopes=scopes, seconds=seconds, progress=p),
    )
    if not as_json:
        say(
            f"{r['sent']} messages at {r['achieved_rate_per_s']}/s over {scopes} scopes: "
            f"{r['stored']} stored, {r['lost']} lost, {r['refused']} refused; ingest "
            f"p50 {r['ingest_p50_ms']} ms, p99 {r['ingest_p99_ms']} ms; {r['replies']} replies "
            f"(p50 {r['reply_p50_ms']} ms, p99 {r['reply_p99_ms']} ms), {r['drain_s']} s to "
            "drain; "
            f"RSS {r['rss_mb_start']} -> {r['rss_mb_end']} MB"
        )


def cluster(
    ctx: typer.Context,
    nodes: Annotated[
        str, typer.Option("--nodes", help="Node counts, one local cluster each, e.g. 3,6")
    ] = "3,6",
    scopes: Annotated[int, typer.Option("--scopes", min=1)] = 1000,
    messages: Annotated[int, typer.Option("--messages", min=1)] = 10000,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """How evenly a Redis Cluster's nodes share the work (local clusters, started and
    stopped here): ingest, a rollover sweep and replies across many scopes."""
    bench_extra("bench cluster")
    from memorybot_bench.cluster_bench import bench_cluster

    try:
        counts = [int(x) for x in nodes.split(",") if x.strip()]
    except ValueError as exc:
        raise fail(f"--nodes {nodes!r}: give node counts like 3,6", 1) from exc
    if not counts or min(counts) < 3:
        raise fail(f"--nodes {nodes!r}: a Redis Cluster needs at least 3 nodes", 1)
    s = settings(ctx)
    r = _measure(
        "cluster",
        len(counts) * (messages + 2 * scopes),
        as_json,
        lambda p: bench_cluster(s, nodes=counts, scopes=scopes, messages=messages, progress=p),
    )
    if not as_json:
        for row in r["clusters"]:
            phases = ", ".join(
                f"{name} {p['max_share_over_ideal']}x" for name, p in row["phases"].items()
            )
            say(
                f"{row['nodes']} nodes: busiest node over its even share: {phases} (overall "
                f"{row['overall']['max_share_over_ideal']}x; target "
                f"<= {r['target_max_share_over_ideal']}x); ingest {row['msgs_per_s']} msgs/s"
            )


def all_benchmarks(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes: a few minutes (CI).")
    ] = False,
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the report.")] = Path(
        "docs/benchmarks.md"
    ),
) -> None:
    """Every benchmark side by side with the alternatives; writes docs/benchmarks.md."""

    bench_extra("bench all", {**PLOTS, **ALTERNATIVES})
    from memorybot_bench.runner import run as run_benchmarks

    s = settings(ctx)
    result = run_benchmarks(
        s, quick=quick, out=out_file, log=lambda line: err.print(line, markup=False)
    )
    say(f"Wrote {out_file} in {result['seconds']} s.")


def report(
    source: Annotated[
        Path, typer.Option("--from", help="A run's saved figures (written next to its report).")
    ] = Path("docs/benchmarks.json"),
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the report.")] = Path(
        "docs/benchmarks.md"
    ),
) -> None:
    """Write the report (and its plots) again from a run's saved figures, measuring nothing."""

    bench_extra("bench report", PLOTS)
    from memorybot_bench.report import write_from_json

    try:
        write_from_json(source, out_file)
    except (OSError, ValueError, KeyError) as exc:
        raise fail(f"cannot write the report from {source}: {exc!r}", 1) from exc
    say(f"Wrote {out_file} from {source}.")
