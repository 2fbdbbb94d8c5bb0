"""How one answer reaches the person who asked: a front door's :class:`ReplySink`, and the
:class:`StreamedReply` that writes through it, optionally showing the answer while the model
writes it.

While it is written, the answer's first message is a :class:`Draft`: posted with the first
words and edited as the answer grows (:class:`EditedDraft`, any platform), or a door's own
(Slack's native streams). A draft's updates go at the platform's pace: a sink that knows its
platform's limits (:class:`PacedSink`) says whether one may go now, and an update that may
not is simply skipped (the next one shows more); the answer's last words wait for their turn.

An answer is never shown twice. A draft that cannot be completed keeps what it shows, and
only what it lacks follows it in a new message (:func:`continuation`).

The core imports no platform library: a sink's handle (a Discord message, a Slack ts) is
opaque here, and a sink reports a failed post or edit by its return value, having logged it.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

from memory_core.text.chunks import split_message

STREAMING_MARK = " …"  # shown at the end of a draft while the answer is still coming
CONTINUED = "…"  # opens what follows a draft that could not be completed

HandleT = TypeVar("HandleT")
HandleT_co = TypeVar("HandleT_co", covariant=True)
Call = Literal["post", "edit"]


class Throttle:
    """True at most once per ``interval_s`` (streaming edits: about one a second)."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last = float("-inf")

    def ready(self) -> bool:
        now = self._clock()
        if now - self._last >= self.interval_s:
            self._last = now
            return True
        return False


class ReplySink(Protocol[HandleT]):
    """How one answer reaches the person who asked, on one platform.

    ``post`` and ``edit`` never raise for a platform failure: they log it (without the text)
    and return None or False, so a refusal never escapes into the model's stream and the
    answer is still finished.
    """

    message_chars: int  # the longest message the platform shows well

    def can_send(self) -> bool:
        """Whether an answer could be posted at all (checked before paying for one)."""
        ...

    def typing(self) -> AbstractAsyncContextManager[object]:
        """Show that the answer is being written, for as long as the block runs."""
        ...

    def markup(self, text: str) -> str:
        """The model's Markdown as the platform writes it."""
        ...

    async def post(self, *, text: str) -> HandleT | None:
        """Post one message of the answer (the first one answers the message that asked);
        its handle, or None when the platform refused it."""
        ...

    async def edit(self, *, handle: HandleT, text: str) -> bool:
        """Replace the text of a posted message; False when the platform refused."""
        ...

    def message_id(self, handle: HandleT) -> str:
        """The platform's id of a posted message ("" where there is none): the answer is
        remembered under it, so that deleting it on the platform forgets it."""
        ...


