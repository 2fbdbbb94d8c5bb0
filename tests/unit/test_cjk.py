"""One rule for the characters of scripts written without spaces, shared by the core."""

from memory_core.recall.textsearch import terms
from memory_core.text.cjk import CJK_CHARACTER
from memory_core.text.language import detect
from memory_core.tiers.redact import removed_spans


def test_kana_kanji_and_half_width_katakana_are_cjk_latin_and_punctuation_are_not() -> None:
    for char in "あア漢㐀\uf900ｱ":  # U+F900 is a compatibility ideograph
        assert CJK_CHARACTER.match(char), char
    for char in "aZ9。、！ 　":
        assert not CJK_CHARACTER.match(char), char


def test_language_detection_and_search_terms_agree_on_compatibility_ideographs() -> None:
    # Search, language detection and edit comparison used to disagree on these.
    compatibility = "\uf900\uf901\uf902"
    assert detect(compatibility) == "ja"
    # Search reads them as the unified ideographs they stand for (NFKC): a search typed
    # with either form finds the other.
    unified = "\u8c48\u66f4\u8eca"
    assert terms(compatibility) == ["\u8c48\u66f4", "\u66f4\u8eca"] == terms(unified)


def test_edits_compare_half_width_katakana_character_by_character() -> None:
    assert removed_spans("ｱﾘｽの番号は090-1234-5678", "ｱﾘｽの番号は秘密") == ["090-1234-5678"]
