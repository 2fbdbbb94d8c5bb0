"""memory_core/service."""
