"""Sources of one channel read as one learn (an export's channel and its threads)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.service.past import CombinedSource, LearnRefused, by_place
from tests.helpers import START, ListSource, past_chat

SINCE = datetime(1970, 1, 1, tzinfo=UTC)


def _sources() -> list[ListSource]:
    channel = ListSource(
        "discord:1:2", past_chat("discord:1:2", START, days=1, per_day=25), page=10
    )
    thread = ListSource(
        "discord:1:2:3", past_chat("discord:1:2:3", START, days=1, per_day=12, prefix="t"), page=5
    )
    other = ListSource("discord:1:4", past_chat("discord:1:4", START, days=1, per_day=3), page=5)
    return [channel, thread, other]


async def test_a_channel_and_its_thread_are_one_learn_that_resumes_anywhere() -> None:
    combined, other = by_place(_sources())
    assert combined.place == "discord:1:2" and other.place == "discord:1:4"
    pages = [page async for page in combined.pages(SINCE)]
    ids = [m.platform_id for page in pages for m in page.messages]
    assert len(ids) == len(set(ids)) == 37 and pages[-1].cursor == ""
    for cut in range(len(pages) - 1):  # resumed after each page: the rest, once
        rest = [page async for page in combined.pages(SINCE, pages[cut].cursor)]
        again = [m.platform_id for page in pages[: cut + 1] + rest for m in page.messages]
        assert again == ids


async def test_a_damaged_cursor_or_places_of_two_channels_are_refused() -> None:
    channel, thread, other = _sources()
    with pytest.raises(LearnRefused, match="damaged"):
        _ = [page async for page in CombinedSource([channel, thread]).pages(SINCE, "{nope")]
    with pytest.raises(ValueError, match="one channel"):
        CombinedSource([channel, other])
