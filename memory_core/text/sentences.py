"""Where sentences end, in English and Japanese: the one splitter of the core.

A line break always ends a sentence. CJK terminators (。！？｡) always end one too. Latin ones
need whitespace (or the end of the line) after them in English, which keeps 3.5, URLs and
"e.g.x" whole; a period is also not a boundary after a known abbreviation or an initial, or
before a lower-case word or a digit ("e.g. the", "p.m. tomorrow"), unless the caller says a
sentence may start in lower case (``lowercase_starts``: summaries that name a speaker "al",
where a sentence about al must stay apart from the one before it). In Japanese, where no
space follows, ! and ? end a sentence wherever they are. Closing quotes and brackets after a
terminator belong to the sentence they close.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A run of terminators plus any closing quotes or brackets that belong to the sentence.
# One character class first, so that the regex engine can skip quickly to candidates.
_TERMINATOR_RE = re.compile(r"([.!?。！？｡]+)[\"'”’)\]」』）】]*")
# Japanese pieces when the line has no Latin period: up to and including a terminator run.
_JA_PIECES_RE = re.compile(
    r"[^。！？｡!?]+(?:[。！？｡!?]+[\"'”’)\]」』）】]*)?|[。！？｡!?]+[\"'”’)\]」』）】]*"
)
_ALNUM_RE = re.compile(r"[^\W_]")
# A period after these is (almost) never the end of a sentence.
ABBREVIATIONS = frozenset(
    """
    e.g i.e etc vs cf mr mrs ms dr prof sr jr st mt no fig approx dept est inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec a.m p.m u.s u.k
    """.split()
)


def split_sentences(
    text: str, *, japanese: bool = False, keep_spacing: bool = False, lowercase_starts: bool = False
) -> list[str]:
    """The sentences of ``text``, in order.

    By default each sentence is stripped, and pieces without a letter or digit ("...", "?!")
    are dropped. With ``keep_spacing`` nothing is dropped or stripped: the pieces joined give
    ``text`` back exactly, each carrying the whitespace (line breaks included) that precedes
    it, so removing a sentence takes its separator with it and leaves its neighbours' lines.
    """
    if keep_spacing:
        return _pieces_keeping_spacing(text, japanese, lowercase_starts)
    sentences: list[str] = []
    for line in text.splitlines():
        sentences.extend(_line_sentences(line, japanese, lowercase_starts))
    return sentences


def _line_sentences(line: str, japanese: bool, lowercase_starts: bool) -> list[str]:
    if not line:
        return []
    if japanese and "." not in line:
        # Every terminator is a boundary here, so the regex alone can do the splitting.
        pieces = _JA_PIECES_RE.findall(line)
        return [piece.strip() for piece in pieces if _ALNUM_RE.search(piece)]
    pieces = []
    start = 0
    for end in _sentence_ends(line, japanese, lowercase_starts):
        pieces.append(line[start:end].strip())
        start = end
    pieces.append(line[start:].strip())
    return [piece for piece in pieces if _ALNUM_RE.search(piece)]


def _pieces_keeping_spacing(text: str, japanese: bool, lowercase_starts: bool) -> list[str]:
    cuts: list[int] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        cuts.extend(offset + end for end in _sentence_ends(line, japanese, lowercase_starts))
        if line.strip():  # the line break (and blank lines) lead the next piece
            cuts.append(offset + len(line.rstrip()))
        offset += len(line)
    pieces: list[str] = []
    start = 0
    for cut in cuts:
        if cut > start:
            pieces.append(text[start:cut])
            start = cut
    if start < len(text):
        if pieces and not text[start:].strip():
            pieces[-1] += text[start:]  # trailing whitespace stays with the last sentence
        else:
            pieces.append(text[start:])
    return pieces


def _sentence_ends(line: str, japanese: bool, lowercase_starts: bool) -> Iterator[int]:
    """The offsets in ``line`` just after each terminator run that ends a sentence."""
    for match in _TERMINATOR_RE.finditer(line):
        if _is_boundary(line, match, japanese, lowercase_starts):
            yield match.end()


def _is_boundary(line: str, match: re.Match[str], japanese: bool, lowercase_starts: bool) -> bool:
    """Decide whether the terminator run ``match`` ends a sentence (see the module doc)."""
    run = match.group(1)
    if not run.isascii():
        return True  # a CJK terminator
    bang = "!" in run or "?" in run
    if japanese and bang:
        return True
    end = match.end()
    if end < len(line) and not line[end].isspace():
        return False
    if bang:
        return True
    following = line[end:].lstrip()[:1]
    if following and (following.isdigit() or (following.islower() and not lowercase_starts)):
        return False
    start = match.start()
    word_start = start
    while word_start > 0 and not line[word_start - 1].isspace():
        word_start -= 1
    token = line[word_start:start].lstrip("([{\"'“‘")
    return not (token.lower() in ABBREVIATIONS or (len(token) == 1 and token.isupper()))
