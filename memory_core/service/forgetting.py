"""Forgetting: the admin operations that take memory away (a text, a fact, a person, a
place or a whole server), one small class per job; :class:`~memory_core.service.admin.MemoryAdmin`
composes them. Each builds a :class:`~memory_core.service.forget_request.ForgetRequest` and hands
it to :class:`~memory_core.service.forget_requests.ForgetRequests`, which carries it out.

Forget means gone: after ``forget_text`` the text is in none of the scope's keys (raw log,
tiers, days, weeks, facts), and the scope's epoch moves so a summary being written from
the old text at that moment is discarded instead of bringing it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError
from memory_core.fleet.spending import SPEND_TTL_S
from memory_core.scopes import Scope, parse_scope
from memory_core.service.forget_request import ForgetReport, ForgetRequest
from memory_core.service.forget_requests import ForgetRequests, threads_first

if TYPE_CHECKING:
    from memory_core.service.budget import Budget

SPEND_DAYS = SPEND_TTL_S // 86400  # how long spend counters are kept, in days


class TextForgetting:
    """Forgetting by what was said: a text, wherever it was repeated, and one fact."""

    def __init__(self, requests: ForgetRequests) -> None:
        self.requests = requests
        self.repo = requests.repo

    async def forget_text(self, scope: str, text: str) -> ForgetReport:
        """Forget the messages containing ``text`` (and the facts and summary sentences
        that repeat it) in the scope and, in a channel, in its threads."""
        scope = parse_scope(scope)
        needle = text.strip()
        if len(needle) < 2:
            raise InputError("give the text to forget (at least 2 characters)")
        places = await self.requests.subtree(scope)
        # Older messages that contain it, never in memory yet (a learn, an import), too.
        await self.requests.ledger.forget_text(scope, needle, self.requests.now_ms())
        return await self.requests.forget_in(places, ForgetRequest(kind="text", text=needle))

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Forget one fact by its id, in the scope or, in a channel, in one of its threads
        (a channel's and its threads' facts never share an id)."""
        scope = parse_scope(scope)
        fact_id = fact_id.strip()
        if not fact_id:
            raise InputError("give the id of the fact to forget (see /memory show facts)")
        deleted = False
        for place in reversed(await self.requests.subtree(scope)):  # the place itself first
            if await self.repo.writes.delete_facts(place, [fact_id]):
                # the last answer may have used it (/memory why also checks what is left)
                await self.repo.writes.drop_answer_record(place)
                deleted = True
                break
        if deleted:
            await self.requests.persist(erase=True)
        return deleted


class PersonForgetting:
    """Forgetting a person: here, or everywhere in a server where they spoke."""

    def __init__(
        self, requests: ForgetRequests, *, clock: Clock, budget: Budget | None = None
    ) -> None:
        self.requests = requests
        self.repo = requests.repo
        self.clock = clock  # when they were forgotten (learning leaves out what came before)
        self.budget = budget  # their share of the spend is about them too

    async def forget_user(self, scope: str, *, user_id: str, name: str = "") -> ForgetReport:
        """Forget one person here (in a channel: and in its threads where they spoke):
        their own messages (by user id; by exact name only where the place has no ids), the
        bot's answers to them, the facts about them or made of their messages, the summary
        sentences that repeat what they said, and what is known about them across the
        guild. Nobody else's memory goes: a name inside someone else's text is not them."""
        scope = parse_scope(scope)
        if not user_id and not name.strip():
            raise InputError("forget me needs a user id or a name")
        places = await self.requests.subtree(scope)
        if user_id:  # where they spoke, by the tree (the place asked in, whatever it says)
            spoken = await self.repo.reads.spoken_in([Scope.of(scope).root.key], user_id)
            reached = {s for found in spoken.values() for s in found} | {scope}
            places = [p for p in places if p in reached]
        return await self._forget_person(places, user_id=user_id, name=name)

    async def forget_user_everywhere(
        self, scope: str, *, user_id: str, name: str = ""
    ) -> ForgetReport:
        """``forget me everywhere``: the person in every place of the scope's server or
        workspace where they spoke (channels, threads, DMs), their DM with the bot, and
        what is known about them across it; as :meth:`forget_user` in each place. Each
        place is listed in the report. Without a server (the console, a Discord DM) it is
        the place itself."""
        scope = parse_scope(scope)
        if not user_id:
            return await self.forget_user(scope, user_id=user_id, name=name)
        now_ms = calendar.to_ms(self.clock.now())
        place = Scope.of(scope)
        dm = place.dm_scope(user_id)
        if dm is not None:  # their DM with the bot is theirs: all of it, whatever comes in
            await self.requests.ledger.forget_place(dm.key, now_ms)
        if place.server_key is not None:  # every place of the server, spoken in or not yet
            await self.requests.ledger.forget_person_in_server(
                place.server_key, user_id, now_ms, also=[dm.key] if dm else []
            )
        places = await self.places_of_member(scope, user_id)
        for dm_place in places:  # (a Slack DM with the bot is its own D... place)
            if Scope.of(dm_place).is_dm and (dm is None or dm_place != dm.key):
                await self.requests.ledger.forget_place(dm_place, now_ms)
        return await self._forget_person(
            sorted({scope, *places}, key=threads_first), user_id=user_id, name=name
        )

    async def places_of_member(self, scope: str, user_id: str) -> list[str]:
        """Every place of the scope's server or workspace where ``user_id`` has memory
        (spoke, or pinned a note about themselves), and their DM with the bot: threads
        before their channel."""
        place = Scope.of(scope)
        places: set[str] = set()
        if place.server_key is not None:
            roots = [root for root, _ in await self.repo.reads.places_of(place.server_key)]
            for found in (await self.repo.reads.spoken_in(roots, user_id)).values():
                places.update(found)
        dm = place.dm_scope(user_id)
        if dm is not None and await self.repo.reads.scope_exists(dm.key):
            places.add(dm.key)
        return sorted(places, key=threads_first)

    async def _forget_person(
        self, places: Sequence[str], *, user_id: str, name: str
    ) -> ForgetReport:
        # A name stands for a person only where lines carry no ids of their own (the
        # console, a replay or import of lines without user_id): on Discord or Slack anyone
        # could take a display name.
        named = not user_id or all(Scope.of(p).server_key is None for p in places)
        request = ForgetRequest(kind="user", user_id=user_id, name=name.strip() if named else "")
        # No writer (a learn, an import, a message held while the store was away) brings
        # back what they said before now: written before anything is removed.
        await self.requests.ledger.forget_person(places, user_id, self.requests.now_ms())
        report = await self.requests.forget_in(places, request)
        for place in places:
            if user_id:
                await self.repo.writes.forget_speaker(place, user_id)
            if self.budget is not None:  # their share of the spend is about them too
                await self.budget.ledger.forget_member(place, user_id)
        return report


