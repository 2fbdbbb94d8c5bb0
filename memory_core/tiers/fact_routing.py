"""Whose facts a summary call sees and where the facts it extracts go: the channel's own,
or a person's (their person scope) when that person spoke only where the whole guild or
workspace could hear."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory_core.models import Fact, LogEntry
from memory_core.scopes import Scope
from memory_core.tiers.facts import provenance
from memory_core.tiers.summarize import FactDraft


@dataclass
class KnownFacts:
    """Facts shown to a summary call, and where the facts it extracts go.

    A fact about a person is theirs only by platform user id, never by display name: a name
    that two speakers of the chunk share names nobody. It may follow them across the guild
    or workspace (their person scope) only if everything they said in the chunk was said
    where the whole guild could see it; otherwise it stays in the place it was learned."""

    channel: list[Fact]
    people: dict[str, list[Fact]]  # person scope -> their facts, for public speakers only
    speakers: dict[str, str]  # casefolded name -> user id, names one speaker alone uses
    public_speakers: dict[str, str]  # user id -> person scope, for speakers heard only in public
    read: bool = True  # False: the stored facts were not read (no model call needed them)

    def for_prompt(self, limit: int = 40) -> list[Fact]:
        """Newest first, the channel's ids as they are, people's as p<n> aliases."""
        aliased = [
            replace(fact, id=f"p{number}")
            for number, (_, fact) in enumerate(self._people_facts(), 1)
        ]
        channel = sorted(self.channel, key=lambda fact: fact.ts, reverse=True)
        return (channel[: limit // 2] + aliased)[:limit]

    def _people_facts(self) -> list[tuple[str, Fact]]:
        return [(scope, fact) for scope in sorted(self.people) for fact in self.people[scope]]

    def route(
        self, drafts: Sequence[FactDraft], chunk: Sequence[LogEntry]
    ) -> tuple[list[FactDraft], dict[str, list[FactDraft]]]:
        """Facts about a public speaker (preferences, profile) go to that person; the rest
        (decisions, open questions, notes, and anything said in a private place) stay with
        the channel. Each gets its subject's user id and its provenance (the messages a
        rule-made draft names already, else those :func:`provenance` finds). p<n> aliases
        map back to their fact."""
        aliases = {
            f"p{number}": (scope, fact)
            for number, (scope, fact) in enumerate(self._people_facts(), 1)
        }
        channel: list[FactDraft] = []
        personal: dict[str, list[FactDraft]] = {}
        for draft in drafts:
            if draft.id in aliases:
                scope, fact = aliases[draft.id]
                sourced = self._sourced(replace(draft, id=fact.id), fact.subject_id, chunk)
                personal.setdefault(scope, []).append(sourced)
                continue
            user_id = self.speakers.get(draft.subject.casefold(), "") if draft.subject else ""
            if draft.id.startswith("p"):
                draft = replace(draft, id="")  # an alias we did not offer
            sourced = self._sourced(draft, user_id, chunk)
            person = self.public_speakers.get(user_id) if user_id else None
            if person and draft.kind in ("preference", "profile") and not draft.id:
                personal.setdefault(person, []).append(sourced)
            else:
                channel.append(sourced)
        return channel, personal

    @staticmethod
    def _sourced(draft: FactDraft, user_id: str, chunk: Sequence[LogEntry]) -> FactDraft:
        sources = draft.message_ids or provenance(draft.text, user_id, chunk)
        return replace(draft, subject_id=user_id, message_ids=sources)


def speakers_of(scope: str, chunk: Sequence[LogEntry]) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> user id for unambiguous names, user id -> person scope for those whose every
    message in ``chunk`` was said in public) of the people speaking in ``chunk``."""
    ids_by_name: dict[str, set[str]] = {}
    private: set[str] = set()
    for entry in chunk:
        if entry.role != "user" or not entry.author_id:
            continue
        ids_by_name.setdefault(entry.author.casefold(), set()).add(entry.author_id)
        if not entry.public:
            private.add(entry.author_id)
    speakers = {name: next(iter(ids)) for name, ids in ids_by_name.items() if len(ids) == 1}
    place = Scope.of(scope)
    public_speakers = {
        user_id: person.key
        for ids in ids_by_name.values()
        for user_id in ids
        if user_id not in private and (person := place.person_scope(user_id))
    }
    return speakers, public_speakers


def usable_here(facts: Sequence[Fact], scope: str) -> list[Fact]:
    """Of the facts about the person asking, those that may be used in ``scope``: learned
    where the whole guild or workspace could see (or pinned by them), or learned in this
    very place."""
    return [fact for fact in facts if fact.shared or fact.origin == scope]
