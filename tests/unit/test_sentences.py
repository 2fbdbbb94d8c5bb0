"""The one sentence splitter: what ends a sentence in English and Japanese."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.text.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("We ship Friday. Bob pays!", ["We ship Friday.", "Bob pays!"]),
        (
            "It costs 3.5 dollars, see example.com today.",
            ["It costs 3.5 dollars, see example.com today."],
        ),
        (
            "Meet Dr. Smith at 3 p.m. tomorrow. Fine?",
            ["Meet Dr. Smith at 3 p.m. tomorrow.", "Fine?"],
        ),
        ("J. R. R. Tolkien wrote it. Really?!", ["J. R. R. Tolkien wrote it.", "Really?!"]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("first line\nsecond line", ["first line", "second line"]),
        ("Well... ?! ok", ["Well...", "ok"]),  # pieces without a letter or digit go
        ("明日は休み。会議は延期！本当？", ["明日は休み。", "会議は延期！", "本当？"]),
        ("「行く」と言った。はい", ["「行く」と言った。", "はい"]),
        ("", []),
    ],
)
def test_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_japanese_ends_sentences_at_latin_marks_without_a_space() -> None:
    assert split_sentences("すごい!本当?うん") == ["すごい!本当?うん"]
    assert split_sentences("すごい!本当?うん", japanese=True) == ["すごい!", "本当?", "うん"]
    assert split_sentences("値段は3.5ドル!安い", japanese=True) == ["値段は3.5ドル!", "安い"]


def test_keep_spacing_gives_the_text_back_with_separators_leading_each_sentence() -> None:
    text = "  A is here. B said no?\n\nC left.  "
    pieces = split_sentences(text, keep_spacing=True)
    assert pieces == ["  A is here.", " B said no?", "\n\nC left.  "]
    assert split_sentences("?! ok", keep_spacing=True) == ["?!", " ok"]


@given(st.text(alphabet=st.sampled_from(list("ab .!?。\n 」D r")), max_size=40), st.booleans())
def test_keep_spacing_is_lossless_and_agrees_with_the_plain_split(
    text: str, japanese: bool
) -> None:
    pieces = split_sentences(text, japanese=japanese, keep_spacing=True)
    assert "".join(pieces) == text
    assert all(pieces)
    plain = [p.strip() for p in pieces if any(c.isalnum() for c in p)]
    assert plain == split_sentences(text, japanese=japanese)
