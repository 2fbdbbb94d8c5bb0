"""Secrets masked out of answers, also while they stream in, and answers cut with a marker."""

from __future__ import annotations

import pytest

from memory_core.prompt.answers import MASK, SecretMask, StreamedAnswer, capped, with_marker

KEY = "sk-proj-abcdefghijklmnop"
TOKEN = "xoxb-1234567890-token"
MASKER = SecretMask([KEY, TOKEN, "short", ""])


def test_every_configured_secret_is_masked_and_short_values_are_not_needles() -> None:
    text = f"your key is {KEY}, the token {TOKEN}; a short word stays, {KEY}{KEY}"
    assert MASKER.mask(text) == (
        f"your key is {MASK}, the token {MASK}; a short word stays, {MASK}{MASK}"
    )


def test_a_secret_inside_another_is_masked_with_the_longer_one() -> None:
    password = "hunter2-is-long"
    url = f"redis://:{password}@db:6379/0"
    masker = SecretMask([password, url])
    assert masker.mask(f"use {url} or {password}") == f"use {MASK} or {MASK}"


@pytest.mark.parametrize("text", [f"the key: {KEY} ok", f"{TOKEN}{KEY}", f"x {KEY[:-1]} y {KEY}"])
def test_no_streamed_prefix_shows_any_part_of_a_secret_that_follows(text: str) -> None:
    """Every way the answer can be cut into pieces: each settled text is the beginning of
    the final one, so no edit ever shows what later turns out to be part of a secret."""
    final = MASKER.mask(text)
    for end in range(len(text) + 1):
        shown = MASKER.settled(text[:end])
        assert final.startswith(shown), (text[:end], shown)
        assert KEY not in shown and TOKEN not in shown


def test_a_tail_that_begins_a_secret_is_held_back_until_it_is_resolved() -> None:
    assert MASKER.settled(f"key: {KEY[:10]}") == "key: "
    assert MASKER.settled(f"key: {KEY[:10]}!") == f"key: {KEY[:10]}!"  # not the key after all
    assert MASKER.settled(f"key: {KEY}") == f"key: {MASK}"


def test_a_finished_text_that_ends_in_the_first_half_of_a_secret_masks_it() -> None:
    """An answer cut off (max_tokens) in the middle of the key."""
    assert MASKER.mask(f"key: {KEY[:12]}") == f"key: {MASK}"
    assert MASKER.mask("ends with sk") == "ends with sk"  # too short to say anything


def test_no_secrets_configured_changes_nothing() -> None:
    masker = SecretMask([])
    assert masker.mask("anything") == masker.settled("anything") == "anything"


def test_a_streamed_answer_is_too_long_once_its_settled_text_passes_the_cap() -> None:
    answer = StreamedAnswer(MASKER, max_chars=10)
    answer.add("0123456789")
    assert not answer.too_long
    answer.add(KEY[:5])  # could be the key: not counted yet
    assert not answer.too_long and answer.shown == "0123456789"
    answer.add("!")
    assert answer.too_long


def test_markers_keep_the_whole_text_within_the_cap() -> None:
    marker = "[cut]"
    assert capped("short", 100, marker) == "short"
    long = "word " * 100
    cut = capped(long, 50, marker)
    assert len(cut) <= 50 and cut.endswith(" [cut]") and cut.startswith("word word")
    assert with_marker("partial answer", marker, 100) == "partial answer [cut]"
