"""bots/bench."""
