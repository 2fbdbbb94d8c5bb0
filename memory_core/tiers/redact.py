"""Removing text from summaries: whole sentences go, so no paraphrase around it survives.

Used by forget: a summary sentence that mentions the forgotten text (or the forgotten
person) is dropped; anything left that still matches is blanked out as a last resort.
An edit forgets what it took out of a message: :func:`removed_spans` finds those needles.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

from memory_core.text.cjk import CJK_CHARACTERS, CJK_RUN
from memory_core.text.language import detect
from memory_core.text.normalise import normalise
from memory_core.text.sentences import split_sentences

REDACTED = "[forgotten]"


_norm = normalise


def contains(text: str, needle: str) -> bool:
    """Whether a reader sees ``needle`` in ``text`` (:func:`~memory_core.text.normalise.
    normalise`: invisible characters, compatibility forms and case make no difference)."""
    return bool(needle) and bool(_norm(needle)) and _norm(needle) in _norm(text)


def redact(text: str, needles: Sequence[str]) -> str:
    """``text`` without the sentences that mention any of ``needles``."""
    needles = [n for n in needles if n.strip()]
    if not text or not needles or not any(contains(text, n) for n in needles):
        return text
    result = without_sentences(text, lambda s: any(contains(s, n) for n in needles))
    for needle in needles:  # a match spanning sentences: blank it out
        result = re.sub(re.escape(needle), REDACTED, result, flags=re.I)
    return result


# A sentence "quotes" a message when it repeats a run of this many of its words (or, in
# Japanese and Chinese, which have no spaces, this many characters). Shorter runs are too
# common ("I think that the") to say where a sentence came from.
QUOTE_WORDS = 4
QUOTE_CHARS = 6
_WORD = re.compile(r"\w+", re.U)


def _quote_grams(text: str) -> set[tuple[str, ...]]:
    """The runs of words (and of CJK characters) by which a sentence could quote ``text``."""
    norm = _norm(text)
    grams: set[tuple[str, ...]] = set()
    for run in CJK_RUN.findall(norm):
        grams.update(tuple(run[i : i + QUOTE_CHARS]) for i in range(len(run) - QUOTE_CHARS + 1))
    words = _WORD.findall(CJK_RUN.sub(" ", norm))
    for i in range(len(words) - QUOTE_WORDS + 1):
        gram = tuple(words[i : i + QUOTE_WORDS])
        if sum(len(w) >= 4 for w in gram) >= 2:  # not a run of small words only
            grams.add(gram)
    return grams


def quotes_any(sentence: str, sources: Sequence[str]) -> bool:
    """Whether ``sentence`` repeats one of ``sources`` (whole, if it is short but specific,
    or a run of its words)."""
    grams = _quote_grams(sentence)
    for source in sources:
        if len(source.strip()) >= 12 and contains(sentence, source.strip()):
            return True
        if grams & _quote_grams(source):
            return True
    return False


def redact_quotes(text: str, sources: Sequence[str]) -> str:
    """``text`` without the sentences that quote any of ``sources`` (removed messages).

    This is how forgetting a person or a message reaches summaries: by what was said, never
    by a name found inside the text (a member called "al" is not in "Alice")."""
    sources = [s for s in sources if s.strip()]
    if not text or not sources:
        return text
    return without_sentences(text, lambda s: quotes_any(s, sources))


def without_sentences(text: str, unwanted: Callable[[str], bool]) -> str:
    """``text`` without its ``unwanted`` sentences. Line by line, so that a line keeps its
    break while any of it is left, and a line left empty goes whole."""
    japanese = detect(text) == "ja"
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        pieces = split_sentences(line, japanese=japanese, keep_spacing=True, lowercase_starts=True)
        kept = [piece for piece in pieces if not unwanted(piece)]
        if len(kept) == len(pieces):
            lines.append(line)
        elif body := "".join(kept).strip():
            lines.append(body + line[len(line.splitlines()[0]) :])  # its line break
    return re.sub(r"[ \t]+", " ", "".join(lines)).strip()


# Words are compared one by one; a character of a script written without spaces (Japanese,
# Chinese) is a word of its own, so an edit inside a Japanese sentence removes just what went.
_WORDS = re.compile(rf"[{CJK_CHARACTERS}]|[^\s{CJK_CHARACTERS}]+")
_EDGES = " \t\n.,;:!?()[]{}<>\"'`«»“”‘’、。，．！？「」『』（）"
WORD_MIN_DIGITS = 4  # "hunter2", "0142", "221B": a digit makes a 4-character word specific
WORD_MIN_LETTERS = 8  # a word without digits or symbols must be long to be specific
PHRASE_MIN_CHARS = 16  # a removed run of at least 3 words this long is quoted nowhere by chance
PHRASE_MIN_WORDS = 3


def _distinctive(word: str) -> bool:
    """Whether a removed word may serve as a needle: redact() drops every summary sentence
    that contains it, so a short common word ("tea", "Tuesday", "5") never may, nor a
    mention (``@memorybot``, ``#general``): a name, which summaries repeat everywhere."""
    if word[:1] in ("@", "#"):
        return False
    if len(word) >= WORD_MIN_LETTERS:
        return True
    if len(word) < WORD_MIN_DIGITS:
        return False
    has_digit = any(c.isdigit() for c in word)
    has_symbol = any(not c.isalnum() and c not in "-'’" for c in word)
    return has_digit or (has_symbol and any(c.isalpha() for c in word))


def removed_spans(old: str, new: str) -> list[str]:
    """What an edit took out of ``old``, as needles for :func:`redact`: each removed (or
    replaced) word that is specific enough (a phone number, a password, a long word) and
    that ``new`` no longer contains, and each removed run of words long enough to be a
    phrase. Compared word by word, case- and width-insensitively."""
    old_words = [m.span() for m in _WORDS.finditer(old)]
    old_keys = [_norm(old[a:b].strip(_EDGES)) for a, b in old_words]
    new_keys = [_norm(m.group().strip(_EDGES)) for m in _WORDS.finditer(new)]
    matcher = difflib.SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
    needles: dict[str, None] = {}
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag not in ("delete", "replace"):
            continue
        run = old[old_words[i1][0] : old_words[i2 - 1][1]].strip(_EDGES)
        if i2 - i1 >= PHRASE_MIN_WORDS and len(run) >= PHRASE_MIN_CHARS:
            needles.setdefault(run, None)
        for a, b in old_words[i1:i2]:
            word = old[a:b].strip(_EDGES)
            if _distinctive(word) and not contains(new, word):
                needles.setdefault(word, None)
    return list(needles)
