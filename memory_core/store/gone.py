"""The erasure ledger: how what was forgotten is recognised without keeping it.

Every forget leaves tombstones in the ledger of the place's subtree (a channel and its
threads share one hash, under their hash tag), and every way data enters memory is checked
against them where it writes (:mod:`memory_core.store.ingest`, the learning and import
writes): a forgotten message, person, text or place never comes back, whoever writes it.

A tombstone keeps no text. Its field is a digest:

- ``m:<digest of a platform message id>``: that message (each posted part of an answer);
- ``u:<digest of a user id>`` -> when: what that person said before then;
- ``t:<length>:<digest of a normalised text>`` -> when: any message said before then that
  contains the text, compared as a reader sees it (:func:`memory_core.text.normalise.
  normalise`, as ``/memory forget <text>`` compares);
- ``all`` -> when (``all:<thread scope>`` for one thread): everything said there before then;
- ``v``: the ledger's version, moved by every tombstone, so that a writer that checked a
  message against the ledger at one version writes it only while the ledger still is at it
  (the scripts compare it in the same atomic step); ``tmax``: the newest text tombstone's
  time, so the hot path knows at once that a message is newer than every forgotten text.

Ids are not secret (anyone in the channel sees them); a digest is not meant to hide them,
only to hold nothing else. A short forgotten text could be guessed back from its digest by
someone who can read the store: they could read the rest of memory too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memory_core.text.normalise import normalise

_KEY = b"memorybot gone v1"  # a label (not a secret): these digests are memorybot's own

VERSION = "v"  # the ledger's version field
TEXTS_UNTIL = "tmax"  # the newest text tombstone's time (ms)


def _digest(value: str) -> str:
    return hashlib.blake2b(value.encode("utf-8", "replace"), digest_size=12, key=_KEY).hexdigest()


def gone_message(platform_id: str) -> str:
    """The field that says a message with this platform id was forgotten."""
    return f"m:{_digest(platform_id)}"


def gone_person(user_id: str) -> str:
    """The field that says this person was forgotten (its value: when)."""
    return f"u:{_digest(user_id)}"


def gone_text(text: str) -> str | None:
    """The field that says messages containing ``text`` were forgotten (its value: when);
    None when nothing of it is left to compare once normalised."""
    norm = normalise(text)
    return f"t:{len(norm)}:{_digest(norm)}" if norm else None


def gone_place(thread: str = "") -> str:
    """The field that says everything said in a channel (or one of its threads) before
    its value was forgotten."""
    return f"all:{thread}" if thread else "all"


@dataclass(frozen=True)
class Ledger:
    """A subtree's ledger as read at one version (with its server's tombstones of people),
    to check messages against before writing them at that version."""

    version: str = ""
    messages: frozenset[str] = frozenset()  # digests of forgotten platform ids
    people: Mapping[str, int] = field(default_factory=dict)  # person field -> forgotten at
    all_before_ms: int = 0  # everything said before was forgotten (0: never)
    threads_before_ms: Mapping[str, int] = field(default_factory=dict)
    # length of the normalised text -> {its digest: forgotten at}
    texts: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, fields: Mapping[str, str], server: Mapping[str, str] | None = None) -> Ledger:
        """The ledger from its hash (and its server's, whose people it adds)."""
        people: dict[str, int] = {}
        texts: dict[int, dict[str, int]] = {}
        for name, value in [*(server or {}).items(), *fields.items()]:
            if name.startswith("u:"):
                people[name] = max(people.get(name, 0), int(value))
        for name, value in fields.items():
            if name.startswith("t:"):
                _, length, digest = name.split(":", 2)
                texts.setdefault(int(length), {})[digest] = int(value)
        return cls(
            version=fields.get(VERSION, "0"),
            messages=frozenset(f for f in fields if f.startswith("m:")),
            people=people,
            all_before_ms=int(fields.get("all", 0)),
            threads_before_ms={
                f.removeprefix("all:"): int(v) for f, v in fields.items() if f.startswith("all:")
            },
            texts=texts,
        )

    def keeps(
        self,
        scope: str,
        platform_id: str,
        author_id: str,
        ts_ms: int,
        text: str = "",
        *,
        also_ids: Iterable[str] = (),
    ) -> bool:
        """Whether a message said at ``ts_ms`` may be written (not forgotten)."""
        if ts_ms < max(self.all_before_ms, self.threads_before_ms.get(scope, 0)):
            return False
        for pid in (platform_id, *also_ids):
            if pid and gone_message(pid) in self.messages:
                return False
        if author_id and ts_ms < self.people.get(gone_person(author_id), 0):
            return False
        return not self.forgotten_text(text, ts_ms)

    def forgotten_text(self, text: str, ts_ms: int) -> bool:
        """Whether ``text``, said at ``ts_ms``, contains a text forgotten after then (every
        stretch of it as long as a forgotten text, compared by digest)."""
        if not self.texts or not text:
            return False
        norm = normalise(text)
        for length, digests in self.texts.items():
            if length > len(norm) or not any(ts_ms < at for at in digests.values()):
                continue
            for start in range(len(norm) - length + 1):
                at = digests.get(_digest(norm[start : start + length]))
                if at is not None and ts_ms < at:
                    return True
        return False