class KeptAnswer:
    """The sink of a caller without a platform (``memorybot ask``, a replay, the
    benchmarks): the answer's messages are kept, in order, for the caller to show. Nothing
    it keeps can be deleted on a platform, so the answer is remembered without an id."""

    message_chars = sys.maxsize  # nothing to split for

    def __init__(self) -> None:
        self.posted: list[str] = []

    def can_send(self) -> bool:
        return True

    def typing(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def markup(self, text: str) -> str:
        return text

    async def post(self, *, text: str) -> int:
        self.posted.append(text)
        return len(self.posted) - 1

    async def edit(self, *, handle: int, text: str) -> bool:
        self.posted[handle] = text
        return True

    def message_id(self, handle: int) -> str:
        return ""

    @property
    def text(self) -> str:
        return "\n".join(self.posted)


@runtime_checkable
class PacedSink(Protocol):
    """A sink on a platform that limits how often it may be called (a sink without it is
    never held back: the console)."""

    async def room(self, call: Call, *, wait: bool) -> bool:
        """Whether one more ``call`` may go now (it is then counted against the limit);
        ``wait``: wait for it, as long as the door is willing to (then True: go anyway)."""
        ...


class Shown(enum.Enum):
    """What became of a draft's update."""

    YES = "shown"
    LATER = "not now"  # the platform's pace: the next update shows more
    NO = "refused"  # no more drafting: the answer is completed, or posted, at the end


class Draft(Protocol[HandleT_co]):
    """The answer's first message while the answer is written."""

    mark: str  # what a draft ends with while the answer is coming ("": the platform shows it)

    @property
    def handle(self) -> HandleT_co | None:
        """The message, once it exists."""
        ...

    @property
    def said(self) -> str:
        """What of the answer it shows now (without the mark)."""
        ...

    async def update(self, text: str) -> Shown:
        """Show ``text``, the answer so far (at the platform's pace)."""
        ...

    async def complete(self, text: str) -> bool:
        """Make the message read ``text``, the answer's first part, and end it (waiting for
        the platform's pace): False when that could not be done (it keeps :attr:`said`)."""
        ...


@runtime_checkable
class DraftingSink(Protocol[HandleT_co]):
    """A sink with a draft of its own (a platform that streams natively); others draft by
    posting and editing (:class:`EditedDraft`)."""

    def draft(self) -> Draft[HandleT_co]:
        """The draft of this answer."""
        ...


async def room(sink: object, call: Call, *, wait: bool) -> bool:
    """The sink's pace for one more ``call`` (always yes for a sink without limits)."""
    return await sink.room(call, wait=wait) if isinstance(sink, PacedSink) else True


class EditedDraft(Generic[HandleT]):
    """A draft posted with the first words and edited as the answer grows, with
    :data:`STREAMING_MARK` at its end until the answer is complete."""

    mark = STREAMING_MARK
    ATTEMPTS = 2  # a final edit the platform refused is tried once more

    def __init__(self, sink: ReplySink[HandleT]) -> None:
        self.sink = sink
        self._handle: HandleT | None = None
        self._said = ""
        self._reads = ""  # what the message reads now, mark included

    @property
    def handle(self) -> HandleT | None:
        return self._handle

    @property
    def said(self) -> str:
        return self._said

    async def update(self, text: str) -> Shown:
        if not await room(self.sink, "post" if self._handle is None else "edit", wait=False):
            return Shown.LATER
        preview = text + self.mark
        if self._handle is None:
            self._handle = await self.sink.post(text=preview)
            shown = self._handle is not None
        else:
            shown = await self.sink.edit(handle=self._handle, text=preview)
        if not shown:
            return Shown.NO
        self._said, self._reads = text, preview
        return Shown.YES

    async def complete(self, text: str) -> bool:
        if self._handle is None:
            return False
        for _ in range(self.ATTEMPTS):
            if self._reads == text:
                return True
            await room(self.sink, "edit", wait=True)
            if await self.sink.edit(handle=self._handle, text=text):
                self._said = self._reads = text
                return True
        return False


def continuation(said: str, text: str) -> str:
    """What a message showing ``said`` lacks of ``text``, to post after it: from the last
    word it shows whole, opened with :data:`CONTINUED` ("" when it lacks nothing)."""
    cut = 0
    for a, b in zip(said, text, strict=False):
        if a != b:
            break
        cut += 1
    if 0 < cut < len(text) and text[cut - 1].isalnum() and text[cut].isalnum():
        # mid-word: from the start of that word (the message shows it cut)
        while cut > 0 and not text[cut - 1].isspace():
            cut -= 1
    if cut == 0:
        return text  # it shows none of it
    rest = text[cut:].strip()
    return f"{CONTINUED}{rest}" if rest else ""


class StreamedReply(Generic[HandleT]):
    """One answer on its way through a sink: optionally streamed as a draft (updated at most
    once per ``stream_interval_s``, at the platform's pace), then completed, with what
    overflows the first message posted after it."""

    def __init__(
        self,
        sink: ReplySink[HandleT],
        *,
        stream_interval_s: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.throttle = (
            Throttle(stream_interval_s, clock) if stream_interval_s is not None else None
        )
        self.draft: Draft[HandleT] | None = None  # once the answer starts streaming
        self.broken = False  # a draft update was refused: no more drafting
        self.first: HandleT | None = None  # the answer's first message that stayed
        self.more: list[HandleT] = []  # its other messages (what overflowed the first)

    @property
    def streams(self) -> bool:
        return self.throttle is not None

    def chunks(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(self.sink.markup(text), limit or self.sink.message_chars)

    async def progress(self, text_so_far: str) -> None:
        """The replier's ``on_progress``: show the answer growing, throttled."""
        if self.throttle is None or self.broken or not text_so_far.strip():
            return
        if not self.throttle.ready():
            return
        if self.draft is None:
            sink = self.sink
            if isinstance(sink, DraftingSink):
                self.draft = sink.draft()
            else:
                self.draft = EditedDraft[HandleT](sink)
        # The first message only, under the limit with the mark; what overflows is posted
        # when the answer is complete.
        chunks = self.chunks(text_so_far, self.sink.message_chars - len(self.draft.mark))
        if chunks and await self.draft.update(chunks[0].rstrip()) is Shown.NO:
            self.broken = True

    async def finish(self, text: str) -> bool:
        """Post (or complete) the answer. Returns whether all of it was posted."""
        chunks = self.chunks(text)
        if not chunks:
            return False
        rest = chunks
        draft = self.draft
        if draft is not None and draft.handle is not None:
            self.first = draft.handle
            rest = chunks[1:]
            if not await draft.complete(chunks[0]):
                # It keeps what it shows: only what it lacks follows it, never all again.
                lacking = continuation(draft.said, chunks[0])
                rest = [lacking, *rest] if lacking else rest
        # else: nothing streamed (or no draft was ever shown): the whole answer, posted.
        for chunk in rest:
            await room(self.sink, "post", wait=True)
            posted = await self.sink.post(text=chunk)
            if posted is None:
                return False
            if self.first is None:
                self.first = posted
            else:
                self.more.append(posted)
        return True
