"""Splitting long answers for chat platforms."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.service.conversation import Throttle, split_message


def _words(text: str) -> list[str]:
    """The words of the text outside fence lines (chunks may close and reopen fences)."""
    kept = [line for line in text.split("\n") if not re.match(r"^\s*(```+|~~~+)", line)]
    return [w for w in re.split(r"\s+", "\n".join(kept)) if w]


def test_short_text_is_one_chunk() -> None:
    assert split_message("hello", 2000) == ["hello"]
    assert split_message("  \n ", 2000) == []


def test_prefers_paragraph_breaks() -> None:
    paragraphs = [f"Paragraph {i}. " + "word " * 60 for i in range(10)]
    chunks = split_message("\n\n".join(paragraphs), 1000)
    assert all(len(c) <= 1000 for c in chunks)
    for chunk in chunks:
        assert chunk.startswith("Paragraph")  # every chunk starts at a paragraph


def test_code_blocks_are_closed_and_reopened() -> None:
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(300)) + "\n```"
    chunks = split_message("Here is the code:\n\n" + code + "\n\nDone.", 2000)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk) <= 2000
        assert chunk.count("```") % 2 == 0, chunk[:80]
    assert chunks[1].startswith("```python")
    assert chunks[-1].endswith("Done.")


def test_tilde_fences_are_closed_with_tildes() -> None:
    code = "~~~\n" + "\n".join(f"line {i} ```" for i in range(200)) + "\n~~~"
    chunks = split_message(code, 500)
    assert all(c.rstrip().endswith("~~~") for c in chunks)
    assert all(c.count("~~~") == 2 for c in chunks)


def test_five_thousand_characters_of_one_line() -> None:
    text = "x" * 5000
    chunks = split_message(text, 2000)
    assert all(len(c) <= 2000 for c in chunks)
    assert "".join(chunks) == text


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300),
            st.sampled_from(["```", "```js", "", "", "- item", "~~~"]),
        ),
        max_size=80,
    ),
    st.integers(min_value=40, max_value=2000),
)
def test_chunks_fit_and_keep_every_word(lines: list[str], limit: int) -> None:
    text = "\n".join(lines)
    chunks = split_message(text, limit)
    assert all(len(c) <= limit for c in chunks)
    # Hard splits may cut a long word in two: compare the words glued back together.
    assert "".join(_words("\n".join(chunks))) == "".join(_words(text))


def test_throttle() -> None:
    now = [0.0]
    throttle = Throttle(1.0, clock=lambda: now[0])
    assert throttle.ready()
    now[0] = 0.5
    assert not throttle.ready()
    now[0] = 1.0
    assert throttle.ready()
