"""What a scope's recall index holds: one document per message or day record
(:class:`Doc`), the per-scope index itself (its BM25 postings, speakers, times and vector
rows, :class:`ScopeIndex`), and what a search returns (:class:`Hit`). Plain data and the
rules that say what a document is (a log entry's, a day record's); keeping an index in step
with Redis is :mod:`memory_core.recall.sync`'s.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from memory_core.calendar import day_start, to_ms
from memory_core.models import DaySummary, LogEntry
from memory_core.recall.textsearch import BM25, terms

DAY_RECORD, NO_SPEAKER = -2, -1  # speaker codes that are not a person
NEIGHBOUR_GAP_MS = 30 * 60 * 1000  # turns further apart than this are not one exchange


class Doc(NamedTuple):
    """One indexed message or day record, a tuple of strings and numbers. (The collector
    keeps tracking a tuple subclass, unlike a plain tuple: a big build freezes its
    documents out of the collector's way, see ``sync.collector_paused``.)"""

    id: str  # the stream id ("" for a day record)
    ms: int
    author: str
    text: str
    kind: str  # "message" | "day" | "retired" (a day record trimmed off the list)
    n_terms: int
    tokens: int = 0  # of the text (the message's stored count; for a day record, estimated)
    day: str = ""  # a day record's day (its identity: one record per day and scope)


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled group: one matching document with the neighbours that give it context."""

    docs: tuple[Doc, ...]  # chronological
    score: float
    scope: str = ""  # where it was said, when not in the scope searched for (a thread's channel)
    # How well the matching document itself answers, on scales that do not depend on the
    # rest of the scope (``score`` is relative: the best hit of any search scores high).
    # ``words``: the share of the query's own words it has (no expansion, no date boost),
    # each word weighed by its idf among the other messages; ``meaning``: its cosine with
    # the query (0 without vectors).
    words: float = 0.0
    meaning: float = 0.0
    at: int = 0  # which of ``docs`` matched (the others are its context)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(doc.id for doc in self.docs if doc.id)


@dataclass
class ScopeIndex:
    epoch: int = -1
    first_id: str = ""
    last_id: str = ""
    # Built (in part) while a forget was written down but not yet carried out: it may hold
    # what the forget deletes, so it is built again once the forget is done.
    provisional: bool = False
    day_rows: dict[str, int] = field(default_factory=dict)  # day -> its record's document
    # A record's document -> how many messages its day had (0: not known), to tell a day
    # whose messages are all still in the log from one retention has cut into.
    day_messages: dict[int, int] = field(default_factory=dict)
    retired: list[int] = field(default_factory=list)  # documents of records no longer listed
    newest_record: str = ""  # the newest day record as stored, to notice a new one cheaply
    docs: list[Doc] = field(default_factory=list)
    messages: int = 0  # of the docs, log entries (to tell from XLEN whether any left the log)
    bm25: BM25 = field(default_factory=BM25)
    authors: dict[str, str] = field(default_factory=dict)  # lowercase name -> name
    # Per document, for vector maths in ranking: time, and who said it (or DAY_RECORD).
    ms: array[int] = field(default_factory=lambda: array("q"))
    # Embeddings: one row per document, unit length; zero until known.
    vectors: np.ndarray | None = None  # float16
    sketch: np.ndarray | None = None  # float32, SKETCH_DIMS per row (see put_row)
    vectors_done: int = 0  # documents before this one have been looked up in Redis
    synced_vectors: bool = False  # the last sync brought the vectors too (a search's)
    unembedded: list[int] = field(default_factory=list)  # message rows with no vector anywhere
    loaded_backlog: bool = False  # some had none when the stored vectors were first loaded
    backlog_since: float | None = None  # (monotonic) since when some have had none
    speaker: array[int] = field(default_factory=lambda: array("i"))
    speaker_ids: dict[str, int] = field(default_factory=dict)

    def add(self, doc: Doc, doc_terms: list[str]) -> None:
        self.docs.append(doc)
        if doc.kind == "message":
            self.messages += 1
        self.bm25.add(doc_terms)
        self.ms.append(doc.ms)
        if doc.kind != "message":
            self.speaker.append(DAY_RECORD)
        elif doc.author:
            self.authors.setdefault(doc.author.lower(), doc.author)
            self.speaker.append(self.speaker_ids.setdefault(doc.author, len(self.speaker_ids)))
        else:
            self.speaker.append(NO_SPEAKER)


def add_entries(index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]) -> None:
    """Log entries (stream id, fields), in order, as message documents at the index's end."""
    for entry_id, fields in raw:
        entry = LogEntry.from_stream(entry_id, fields)
        doc_terms = terms(entry.text)
        index.add(
            Doc(
                id=entry.id,
                ms=entry.ms,
                author=entry.author,
                text=entry.text,
                kind="message",
                n_terms=len(doc_terms),
                tokens=entry.tokens,
            ),
            doc_terms,
        )
        index.last_id = entry.id
        if not index.first_id:
            index.first_id = entry.id


def index_entries(entries: Sequence[LogEntry]) -> ScopeIndex:
    """A throwaway index of ``entries`` (in order): a few messages ranked as a scope is."""
    index = ScopeIndex()
    for entry in entries:
        doc_terms = terms(entry.text)
        doc = Doc(entry.id, entry.ms, entry.author, entry.text, "message", len(doc_terms))
        index.add(doc._replace(tokens=entry.tokens), doc_terms)
    return index


def add_day_record(index: ScopeIndex, day: DaySummary) -> None:
    """A day record as a document at the index's end, known by its day."""
    text = day_text(day)
    doc_terms = terms(text)
    index.add(
        Doc(
            id="",
            ms=to_ms(day_start(day.day, "UTC")) + 12 * 3_600_000,  # midday: the right date anywhere
            author="",
            text=text,
            kind="day",
            n_terms=len(doc_terms),
            tokens=len(text) // 3 + 1,  # an over-estimate: costs are re-measured later
            day=day.day,
        ),
        doc_terms,
    )
    index.day_rows[day.day] = len(index.docs) - 1
    index.day_messages[len(index.docs) - 1] = day.messages


def retire_day_record(index: ScopeIndex, row: int) -> None:
    """Take a day record out of recall without rebuilding the index: its document stays in
    place (rows are positions) but empty, and ranking never scores it."""
    index.docs[row] = index.docs[row]._replace(kind="retired", text="", n_terms=0)
    index.retired.append(row)


def day_text(day: DaySummary) -> str:
    parts = (day.topic, *day.decisions, *day.follow_ups, day.summary)
    return " ".join(part for part in parts if part)


def same_exchange(earlier: Doc, later: Doc) -> bool:
    return (
        earlier.kind == later.kind == "message" and 0 <= later.ms - earlier.ms <= NEIGHBOUR_GAP_MS
    )
