"""bots/cli."""
