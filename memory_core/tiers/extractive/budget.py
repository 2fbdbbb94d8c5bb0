"""Choosing sentences in rank order within the token budget, trusting only counted layouts.

Estimates choose sentences quickly, but whatever is returned has been measured with the
caller's own counter, and a last-resort cut (with an ellipsis) or ``""`` covers the rest.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass

from memory_core.tiers.extractive.candidates import Sentence
from memory_core.tiers.extractive.layout import cut_best, render

# Every layout is counted before it is trusted. A few renders normally suffice (one per round,
# plus a trim when the additive estimate overshoots); the cap keeps a pathological counter
# from turning the budget check into quadratic work.
_MAX_RENDERS = 24
_TRIM_ATTEMPTS = 3
# A sentence whose estimate exceeds the space left by at most this (plus an eighth of its
# cost) is measured for real, at most _MAX_PROBES times per call.
_NEAR_MISS_TOKENS = 2
_MAX_PROBES = 8


class _CostModel:
    """Estimates what one more sentence adds to the rendered layout, in tokens.

    A sentence that joins a neighbour's line costs only its text; one that starts a line also
    pays for its prefix and a newline, and one that lands inside another speaker's run splits
    that run, which then needs its prefix a second time. Estimates are summed, so they are
    exact only for additive counters; every layout is counted for real before it is trusted.
    Costs are cached per sentence and per prefix (consecutive messages share prefixes).
    """

    def __init__(self, sentences: list[Sentence], count_tokens: Callable[[str], int]) -> None:
        self._sentences = sentences
        self._count = count_tokens
        self._prefix_costs: dict[str, int] = {"": 0}
        self._line_costs: dict[int, int] = {}
        self._join_costs: dict[int, int] = {}

    def _prefix(self, prefix: str) -> int:
        if prefix not in self._prefix_costs:
            self._prefix_costs[prefix] = self._count(prefix)
        return self._prefix_costs[prefix]

    def marginal(self, position: int, kept: list[int]) -> int:
        """The estimated cost of adding ``position`` to the sorted ``kept`` positions."""
        sentences = self._sentences
        group = sentences[position].group
        at = bisect_left(kept, position)
        before = sentences[kept[at - 1]].group if at > 0 else None
        after = sentences[kept[at]] if at < len(kept) else None
        if group in (before, after.group if after is not None else None):
            if position not in self._join_costs:
                self._join_costs[position] = self._count(" " + sentences[position].text)
            return self._join_costs[position]
        if position not in self._line_costs:
            self._line_costs[position] = self._count(sentences[position].text + "\n")
        cost = self._prefix(sentences[position].prefix) + self._line_costs[position]
        if after is not None and before == after.group:
            cost += self._prefix(after.prefix)  # the run we split needs its prefix again
        return cost


class _Probe:
    """Settles near misses by counting the real layout, a bounded number of times.

    Summed estimates run a little high for counters that round each piece up, so a sentence
    that would fit exactly can look a token or two too big. Without a second opinion the
    best sentence would then lose its place to smaller, less important ones.
    """

    def __init__(
        self,
        sentences: list[Sentence],
        max_tokens: int,
        count_tokens: Callable[[str], int],
        japanese: bool,
    ) -> None:
        self._sentences = sentences
        self._max_tokens = max_tokens
        self._count = count_tokens
        self._japanese = japanese
        self._left = _MAX_PROBES

    def slack_with(self, kept: list[int], position: int) -> int | None:
        """The real tokens left if ``position`` joined ``kept``; None if it does not fit."""
        if self._left <= 0:
            return None
        self._left -= 1
        positions = list(kept)
        insort(positions, position)
        used = self._count(render(self._sentences, positions, self._japanese))
        return self._max_tokens - used if used <= self._max_tokens else None


def _greedy(
    candidates: list[int],
    kept: list[int],
    budget: int,
    costs: _CostModel,
    probe: _Probe,
) -> list[tuple[int, int]]:
    """Add candidates (best first) to ``kept`` while the estimated cost fits ``budget``.

    A candidate that does not fit is skipped so that smaller ones can still use the space;
    one that misses by a little is measured for real first (see _Probe).
    Returns the added positions with their estimated costs, in the order they were added.
    """
    added: list[tuple[int, int]] = []
    for position in candidates:
        if budget <= 0:
            break
        cost = costs.marginal(position, kept)
        if cost <= budget:
            insort(kept, position)
            added.append((position, cost))
            budget -= cost
            continue
        if cost - budget <= _NEAR_MISS_TOKENS + cost // 8:
            slack = probe.slack_with(kept, position)
            if slack is not None:
                insort(kept, position)
                added.append((position, cost))
                budget = slack  # measured, so earlier estimation errors are gone too
    return added


def select_and_render(
    sentences: list[Sentence],
    ranking: list[int],
    scores: list[int],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    japanese: bool,
) -> str:
    """Choose sentences in rank order within the budget and return the verified layout.

    Filler (negative score) is all or nothing: it is kept only when the whole conversation
    fits, because a summary that had to drop anything should not spend tokens on "lol".
    Only a conversation of nothing but filler is trimmed filler by filler.
    If nothing fits at all, the best sentence is cut to the budget.
    """
    content = [position for position in ranking if scores[position] >= 0]
    filler = [position for position in ranking if scores[position] < 0]
    fill = _Filler(sentences, max_tokens, count_tokens, japanese)
    fill.add(content if content else filler)
    if content and filler and len(fill.kept) == len(content):
        everything = render(sentences, list(range(len(sentences))), japanese)
        if count_tokens(everything) <= max_tokens:
            return everything
    if not fill.kept:
        return cut_best(sentences[ranking[0]], max_tokens, count_tokens, japanese)
    return fill.text


class _Filler:
    """Fills the budget with candidates in rounds, trusting only counted layouts.

    Each round selects greedily against the slack that is really left, renders, and counts
    with the caller's counter. A round that overshoots (the estimate is only additive) drops
    its lowest-ranked additions, first by the estimated excess, then by binary search; the
    next round then fills the space that shared prefixes saved. The number of renders is
    bounded, so a strange counter costs quality, never time.
    """

    def __init__(
        self,
        sentences: list[Sentence],
        max_tokens: int,
        count_tokens: Callable[[str], int],
        japanese: bool,
    ) -> None:
        self._sentences = sentences
        self._max_tokens = max_tokens
        self._count = count_tokens
        self._japanese = japanese
        self._costs = _CostModel(sentences, count_tokens)
        self._probe = _Probe(sentences, max_tokens, count_tokens, japanese)
        self.kept: list[int] = []  # sorted positions, i.e. in output order
        self.text = ""
        self.used = 0

    def add(self, ranking: list[int]) -> None:
        """Add what fits of ``ranking`` (best first) to the kept layout."""
        renders = 0
        while renders < _MAX_RENDERS and self.used < self._max_tokens:
            taken = set(self.kept)
            pending = [position for position in ranking if position not in taken]
            trial = list(self.kept)
            slack = self._max_tokens - self.used
            added = _greedy(pending, trial, slack, self._costs, self._probe)
            if not added:
                return
            verified = _verify_round(
                self._sentences,
                self.kept,
                added,
                self._max_tokens,
                self._count,
                self._japanese,
                _MAX_RENDERS - renders,
            )
            renders += verified.renders
            if verified.kept is None:
                return  # nothing of this round fits: more rounds would choose the same
            self.kept, self.text, self.used = verified.kept, verified.text, verified.used


@dataclass(frozen=True, slots=True)
class _Round:
    """The outcome of verifying one round of additions."""

    kept: list[int] | None  # the new kept positions, or None if no addition fitted
    text: str
    used: int
    renders: int


def _verify_round(
    sentences: list[Sentence],
    kept: list[int],
    added: list[tuple[int, int]],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    japanese: bool,
    render_allowance: int,
) -> _Round:
    """Find the longest best-first part of ``added`` whose layout (with ``kept``) fits."""
    renders = 0

    def attempt(count: int) -> tuple[list[int], str, int]:
        nonlocal renders
        renders += 1
        positions = sorted(kept + [position for position, _ in added[:count]])
        layout = render(sentences, positions, japanese)
        return positions, layout, count_tokens(layout)

    # Overshoots are usually a few tokens, so first drop just enough by the estimates.
    count = len(added)
    smallest_failure = count + 1
    for _ in range(_TRIM_ATTEMPTS):
        if count == 0 or renders >= render_allowance:
            break
        positions, layout, layout_used = attempt(count)
        if layout_used <= max_tokens:
            return _Round(positions, layout, layout_used, renders)
        smallest_failure = count
        excess = layout_used - max_tokens
        while count > 0 and excess > 0:
            count -= 1
            excess -= added[count][1]
    # The estimates are off for this counter: binary search on how many to keep.
    best = _Round(None, "", 0, renders)
    low, high = 1, smallest_failure - 1
    while low <= high and renders < render_allowance:
        middle = (low + high) // 2
        positions, layout, layout_used = attempt(middle)
        if layout_used <= max_tokens:
            best = _Round(positions, layout, layout_used, renders)
            low = middle + 1
        else:
            high = middle - 1
    return _Round(best.kept, best.text, best.used, renders)
