"""Reading an image attachment's bytes for its caption (``llm.vision_model``): a GET of its
CDN url, which Discord signs (no token, no extra intent or permission: the bot sees the file
because it sees the message). The bytes go to the core's caption call and are dropped;
memory stores the caption, never the file. Nothing is read until the core asks.
"""

from __future__ import annotations

import aiohttp
import discord

from memory_core.errors import AttachmentUnavailable
from memory_core.models import ImageSource


def image_source(attachment: discord.Attachment) -> ImageSource | None:
    """How the core reads an image attachment's bytes: a GET of its CDN url (signed by
    Discord, no token needed; the bot sees the file because it sees the message)."""
    mime = (attachment.content_type or "").split(";", 1)[0].strip().lower()
    if not mime.startswith("image/"):
        return None

    async def fetch(limit: int) -> bytes:
        if attachment.size > limit:
            raise AttachmentUnavailable(f"{attachment.size} bytes is over {limit}")
        try:
            data = await attachment.read()
        except (discord.HTTPException, aiohttp.ClientError, TimeoutError) as exc:
            raise AttachmentUnavailable(f"Discord did not give the file: {exc!r}") from exc
        if len(data) > limit:
            raise AttachmentUnavailable(f"{len(data)} bytes is over {limit}")
        return data

    return ImageSource(mime=mime, fetch=fetch)
