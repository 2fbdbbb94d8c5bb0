"""memory_core/text."""
