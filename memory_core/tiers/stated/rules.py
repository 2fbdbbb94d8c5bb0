"""The facts a chunk of messages states plainly: each person's messages, sentence by
sentence, through the rules of the sentence's language."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.models import LogEntry
from memory_core.text.cjk import CJK_CHARACTER
from memory_core.text.sentences import split_sentences
from memory_core.tiers.stated.english import match as english_match
from memory_core.tiers.stated.japanese import match as japanese_match

MAX_FACTS = 20  # per chunk, as many as a summary call may return
MAX_SENTENCE_CHARS = 200  # a longer sentence says more than one plain thing
_KANA = re.compile(r"[ぁ-ゖァ-ヺ]")
_QUOTED_LINE = re.compile(r"^\s*(?:>|&gt;)")  # a quoted line (Discord and Slack markdown)
_CODE = "```"


@dataclass(frozen=True, slots=True)
class StatedFact:
    """A fact as the rules found it: its kind, its text (naming the speaker: "Alice is
    vegetarian"), who it is about ("" for the channel) and the messages that said it."""

    kind: str
    text: str
    subject: str
    message_ids: tuple[str, ...]


def stated_facts(entries: Sequence[LogEntry]) -> list[StatedFact]:
    """The facts ``entries`` state plainly, in the order they were said; one said twice is
    one fact with both messages. The bot's own answers state nothing about anyone."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for entry in entries:
        if entry.role != "user":
            continue
        for kind, text, about_speaker in facts_in(entry.text, entry.author):
            subject = entry.author if about_speaker else ""
            ids = found.setdefault((kind, text, subject), [])
            if entry.id not in ids:
                ids.append(entry.id)
    facts = [
        StatedFact(kind=kind, text=text, subject=subject, message_ids=tuple(ids))
        for (kind, text, subject), ids in found.items()
    ]
    return facts[-MAX_FACTS:]


def facts_in(text: str, speaker: str) -> list[tuple[str, str, bool]]:
    """(kind, fact text, whether it is about the speaker) for each sentence of one message
    by ``speaker`` that a rule matches. A fact about the speaker needs their name."""
    if _CODE in text:
        return []  # code, logs, pasted text: nobody's own words
    found: list[tuple[str, str, bool]] = []
    for line in text.splitlines():
        if _QUOTED_LINE.match(line):
            continue
        japanese_line = bool(_KANA.search(line))
        for sentence in split_sentences(line, japanese=japanese_line):
            clean = _clean(sentence)
            if not clean or len(clean) > MAX_SENTENCE_CHARS:
                continue
            rules = japanese_match if CJK_CHARACTER.search(clean) else english_match
            match = rules(clean, speaker.strip())
            if match is not None:
                found.append(match)
    return found


def _clean(sentence: str) -> str:
    """The sentence as the rules read it: compatibility forms as plain ones (full-width
    letters, ？ as ?), curly apostrophes straight, spaces single."""
    if not sentence.isascii():
        sentence = unicodedata.normalize("NFKC", sentence)
        sentence = sentence.replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(sentence.split())
