"""Reading a shared image's bytes for its caption (``llm.vision_model``): a GET of the file's
``url_private`` with the bot token, which Slack serves only to an app with the ``files:read``
scope (without it Slack answers with its login page, not the file). The bytes go to the
core's caption call and are dropped; memory stores the caption, never the file.

The token is sent only to Slack's file host (or the host of ``slack.api_base_url``, where
GovSlack and the tests' fake serve files): a file link in an event is never trusted to lead
elsewhere with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlsplit

import aiohttp

from config.settings import SlackSettings
from memory_core.errors import AttachmentUnavailable
from memory_core.models import Attachment, ImageSource

FILE_HOSTS = frozenset({"files.slack.com"})
DOWNLOAD_TIMEOUT_S = 30.0
_CHUNK = 64 * 1024


class SlackFiles:
    def __init__(self, settings: SlackSettings) -> None:
        self._token = settings.bot_token.get_secret_value() if settings.bot_token else ""
        api = urlsplit(settings.api_base_url)
        self._api = (api.scheme, api.netloc)

    def with_images(
        self, files: Sequence[Attachment], downloads: Sequence[tuple[str, str]]
    ) -> tuple[Attachment, ...]:
        """``files`` with a way to read the images among them (``downloads``: each file's
        MIME type and ``url_private``, in the same order)."""
        if len(files) != len(downloads):
            return tuple(files)
        return tuple(
            replace(file, image=source) if (source := self._source(*link)) else file
            for file, link in zip(files, downloads, strict=True)
        )

    def _source(self, mime: str, url: str) -> ImageSource | None:
        parts = urlsplit(url)
        trusted = (parts.scheme == "https" and parts.netloc in FILE_HOSTS) or (
            parts.scheme,
            parts.netloc,
        ) == self._api
        if not mime.startswith("image/") or not self._token or not trusted:
            return None

        async def fetch(limit: int) -> bytes:
            return await self._download(url, limit)

        return ImageSource(mime=mime, fetch=fetch)

    async def _download(self, url: str, limit: int) -> bytes:
        headers = {"Authorization": f"Bearer {self._token}"}
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers, allow_redirects=False) as response,
            ):
                kind = response.headers.get("Content-Type", "")
                if response.status != 200 or not kind.startswith("image/"):
                    raise AttachmentUnavailable(
                        f"Slack answered HTTP {response.status} ({kind or 'no type'}) instead "
                        "of the image: the app needs the files:read scope (docs/slack.md)"
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(_CHUNK):
                    data += chunk
                    if len(data) > limit:
                        raise AttachmentUnavailable(f"the image is over {limit} bytes")
                return bytes(data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise AttachmentUnavailable(f"could not download the image: {exc!r}") from exc
