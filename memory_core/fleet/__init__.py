"""memory_core/fleet."""
