"""A front door made of lists: :class:`FakeSink` implements the core's ``ReplySink`` and
records what a platform would have shown, so the conversation can be tested without one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class FakeSink:
    """Messages by handle (0, 1, ...), every post and edit in order, and whether "typing"
    was showing at each of them. ``refuse_posts``/``refuse_edits``: how many of the next
    posts or edits the platform refuses; ``closed``: the bot may not write here at all."""

    message_chars: int = 100
    refuse_posts: int = 0
    refuse_edits: int = 0
    closed: bool = False
    messages: dict[int, str] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # ("post" | "edit", text)
    typing_now: bool = False
    typed: int = 0  # how many times typing was shown
    typing_at_posts: list[bool] = field(default_factory=list)

    def can_send(self) -> bool:
        return not self.closed

    def typing(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def showing() -> AsyncIterator[None]:
            self.typing_now, self.typed = True, self.typed + 1
            try:
                yield
            finally:
                self.typing_now = False

        return showing()

    def markup(self, text: str) -> str:
        return text.replace("**", "*")  # a platform with its own bold, like Slack

    async def post(self, *, text: str) -> int | None:
        self.calls.append(("post", text))
        self.typing_at_posts.append(self.typing_now)
        if self.refuse_posts:
            self.refuse_posts -= 1
            return None
        handle = len(self.messages)
        self.messages[handle] = text
        return handle

    def message_id(self, handle: int) -> str:
        return f"sink-{handle}"

    async def edit(self, *, handle: int, text: str) -> bool:
        self.calls.append(("edit", text))
        if self.refuse_edits:
            self.refuse_edits -= 1
            return False
        self.messages[handle] = text
        return True

    @property
    def shown(self) -> list[str]:
        """The messages as they read now, in the order they were posted."""
        return [self.messages[h] for h in sorted(self.messages)]