class PlaceForgetting:
    """Forgetting a place: everything learned in a scope (with its threads), or in every
    place of a server the bot was removed from."""

    def __init__(
        self, requests: ForgetRequests, *, clock: Clock, budget: Budget | None = None
    ) -> None:
        self.requests = requests
        self.repo = requests.repo
        self.clock = clock
        self.budget = budget  # a forgotten channel keeps its budget limits

    async def forget_all(self, scope: str, *, keep_settings: bool = True) -> int:
        """Delete everything learned in the scope and, in a channel, in its threads: their
        keys (raw log, tiers, days, weeks, day records, facts, vectors, markers) and the
        facts about people that were learned there. Each place's epoch survives and moves
        on, so a summary being written from the forgotten memory right now is refused; its
        fact counter survives, so no fact id comes back. Its budget limits are set again
        unless ``keep_settings`` is False (the place itself is gone). Returns how many keys
        went."""
        # Nothing said there before now comes back (a learn, an import): written first.
        await self.requests.ledger.forget_place(parse_scope(scope), self.requests.now_ms())
        deleted = await self._forget_all(scope, keep_settings=keep_settings)
        await self.requests.persist(erase=True)
        return deleted

    async def _forget_all(self, scope: str, *, keep_settings: bool) -> int:
        places = await self.requests.subtree(parse_scope(scope))
        kept = {place: await self._budget_before_forget(place) for place in places}
        if not keep_settings:
            kept = {}
        request = ForgetRequest(kind="all").to_json()
        await self.repo.writes.begin_forgets([(place, request) for place in places])
        deleted = 0
        for place in places:  # threads first: the channel keeps the list of them till last
            deleted += await self.requests.forget_everything(place)
            if kept.get(place):
                await self.repo.writes.set_fields(place, kept[place])
        return deleted

    async def forget_server(self, server_key: str) -> int:
        """The bot was removed from a server (a Discord guild kicked it, a Slack workspace
        uninstalled it): everything learned there goes, every channel with its threads, the
        Slack DMs, what is known about its people, and the server's own record of its
        places. Returns how many places were forgotten. (A Discord DM belongs to no guild and
        stays: the person still talks to the bot there.)"""
        roots = [root for root, _ in await self.repo.reads.places_of(server_key)]
        people: set[str] = set()
        for root in roots:
            people.update(await self.repo.reads.people_of(root))
            for thread in await self.repo.reads.threads_of(root):
                people.update(await self.repo.reads.people_of(thread))
        for person in sorted(people):  # first: a person scope has no pending-forget sweep
            await self.repo.writes.forget_scope(person)
        forgotten: list[str] = []
        for root in roots:
            forgotten += await self.requests.subtree(root)
            await self._forget_all(root, keep_settings=False)
        # Nothing of the server is left: not the counters a forget keeps (an epoch, a fact
        # counter), not its token spend (member ids among it), not its record of places.
        today = self.clock.now().date()
        days = [(today - timedelta(days=n)).isoformat() for n in range(-1, SPEND_DAYS + 2)]
        await self.repo.writes.purge(
            [*forgotten, *sorted(people)], server_key=server_key, days=days
        )
        await self.requests.persist(erase=True)  # (one rewrite of the store's files for them all)
        return len(roots)

    async def _budget_before_forget(self, scope: str) -> dict[str, str | int]:
        """Forgetting a channel's memory must not reset its budget: the spend counters are
        not memory keys (they stay), the members' display names in them go, and the
        channel's own limits are returned to be written back after the forget."""
        if self.budget is None:
            return {}
        await self.budget.ledger.forget_names(scope)
        own = await self.budget.ledger.overrides(scope)
        kept = {"daily_tokens": own.daily, "user_daily_tokens": own.user_daily}
        return {k: v for k, v in kept.items() if v}
