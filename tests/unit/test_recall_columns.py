"""A scope's index in columns: documents read back as they went in, messages found by id,
postings the same whether merged into the flat arrays or not, and vectors to int8's
precision."""

from __future__ import annotations

import numpy as np

from memory_core.recall.documents import Doc, DocTable, ScopeIndex
from memory_core.recall.textsearch import BM25, terms
from memory_core.recall.vectors import put_rows, quantised, query_similarity, room_to_grow


def _docs() -> list[Doc]:
    return [
        Doc("1700000000000-0", 5, "Ana", "we moved to Lisbon", "message", 3, tokens=6),
        Doc("", 7, "", "Day: the move. 引っ越し", "day", 4, tokens=9, day="2026-01-02"),
        Doc("1700000000000-1", 9, "", "喫茶店で会いましょう 🎉", "message", 6),
        Doc("1700000000001-5000", 11, "Bo", "far along a busy millisecond", "message", 4),
        Doc("1700000000001-5001", 12, "Ana", "and the next one", "message", 2),
        Doc("m-odd", 13, "Bo", "an id of a test's own", "message", 5),
    ]


def test_documents_read_back_as_they_went_in() -> None:
    table = DocTable()
    for doc in _docs():
        table.append(doc)
    assert list(table) == _docs()
    assert table[-1] == _docs()[-1] and table[1:3] == _docs()[1:3]
    assert table.id(2) == "1700000000000-1" and table.text(2) == "喫茶店で会いましょう 🎉"
    table.retire(1)
    assert table[1] == _docs()[1]._replace(kind="retired", text="", n_terms=0)
    assert table[2] == _docs()[2]  # (the rows after it untouched)


def test_messages_are_found_by_id_in_one_search() -> None:
    table = DocTable()
    for doc in _docs():
        table.append(doc)
    rows = table.message_rows()
    assert rows.rows.tolist() == [0, 2, 3, 4, 5]  # not the day record
    ids = ["1700000000001-5001", "1700000000000-0", "nope", "1700000000000-9", "m-odd", ""]
    assert rows.find(ids).tolist() == [4, 0, -1, -1, 5, -1]
    assert rows.get("1700000000001-5000") == 3 and rows.get("1700000000000-1") == 2
    assert DocTable().message_rows().find(["1-0"]).tolist() == [-1]


def test_postings_score_alike_merged_or_not() -> None:
    texts = [f"coffee {i % 7} tea {i % 3} plan{i % 11}" for i in range(300)]
    merged, pending = BM25(), BM25()
    for n, text in enumerate(texts):
        merged.add(terms(text))
        pending.add(terms(text))
        if n % 97 == 0:
            merged.compact()  # merged several times, the last ones still pending
    query = terms("coffee 3 plan5 tea")
    np.testing.assert_array_equal(merged.score_array(query), pending.score_array(query))
    merged.compact()
    pending.compact()
    assert merged.pending_postings() == 0
    np.testing.assert_array_equal(merged.score_array(query), pending.score_array(query))
    plan5 = [n for n, text in enumerate(texts) if "plan5" in text.split()]
    postings = merged.postings_of("plan5")
    assert postings is not None and postings.tolist() == plan5
    assert merged.df("plan5") == len(plan5) and merged.df("unknown") == 0


def test_a_term_said_often_in_one_message_saturates_not_overflows() -> None:
    bm25 = BM25()
    bm25.add(["echo"] * 300)
    bm25.add(["echo", "other"])
    bm25.compact()
    scores = bm25.score_array(["echo"])
    assert scores[0] > scores[1] > 0


def test_int8_vectors_keep_cosines_within_a_thousandth() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((50, 512)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows, scales = quantised(vectors)
    assert rows.dtype == np.int8 and np.abs(rows).max() == 127
    np.testing.assert_allclose(rows * scales[:, None], vectors, atol=scales.max())
    index = ScopeIndex()
    for n in range(50):
        index.add(Doc(f"{n + 1}-0", n, "A", f"m {n}", "message", 2), ["m"])
    put_rows(index, list(range(50)), vectors)
    assert index.vectors is not None and index.vectors.dtype == np.int8
    sims = query_similarity(index, vectors[7])
    assert sims is not None
    np.testing.assert_allclose(sims, vectors @ vectors[7], atol=1e-3)
    assert int(np.argmax(sims)) == 7


def test_vectors_grow_by_an_eighth_ahead_of_need() -> None:
    """Rows are reserved with a little slack, and a big index's grown by an eighth before
    they fill (the sync does it in a worker thread), never doubled."""
    index = ScopeIndex()
    unit = np.ones((1, 512), dtype=np.float32) / np.sqrt(512)
    for n in range(20_000):
        index.add(Doc(f"{n + 1}-0", n, "A", "m", "message", 1), ["m"])
    put_rows(index, [0], unit)
    assert index.vectors is not None
    capacity = 20_000 + 20_000 // 64 + 16  # a little slack, no more
    assert index.vectors.shape[0] == capacity
    assert room_to_grow(index) == 0
    for n in range(20_000, 20_100):  # fewer than 256 rows left
        index.add(Doc(f"{n + 1}-0", n, "A", "m", "message", 1), ["m"])
    assert room_to_grow(index) == capacity + capacity // 8 + 64
    put_rows(index, [capacity + 5], unit)  # (an overflow still grows, by an eighth)
    assert index.vectors.shape[0] == capacity + capacity // 8 + 64
    small = ScopeIndex()
    small.add(Doc("1-0", 1, "A", "m", "message", 1), ["m"])
    put_rows(small, [0], unit)
    assert small.vectors is not None and small.vectors.shape[0] == 17
    assert room_to_grow(small) == 0  # (grown when a row overflows: a small copy)
