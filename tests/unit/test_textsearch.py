"""Lexical search terms and BM25, English and Japanese."""

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
