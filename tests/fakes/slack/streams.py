"""Slack's streamed messages in the fake: chat.startStream, chat.appendStream and
chat.stopStream as their reference pages document them (chat:write, Tier 2, 4 and 2).

A stream is a reply in a thread (``thread_ts``, a message of the conversation: else
``invalid_thread_ts``); outside a DM it names who receives it (``recipient_user_id`` and
``recipient_team_id``, else ``missing_recipient_user_id`` / ``missing_recipient_team_id``;
a user the workspace does not know is ``user_not_found``). Its text is Markdown
(``markdown_text`` or ``markdown_text`` chunks, at most 12,000 characters a call); appends
and the stop add to it while it streams, and once it stopped (or timed out:
:meth:`StreamsMixin.time_out_stream`) it takes no more (``message_not_in_streaming_state``),
but chat.update may change it like any message of the app. A workspace or plan that does not
allow streaming answers chat.startStream with ``stream_refusal`` (the FakeSlack argument).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from .blocks import _invalid_arguments
from .models import _STREAM_TEXT_CHARS

StreamState = Literal["streaming", "stopped"]


@dataclass(slots=True)
class FakeStream:
    """A streamed message as it stands: what it reads, how it got there, and its state."""

    channel: str
    ts: str
    thread_ts: str
    recipient_user_id: str | None
    recipient_team_id: str | None
    text: str
    appends: int = 0
    state: StreamState = "streaming"
    timed_out: bool = False


class StreamsMixin:
    """chat.startStream / appendStream / stopStream and the records of the streams."""

    _streams: dict[tuple[str, str], FakeStream]
    stream_refusal: str | None

    @property
    def streams(self) -> list[FakeStream]:
        """Every stream started, oldest first; ``text``: what its message reads now (a
        chat.update after the stream changes it too)."""
        shown = []
        for key, stream in self._streams.items():
            now = copy.copy(stream)
            now.text = str(self._messages[key].get("text", ""))
            shown.append(now)
        return shown

    def time_out_stream(self, ts: str) -> None:
        """The stream ``ts`` ends on Slack's side (left without appends for too long): it
        reads what it had, and takes no more appends (``message_not_in_streaming_state``)."""
        stream = next(s for s in self._streams.values() if s.ts == ts)
        stream.state, stream.timed_out = "stopped", True

    def _stream_text(self, params: dict[str, Any], *, required: bool) -> tuple[str, str | None]:
        """The Markdown a call adds (``markdown_text`` and ``markdown_text`` chunks), or the
        error: ``no_text`` (required and none), ``invalid_chunks``, too long."""
        parts: list[str] = []
        if params.get("markdown_text") is not None:
            parts.append(str(params["markdown_text"]))
        chunks = params.get("chunks")
        if chunks is not None:
            if not isinstance(chunks, list) or not all(
                isinstance(c, dict) and c.get("type") == "markdown_text" and "text" in c
                for c in chunks
            ):
                return "", "invalid_chunks"
            parts.extend(str(c["text"]) for c in chunks)
        text = "".join(parts)
        if required and not text:
            return "", "no_text"
        if any(len(part) > _STREAM_TEXT_CHARS for part in parts):
            return "", "msg_too_long"
        return text, None

    def _open_stream(
        self, params: dict[str, Any]
    ) -> tuple[FakeStream | None, dict[str, Any] | None]:
        """The stream a call names (``channel``, ``ts``), still streaming, or the error."""
        error = self._post_error(params, needs_content=False)
        if error is not None:
            return None, {"ok": False, "error": error}
        key = (str(params.get("channel", "")), str(params.get("ts", "")))
        stream = self._streams.get(key)
        if stream is None:
            known = key in self._messages
            return None, {
                "ok": False,
                "error": "message_not_in_streaming_state" if known else "message_not_found",
            }
        if stream.state != "streaming":
            return None, {"ok": False, "error": "message_not_in_streaming_state"}
        return stream, None

    def _chat_start_stream(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        error = self._post_error(params, needs_content=False)
        if error is not None:
            return {"ok": False, "error": error}
        if self.stream_refusal is not None:
            return {"ok": False, "error": self.stream_refusal}
        channel_id = str(params["channel"])
        channel = self.channels[channel_id]
        thread_ts = str(params.get("thread_ts") or "")
        parent = self._known_message(channel_id, thread_ts) if thread_ts else None
        if parent is None:
            return {"ok": False, "error": "invalid_thread_ts"}
        thread_ts = str(parent.get("thread_ts") or thread_ts)
        user, team = params.get("recipient_user_id"), params.get("recipient_team_id")
        if not channel.is_im:
            if not user:
                return {"ok": False, "error": "missing_recipient_user_id"}
            if not team:
                return {"ok": False, "error": "missing_recipient_team_id"}
        if user and user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        text, text_error = self._stream_text(params, required=False)
        if text_error is not None:
            return {"ok": False, "error": text_error}
        ts = self.next_ts()
        message = self._message_object({"text": text, "thread_ts": thread_ts}, ts)
        self._messages[(channel_id, ts)] = message
        self._count_channel_post(channel_id)
        self._assistant_replied(channel_id, thread_ts)  # a reply: the thread's status clears
        self._streams[(channel_id, ts)] = FakeStream(
            channel=channel_id,
            ts=ts,
            thread_ts=thread_ts,
            recipient_user_id=str(user) if user else None,
            recipient_team_id=str(team) if team else None,
            text=text,
        )
        return {"ok": True, "channel": channel_id, "ts": ts}

    def _chat_append_stream(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        if not params.get("ts"):
            return _invalid_arguments("missing required field: ts")
        stream, error = self._open_stream(params)
        if error is not None or stream is None:
            return error or {"ok": False, "error": "message_not_found"}
        text, text_error = self._stream_text(params, required=True)
        if text_error is not None:
            return {"ok": False, "error": text_error}
        self._grow(stream, text)
        stream.appends += 1
        return {"ok": True, "channel": stream.channel, "ts": stream.ts}

    def _chat_stop_stream(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        if not params.get("ts"):
            return _invalid_arguments("missing required field: ts")
        stream, error = self._open_stream(params)
        if error is not None or stream is None:
            return error or {"ok": False, "error": "message_not_found"}
        text, text_error = self._stream_text(params, required=False)
        if text_error is not None:
            return {"ok": False, "error": text_error}
        self._grow(stream, text)
        stream.state = "stopped"
        message = self._messages[(stream.channel, stream.ts)]
        return {
            "ok": True,
            "channel": stream.channel,
            "ts": stream.ts,
            "message": copy.deepcopy(message),
        }

    def _grow(self, stream: FakeStream, text: str) -> None:
        stream.text += text
        self._messages[(stream.channel, stream.ts)]["text"] = stream.text
