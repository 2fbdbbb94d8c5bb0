"""The model: one OpenAI-compatible client with retries, a deadline per reply and streaming,
and the offline stand-in used when no key is set. Errors of the SDK become ``LLMError`` here."""

from __future__ import annotations

from memory_core.llm.client import LLM, ChatMessage, ChatResult, LLMStats, OfflineLLM, build_llm

__all__ = ["LLM", "ChatMessage", "ChatResult", "LLMStats", "OfflineLLM", "build_llm"]
