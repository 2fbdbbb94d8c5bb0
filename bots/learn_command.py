"""``/memory learn``, for the doors that have a platform history (Discord, Slack).

``/memory learn [days]`` reads the channel's past in the background (one learn per channel
in a process) and says how far it got, then what it found and what summarising it takes;
nothing is learned until ``/memory learn confirm``, which stores it, again in the background.
``/memory learn cancel`` stops it and drops what was read; ``/memory learn status`` says
where it is. What it says goes to ``tell``: the door shows it where only the admin sees it
(Discord: the command's ephemeral response, edited; Slack: an ephemeral message).

A learn that stopped (a restart, a rate limit past its cap) goes on where it stopped the
next time ``/memory learn`` is run with the same days.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from bots.commands import Command
from config.prompts import PromptSet
from config.settings import LearnSettings
from memory_core.errors import MemorybotError
from memory_core.service.learning import Learner, LearnProgress
from memory_core.service.past import PastSource

log = logging.getLogger(__name__)

Tell = Callable[[str], Awaitable[None]]
PROGRESS_EVERY_S = 2.0  # how often a learn's progress is said, at most


class ChannelLearns:
    def __init__(
        self,
        learner: Learner,
        settings: LearnSettings,
        *,
        progress_every_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self.learner = learner
        self.settings = settings
        # (Slack lets a command's answer be replaced five times: its progress is said seldom)
        self.progress_every_s = progress_every_s
        self.running: dict[str, asyncio.Task[None]] = {}

    async def handle(
        self,
        command: Command,
        *,
        place: str,
        source: Callable[[], Awaitable[PastSource]],
        tell: Tell,
        p: PromptSet,
    ) -> str:
        """What to answer at once; the rest is told as the learn goes."""
        job = self.running.get(place)
        busy = job is not None and not job.done()
        if command.key == "status":
            return _status(await self.learner.status(place), p, self.settings)
        if command.key == "cancel":
            if busy and job is not None:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job
            if await self.learner.cancel(place) or busy:
                return p.say("learn_cancelled", place=place)
            return _status(await self.learner.status(place), p, self.settings)
        if busy:
            progress = await self.learner.status(place)
            return p.say("learn_running", place=place, status=progress.status)
        if command.key == "confirm":
            progress = await self.learner.status(place)
            if progress.status not in ("read", "storing") or not progress.new:
                return _status(progress, p, self.settings)
            self._start(place, self._store(place, tell, p))
            return p.say("learn_storing", place=place, new=progress.new)
        days = int(command.arg) if command.arg else self.settings.default_days
        if days > self.settings.max_days:
            return p.say("learn_too_far", max=self.settings.max_days)
        try:
            reader = await source()
        except MemorybotError as exc:  # (a place the platform cannot read the past of)
            return p.say("learn_failed", place=place, why=str(exc))
        self._start(place, self._read(reader, days, tell, p))
        return p.say("learn_reading", place=place, days=days)

    def _start(self, place: str, work: Awaitable[None]) -> None:
        async def run() -> None:
            await work

        self.running[place] = asyncio.create_task(run(), name=f"learn {place}")

    async def _read(self, source: PastSource, days: int, tell: Tell, p: PromptSet) -> None:
        place = source.place
        said = [time.monotonic()]

        async def progress(now: LearnProgress) -> None:
            if time.monotonic() - said[0] >= self.progress_every_s:
                said[0] = time.monotonic()
                await _quietly(
                    tell, p.say("learn_progress", place=place, read=now.read, new=now.new)
                )

        try:
            found = await self.learner.read(source, days=days, progress=progress)
        except MemorybotError as exc:
            await _quietly(tell, p.say("learn_failed", place=place, why=str(exc)))
            return
        except Exception as exc:  # a platform's error: said, logged, the learn resumable
            log.exception("learning %s stopped", place)
            await _quietly(tell, p.say("learn_failed", place=place, why=type(exc).__name__))
            return
        if found.status not in ("read", "done"):
            return  # cancelled meanwhile
        if not found.new:
            text = p.say("learn_nothing", place=place, known=found.known, forgotten=found.forgotten)
        else:
            text = p.say(
                "learn_found",
                place=place,
                new=found.new,
                days=found.span_days,
                known=found.known,
                forgotten=found.forgotten,
                skipped=found.skipped,
                tokens=f"{found.estimate_tokens:,}",
            )
        await _quietly(tell, text)

    async def _store(self, place: str, tell: Tell, p: PromptSet) -> None:
        try:
            done = await self.learner.store_read(place)
        except MemorybotError as exc:
            await _quietly(tell, p.say("learn_failed", place=place, why=str(exc)))
            return
        text = p.say(
            "learn_stored",
            place=place,
            stored=done.stored,
            records=done.day_records,
            weeks=done.weeks,
        )
        if done.not_stored:
            text += " " + p.say("learn_not_stored", count=done.not_stored)
        await _quietly(tell, text)

    async def close(self) -> None:
        """Stop the learns of this process (they resume with the next /memory learn)."""
        for job in self.running.values():
            job.cancel()
        for job in self.running.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job


def _status(progress: LearnProgress, p: PromptSet, settings: LearnSettings) -> str:
    if not progress.status:
        return p.say("learn_none", days=settings.default_days, max=settings.max_days)
    return p.say(
        "learn_status",
        place=progress.place,
        source=progress.source,
        status=progress.status,
        read=progress.read,
        new=progress.new,
        stored=progress.stored,
    )


async def _quietly(tell: Tell, text: str) -> None:
    """Say it; a platform that cannot take it (the message expired) does not stop the learn."""
    try:
        await tell(text)
    except Exception as exc:  # noqa: BLE001 - the platform's own errors, whatever the door
        log.warning("could not tell how a learn goes: %s", exc)
