"""memory_core/tiers."""
