"""Laying kept sentences out as the summary's text, and cutting one sentence to fit."""

from __future__ import annotations

from collections.abc import Callable

from memory_core.tiers.extractive.candidates import Sentence

# Sentence-final characters after which Japanese text needs no separating space.
_CJK_CLOSERS = frozenset("。！？｡」』）】")
_ELLIPSIS = "…"


def render(sentences: list[Sentence], kept: list[int], japanese: bool) -> str:
    """Lay kept sentences out chronologically, sharing a prefix within a run of one group."""
    lines: list[str] = []
    parts: list[str] = []
    group: str | None = None
    for position in sorted(kept):
        sentence = sentences[position]
        if sentence.group != group:
            if parts:
                lines.append("".join(parts))
            group = sentence.group
            parts = [sentence.prefix + sentence.text]
        else:
            # Japanese sentences that end in 。 need no space; everything else does.
            joiner = "" if japanese and parts[-1][-1] in _CJK_CLOSERS else " "
            parts.append(joiner + sentence.text)
    if parts:
        lines.append("".join(parts))
    return "\n".join(lines)


def cut_best(
    sentence: Sentence, max_tokens: int, count_tokens: Callable[[str], int], japanese: bool
) -> str:
    """Cut the best sentence at a character boundary so that it fits, marking the cut.

    Tries, in order: prefix + cut + "…"; the whole sentence without its prefix; cut + "…"
    without the prefix; a bare cut. ``""`` is the answer only when not one character fits.
    """
    text, prefix = sentence.text, sentence.prefix
    if count_tokens(prefix + text) <= max_tokens:
        return prefix + text
    limit = len(text) - 1  # the whole text was just ruled out

    def fits(candidate: str) -> bool:
        return count_tokens(candidate) <= max_tokens

    if prefix:
        cut = _longest_fitting(limit, lambda k: fits(prefix + text[:k].rstrip() + _ELLIPSIS))
        if cut is not None:
            return _prefer_word_boundary(cut, text, prefix, japanese, max_tokens, count_tokens)
        if fits(text):
            return text  # the whole sentence is worth more than its attribution
    cut = _longest_fitting(limit, lambda k: fits(text[:k].rstrip() + _ELLIPSIS))
    if cut is not None:
        return _prefer_word_boundary(cut, text, "", japanese, max_tokens, count_tokens)
    # Not even one character and an ellipsis fit: try bare characters, then give up.
    cut = _longest_fitting(limit, lambda k: fits(text[:k]))
    return text[:cut] if cut is not None else ""


def _longest_fitting(limit: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``k`` in ``1..limit`` with ``fits(k)``, or None if not even 1 fits.

    Gallops up from 1 and then bisects, so the strings counted stay within about twice the
    final cut: a megabyte-long sentence cut to a 50-token budget is never counted whole.
    Assumes longer text never costs fewer tokens; when a counter breaks that, the answer
    may be shorter than possible but ``fits`` has still approved it.
    """
    if limit < 1 or not fits(1):
        return None
    good, bad = 1, limit + 1
    while good < limit:
        trial = min(good * 2, limit)
        if not fits(trial):
            bad = trial
            break
        good = trial
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def _prefer_word_boundary(
    cut: int,
    text: str,
    prefix: str,
    japanese: bool,
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> str:
    """Back off to the last space when that loses little, so no word is left half-written.

    Japanese has no spaces between words, so there the character cut stands.
    """
    fallback = prefix + text[:cut].rstrip() + _ELLIPSIS
    if japanese:
        return fallback
    space = text.rfind(" ", 0, cut + 1)
    kept = text[:space].rstrip(" ,;:-")
    if space <= cut // 2 or not kept:
        return fallback
    candidate = prefix + kept + _ELLIPSIS
    return candidate if count_tokens(candidate) <= max_tokens else fallback
