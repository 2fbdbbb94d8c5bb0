"""memory_core/prompt."""
