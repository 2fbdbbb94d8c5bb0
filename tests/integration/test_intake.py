"""The intake on a real Redis: a message is stored on its path, and the work it makes due
(maintenance, its vector, its captions) is handed on off that path. In a running bot's core
that work runs in a background task, so its failure loses nothing and is logged; in a
one-shot core it runs at once and its failure reaches the caller."""

from __future__ import annotations

import logging

import pytest

from memory_core.models import IncomingMessage, IngestResult
from memory_core.tiers.maintenance import Maintainer
from tests.helpers import CoreFactory

SCOPE = "console:intake"


class BrokenSchedule:
    """The real scheduler, except that deciding whether maintenance is due fails."""

    def __init__(self, maintainer: Maintainer) -> None:
        self.maintainer = maintainer
        self.asked = 0

    def due_after(self, scope: str, result: IngestResult, ts_ms: int) -> bool:
        self.asked += 1
        raise RuntimeError("the scheduler broke")


def message(text: str, platform_id: str) -> IncomingMessage:
    return IncomingMessage(scope=SCOPE, text=text, author="Ann", platform_id=platform_id)


async def test_work_handed_on_in_the_background_never_costs_the_message(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    core = await make_core(background=True)
    broken = BrokenSchedule(core.maintainer)
    core.intake.after.maintenance = broken  # type: ignore[assignment]
    stored = await core.intake.accept(message("the launch is on friday", "m-1"))
    assert stored.stored and stored.outcome != "duplicate"
    with caplog.at_level(logging.ERROR, logger="memory_core.service.intake"):
        await core.intake.after.drain()
    assert broken.asked == 1  # it ran, after accept returned
    assert f"the work after a message in {SCOPE} failed" in caplog.text
    recent = (await core.admin.show(SCOPE, recent=10)).recent
    assert [e.text for e in recent] == ["the launch is on friday"]


async def test_a_one_shot_core_runs_the_work_at_once_and_says_when_it_fails(
    make_core: CoreFactory,
) -> None:
    core = await make_core(background=False)
    broken = BrokenSchedule(core.maintainer)
    core.intake.after.maintenance = broken  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="the scheduler broke"):
        await core.intake.accept(message("the budget is 400", "m-2"))
    assert broken.asked == 1
    # Stored all the same: it was written before the work it made due.
    recent = (await core.admin.show(SCOPE, recent=10)).recent
    assert [e.text for e in recent] == ["the budget is 400"]


async def test_a_repeat_delivery_is_stored_once(
    make_core: CoreFactory,
) -> None:
    core = await make_core(background=False)
    first = await core.intake.accept(message("see you at nine", "m-3"))
    again = await core.intake.accept(message("see you at nine", "m-3"))
    assert first.stored and first.outcome != "duplicate"
    assert again.outcome == "duplicate"
    recent = (await core.admin.show(SCOPE, recent=10)).recent
    assert [e.text for e in recent] == ["see you at nine"]
