"""bots/slack."""
