"""A memorybot process for the crash tests to kill: ``python -m tests.faults.child ACTION``.

Reads REDIS_URL, OPENAI_BASE_URL, CHILD_NOW (ISO time), CHILD_SCOPE, CHILD_TEXT and
CHILD_LOCK_TTL_S (the maintenance lock, 1 s unless given) from the environment, does one
thing, and prints "done" if nobody killed it first.

Actions: ``maintain`` and ``forget`` one scope; ``sweep``: one scheduler sweep, as a fleet
job fires it (prints "sweeping" before and the report as JSON after); ``sweep-stuck``: a
sweep whose enumeration never ends (prints "enumerating" once it is inside it), for a test
to kill an enumerator in the act."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from tests.helpers import make_settings

ROOT = Path(__file__).parents[2]


async def spawn(action: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    """This child, doing ``action``, in its own process (stdout piped for its lines)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.faults.child",
        action,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_until(proc: asyncio.subprocess.Process, line: str, *, within: float = 60) -> None:
    """Wait until the child prints ``line`` (it says where it is)."""
    assert proc.stdout is not None

    async def scan() -> None:
        assert proc.stdout is not None
        while (raw := await proc.stdout.readline()) != b"":
            if raw.decode().strip() == line:
                return
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        raise AssertionError(f"the child ended before printing {line!r}: {err[-1500:]}")

    await asyncio.wait_for(scan(), within)


async def _stuck_states(**_: Any) -> AsyncIterator[list[Any]]:
    """The scopes index read by an enumerator that hangs before its first batch."""
    print("enumerating", flush=True)
    await asyncio.Event().wait()
    yield []


async def main(action: str) -> None:
    settings = make_settings(
        redis_url=os.environ["REDIS_URL"],
        llm_url=os.environ.get("OPENAI_BASE_URL"),
        llm={"timeout_s": 120.0},
        memory={"compact_trigger_tokens": 200, "compact_min_messages": 5, "compact_keep_tokens": 0},
        scheduler={"lock_ttl_s": float(os.environ.get("CHILD_LOCK_TTL_S", "1.0"))},
    )
    clock = ManualClock(datetime.fromisoformat(os.environ["CHILD_NOW"]))
    core = await build_core(settings, clock=clock, background=False)
    scope = os.environ.get("CHILD_SCOPE", "")
    if action == "maintain":
        await core.maintenance.maintain(scope)
    elif action == "forget":
        await core.admin.text.forget_text(scope, os.environ["CHILD_TEXT"])
    elif action == "sweep":
        print("sweeping", flush=True)
        report = await core.scheduler.sweep()
        print(json.dumps(report.as_dict()), flush=True)
    elif action == "sweep-stuck":
        # A short enumeration lease, so the test need not wait long once this one is killed.
        core.scheduler.enumeration_lease_s = 3.0
        core.scheduler.fleet.states = _stuck_states  # type: ignore[method-assign]
        await core.scheduler.sweep()
    else:
        raise SystemExit(f"unknown action {action}")
    await core.close()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
