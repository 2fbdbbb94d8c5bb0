"""memory_core."""
