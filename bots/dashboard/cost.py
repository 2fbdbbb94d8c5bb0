"""The cost page: model tokens spent, from the budget's counters in Redis (every process of
the fleet adds to them after each model call). Per day for the last two weeks (the fleet's
total, with bars), the scopes that spent most on a chosen day, and the members of one scope
on that day. Behind the login like every page; read-only.

Days are those of ``memory.timezone`` (a scope's own counters use its local day; for a
scope in another timezone the member view is of its local day of the same date).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from bots.dashboard.web import dash, render
from memory_core.errors import InputError
from memory_core.fleet.spending import MemberSpend, last_days
from memory_core.scopes import parse_scope

DAYS = 14
TOP_SCOPES = 50


@dataclass(frozen=True, slots=True)
class CostView:
    days: list[tuple[str, int]]  # (day, fleet tokens), oldest first
    day: str  # the chosen day
    top: list[tuple[str, int]]  # (scope, tokens) on that day, most first
    scope: str  # "" or the chosen scope
    members: list[MemberSpend]
    timezone: str


def register(app: FastAPI) -> None:
    app.add_api_route("/cost", cost_page, methods=["GET"])


def _chosen_day(value: str, days: list[str]) -> str:
    if not value:
        return days[-1]
    try:
        date.fromisoformat(value)
    except ValueError as exc:
        raise InputError(f"day must be a date such as {days[-1]} (got {value[:20]!r})") from exc
    return value


async def cost_view(request: Request) -> CostView:
    core = dash(request).core
    ledger = core.budget.ledger
    tz = core.settings.memory.timezone
    days = last_days(core.clock.now(), tz, DAYS)
    day = _chosen_day(request.query_params.get("day", ""), days)
    raw_scope = request.query_params.get("scope", "")
    scope = parse_scope(raw_scope) if raw_scope else ""
    return CostView(
        days=await ledger.fleet_days(days),
        day=day,
        top=await ledger.top_scopes(day, limit=TOP_SCOPES),
        scope=scope,
        members=await ledger.members(scope, day) if scope else [],
        timezone=tz,
    )


def chart(days: list[tuple[str, int]], chosen: str) -> dict[str, Any]:
    """Bars for an inline SVG (attributes, not inline styles: the CSP forbids those)."""
    width, height = 600, 100
    peak = max((n for _, n in days), default=0) or 1
    step = width / max(1, len(days))
    bars = [
        {
            "x": round(i * step + 2, 2),
            "w": round(max(step - 4, 1), 2),
            "h": round(height * n / peak, 2),
            "y": round(height - height * n / peak, 2),
            "day": day,
            "chosen": day == chosen,
            "label": f"{day}: {n:,} tokens",
        }
        for i, (day, n) in enumerate(days)
    ]
    return {"width": width, "height": height, "bars": bars, "peak": peak}


async def cost_page(request: Request) -> Response:
    view = await cost_view(request)
    return render(
        request, "cost.html", {"view": view, "chart": chart(view.days, view.day), "nav": "cost"}
    )
