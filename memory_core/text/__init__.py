"""Text rules the whole core shares: token counts, language, CJK characters, sentences, and
cutting a long text under a platform's limit."""

from __future__ import annotations

from memory_core.text.chunks import split_message
from memory_core.text.cjk import CJK_CHARACTER, CJK_RUN
from memory_core.text.language import detect, resolve
from memory_core.text.normalise import normalise
from memory_core.text.sentences import split_sentences
from memory_core.text.tokens import TokenCounter

__all__ = [
    "CJK_CHARACTER",
    "CJK_RUN",
    "TokenCounter",
    "detect",
    "normalise",
    "resolve",
    "split_message",
    "split_sentences",
]
