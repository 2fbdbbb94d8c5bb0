"""The prompt of a reply: assembly under a token budget (memory inside a fence the text cannot
close), and what is done to an answer before anyone sees it (secret masking, the length cap)."""

from __future__ import annotations

from memory_core.prompt.answers import SecretMask, StreamedAnswer, capped, with_marker
from memory_core.prompt.assembly import (
    AssemblyInput,
    Prompt,
    PromptAssembler,
    order_facts,
    render_fact,
)
from memory_core.prompt.fence import fence

__all__ = [
    "AssemblyInput",
    "Prompt",
    "PromptAssembler",
    "SecretMask",
    "StreamedAnswer",
    "capped",
    "fence",
    "order_facts",
    "render_fact",
    "with_marker",
]
