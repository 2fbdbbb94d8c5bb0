"""memory_core/llm."""
