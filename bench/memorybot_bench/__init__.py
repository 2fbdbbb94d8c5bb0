"""memorybot's benchmarks and its LoCoMo and year evaluations, run as ``memorybot bench ...``
and ``memorybot eval ...`` (bots/cli/bench.py and bots/cli/eval.py import them lazily).

A distribution of its own (bench/pyproject.toml), installed by memorybot's ``bench`` extra:
nothing here ships with the bot, and the product's tests import none of it."""
