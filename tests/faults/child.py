"""A memorybot process for the crash tests to kill: ``python -m tests.faults.child ACTION``.

Reads REDIS_URL, OPENAI_BASE_URL, CHILD_NOW (ISO time), CHILD_SCOPE, CHILD_TEXT from the
environment, does one thing, and prints "done" if nobody killed it first."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import datetime

from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from tests.conftest import make_settings


async def main(action: str) -> None:
    settings = make_settings(
        redis_url=os.environ["REDIS_URL"],
        llm_url=os.environ.get("OPENAI_BASE_URL"),
        llm={"timeout_s": 120.0},
        memory={"compact_trigger_tokens": 200, "compact_min_messages": 5, "compact_keep_tokens": 0},
        scheduler={"lock_ttl_s": 1.0},
    )
    clock = ManualClock(datetime.fromisoformat(os.environ["CHILD_NOW"]))
    core = await build_core(settings, clock=clock, background=False)
    scope = os.environ["CHILD_SCOPE"]
    if action == "maintain":
        await core.pipeline.maintain(scope)
    elif action == "forget":
        await core.admin.forget_text(scope, os.environ["CHILD_TEXT"])
    else:
        raise SystemExit(f"unknown action {action}")
    await core.close()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
