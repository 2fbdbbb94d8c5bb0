"""``memorybot bench cluster`` as a user runs it (its own process): local clusters started,
measured and gone afterwards, and figures for every node of every phase."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from tests.helpers import spawn_memorybot


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
async def test_bench_cluster_measures_every_node_and_leaves_nothing_behind(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = await spawn_memorybot(
        tmp_path,
        *("bench", "cluster", "--nodes", "3", "--scopes", "30", "--messages", "300", "--json"),
        env={"TMPDIR": str(temp)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=100)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out)
    assert (result["scopes"], result["messages"], result["replies"]) == (30, 300, 30)
    [row] = result["clusters"]
    assert row["nodes"] == 3 and row["msgs_per_s"] > 0
    assert set(row["phases"]) == {"ingest", "sweep", "replies"}
    for name, phase in [*row["phases"].items(), ("overall", row["overall"])]:
        assert len(phase["calls"]) == 3 and all(calls > 0 for calls in phase["calls"]), name
        assert abs(sum(phase["shares"]) - 1) < 0.01, name
        assert 1.0 <= phase["max_share_over_ideal"] <= 3.0, name
        assert abs(phase["max_share_over_ideal"] - max(phase["shares"]) * 3) < 0.01, name
    assert row["even"] == (row["worst_phase_max_share_over_ideal"] <= 1.5)
    # 300 messages in, the day rolled over for all 30 scopes, and a question and its
    # answer per scope: each phase did its work on the cluster.
    ingest, sweep, replies = (row["phases"][p] for p in ("ingest", "sweep", "replies"))
    assert sum(ingest["calls"]) >= 300 and sum(replies["calls"]) >= 30 * 2
    assert sum(sweep["calls"]) >= 30
    assert not any(_listening(port) for port in row["ports"]), "the nodes are stopped"
    assert not list(temp.glob("mb-redis-*")), "the nodes' directories are removed"
