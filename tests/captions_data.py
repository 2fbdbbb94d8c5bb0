"""An image, its caption and the vision settings the caption tests share (Discord, Slack and the
core), and checks that no file's bytes were stored.
"""

from __future__ import annotations

import base64
from typing import Any

from memory_core.bootstrap import Core
from memory_core.models import Attachment, ImageSource, IncomingMessage
from memory_core.scopes import Audience
from tests.helpers import key_values

VISION = {"vision_model": "fake-vision"}


# A PNG as the fake model reads it: the words in it are what it "sees"; the rest is pixels.
PIXELS = bytes(b for b in range(256) if not chr(b).isascii() or not chr(b).isalpha()) * 8


IMAGE = b"\x89PNG\r\n\x1a\n\x00a tabby cat asleep on the red sofa\x00" + PIXELS


CAPTION = "A picture showing a tabby cat asleep on the red sofa."


async def stored_values(core: Core) -> list[str]:
    """Every key and value under the core's prefix (not only the scope's keys)."""
    client: Any = core.store.client
    values: list[str] = []
    async for key in client.scan_iter(match=f"{core.store.keys.prefix}:*", count=500):
        values += await key_values(core, key)
    return values


def assert_no_file_bytes(values: list[str]) -> None:
    encoded = base64.b64encode(IMAGE).decode()
    assert not any(encoded[:40] in v or "PNG\r\n" in v or "\x00\x01\x02" in v for v in values)


SCOPE = "discord:1:2"


class Image:
    """An image a front door can fetch, counting the fetches."""

    def __init__(self, data: bytes = IMAGE) -> None:
        self.data = data
        self.fetches = 0

    async def fetch(self, limit: int) -> bytes:
        self.fetches += 1
        return self.data[:limit]

    def attachment(self, name: str = "p.png", *, size: int | None = None) -> Attachment:
        return Attachment(
            name=name,
            kind="image/png",
            size=len(self.data) if size is None else size,
            url=f"https://cdn.example.com/{name}",
            image=ImageSource(mime="image/png", fetch=self.fetch),
        )


def message(*attachments: Attachment, pid: str = "m1", public: bool = False) -> IncomingMessage:
    return IncomingMessage(
        scope=SCOPE,
        text="",
        author="Alice",
        author_id="u1",
        platform_id=pid,
        attachments=attachments,
        audience=Audience.SERVER if public else Audience.PRIVATE,
    )
