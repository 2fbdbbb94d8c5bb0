"""The fake Slack's assistant panel (an app whose manifest has ``features.assistant_view``):
the events Slack sends when a member opens the panel or looks at another channel, the
``assistant.threads.*`` methods with the errors their reference pages document, and message
metadata (where Bolt's default thread-context store keeps a thread's context).

An assistant thread lives in the member's DM with the app: its root is a message of the
member with subtype ``assistant_app_thread`` ("Chats from ..."), whose ``ts`` is the
thread's ``thread_ts``; the app's answers and the member's questions are its replies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .blocks import _invalid_arguments

# assistant.threads.setSuggestedPrompts: "up to four suggested prompts"; setStatus:
# loading_messages, "Maximum of 10 messages".
MAX_SUGGESTED_PROMPTS = 4
MAX_LOADING_MESSAGES = 10


@dataclass(slots=True)
class AssistantThread:
    """An assistant thread as the fake keeps it: whose it is, its title, the status shown
    now and every status the app set (oldest first; Slack clears it when the app posts in
    the thread), the suggested prompts last set and their title."""

    channel_id: str
    thread_ts: str
    user_id: str
    title: str
    status: str = ""
    statuses: list[str] = field(default_factory=list)
    prompts: list[dict[str, str]] = field(default_factory=list)
    prompts_title: str | None = None


def metadata_error(params: Mapping[str, Any]) -> str | None:
    """Why chat.postMessage / chat.update would refuse the message's ``metadata``: an
    object with an ``event_type`` (a string) and an ``event_payload`` (an object)."""
    metadata = params.get("metadata")
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        return "invalid_metadata_format"
    event_type, payload = metadata.get("event_type"), metadata.get("event_payload")
    if not isinstance(event_type, str) or not event_type or not isinstance(payload, Mapping):
        return "invalid_metadata_format"
    return None


class AssistantMixin:
    """Assistant events, the ``assistant.threads.*`` methods, and the record of threads."""

    # ---------------------------------------------------------------- events

    def assistant_thread_started_event(
        self,
        *,
        user_id: str,
        viewing: str | None = None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """``user_id`` opens the app's assistant panel (``assistant_thread_started``) while
        looking at the channel ``viewing`` (None: at no channel). A new thread begins in
        their DM with the app: its root message (subtype ``assistant_app_thread``) exists
        from now on. Slack shows no panel for an app without the assistant view
        (ValueError)."""
        if not self.assistant_view:
            raise ValueError("the app has no assistant view: nobody can open its panel")
        dm = self._dm_with(user_id)
        ts = self.next_ts()
        title = "Chats from " + datetime.fromtimestamp(float(ts), tz=UTC).isoformat()
        self._said[(dm.id, ts)] = {
            "type": "message",
            "subtype": "assistant_app_thread",
            "user": user_id,
            "text": title,
            "ts": ts,
            "thread_ts": ts,
            "team": team_id or self.team_id,
            "channel": dm.id,
            "assistant_app_thread": {"title": title, "title_blocks": [], "artifacts": []},
        }
        self.assistant_threads[(dm.id, ts)] = AssistantThread(
            channel_id=dm.id, thread_ts=ts, user_id=user_id, title=title
        )
        return self._assistant_event(
            "assistant_thread_started", dm.id, ts, user_id, viewing, team_id
        )

    def assistant_thread_context_changed_event(
        self, *, started: Mapping[str, Any], viewing: str | None, team_id: str | None = None
    ) -> dict[str, Any]:
        """The member of the thread ``started`` (its ``assistant_thread_started`` event)
        looks at another channel, ``viewing``, with the panel open
        (``assistant_thread_context_changed``)."""
        thread = started["assistant_thread"]
        channel_id, ts = str(thread["channel_id"]), str(thread["thread_ts"])
        if (channel_id, ts) not in self.assistant_threads:
            raise ValueError(f"no assistant thread {ts} in {channel_id}")
        return self._assistant_event(
            "assistant_thread_context_changed",
            channel_id,
            ts,
            str(thread["user_id"]),
            viewing,
            team_id,
        )

    def _assistant_event(
        self,
        kind: str,
        channel_id: str,
        ts: str,
        user_id: str,
        viewing: str | None,
        team_id: str | None,
    ) -> dict[str, Any]:
        context: dict[str, Any] = {}
        if viewing is not None:
            context = {
                "channel_id": viewing,
                "team_id": team_id or self.team_id,
                "enterprise_id": self.enterprise_id,
            }
        return {
            "type": kind,
            "assistant_thread": {
                "user_id": user_id,
                "context": context,
                "channel_id": channel_id,
                "thread_ts": ts,
            },
            "event_ts": f"{time.time():.6f}",
        }

    def assistant_thread(self, channel_id: str, thread_ts: str) -> AssistantThread | None:
        """The assistant thread ``thread_ts`` of the DM ``channel_id``, as it is now."""
        return self.assistant_threads.get((channel_id, thread_ts))

    def _assistant_replied(self, channel_id: str, thread_ts: Any) -> None:
        """The app posted in a thread: Slack clears the thread's status."""
        thread = self.assistant_threads.get((channel_id, str(thread_ts)))
        if thread is not None:
            thread.status = ""

    # ---------------------------------------------------------------- methods

    def _assistant_target(
        self, params: Mapping[str, Any], *, assistant_only: bool
    ) -> tuple[tuple[str, str] | None, dict[str, Any] | None]:
        """The (channel, thread_ts) a method names, or its error: ``channel_id`` and
        ``thread_ts`` missing (``invalid_arguments``), a conversation the app cannot see
        (``channel_not_found``), a thread that is not there (``invalid_thread_ts``: "Thread
        not found"; for ``assistant_only``, any thread but an assistant thread)."""
        channel_id, ts = params.get("channel_id"), params.get("thread_ts")
        missing = [name for name, v in (("channel_id", channel_id), ("thread_ts", ts)) if not v]
        if missing:
            return None, _invalid_arguments(*(f"missing required field: {m}" for m in missing))
        channel = self._app_channel(str(channel_id))
        if channel is None:
            return None, {"ok": False, "error": "channel_not_found"}
        key = (channel.id, str(ts))
        if assistant_only and key not in self.assistant_threads:
            return None, {"ok": False, "error": "invalid_thread_ts"}
        if self._known_message(channel.id, str(ts)) is None:
            return None, {"ok": False, "error": "invalid_thread_ts"}
        return key, None

    def _assistant_set_status(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """assistant.threads.setStatus (chat:write, or assistant:write for now): ``status``
        is required ("" clears it), ``loading_messages`` at most 10. Allowed in any thread
        of a conversation the app can see (since March 2026, channels' too)."""
        key, error = self._assistant_target(params, assistant_only=False)
        if error is not None or key is None:
            return error or {"ok": False, "error": "invalid_thread_ts"}
        status = params.get("status")
        if not isinstance(status, str):
            return _invalid_arguments("missing required field: status")
        loading = params.get("loading_messages")
        if loading is not None and (
            not isinstance(loading, list) or len(loading) > MAX_LOADING_MESSAGES
        ):
            return _invalid_arguments("[ERROR] no more than 10 items allowed [loading_messages]")
        thread = self.assistant_threads.get(key)
        if thread is not None:
            thread.status = status
            thread.statuses.append(status)
        return {"ok": True}

    def _assistant_set_suggested_prompts(
        self, params: dict[str, Any], token: str | None
    ) -> dict[str, Any]:
        """assistant.threads.setSuggestedPrompts (assistant:write): ``prompts``, one to four
        objects each with a ``title`` and a ``message`` (strings), and an optional
        ``title`` for the list."""
        key, error = self._assistant_target(params, assistant_only=True)
        if error is not None or key is None:
            return error or {"ok": False, "error": "invalid_thread_ts"}
        prompts = params.get("prompts")
        if not isinstance(prompts, list) or not prompts:
            return _invalid_arguments("missing required field: prompts")
        if len(prompts) > MAX_SUGGESTED_PROMPTS:
            return _invalid_arguments("[ERROR] too many items [json-pointer:/prompts]")
        for index, prompt in enumerate(prompts):
            fields = (
                [prompt.get(k) for k in ("title", "message")] if isinstance(prompt, dict) else []
            )
            if len(fields) != 2 or not all(isinstance(f, str) and f.strip() for f in fields):
                where = f"[json-pointer:/prompts/{index}]"
                return _invalid_arguments(f"[ERROR] missing required field: title, message {where}")
        title = params.get("title")
        thread = self.assistant_threads[key]
        thread.prompts = [dict(p) for p in prompts]
        thread.prompts_title = str(title) if title is not None else None
        return {"ok": True}

    def _assistant_set_title(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """assistant.threads.setTitle (assistant:write): ``title`` is required; the thread's
        root message takes it (what the member's history of chats shows)."""
        key, error = self._assistant_target(params, assistant_only=True)
        if error is not None or key is None:
            return error or {"ok": False, "error": "invalid_thread_ts"}
        title = params.get("title")
        if not isinstance(title, str) or not title.strip():
            return _invalid_arguments("missing required field: title")
        self.assistant_threads[key].title = title
        root = self._said.get(key)
        if root is not None:
            root["text"] = title
            root["assistant_app_thread"] = {**root["assistant_app_thread"], "title": title}
        return {"ok": True}
