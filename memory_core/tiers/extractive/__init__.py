"""Deterministic extractive summariser: the stand-in when no LLM is usable.

When no model is configured, or the model fails or answers with garbage, memory still has to
be compacted, so this package picks the sentences that matter most and lays them out in
chronological order, within a token budget. It never invents text: every kept sentence is a
(cleaned) sentence of the input, prefixed with its date and speaker.

The design goals, in order:

1. **Hard budget.** ``count_tokens(result) <= max_tokens`` for every input. Estimates are used
   to choose sentences quickly, but whatever is returned has been measured with the caller's
   own counter, and a last-resort cut (with an ellipsis) or ``""`` covers the rest.
2. **Keep what a human would want remembered**: names, numbers, dates and times, decisions,
   commitments and preferences, and open questions; drop filler ("ok", "lol", うん, 了解) first.
3. **Determinism.** The same input always yields the same output: every ranking key is total
   (score, then recency, then position) and nothing depends on hashing or dict order.
4. **Purity and speed.** No I/O and no global mutable state; regular expressions are compiled
   once at import and each sentence is scanned a handful of times.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memory_core.tiers.extractive.budget import select_and_render
from memory_core.tiers.extractive.candidates import SummaryItem, clean_speakers, collect_sentences
from memory_core.tiers.extractive.scoring import known_speakers, score

__all__ = ["SummaryItem", "extractive_summary"]

# Kana: only Japanese writes them (Chinese shares the ideographs), so they tell the two apart.
_KANA_RE = re.compile(r"[ぁ-ゖァ-ヺ]")


def extractive_summary(
    items: Sequence[SummaryItem],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    language: str = "en",
) -> str:
    """Summarise ``items`` by keeping their most informative sentences, within ``max_tokens``.

    The result is plain text in chronological order: carried-forward summaries (items whose
    ``speaker`` is ``None``) first with their own text and lines (prefixed with their date if
    they have a ``when`` and the line has no prefix of its own), then the other items, each
    line prefixed like ``[2025-08-13] Alice: ``. Consecutive kept sentences of the same
    speaker on the same day share one line and prefix. ``language`` ("en" or "ja"; "auto"
    guesses from the presence of kana) chooses the sentence splitter and keyword lists.

    ``count_tokens(result) <= max_tokens`` always holds; when not even one sentence fits, the
    best sentence is cut with an ellipsis. Empty or whitespace-only input gives ``""``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    japanese = _is_japanese(language, items)
    speaker_names = clean_speakers(items)
    sentences = collect_sentences(items, japanese, speaker_names)
    if not sentences:
        return ""
    speakers = known_speakers(speaker_names)
    scores = [score(sentence, japanese, speakers) for sentence in sentences]
    # Best first; newer items win ties, then earlier sentences of the same item. The key is
    # unique per sentence, so the order is total and the output fully deterministic.
    ranking = sorted(
        range(len(sentences)),
        key=lambda i: (-scores[i], -sentences[i].item_rank, sentences[i].index),
    )
    return select_and_render(sentences, ranking, scores, max_tokens, count_tokens, japanese)


def _is_japanese(language: str, items: Sequence[SummaryItem]) -> bool:
    """Map the language setting to the Japanese or English rules.

    Anything starting with "ja" ("ja", "ja-JP") is Japanese; "auto" looks for kana, which
    only Japanese uses; everything else gets the English rules rather than an error, because
    this code runs exactly when something else has already gone wrong.
    """
    code = language.strip().lower()
    if code.startswith("ja"):
        return True
    if code == "auto":
        return any(_KANA_RE.search(item.text) for item in items)
    return False
