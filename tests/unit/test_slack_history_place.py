"""The pure parts of reading a Slack channel's past (bots/learn/slack_history.py and
slack_pacing.py): the cursor that says where a reading is, which messages start threads,
what a 429 asks to wait, and the pacer's spacing on a clock the test moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bots.learn.slack_history import Place, is_thread_parent, slack_ts
from bots.learn.slack_pacing import Pacer, without_rate_retries
from bots.slack.connect import retry_after
from memory_core.service.past import LearnRefused


@pytest.mark.parametrize(
    "place",
    [
        Place(channel="C1", oldest="0.000000"),
        Place(channel="C1", oldest="1.000000", history="bmV4dA==", threads=("1.5", "1.7")),
        Place(
            channel="D1",
            oldest="1.000000",
            history_done=True,
            threads=("1.5",),
            replies="cmVwbGllcw==",
        ),
    ],
)
def test_a_place_reads_back_from_its_cursor(place: Place) -> None:
    assert Place.decode(place.encode(), channel=place.channel) == place


@pytest.mark.parametrize(
    "cursor",
    [
        "not json",
        "[]",
        '{"channel": "C1"}',
        '{"channel": "C1", "oldest": 1, "history": "", "history_done": false, '
        '"threads": [], "replies": ""}',
        '{"channel": "C1", "oldest": "1", "history": "", "history_done": false, '
        '"threads": [2], "replies": ""}',
    ],
)
def test_a_cursor_that_is_no_place_is_refused(cursor: str) -> None:
    with pytest.raises(LearnRefused, match="from the start"):
        Place.decode(cursor, channel="C1")


def test_a_place_of_another_channel_is_refused() -> None:
    cursor = Place(channel="C2", oldest="0.000000").encode()
    with pytest.raises(LearnRefused, match="of channel C2, not C1"):
        Place.decode(cursor, channel="C1")


def test_a_place_is_finished_once_the_history_and_its_last_threads_are_read() -> None:
    assert not Place(channel="C1", oldest="0").finished
    assert not Place(channel="C1", oldest="0", history_done=True, threads=("1.1",)).finished
    assert Place(channel="C1", oldest="0", history_done=True).finished


@pytest.mark.parametrize(
    ("message", "parent"),
    [
        ({"ts": "1.1", "thread_ts": "1.1", "reply_count": 2}, True),
        ({"ts": "1.1", "thread_ts": "1.1", "reply_count": 2, "subtype": "tombstone"}, True),
        ({"ts": "1.1", "thread_ts": "1.1", "reply_count": 0}, False),
        ({"ts": "1.2", "thread_ts": "1.1", "subtype": "thread_broadcast"}, False),
        ({"ts": "1.1", "reply_count": 2}, False),
        ({"ts": "1.1", "thread_ts": "1.1", "reply_count": True}, False),
        ({"ts": "1.1"}, False),
    ],
)
def test_which_messages_start_threads(message: dict[str, Any], parent: bool) -> None:
    assert is_thread_parent(message) is parent


def test_since_is_slacks_timestamp() -> None:
    assert slack_ts(datetime(2020, 9, 13, 12, 26, 40, 100, tzinfo=UTC)) == "1600000000.000100"
    plus_two = timezone(timedelta(hours=2))
    assert slack_ts(datetime(2020, 9, 13, 14, 26, 40, tzinfo=plus_two)) == "1600000000.000000"
    assert slack_ts(datetime(2020, 9, 13, 12, 26, 40)) == "1600000000.000000"  # naive: UTC


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "30"}, 30.0),
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": ["12"]}, 12.0),
        ({"Retry-After": "soon"}, 60.0),
        ({"Retry-After": "-1"}, 60.0),
        ({"Retry-After": "inf"}, 60.0),
        ({}, 60.0),
    ],
)
def test_what_a_429_asks_to_wait(headers: dict[str, Any], seconds: float) -> None:
    assert retry_after(headers) == seconds


async def test_the_pacer_spaces_each_method_on_its_own() -> None:
    now = [100.0]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    pacer = Pacer(requests_per_minute=2, max_wait_s=120, sleep=sleep, clock=lambda: now[0])
    for method in ("a", "b", "a"):  # "b" does not wait for "a"; "a" again waits 30 s
        await pacer._pace(method)
    now[0] += 10
    for method in ("b", "b"):  # 40 s after its first: at once; then 30 s after that
        await pacer._pace(method)
    assert waits == [30.0, 30.0]
    with pytest.raises(ValueError, match="over 0"):
        Pacer(requests_per_minute=0, max_wait_s=1)


def test_the_reader_is_the_door_client_without_its_429_retry() -> None:
    door = AsyncWebClient(
        token="xoxb-1",
        base_url="http://127.0.0.1:9/api/",
        team_id="T9",
        retry_handlers=[AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler()],
    )
    reader = without_rate_retries(door)
    assert (reader.token, reader.base_url, reader.default_params) == (
        "xoxb-1",
        "http://127.0.0.1:9/api/",
        {"team_id": "T9"},
    )
    assert [type(h) for h in reader.retry_handlers] == [AsyncConnectionErrorRetryHandler]
    assert len(door.retry_handlers) == 2  # the door's own client is left as it was
