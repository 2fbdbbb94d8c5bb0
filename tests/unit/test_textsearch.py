"""Lexical search terms and BM25, English and Japanese."""

import math
import random

import numpy as np

from memory_core.recall.textsearch import BM25, terms


def test_english_terms_are_stemmed_without_stopwords() -> None:
    assert terms("We went camping with the kids!") == ["go", "camp", "kid"]
    assert terms("hiked") == terms("hiking") == terms("hikes")
    assert terms("She planned two trips") == ["plan", "two", "trip"]
    assert terms("Caroline's painting classes") == ["carolin", "paint", "class"]
    assert terms("Caroline's") == terms("Caroline")
    assert terms("the a an of") == []


def test_a_real_stemmer_joins_derived_and_irregular_forms() -> None:
    # The suffix stripping before the Snowball stemmer kept each of these pairs apart.
    assert terms("happiness") == terms("happy")
    assert terms("adoption") == terms("adopting")
    assert terms("she left early") == terms("leaving early")


def test_japanese_terms_are_bigrams_and_katakana_words() -> None:
    found = terms("明日カラオケに行く")
    assert "明日" in found and "カラオケ" in found
    assert "ケに" in found  # bigrams cross script boundaries inside a run


def test_bm25_prefers_rare_terms_and_short_documents() -> None:
    index = BM25()
    docs = [
        "we talked about the weather today",
        "the weather is nice and the weather is warm",
        "caroline joined a pottery class on saturday",
        "pottery pottery is fun",
    ]
    for doc in docs:
        index.add(terms(doc))
    scores = index.scores(terms("pottery class"))
    best = max(scores, key=lambda d: scores[d])
    assert best == 2
    assert set(scores) == {2, 3}
    assert index.scores(terms("astronomy")) == {}


def test_query_days() -> None:
    from memory_core.recall.ranking import query_days

    assert query_days("What did she paint on October 13, 2023?") == {(10, 13)}
    assert query_days("on 8 May, 2023 and 2023-06-01") == {(5, 8), (6, 1)}
    assert query_days("10月13日に何をしましたか") == {(10, 13)}
    assert query_days("nothing dated here") == set()


def _reference_bm25(
    docs: list[list[str]], query: list[str], weights: dict[str, float]
) -> list[float]:
    """BM25 written out term by term, document by document (k1 1.2, b 0.75)."""
    n = len(docs)
    avg = sum(map(len, docs)) / n
    out = []
    for doc in docs:
        score = 0.0
        for term in set(query):
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            if not df or not tf:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5)) * weights.get(term, 1.0)
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avg))
        out.append(score)
    return out


def test_bm25_scores_all_terms_at_once_as_the_formula_term_by_term() -> None:
    """Every query term's postings are scored in one pass: the same scores as the formula
    worked out by hand, whatever order the terms come in, with repeated terms, terms no
    document has, and weighted terms."""
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    docs = [[rng.choice(words) for _ in range(rng.randint(1, 25))] for _ in range(300)]
    index = BM25()
    for doc in docs:
        index.add(doc)
    for _ in range(50):
        query = [rng.choice([*words, "absent"]) for _ in range(rng.randint(1, 12))]
        weights = {t: rng.choice([0.2, 0.3, 1.0]) for t in query if rng.random() < 0.4}
        got = index.score_array(query, weights=weights)
        expected = _reference_bm25(docs, query, weights)
        assert got.dtype == np.float32 and len(got) == len(docs)
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert np.allclose(index.score_array(query[::-1], weights=weights), got, rtol=1e-6)
    assert not index.score_array(["absent"]).any()
    assert len(BM25().score_array(["w1"])) == 0
