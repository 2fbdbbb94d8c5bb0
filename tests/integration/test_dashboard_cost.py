"""The dashboard's cost page and /metrics budget counters over HTTP (real Redis, the fake
model): per-day fleet totals with a plot, top scopes of a day, members of a scope; text
escaped; budget refusals counted by limit for scrapers."""

from __future__ import annotations

from datetime import timedelta

from bots.dashboard import running_dashboard
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.browser.support import TOKEN
from tests.dashboard_session import client, parse_prometheus
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory

HOSTILE = '<script>alert("x")</script>'


def asked(scope: str, author: str, author_id: str) -> IncomingMessage:
    return IncomingMessage(
        scope=scope, text="what now?", author=author, author_id=author_id, direct=True
    )


async def test_the_cost_page_shows_days_scopes_and_members(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START - timedelta(days=2))
    core = await make_core(clock=clock, dashboard={"token": TOKEN})
    await converse(core, asked("discord:1:2", "Old", "9"))
    clock.set(START)
    await converse(core, asked("discord:1:2", HOSTILE, "7"))
    await converse(core, asked("slack:T1:C1", "Sam", "U1"))
    ledger = core.budget.ledger
    today, old = START.date().isoformat(), (START - timedelta(days=2)).date().isoformat()
    top = dict(await ledger.top_scopes(today))
    async with running_dashboard(core) as server, client() as http:
        async with http.get(f"{server.url}/cost", allow_redirects=False) as r:
            assert r.status == 303  # behind the login
        async with http.post(
            f"{server.url}/login", data={"token": TOKEN, "next": "/cost"}, allow_redirects=False
        ) as r:
            assert r.status == 303
        async with http.get(f"{server.url}/cost") as r:
            assert r.status == 200
            page = await r.text()
        async with http.get(f"{server.url}/cost?day={today}&scope=discord:1:2") as r:
            members = await r.text()
        async with http.get(f"{server.url}/cost?day=yesterday") as r:
            assert r.status == 400 and "day must be a date" in await r.text()
    assert page.count("<rect ") == 14  # two weeks of bars, the plot inline
    assert f"{today}: {sum(top.values()):,} tokens" in page
    assert f"{old}: " in page and f"{old}: 0 tokens" not in page
    assert "discord:1:2" in page and "slack:T1:C1" in page
    assert f"{top['slack:T1:C1']:,}" in page
    assert HOSTILE not in members and "&lt;script&gt;alert(" in members
    assert ">7<" in members and "Old" not in members  # that day's members only


async def test_metrics_count_budget_refusals_by_limit(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(dashboard={"token": TOKEN}, budget={"user_daily_tokens": 10})
    for _ in range(3):
        await converse(core, asked("discord:1:2", "Max", "2"))
    await core.metrics.flush()
    async with running_dashboard(core) as server, client() as http:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{server.url}/metrics", headers=bearer) as r:
            m = parse_prometheus(await r.text())
    assert m["memorybot_budget_refusals_total", (("limit", "member"),)] == 2
    assert m["memorybot_budget_refusals_total", (("limit", "scope"),)] == 0
    assert m["memorybot_replies_total", (("kind", "budget"),)] == 2
    assert m["memorybot_llm_calls_total", (("purpose", "reply"),)] == 1
