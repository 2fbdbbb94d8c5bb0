"""The erasure ledger in Redis (:mod:`memory_core.store.gone` says what it holds): every
forget writes its tombstones here before it removes anything, and the writers read it to
check what they are about to write (the scripts then compare its version in the step that
writes).

A subtree's ledger is one hash under the channel's hash tag, so a script storing a message in
the channel or any of its threads reads it in the same atomic step, on a Redis Cluster too.
A person forgotten everywhere in a server is written into the ledger of each of the
server's places, and into the server's own (another hash tag): a place the server gains later
(a channel learned for the first time) takes the server's people into its own ledger before
anything is written there (:meth:`ErasureLedger.adopt_server`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memory_core.scopes import Scope
from memory_core.store.gone import (
    TEXTS_UNTIL,
    VERSION,
    Ledger,
    gone_message,
    gone_person,
    gone_place,
    gone_text,
)
from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script


@translates_redis_errors
class ErasureLedger:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    async def read(self, place: str) -> Ledger:
        """The ledger of ``place``'s subtree, with its server's people."""
        root = Scope.of(place).root
        look = self.client.pipeline(transaction=False)
        look.hgetall(self.keys.scope(root.key).gone)
        if root.server_key is not None:
            look.hgetall(self.keys.server(root.server_key).gone)
        own, *server = await look.execute()
        return Ledger.of(own, server[0] if server else None)

    async def version(self, place: str) -> str:
        found = await self.client.hget(self.keys.scope(Scope.of(place).root.key).gone, VERSION)
        return str(found or "0")

    async def _later(self, key: str, fields: dict[str, int], *, starters: str = "") -> None:
        """Tombstones into the ledger ``key``; a place's also drops its subtree's thread
        starters (``starters``): what was read from the platform is read, and checked,
        again."""
        args: list[str | int] = [x for name, at in fields.items() for x in (name, at)]
        await run_script(self.client, "ledger_later", [key, starters] if starters else [key], args)

    async def _later_in(self, place: str, fields: dict[str, int]) -> None:
        k = self.keys.scope(place)
        await self._later(k.gone, fields, starters=k.starters)

    async def forget_messages(self, place: str, platform_ids: Iterable[str], at_ms: int) -> None:
        """These messages (every posted part of each) are forgotten."""
        fields = {gone_message(p): at_ms for p in platform_ids if p}
        if fields:
            await self._later_in(place, fields)

    async def forget_text(self, place: str, text: str, at_ms: int) -> None:
        """Every message said in ``place``'s subtree before ``at_ms`` that contains
        ``text`` is forgotten."""
        field = gone_text(text)
        if field is None:
            return
        await self._later_in(place, {field: at_ms, TEXTS_UNTIL: at_ms})

    async def forget_person(self, places: Sequence[str], user_id: str, at_ms: int) -> None:
        """What ``user_id`` said in these places' subtrees before ``at_ms`` is forgotten."""
        if not user_id:
            return
        for root in sorted({Scope.of(p).root.key for p in places}):
            await self._later_in(root, {gone_person(user_id): at_ms})

    async def forget_person_in_server(
        self, server_key: str, user_id: str, at_ms: int, *, also: Sequence[str] = ()
    ) -> None:
        """``forget me everywhere``: the person in the server's own ledger first, then in
        every place it lists and ``also`` (their DM), so that a place the server gains
        meanwhile takes them in when it adopts the server's ledger."""
        await self._later(self.keys.server(server_key).gone, {gone_person(user_id): at_ms})
        places = self.keys.server(server_key).places
        roots = [str(r) for r in await self.client.zrange(places, 0, -1)]
        await self.forget_person([*roots, *also], user_id, at_ms)

    async def forget_place(self, place: str, at_ms: int) -> None:
        """Everything said in ``place`` (a channel: and its threads) before ``at_ms``."""
        scope = Scope.of(place)
        field = gone_place(scope.key if scope.is_thread else "")
        await self._later_in(place, {field: at_ms})

    async def adopt_server(self, place: str) -> None:
        """Before anything is written in ``place`` from the past (a learn, an import): it is
        listed among its server's places, and the people forgotten everywhere in the server
        are in its own ledger (listed first: a forget everywhere either finds it listed, or
        wrote the server's ledger before this reads it)."""
        root = Scope.of(place).root
        if root.server_key is None or root.person:
            return
        server = self.keys.server(root.server_key)
        await self.client.zadd(server.places, {root.key: 0}, nx=True)
        people = {
            str(name): int(at)
            for name, at in (await self.client.hgetall(server.gone)).items()
            if str(name).startswith("u:")
        }
        if people:
            await self._later_in(root.key, people)
