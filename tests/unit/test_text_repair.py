"""``repair``: any ``str`` made encodable as UTF-8 (what Redis, the model's request, the
sentence encoder and the terminal need), changing nothing else, and the same object back
when there is nothing to repair (it runs on every message)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.text.attachments import stored_text
from memory_core.text.repair import REPLACEMENT, repair

# Every code point, and surrogates often (Hypothesis' text() leaves them out by default),
# with the halves of an emoji's UTF-16 pair among them, so pairs and near-pairs come up.
ANY_CODE_POINT = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
any_str = st.text(
    alphabet=ANY_CODE_POINT | SURROGATE | st.sampled_from(["\ud83d", "\ude00", "\ufffd"]),
    max_size=200,
)


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ("before \ud800 after", "before \ufffd after"),  # a JSON "\ud800" escape
        ("caf\udce9 au lait", "caf\ufffd au lait"),  # a Latin-1 byte read with surrogateescape
        ("\udcff", "\ufffd"),
        ("a\udcffb\ud800", "a\ufffdb\ufffd"),
        ("\ud83d\ude00 ok", "😀 ok"),  # a UTF-16 pair left as two code points: joined
        ("\ude00\ud83d", "\ufffd\ufffd"),  # low then high: no pair, two lone ones
        ("\ud83d\ud83d\ude00", "\ufffd😀"),
        ("日本語\udc80です", "日本語\ufffdです"),
    ],
)
def test_lone_surrogates_become_the_replacement_character(text: str, repaired: str) -> None:
    assert repair(text) == repaired
    repair(text).encode("utf-8")  # strict: encodable now
    assert repair(text) is not text


@pytest.mark.parametrize(
    "text",
    ["", "hello", "x" * 10_000, "café 😀 日本語", "\x00\x1b[31m", "\ufffd already", "\U0010ffff"],
)
def test_text_with_nothing_to_repair_is_returned_as_the_same_object(text: str) -> None:
    assert repair(text) is text


@given(any_str)
def test_any_text_comes_out_encodable_and_the_same_where_it_was_fine(text: str) -> None:
    repaired = repair(text)
    repaired.encode("utf-8")
    assert repair(repaired) is repaired  # nothing left to repair
    assert len(repaired) <= len(text)  # a cap that held before holds after
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert repaired is text

    # What was not a surrogate is kept, in order (a joined pair adds a character beyond
    # the BMP, a lone surrogate a U+FFFD: both are left out of the comparison).
    def plain(s: str) -> str:
        return "".join(
            c for c in s if ord(c) < 0xD800 or (0xDFFF < ord(c) < 0x10000 and c != REPLACEMENT)
        )

    assert plain(repaired) == plain(text)


def test_stored_text_repairs_a_message_and_the_files_listed_with_it() -> None:
    """The one place every door's text passes on its way into memory."""
    text, truncated = stored_text("  caf\udce9 \ud800  ", 4000)
    assert (text, truncated) == ("caf\ufffd \ufffd", False)
    text.encode("utf-8")
    cut, truncated = stored_text("\ud83d\ude00" * 50, 21)  # a pair cut in two by the cap
    assert truncated and cut.startswith("😀" * 10 + "\ufffd …")
    cut.encode("utf-8")
