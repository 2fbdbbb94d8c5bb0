"""Links to Discord messages, for ``/memory why`` and source lines: the URL the client opens,
``https://discord.com/channels/<guild>/<channel>/<message>`` (``@me`` in place of the guild
for a DM). A recalled message was said in the scope's own channel, thread or DM, so the
place where the link is shown knows both ids; the core only stored the message id."""

from __future__ import annotations

BASE = "https://discord.com/channels"


def message_url(*, guild_id: int | None, channel_id: int, message_id: str) -> str:
    """The message's URL ("" for an id that is not a Discord snowflake, e.g. an import's)."""
    if not message_id.isdigit() or not channel_id:
        return ""
    where = "@me" if guild_id is None else str(guild_id)
    return f"{BASE}/{where}/{channel_id}/{message_id}"
