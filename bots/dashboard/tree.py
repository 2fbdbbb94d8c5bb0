"""The tree page: memory as the shape of the places it comes from. A server (a Discord
guild, a Slack workspace) holds channels and its members' Slack DMs; a channel holds
threads. Each node shows its counts (messages, facts, threads) and links to its scope page;
what a forget, a setting or a budget in a channel reaches is the channel and its threads.

Servers are found among the scopes index's ids (at most ``listing.SCAN_LIMIT`` of them,
said when there are more); a server's channels come from its record of its places, most
recently active first, a page at a time, with each channel's most recent threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from bots.dashboard.listing import SCAN_LIMIT
from bots.dashboard.web import dash, render
from memory_core.bootstrap import Core
from memory_core.calendar import from_ms
from memory_core.errors import InvalidScope
from memory_core.scopes import Scope, parse_server

CHANNELS_PAGE = 50
THREADS_SHOWN = 20


@dataclass(slots=True)
class Node:
    """A channel, DM or thread with its counts; a channel with its threads."""

    scope: str
    name: str
    kind: str
    last: datetime | None
    messages: int
    facts: int
    threads: int = 0
    children: list[Node] = field(default_factory=list)

    @property
    def more(self) -> int:
        """Threads not listed under it."""
        return max(0, self.threads - len(self.children))


@dataclass(frozen=True, slots=True)
class ServerRow:
    key: str  # discord:1, slack:T1
    platform: str
    name: str  # as a channel's name says it ("#general (My Server)" -> My Server), or ""
    places: int
    last: datetime | None


@dataclass(slots=True)
class TreeIndex:
    servers: list[ServerRow]
    others: int  # scopes of no server: Discord DMs, the console, replays
    note: str = ""


def register(app: FastAPI) -> None:
    app.add_api_route("/tree", tree_page, methods=["GET"])
    app.add_api_route("/tree/{server}", server_page, methods=["GET"])


def _server_name(place_name: str) -> str:
    """``#general (My Server)`` -> ``My Server`` (the name Discord places carry)."""
    if place_name.endswith(")") and " (" in place_name:
        return place_name.rsplit(" (", 1)[1][:-1]
    return ""


async def tree_index(core: Core) -> TreeIndex:
    pairs = await core.repo.reads.scopes(offset=0, limit=SCAN_LIMIT)
    total = await core.repo.reads.scope_count()
    servers: dict[str, None] = {}
    others = 0
    for scope, _ in pairs:
        key = Scope.of(scope).server_key
        if key is None:
            others += 1
        else:
            servers.setdefault(key, None)
    rows: list[ServerRow] = []
    for key in servers:
        places = await core.repo.reads.places_of(key)
        names = await core.repo.reads.names_of([p for p, _ in places[:5]])
        name = next((n for p, _ in places[:5] if (n := _server_name(names.get(p, "")))), "")
        platform, server_id = parse_server(key)
        rows.append(
            ServerRow(
                key=key,
                platform=platform,
                name=name or server_id,
                places=len(places),
                last=from_ms(places[0][1]) if places else None,
            )
        )
    rows.sort(key=lambda r: (r.last is None, -(r.last.timestamp() if r.last else 0), r.key))
    note = (
        f"Servers of the {len(pairs):,} most recently active scopes of {total:,}."
        if (total > len(pairs))
        else ""
    )
    return TreeIndex(servers=rows, others=others, note=note)


async def server_tree(core: Core, server: str, *, page: int) -> tuple[list[Node], int]:
    """A page of the server's channels, most recently active first, each with its most
    recent threads; and how many channels there are."""
    places = await core.repo.reads.places_of(server)
    shown = places[(page - 1) * CHANNELS_PAGE : page * CHANNELS_PAGE]
    threads = {root: (await core.repo.reads.threads_of(root))[:THREADS_SHOWN] for root, _ in shown}
    all_scopes = [root for root, _ in shown] + [t for ts in threads.values() for t in ts]
    counts = await core.repo.reads.counts_of(all_scopes)

    def node(scope: str, when: int | None) -> Node:
        c = counts[scope]
        place = Scope.of(scope)
        return Node(
            scope=scope,
            name=c.name or (place.thread if place.is_thread else place.channel),
            kind=place.kind,
            last=from_ms(when) if when else None,
            messages=c.messages,
            facts=c.facts,
            threads=c.threads,
        )

    nodes = []
    for root, ms in shown:
        channel = node(root, ms)
        channel.children = [node(t, None) for t in threads[root]]
        nodes.append(channel)
    return nodes, len(places)


async def tree_page(request: Request) -> Response:
    index = await tree_index(dash(request).core)
    return render(request, "tree.html", {"index": index, "nav": "tree"})


async def server_page(request: Request, server: str) -> Response:
    try:
        parse_server(server)
    except InvalidScope as exc:
        raise HTTPException(404, f"There is no server {server[:80]!r}.") from exc
    page_arg = request.query_params.get("page", "1")
    page = max(1, min(int(page_arg) if page_arg.isdigit() else 1, 1_000_000))
    nodes, total = await server_tree(dash(request).core, server, page=page)
    pages = max(1, -(-total // CHANNELS_PAGE))
    return render(
        request,
        "server.html",
        {
            "server": server,
            "nodes": nodes,
            "total": total,
            "page": page,
            "pages": pages,
            "nav": "tree",
        },
    )
