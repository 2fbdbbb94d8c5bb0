"""Benchmarks: memorybot side by side with the alternatives, written to docs/benchmarks.md."""
