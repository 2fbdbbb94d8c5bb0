"""The streaming writer every front door shares: long answers split for chat platforms, a
throttle on draft edits, the draft posted, edited and completed through a sink at the
platform's pace, and an answer never shown twice."""

import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.service.streaming import STREAMING_MARK, StreamedReply, Throttle, continuation
from memory_core.text.chunks import split_message
from tests.fakes.reply_sink import FakeSink


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_streamed_draft_is_edited_at_most_once_per_interval_then_completed() -> None:
    sink, clock = FakeSink(), Clock()
    writer = StreamedReply(sink, stream_interval_s=1.0, clock=clock)
    await writer.progress("Hello")
    clock.now = 0.5
    await writer.progress("Hello there")  # too soon: not shown
    clock.now = 1.0
    await writer.progress("Hello there, **friend**")
    assert sink.calls == [
        ("post", "Hello" + STREAMING_MARK),
        ("edit", "Hello there, *friend*" + STREAMING_MARK),  # in the platform's markup
    ]
    assert await writer.finish("Hello there, **friend**. Done.")
    assert sink.shown == ["Hello there, *friend*. Done."]
    assert len(sink.calls) == 3


async def test_a_long_answer_completes_the_draft_and_posts_the_rest() -> None:
    sink = FakeSink(message_chars=100)
    writer = StreamedReply(sink, stream_interval_s=0.0)
    answer = "\n\n".join(f"Paragraph {i}: " + "word " * 12 for i in range(6))
    await writer.progress(answer)
    [draft] = sink.shown
    assert draft.endswith(STREAMING_MARK) and len(draft) <= 100
    assert await writer.finish(answer)
    assert all(len(m) <= 100 for m in sink.shown)
    assert len(sink.shown) == len(split_message(answer, 100)) > 2
    assert [kind for kind, _ in sink.calls].count("edit") == 1  # only the draft is edited


async def test_without_streaming_the_answer_is_only_posted_complete() -> None:
    sink = FakeSink()
    writer = StreamedReply(sink, stream_interval_s=None)
    await writer.progress("partial")
    assert sink.calls == []
    assert await writer.finish("The whole answer.")
    assert sink.calls == [("post", "The whole answer.")]


async def test_a_refused_final_edit_is_tried_again() -> None:
    sink = FakeSink()
    writer = StreamedReply(sink, stream_interval_s=0.0)
    await writer.progress("Half of it")
    sink.refuse_edits = 1
    assert await writer.finish("Half of it, and the rest.")
    assert sink.shown == ["Half of it, and the rest."]
    assert [kind for kind, _ in sink.calls] == ["post", "edit", "edit"]


async def test_a_draft_that_cannot_be_completed_is_followed_by_what_it_lacks_only() -> None:
    """Never the answer twice: the draft keeps what it shows, and a new message carries
    the rest of it, from the first word the draft does not show whole."""
    sink = FakeSink()
    writer = StreamedReply(sink, stream_interval_s=0.0)
    await writer.progress("Half of it, and the re")
    sink.refuse_edits = 2
    assert await writer.finish("Half of it, and the rest. Done.")
    assert sink.shown == ["Half of it, and the re" + STREAMING_MARK, "…rest. Done."]
    assert writer.first == 0 and writer.more == [1]


@pytest.mark.parametrize(
    ("said", "text", "lacking"),
    [
        ("Half of it", "Half of it, and the rest.", "…, and the rest."),
        ("Half of it ", "Half of it and the rest.", "…and the rest."),
        ("Half of it, and the re", "Half of it, and the rest.", "…rest."),
        ("All of it.", "All of it.", ""),
        ("Half of [secr", "Half of [secret hidden] and more", "…[secret hidden] and more"),
        ("Something else", "Other words entirely", "Other words entirely"),
        ("", "The answer", "The answer"),
    ],
)
def test_what_a_draft_lacks(said: str, text: str, lacking: str) -> None:
    assert continuation(said, text) == lacking


@dataclass
class PacedSink(FakeSink):
    """A platform whose limit lets ``room`` calls through now (then none), and whose
    waits are counted."""

    room_now: int = 0
    waits: list[str] = field(default_factory=list)

    async def room(self, call: str, *, wait: bool) -> bool:
        if wait:
            self.waits.append(call)
            return True
        if self.room_now:
            self.room_now -= 1
            return True
        return False


async def test_a_draft_update_waits_for_the_platforms_pace_and_the_last_words_do_not() -> None:
    sink, clock = PacedSink(room_now=1), Clock()
    writer = StreamedReply(sink, stream_interval_s=1.0, clock=clock)
    await writer.progress("Hello")  # room for it: posted
    clock.now = 1.0
    await writer.progress("Hello there")  # no room now: skipped, drafting goes on
    clock.now = 2.0
    sink.room_now = 1
    await writer.progress("Hello there, friend")
    assert sink.calls == [
        ("post", "Hello" + STREAMING_MARK),
        ("edit", "Hello there, friend" + STREAMING_MARK),
    ]
    assert await writer.finish("Hello there, friend. Done.")
    assert sink.shown == ["Hello there, friend. Done."]
    assert sink.waits == ["edit"]  # the last words waited for their turn


async def test_an_answer_with_no_room_to_stream_is_posted_once_complete() -> None:
    sink = PacedSink(message_chars=50)
    writer = StreamedReply(sink, stream_interval_s=0.0)
    await writer.progress("The first words")
    assert sink.calls == []
    answer = "The first words of a long answer. " * 3
    assert await writer.finish(answer)
    assert sink.shown == split_message(answer, 50) and len(sink.shown) > 1
    assert [kind for kind, _ in sink.calls] == ["post"] * len(sink.shown)
    assert sink.waits == ["post"] * len(sink.shown)  # each waited for its turn


async def test_a_refused_draft_stops_drafting_and_the_answer_is_still_posted() -> None:
    sink = FakeSink(refuse_posts=1)
    writer = StreamedReply(sink, stream_interval_s=0.0)
    await writer.progress("First words")
    await writer.progress("First words and more")  # drafting stopped: nothing tried
    assert sink.calls == [("post", "First words" + STREAMING_MARK)]
    assert await writer.finish("First words and more.")
    assert sink.shown == ["First words and more."]


async def test_an_answer_is_not_delivered_when_a_post_is_refused_or_it_is_empty() -> None:
    sink = FakeSink(message_chars=50)
    writer = StreamedReply(sink, stream_interval_s=None)
    assert not await writer.finish("  \n ")
    assert sink.calls == []
    sink.refuse_posts = 1
    assert not await writer.finish("one two three four five six seven eight nine ten " * 2)
    assert len(sink.calls) == 1  # the rest is not posted after a refused part
