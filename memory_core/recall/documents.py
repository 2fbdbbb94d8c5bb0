"""What a scope's recall index holds: one document per message or day record
(:class:`Doc`, stored by column in a :class:`DocTable`), the per-scope index itself (its BM25
postings, speakers, times and vector rows, :class:`ScopeIndex`), and what a search returns
(:class:`Hit`). Plain data and the rules that say what a document is (a log entry's, a day
record's); keeping an index in step with Redis is :mod:`memory_core.recall.sync`'s.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, overload

import numpy as np

from memory_core.calendar import day_start, to_ms
from memory_core.models import DaySummary, LogEntry
from memory_core.recall.textsearch import BM25, terms

DAY_RECORD, NO_SPEAKER = -2, -1  # speaker codes that are not a person
NEIGHBOUR_GAP_MS = 30 * 60 * 1000  # turns further apart than this are not one exchange


class Doc(NamedTuple):
    """One indexed message or day record, as ranking and prompts read it. An index keeps
    none of these: its :class:`DocTable` makes one when a document is read."""

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


_KINDS = ("message", "day", "retired")
_KIND_CODES = {kind: code for code, kind in enumerate(_KINDS)}
_MESSAGE, _RETIRED = _KIND_CODES["message"], _KIND_CODES["retired"]
_NO_SEQUENCE = -1  # an id that is no stream id ("<ms>-<seq>"): kept as a string


def _int_size(value: int) -> int:
    return sys.getsizeof(value) if value > 256 else 0  # (small ints are shared)


class MessageRows:
    """The rows of a table's messages, found by id with a binary search over their stream
    ids as numbers (a dict of a million id strings cost more than the index it served)."""

    def __init__(self, table: DocTable) -> None:
        kinds = np.frombuffer(table._kind, dtype=np.int8)
        seqs = np.frombuffer(table._id_seq, dtype=np.int32)
        messages = kinds == _KIND_CODES["message"]
        self.rows = np.flatnonzero(messages)
        numbered = np.flatnonzero(messages & (seqs != _NO_SEQUENCE))
        keys = _id_keys(np.frombuffer(table._id_ms, dtype=np.int64)[numbered], seqs[numbered])
        order = np.argsort(keys, kind="stable")
        self._keys, self._rows = keys[order], numbered[order]
        message = _KIND_CODES["message"]
        self._odd = {i: row for row, i in table._odd_ids.items() if table._kind[row] == message}
        self._table = table

    def get(self, entry_id: str) -> int | None:
        row = int(self.find([entry_id])[0])
        return row if row >= 0 else None

    def find(self, entry_ids: Sequence[str]) -> np.ndarray:
        """The rows of ``entry_ids`` (-1: no message of the table), in one binary search."""
        found = np.full(len(entry_ids), -1, dtype=np.int64)
        ms = np.zeros(len(entry_ids), dtype=np.int64)
        seq = np.zeros(len(entry_ids), dtype=np.int64)
        numbered = np.zeros(len(entry_ids), dtype=bool)
        for n, entry_id in enumerate(entry_ids):
            odd = self._odd.get(entry_id)
            if odd is not None:
                found[n] = odd
                continue
            ms_part, _, seq_part = entry_id.partition("-")
            if ms_part.isdigit() and seq_part.isdigit():
                ms[n], seq[n], numbered[n] = int(ms_part), min(int(seq_part), 2**40), True
        keys = _id_keys(ms, seq)
        at = np.minimum(np.searchsorted(self._keys, keys), max(len(self._keys) - 1, 0))
        if not len(self._keys):
            return found
        hit = numbered & (self._keys[at] == keys)
        found[hit] = self._rows[at[hit]]
        # A shared key (a sequence past 4095) is told apart by the id itself.
        for n in np.flatnonzero(hit & (seq >= 4095)).tolist():
            found[n] = self._by_id(entry_ids[n], int(at[n]), int(keys[n]))
        return found

    def _by_id(self, entry_id: str, at: int, key: int) -> int:
        while at < len(self._keys) and self._keys[at] == key:
            if self._table.id(int(self._rows[at])) == entry_id:
                return int(self._rows[at])
            at += 1
        return -1


def _id_keys(ms: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """A stream id as one sortable number (a sequence past 4095 shares its key with others,
    told apart by the id itself)."""
    keys: np.ndarray = ms.astype(np.int64) * 4096 + np.minimum(seq, 4095)
    return keys


class DocTable(Sequence[Doc]):
    """A scope's documents by column: numbers in typed arrays, every text in one UTF-8
    blob with its end offsets, an id as its stream id's two numbers. A per-document tuple of
    strings cost ~600 bytes a message beside the ~150 of its text; this costs the text and
    ~40 bytes. ``table[i]`` makes the :class:`Doc` (a few µs: ranking reads a few hundred)."""

    def __init__(self) -> None:
        self.ms: array[int] = array("q")  # ranking reads the times as one array
        self._id_ms: array[int] = array("q")
        self._id_seq: array[int] = array("i")
        self._odd_ids: dict[int, str] = {}  # row -> an id that is no stream id
        self._author: array[int] = array("i")  # into _names; -1: none
        self._names: list[str] = []
        self._name_codes: dict[str, int] = {}
        self._kind: array[int] = array("b")
        self._n_terms: array[int] = array("i")
        self._tokens: array[int] = array("i")
        self._text = bytearray()
        self._text_ends: array[int] = array("q")
        self._days: dict[int, str] = {}  # row -> a day record's day

    def __len__(self) -> int:
        return len(self.ms)

    @overload
    def __getitem__(self, row: int) -> Doc: ...
    @overload
    def __getitem__(self, row: slice) -> list[Doc]: ...
    def __getitem__(self, row: int | slice) -> Doc | list[Doc]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        code, author, seq = self._kind[row], self._author[row], self._id_seq[row]
        if code == _RETIRED:
            text, n_terms = "", 0
        else:
            start = self._text_ends[row - 1] if row else 0
            text = self._text[start : self._text_ends[row]].decode("utf-8", "surrogatepass")
            n_terms = self._n_terms[row]
        # (Ranking reads a few hundred per search: the tuple made directly, positionally.)
        return tuple.__new__(
            Doc,
            (
                f"{self._id_ms[row]}-{seq}" if seq != _NO_SEQUENCE else self._odd_ids.get(row, ""),
                self.ms[row],
                self._names[author] if author >= 0 else "",
                text,
                _KINDS[code],
                n_terms,
                self._tokens[row],
                self._days.get(row, ""),
            ),
        )

    def __iter__(self) -> Iterator[Doc]:
        return (self[row] for row in range(len(self)))

    def id(self, row: int) -> str:
        seq = self._id_seq[row]
        if seq == _NO_SEQUENCE:
            return self._odd_ids.get(row, "")
        return f"{self._id_ms[row]}-{seq}"

    def text(self, row: int) -> str:
        if self._kind[row] == _RETIRED:
            return ""
        start = self._text_ends[row - 1] if row else 0
        return self._text[start : self._text_ends[row]].decode("utf-8", "surrogatepass")

    def is_message(self, row: int) -> bool:
        return self._kind[row] == _MESSAGE

    def message_rows(self) -> MessageRows:
        """Every message's row, found by its id."""
        return MessageRows(self)

    def append(self, doc: Doc) -> None:
        ms_part, dash, seq_part = doc.id.partition("-")
        if dash and ms_part.isdigit() and seq_part.isdigit() and int(seq_part) < 2**31:
            self._id_ms.append(int(ms_part))
            self._id_seq.append(int(seq_part))
        else:
            self._id_ms.append(0)
            self._id_seq.append(_NO_SEQUENCE)
            if doc.id:
                self._odd_ids[len(self.ms)] = doc.id
        if doc.day:
            self._days[len(self.ms)] = doc.day
        self.ms.append(doc.ms)
        if doc.author:
            code = self._name_codes.get(doc.author)
            if code is None:
                code = self._name_codes[doc.author] = len(self._names)
                self._names.append(doc.author)
            self._author.append(code)
        else:
            self._author.append(-1)
        self._kind.append(_KIND_CODES[doc.kind])
        self._n_terms.append(doc.n_terms)
        self._tokens.append(doc.tokens)
        self._text += doc.text.encode("utf-8", "surrogatepass")
        self._text_ends.append(len(self._text))

    def retire(self, row: int) -> None:
        """A document no longer recalled: its text reads empty (its bytes stay in the blob
        until the index is built again)."""
        self._kind[row] = _KIND_CODES["retired"]

    def nbytes(self) -> int:
        """The bytes it holds (arrays and blob as allocated, the few Python strings kept)."""
        arrays = (
            self.ms,
            self._id_ms,
            self._id_seq,
            self._author,
            self._kind,
            self._n_terms,
            self._tokens,
            self._text_ends,
        )
        total = sum(sys.getsizeof(column) for column in arrays) + sys.getsizeof(self._text)
        for strings in (self._odd_ids, self._days):
            total += sys.getsizeof(strings) + sum(
                sys.getsizeof(value) + _int_size(row) for row, value in strings.items()
            )
        total += sys.getsizeof(self._names) + sys.getsizeof(self._name_codes)
        return total + 2 * sum(sys.getsizeof(name) for name in self._names)


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
    docs: DocTable = field(default_factory=DocTable)
    messages: int = 0  # of the docs, log entries (to tell from XLEN whether any left the log)
    # Log entries before the first one indexed: an index too big for the cache holds only
    # the scope's newest messages (its older days are recalled by their day records).
    skipped: int = 0
    bm25: BM25 = field(default_factory=BM25)
    authors: dict[str, str] = field(default_factory=dict)  # lowercase name -> name
    # Embeddings: one row per document, unit length; zero until known. Stored as int8 with
    # a scale per row (the cosines move by ~0.001: nothing a ranking notices), at a third
    # of float16's bytes with a sketch.
    vectors: np.ndarray | None = None  # int8
    vector_scales: np.ndarray | None = None  # float32, one per row
    sketch: np.ndarray | None = None  # int8, SKETCH_DIMS per row (see put_rows)
    sketch_scales: np.ndarray | None = None  # float32, one per row
    vectors_done: int = 0  # documents before this one have been looked up in Redis
    synced_vectors: bool = False  # the last sync brought the vectors too (a search's)
    unembedded: list[int] = field(default_factory=list)  # message rows with no vector anywhere
    loaded_backlog: bool = False  # some had none when the stored vectors were first loaded
    backlog_since: float | None = None  # (monotonic) since when some have had none
    # Per document, for vector maths in ranking: who said it (or DAY_RECORD).
    speaker: array[int] = field(default_factory=lambda: array("i"))
    speaker_ids: dict[str, int] = field(default_factory=dict)

    @property
    def ms(self) -> array[int]:
        """Every document's time (ms), for vector maths in ranking."""
        return self.docs.ms

    def add(self, doc: Doc, doc_terms: list[str]) -> None:
        self.docs.append(doc)
        if doc.kind == "message":
            self.messages += 1
        self.bm25.add(doc_terms)
        if doc.kind != "message":
            self.speaker.append(DAY_RECORD)
        elif doc.author:
            self.authors.setdefault(doc.author.lower(), doc.author)
            self.speaker.append(self.speaker_ids.setdefault(doc.author, len(self.speaker_ids)))
        else:
            self.speaker.append(NO_SPEAKER)

    def release(self) -> None:
        """Let go of the documents, postings and vectors of an index that is being replaced
        (a rebuild): the old and the new are not both held while the new one is built."""
        self.docs, self.bm25, self.speaker = DocTable(), BM25(), array("i")
        self.vectors = self.vector_scales = self.sketch = self.sketch_scales = None
        self.unembedded, self.vectors_done = [], 0

    def nbytes(self) -> int:
        """What the index holds in memory, in bytes: its arrays as allocated and a careful
        estimate of the few Python objects it keeps (the cache is bounded by this)."""
        arrays = (self.vectors, self.vector_scales, self.sketch, self.sketch_scales)
        total = sum(column.nbytes for column in arrays if column is not None)
        total += self.docs.nbytes() + self.bm25.nbytes() + sys.getsizeof(self.speaker)
        # Row numbers as Python ints (a pointer and the int each) and the small dicts.
        total += sys.getsizeof(self.unembedded) + 32 * len(self.unembedded)
        total += sys.getsizeof(self.retired) + 32 * len(self.retired)
        total += sys.getsizeof(self.day_rows) + 64 * len(self.day_rows)
        people = len(self.authors) + len(self.speaker_ids)
        return total + sys.getsizeof(self.authors) + sys.getsizeof(self.speaker_ids) + 64 * people


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
    index.docs.retire(row)
    index.retired.append(row)


def day_text(day: DaySummary) -> str:
    parts = (day.topic, *day.decisions, *day.follow_ups, day.summary)
    return " ".join(part for part in parts if part)


def same_exchange(earlier: Doc, later: Doc) -> bool:
    """Whether ``later`` answers ``earlier``: both messages, said close together."""
    return (
        earlier.kind == later.kind == "message" and 0 <= later.ms - earlier.ms <= NEIGHBOUR_GAP_MS
    )
