"""Text rules the whole core shares: token counts, language, CJK characters, sentences,
cutting a long text under a platform's limit, and a message's files as lines of its text."""

from __future__ import annotations

from memory_core.text.attachments import render_attachments, stored_text
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
    "render_attachments",
    "resolve",
    "split_message",
    "split_sentences",
    "stored_text",
]
