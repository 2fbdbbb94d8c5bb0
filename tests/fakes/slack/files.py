"""Files on the fake Slack: files.getUploadURLExternal and completeUploadExternal, the upload and
download endpoints, and response_url posts.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from aiohttp import web

from .blocks import message_error
from .models import _RESPONSE_URL_LIFETIME_S, FileUpload, ResponseUrlPost


class FilesMixin:
    """File uploads and downloads, response_url posts."""

    def _files_get_upload_url(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        filename = params.get("filename")
        length = params.get("length")
        if not filename or length is None:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = "F" + secrets.token_hex(5).upper()
        self._uploads[file_id] = FileUpload(
            file_id=file_id, filename=str(filename), declared_length=int(length), token=token
        )
        return {
            "ok": True,
            "upload_url": f"{self.base_url}/upload/v1/{file_id}",
            "file_id": file_id,
        }

    def _files_complete_upload(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        files = params.get("files")
        if not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        uploads: list[FileUpload] = []
        for item in files:
            upload = self._uploads.get(str(item.get("id", ""))) if isinstance(item, dict) else None
            if upload is None or upload.content is None:
                # Slack refuses to complete files whose bytes never arrived.
                return {"ok": False, "error": "file_not_found"}
            upload.title = item.get("title") or upload.filename
            uploads.append(upload)
        channels = [c for c in str(params.get("channels", "")).split(",") if c]
        channel_id = params.get("channel_id")
        shared_to = [str(channel_id)] if channel_id else channels
        if any(c not in self.channels for c in shared_to):
            return {"ok": False, "error": "invalid_channel"}
        for upload in uploads:
            upload.completed = True
            upload.channel_id = str(channel_id) if channel_id else None
            upload.channels = channels
            upload.initial_comment = params.get("initial_comment")
            upload.thread_ts = params.get("thread_ts")
        return {
            "ok": True,
            "files": [
                {
                    "id": u.file_id,
                    "name": u.filename,
                    "title": u.title,
                    "size": len(u.content or b""),
                    "user": self.bot_user_id,
                    "channels": shared_to,
                    "url_private": f"{self.base_url}/files/{u.file_id}/{u.filename}",
                }
                for u in uploads
            ],
        }

    # ---------------------------------------------------------------- other endpoints

    async def _handle_file_download(self, request: web.Request) -> web.Response:
        """``url_private``: the file's bytes for a bot token with ``files:read``; for
        anything else Slack answers with its sign-in page (HTML, status 200), not an error
        the client could tell from the status alone."""
        _, _, file_id = request.match_info["team_file"].partition("-")
        shared = self._shared_files.get(file_id)
        if shared is None:
            return web.Response(status=404, text="file_not_found")
        authorization = request.headers.get("Authorization", "")
        token = authorization.removeprefix("Bearer ").strip() if authorization else ""
        allowed = token == self.bot_token and token not in self._invalid_tokens
        if allowed and self.scopes is not None:
            allowed = "files:read" in self.scopes
        self.file_downloads.append((file_id, allowed))
        self._notify()
        if not allowed:
            page = "<!DOCTYPE html><html><title>Slack</title><body>Sign in</body></html>"
            return web.Response(text=page, content_type="text/html")
        data, mimetype = shared
        return web.Response(body=data, content_type=mimetype)

    async def _handle_upload(self, request: web.Request) -> web.Response:
        upload = self._uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="file_not_found")
        if request.content_type == "multipart/form-data":
            form = await request.post()
            field_value = next(iter(form.values()), b"")
            if isinstance(field_value, web.FileField):
                content = field_value.file.read()
            elif isinstance(field_value, str):
                content = field_value.encode()
            else:
                content = bytes(field_value)
        else:
            # slack_sdk's async client POSTs the raw bytes.
            content = await request.read()
        upload.content = content
        self._notify()
        # Slack's upload endpoint answers in plain text; slack_sdk only checks the status.
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        response_id = request.match_info["response_id"]
        registration = self._response_urls.get(response_id)
        if registration is None:
            return web.Response(status=404, text="no_service")
        if time.monotonic() - registration.issued_at > _RESPONSE_URL_LIFETIME_S:
            return web.Response(status=404, text="expired_url")
        if registration.uses_left <= 0:
            return web.Response(status=404, text="used_url")
        registration.uses_left -= 1
        body: Any
        if request.content_type == "application/json":
            body = await request.json()
        else:
            form = await request.post()
            raw = form.get("payload")
            body = json.loads(raw) if isinstance(raw, str) else {}
        if not isinstance(body, dict):
            return web.Response(status=400, text="invalid_payload")
        post = ResponseUrlPost(response_id=response_id, body=body)
        error = message_error(body)
        if error is None and self._response_rejections:
            error = self._response_rejections.popleft()
        if error is not None:
            # Like Slack: HTTP 400 with the error as plain text, nothing posted.
            self.rejected_responses.append((post, error))
            self._notify()
            return web.Response(status=400, text=error, content_type="text/plain")
        self._responses.append(post)
        self._notify()
        return web.Response(text="ok", content_type="text/plain")
