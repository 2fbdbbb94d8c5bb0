"""Recall by meaning without Redis: the local model, the sketch that keeps a 100k-message
scope fast, and the blend of words and meaning."""

from __future__ import annotations

import numpy as np
import pytest

from bots.cli.eval import parse_budgets
from memory_core.errors import InputError
from memory_core.recall.documents import Doc, ScopeIndex
from memory_core.recall.embedding import DIMENSIONS, encode_sync
from memory_core.recall.ranking import rank
from memory_core.recall.textsearch import terms
from memory_core.recall.vectors import (
    SKETCH_TOP,
    encode_vector,
    put_decoded,
    put_rows,
    query_similarity,
)


def _index(vectors: np.ndarray, texts: list[str] | None = None) -> ScopeIndex:
    index = ScopeIndex()
    for i in range(len(vectors)):
        text = texts[i] if texts else f"message {i}"
        words = terms(text)
        index.add(
            Doc(
                id=f"{1000 + i}-0",
                ms=1_700_000_000_000 + i * 3_600_000,  # hours apart: no neighbours
                author="A",
                text=text,
                kind="message",
                n_terms=len(words),
            ),
            words,
        )
    put_rows(index, list(range(len(vectors))), vectors)
    return index


def _units(n: int, seed: int = 1) -> np.ndarray:
    vecs = np.random.default_rng(seed).standard_normal((n, DIMENSIONS)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_the_sketch_finds_the_nearest_messages_of_a_large_scope_exactly() -> None:
    """Past SKETCH_TOP messages, the sketch picks whom to score exactly: the messages
    nearest the query are among them, with their cosine to int8's precision (~0.001)."""
    vecs = _units(3 * SKETCH_TOP)
    query = _units(1, seed=9)[0]
    related = np.arange(100, 6000, 300)  # 20 messages about the query (cosine 0.3 to 0.95)
    for n, row in enumerate(related):
        mixed = (0.3 + 0.65 * n / len(related)) * query + 0.5 * vecs[row]
        vecs[row] = mixed / np.linalg.norm(mixed)
    sims = query_similarity(_index(vecs), query)
    assert sims is not None
    exact = vecs @ query
    assert exact[related].min() > 0.3  # (unrelated ones are below 0.2)
    assert set(np.argsort(-sims)[:20].tolist()) == set(related.tolist())
    np.testing.assert_allclose(sims[related], exact[related], atol=2e-3)


def test_a_vector_of_another_size_is_ignored_not_mixed_in() -> None:
    """Vectors of another model (another size) in Redis: the message is embedded again."""
    index = _index(_units(3))
    found = np.zeros(len(index.docs), dtype=bool)
    rows = {d.id: i for i, d in enumerate(index.docs)}
    other = encode_vector(np.ones(8, dtype=np.float32) / np.sqrt(8))
    put_decoded(index, rows, {"1000-0": other, "1001-0": encode_vector(_units(1)[0])}, found)
    assert found.nonzero()[0].tolist() == [1]


def test_the_local_model_recalls_by_meaning_in_english_and_japanese() -> None:
    """The default embedder: a question and its answer in other words, and across
    languages, are closer than unrelated messages."""
    texts = [
        "We adopted a kitten last week, she is adorable",
        "The quarterly budget review is on Friday",
        "犬の散歩に毎朝行きます",  # I walk the dog every morning
    ]
    vecs = encode_sync(texts)
    assert vecs.shape == (3, DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    [pet_question, dog_question] = encode_sync(["Did they get a new pet cat?", "Who walks a dog?"])
    assert int(np.argmax(vecs @ pet_question)) == 0
    assert int(np.argmax(vecs @ dog_question)) == 2


def test_meaning_lifts_a_message_words_alone_would_miss() -> None:
    """The blend: a message with no word of the query but its meaning is recalled, below
    one that matches both ways."""
    texts = ["We adopted a kitten", "The cat food budget is ready", "Lunch at noon"]
    index = _index(encode_sync(texts), texts)
    query = "Any news about a cat?"
    sims = query_similarity(index, encode_sync([query])[0])
    hits = rank(index, query, exclude_ids=set(), limit=5, similarity=sims)
    texts_found = [d.text for h in hits for d in h.docs]
    assert texts_found[:2] == ["The cat food budget is ready", "We adopted a kitten"]
    assert "Lunch at noon" not in texts_found


def test_budgets_parse_and_bad_ones_say_what_to_give() -> None:
    assert parse_budgets("1500, 3000,1500") == (1500, 3000)
    with pytest.raises(InputError, match="separated by commas"):
        parse_budgets("1500;3000")
    with pytest.raises(InputError, match="between 500 and 200000"):
        parse_budgets("100")


def test_a_question_about_a_person_prefers_what_they_said_by_meaning_too() -> None:
    """A question such as "What pets does Nate have?" is answered by Nate's turns: a turn
    found by meaning alone (no word of the question in it) ranks above another speaker's
    turn just as close in meaning, even when that one is newer (the tie-break)."""
    texts = ["I just got a new addition to the family, this is Max!", "Max is so cute!"]
    query = _units(1, seed=3)[0]
    noise = _units(2, seed=4)
    vecs = 0.6 * query + 0.8 * noise  # both equally close to the query (cosine ~0.6)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = ScopeIndex()
    for i, (author, text) in enumerate(zip(["Nate", "Joanna"], texts, strict=True)):
        words = terms(text)
        index.add(
            Doc(
                id=f"{1000 + i}-0",
                ms=1_700_000_000_000 + i * 3_600_000,
                author=author,
                text=text,
                kind="message",
                n_terms=len(words),
            ),
            words,
        )
    put_rows(index, [0, 1], vecs)
    similarity = np.full(2, float(vecs[0] @ query), dtype=np.float32)  # an exact tie
    hits = rank(
        index, "What pets does Nate have?", exclude_ids=set(), limit=5, similarity=similarity
    )
    assert [h.docs[0].author for h in hits] == ["Nate", "Joanna"]
