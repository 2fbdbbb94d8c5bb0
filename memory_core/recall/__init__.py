"""memory_core/recall."""
