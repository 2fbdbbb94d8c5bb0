"""bots/discord."""
