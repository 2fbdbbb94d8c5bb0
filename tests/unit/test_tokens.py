import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.text import tokens
from memory_core.text.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, TokenCounter

counter = TokenCounter()


def test_counts_offline_english_and_japanese() -> None:
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("こんにちは、世界") > 3


def test_count_messages_adds_overheads() -> None:
    messages = [{"role": "system", "content": "hi"}, {"role": "user", "content": "there"}]
    assert counter.count_messages(messages) == REPLY_PRIMING + 2 * MESSAGE_OVERHEAD + 2


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=400), st.integers(min_value=0, max_value=60))
def test_truncate_always_fits(text: str, limit: int) -> None:
    cut = counter.truncate(text, limit)
    assert counter.count(cut) <= limit
    if counter.count(text) <= limit:
        assert cut == text


def test_truncate_marks_the_cut() -> None:
    text = "word " * 100
    cut = counter.truncate(text, 10)
    assert cut.endswith("…")
    assert text.startswith(cut[:-1].rstrip())


def test_a_remembering_counter_counts_the_same_and_keeps_a_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "REMEMBERED", 8)
    plain = TokenCounter()
    remembering = plain.remembering()
    texts = [f"line {i}: 日本語 and emoji 😀 <|endoftext|>" for i in range(20)]
    long_text = "word " * 1000  # over REMEMBERED_CHARS: counted, not kept
    for text in [*texts, *texts, long_text, long_text]:
        assert remembering.count(text) == plain.count(text)
        assert remembering._known is not None and len(remembering._known) <= 8
    assert long_text not in remembering._known
    assert plain._known is None  # the bot's own counter (ingest) keeps nothing
