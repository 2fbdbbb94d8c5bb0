"""``python -m bots.cli``: the memorybot command."""

from bots.cli.main import main

main()
