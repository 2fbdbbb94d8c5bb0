"""Lexical search terms and BM25, English and Japanese."""

from memory_core.textsearch import BM25, terms


def test_english_terms_are_stemmed_without_stopwords() -> None:
    assert terms("We went camping with the kids!") == ["went", "camp", "kid"]
    assert terms("She planned two trips") == ["plan", "two", "trip"]
    assert terms("Caroline's painting classes") == ["caroline", "paint", "class"]
    assert terms("the a an of") == []


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
