"""Turning the items to summarise into candidate sentences: cleaned of emoji, split, and
de-duplicated, in output order (carried-forward summaries first, then by time), each with the
prefix and line group it will be rendered with."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memory_core.text.sentences import split_sentences


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """One piece of conversation to summarise.

    ``speaker`` is a display name such as ``"Alice"``; ``None`` marks an earlier summary being
    carried forward, which is placed first and keeps its own text (a day summary given a
    ``when`` is labelled with that date, like a message). ``when`` should be
    timezone-aware; its calendar date (in its own timezone) becomes the ``[YYYY-MM-DD]`` prefix.
    A naive ``when`` is ordered as if it were UTC rather than rejected.
    """

    text: str
    speaker: str | None = None
    when: datetime | None = None


# Chat-platform emoji syntax and free-standing ASCII emoticons. Only lines containing one of
# ":;=<" can match, which _clean checks first because most lines contain none.
_EMOJI_SYNTAX_RE = re.compile(
    # Every alternative starts with a literal character, with any "not preceded by" check
    # placed after it: that lets the regex engine jump between candidate characters instead
    # of trying each position (a several-fold speed-up on long lines).
    r"<a?:\w{1,64}:\d{5,25}>"  # Discord custom emoji <:name:id>
    r"|<(?<!\S<)3(?!\S)"  # <3
    r"|:(?<![\w:]:)[a-z0-9_+\-]{1,50}:(?::skin-tone-[2-6]:)?(?![\w:])"  # Slack :shortcode:
    r"|:(?<!\S:)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"  # free-standing :) :-( :D
    r"|;(?<!\S;)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"
    r"|=(?<!\S=)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"
)
_KEYCAP_RE = re.compile("[0-9#*]\ufe0f?\u20e3")  # 1️⃣: the digit is decoration, not a number
# Single emoji code points (and the invisible characters that glue emoji sequences together),
# plus C0/C1 controls that str.splitlines() does not already treat as line breaks. A plain
# character class lets the regex engine scan fast, which matters: every line passes here.
_EMOJI_CHAR_RE = re.compile(
    "[\U0001f000-\U0001faff"  # pictographs, emoticons, flags, skin tones, symbols
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats (☀ ✅ ❤ ♪)
    "\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55\u231a\u231b\u23e9-\u23f3\u23f8-\u23fa"
    "\u3030\u303d\u3297\u3299\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe\u2934\u2935"
    "\ufe00-\ufe0f\u200d\u20e3"  # variation selectors, zero-width joiner, keycap mark
    "\U000e0020-\U000e007f"  # tag characters (subdivision flags)
    "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]"
)

# Recognises the prefix this summariser writes, so a carried-forward summary keeps its
# attribution per sentence even when the first sentence of its line is dropped.
_SUMMARY_PREFIX_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\] (?:([^\s:\[][^:\n]{0,79}?): )?")

_DEDUP_TRAILING = " .!?。！？｡…"


@dataclass(slots=True)
class Sentence:
    """A candidate sentence with everything the selection and rendering need.

    Sentences are stored in output order (summaries first, then chronological), so a
    sentence's index in that list is also its place in the output.
    """

    item_rank: int  # chronological rank of its item; higher is newer (the recency tie-break)
    index: int  # position within its item (the second tie-break)
    text: str
    prefix: str  # "[2025-08-13] Alice: ", or "" for a summary line without one
    group: str  # consecutive kept sentences with the same group share one prefix and line
    is_summary: bool


def _clean(text: str) -> str:
    """Remove emoji and control characters and collapse whitespace within one line.

    The cheap membership tests skip regular expressions that cannot match, which is most of
    them for most lines. The result contains no whitespace other than single spaces.
    """
    if ":" in text or ";" in text or "=" in text or "<" in text:
        text = _EMOJI_SYNTAX_RE.sub(" ", text)
    if "\u20e3" in text:
        text = _KEYCAP_RE.sub(" ", text)
    if not (text.isascii() and text.isprintable()):
        text = _EMOJI_CHAR_RE.sub(" ", text)
    return " ".join(text.split())


def _clean_speaker(name: str) -> str:
    """A display name fit for a one-line prefix; keeps emoji only if nothing else is left."""
    cleaned = _clean(name)
    return cleaned or " ".join(name.split())


def _chronological(items: Sequence[SummaryItem]) -> list[SummaryItem]:
    """Summaries first, then the other items; each group sorted by time."""
    summaries = [item for item in items if item.speaker is None]
    messages = [item for item in items if item.speaker is not None]
    return _by_time(summaries) + _by_time(messages)


def _by_time(items: list[SummaryItem]) -> list[SummaryItem]:
    """Sort by ``when``; an item without one keeps its place after the item before it.

    A caller that sets no times therefore gets its own order back. The sort is stable and
    the key includes the input position, hence deterministic.
    """
    keyed: list[tuple[float, int, SummaryItem]] = []
    last = float("-inf")
    for position, item in enumerate(items):
        if item.when is not None:
            when = item.when if item.when.tzinfo is not None else item.when.replace(tzinfo=UTC)
            last = when.timestamp()
        keyed.append((last, position, item))
    keyed.sort(key=lambda entry: (entry[0], entry[1]))
    return [item for _, _, item in keyed]


def clean_speakers(items: Sequence[SummaryItem]) -> dict[str, str]:
    """Clean each distinct display name once; channels have few speakers and many messages."""
    names: dict[str, str] = {}
    for item in items:
        if item.speaker is not None and item.speaker not in names:
            names[item.speaker] = _clean_speaker(item.speaker)
    return names


def collect_sentences(
    items: Sequence[SummaryItem], japanese: bool, speaker_names: dict[str, str]
) -> list[Sentence]:
    """Split every item into cleaned, de-duplicated sentences in output order."""
    sentences: list[Sentence] = []
    seen: set[str] = set()
    for rank, item in enumerate(_chronological(items)):
        is_summary = item.speaker is None
        date = f"[{item.when.date().isoformat()}] " if item.when is not None else ""
        item_prefix = date
        if not is_summary:
            speaker = speaker_names[item.speaker] if item.speaker is not None else ""
            item_prefix = date + (f"{speaker}: " if speaker else "")
        index = 0
        for line_no, raw_line in enumerate(item.text.splitlines()):
            prefix, group, line = item_prefix, f"L{item_prefix}", raw_line
            if is_summary:
                # Earlier summaries keep their own text and their own lines. A line that
                # starts with a prefix we wrote before lends it to each of its sentences, so
                # they stay attributed when the first is dropped; other lines get the
                # summary's date, if it has one (a day summary folded into the week).
                group = f"R{rank}:{line_no}"
                match = _SUMMARY_PREFIX_RE.match(raw_line.lstrip())
                if match is not None:
                    name = _clean_speaker(match.group(2) or "")
                    prefix = f"[{match.group(1)}] " + (f"{name}: " if name else "")
                    group = f"L{prefix}"
                    line = raw_line.lstrip()[match.end() :]
            elif not item_prefix:
                group = f"R{rank}"
            for text in split_sentences(_clean(line), japanese=japanese):
                key = _dedup_key(text)
                if key in seen:
                    continue
                seen.add(key)
                sentences.append(Sentence(rank, index, text, prefix, group, is_summary))
                index += 1
    return sentences


def _dedup_key(text: str) -> str:
    """Sentences equal up to case, width, spacing and final punctuation are duplicates."""
    normal = text if text.isascii() else unicodedata.normalize("NFKC", text)
    return normal.casefold().rstrip(_DEDUP_TRAILING)
