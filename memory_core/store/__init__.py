"""memory_core/store."""
