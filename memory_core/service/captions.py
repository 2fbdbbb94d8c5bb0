"""Captions of images shared in chats: when a vision model is configured
(``llm.vision_model``; never in offline mode), each image of a stored message gets one
caption call, in the background, and the caption is stored in the message's text.

Never on the reply path, never holding up ingest. The bytes come from the front door
(:class:`~memory_core.models.ImageSource`: the core knows no platform), live only for the
call and are never stored. A failure loses nothing: the message stays as it was stored, with
a log line. The write goes through the caption store (the admin's message changes), which
refuses it when the message is gone or anything was forgotten meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from config.prompts import load_prompts
from config.settings import Settings
from memory_core.errors import AttachmentUnavailable, LLMError, StoreError
from memory_core.llm.client import LLM
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.models import Attachment, IncomingMessage
from memory_core.text.attachments import MAX_ATTACHMENTS
from memory_core.text.language import resolve

if TYPE_CHECKING:
    from memory_core.service.budget import Budget

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # bigger images are not fetched (nor sent to the model)
MAX_IMAGES = 4  # per message: the first ones; the rest keep their file line only
CAPTION_MAX_TOKENS = 120


class CaptionStore(Protocol):
    async def uncaptioned(
        self,
        scope: str,
        platform_id: str,
        attachments: Sequence[Attachment],
        *,
        when: datetime | None = None,
    ) -> tuple[list[Attachment], int]: ...

    async def add_captions(
        self,
        scope: str,
        platform_id: str,
        captioned: Sequence[Attachment],
        *,
        epoch: int,
        when: datetime | None = None,
    ) -> bool: ...


def captionable(attachment: Attachment) -> bool:
    """An image the front door can fetch, of a size worth a model call."""
    image = attachment.image
    if image is None or not image.mime.lower().startswith("image/"):
        return False
    return attachment.size is None or 0 < attachment.size <= MAX_IMAGE_BYTES


class Captioner:
    def __init__(
        self,
        *,
        settings: Settings,
        llm: LLM,
        store: CaptionStore,
        background: bool = True,
        budget: Budget | None = None,
    ) -> None:
        self.enabled = bool(settings.llm.vision_model) and not llm.offline
        self.budget = budget  # no captions while the scope's daily budget is reached
        self.settings = settings
        self.llm = llm
        self.store = store
        self.background = background
        self._tasks: set[asyncio.Task[bool]] = set()
        # Images described at once (their bytes are in memory meanwhile).
        self._fetches_at_once = asyncio.Semaphore(max(1, settings.llm.concurrency))

    def images(self, msg: IncomingMessage) -> list[Attachment]:
        """The images of ``msg`` to caption (none when vision is off)."""
        if not self.enabled or not msg.platform_id:
            return []
        return [a for a in msg.attachments[:MAX_ATTACHMENTS] if captionable(a)][:MAX_IMAGES]

    async def soon(self, msg: IncomingMessage) -> None:
        """Caption the images of a message just stored: in a background task (or now, for
        a core without background work)."""
        images = self.images(msg)
        if not images:
            return
        if not self.background:
            await self.caption(msg, images)
            return
        task = asyncio.create_task(self._in_background(msg, images))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _in_background(self, msg: IncomingMessage, images: list[Attachment]) -> bool:
        try:
            return await self.caption(msg, images)
        except StoreError as exc:
            log.warning(
                "captions of message %s in %s not stored: %s", msg.platform_id, msg.scope, exc
            )
        except Exception:  # a background task has no caller to tell: log it, loudly
            log.exception("captioning message %s in %s failed", msg.platform_id, msg.scope)
        return False

    async def caption(self, msg: IncomingMessage, images: Sequence[Attachment]) -> bool:
        """One model call per image still without a caption, then one write; whether a
        caption was stored."""
        # The epoch is read before the model is asked: a forget while it describes the image
        # moves it, and the caption is then refused (it must not bring anything back).
        todo, epoch = await self.store.uncaptioned(msg.scope, msg.platform_id, images, when=msg.ts)
        if (
            todo
            and self.budget is not None
            and await self.budget.over(msg.scope, member_id=msg.author_id)
        ):
            log.info("captions in %s skipped: a daily token budget is reached", msg.scope)
            return False
        language = resolve(self.settings.memory.language, [msg.text])
        captioned: list[Attachment] = []
        with charge_to(SpendTag(msg.scope, msg.author_id, msg.author)):
            for attachment in todo:
                text = await self._describe(msg.scope, attachment, language)
                if text:
                    captioned.append(replace(attachment, caption=text, image=None))
        if not captioned:
            return False
        stored = await self.store.add_captions(
            msg.scope, msg.platform_id, captioned, epoch=epoch, when=msg.ts
        )
        if not stored:
            log.info(
                "captions of message %s in %s dropped: it changed or memory was forgotten "
                "meanwhile",
                msg.platform_id,
                msg.scope,
            )
        return stored

    async def _describe(self, scope: str, attachment: Attachment, language: str) -> str:
        image = attachment.image
        assert image is not None
        try:
            async with self._fetches_at_once:
                data = await image.fetch(MAX_IMAGE_BYTES)
                if not data or len(data) > MAX_IMAGE_BYTES:
                    raise AttachmentUnavailable(f"{len(data)} bytes: not captioned")
                result = await self.llm.describe_image(
                    data,
                    mime=image.mime,
                    instruction=load_prompts(language).caption,
                    max_tokens=CAPTION_MAX_TOKENS,
                )
        except (AttachmentUnavailable, LLMError) as exc:
            log.warning("no caption for %r in %s: %s", attachment.name[:80], scope, exc)
            return ""
        return " ".join(result.text.split()).strip("\"'")

    async def drain(self) -> None:
        """Wait for the captions being made (shutdown, end of a test)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
