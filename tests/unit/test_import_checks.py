"""``parse_export`` checks an export like live input: each bad field is refused with an
InputError that names its path and says what to fix, in a message of sane length."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from memory_core.errors import InputError
from memory_core.service.exports import parse_export

NOW = datetime(2025, 8, 20, 12, 0, tzinfo=UTC)
TARGET = "discord:100:3"
CAP = 8000


def valid_export() -> dict[str, Any]:
    """What ``MemoryAdmin.export`` writes for a thread of guild 100 (values as Redis has
    them: state fields are strings)."""
    return {
        "format": "memorybot-export",
        "version": 1,
        "scope": "discord:100:7",
        "exported_at": "2025-08-20T11:00:00+00:00",
        "state": {
            "day": "2025-08-20",
            "short": "Ada asked about the release.",
            "short_upto": "1755600000000-0",
            "mid": "",
            "long": "",
            "overview": "A channel about releases.",
            "tiers_at": "2025-08-19T00:00:05+00:00",
            "msg_count": "3",
            "last_ms": "1755680000000",
            "created_ms": "1755500000000",
            "paused": "0",
            "mode": "mention",
            "tz": "Asia/Tokyo",
            "lang": "en",
            "refresh_pending": "1",
            "week_pending": "2025-08-18",
            "fact_seq": "2",
            "day_msgs": "1",
            "last_rollover": "2025-08-19T00:00:00+00:00",
        },
        "log": [
            {
                "id": "1755600000000-0",
                "ts": "2025-08-19T10:40:00+00:00",
                "role": "user",
                "author": "Ada",
                "author_id": "1",
                "text": "when is the release?",
                "tokens": 5,
                "platform_id": "m1",
            },
            {
                "id": "1755600000000-1",
                "ts": "2025-08-19T10:40:00+00:00",
                "role": "assistant",
                "author": "memorybot",
                "author_id": "bot",
                "text": "On Friday.",
                "tokens": 3,
                "platform_id": "",
            },
            {
                "id": "1755680000000-0",
                "ts": "2025-08-20T09:53:20+09:00",
                "role": "user",
                "author": "Max",
                "author_id": "2",
                "text": "thanks",
                "tokens": 1,
                "platform_id": "m3",
            },
        ],
        "days": [
            {
                "day": "2025-08-18",
                "summary": "Release planning.",
                "messages": 12,
                "degraded": False,
                "topic": "release",
                "decisions": ["ship Friday"],
                "follow_ups": [],
            }
        ],
        "episodes": [
            {
                "day": "2025-08-18",
                "summary": "Release planning.",
                "messages": 12,
                "degraded": True,
                "topic": "release",
                "decisions": [],
                "follow_ups": ["ask QA"],
            }
        ],
        "weeks": [{"week": "2025-08-11", "summary": "A quiet week.", "days": 5, "degraded": False}],
        "facts": [
            {
                "id": "f1",
                "kind": "decision",
                "text": "ship on Friday",
                "subject": "",
                "source": "summary",
                "by": "Ada",
                "ts": "2025-08-19T00:00:05+00:00",
                "message_ids": ["1755600000000-0"],
                "pinned": False,
                "history": [],
                "origin": "discord:100:7",
            },
            {
                "id": "f2",
                "kind": "note",
                "text": "standup at 10",
                "subject": "",
                "source": "remember",
                "by": "Ada",
                "ts": "2025-08-19T00:00:05+00:00",
                "message_ids": [],
                "pinned": True,
                "history": ["standup at 9"],
                "origin": "",
            },
        ],
        "done": ["day:2025-08-18", "week:2025-08-11"],
    }


def parse(data: Any, scope: str = TARGET) -> Any:
    return parse_export(data, scope=scope, max_message_chars=CAP, now=NOW)


def test_a_valid_export_parses_and_is_made_to_belong_to_the_target() -> None:
    dump = parse(json.loads(json.dumps(valid_export())))
    assert dump.state["tz"] == "Asia/Tokyo"
    assert [e.id for e in dump.log] == ["1755600000000-0", "1755600000000-1", "1755680000000-0"]
    assert dump.log[2].ts.utcoffset() is not None
    assert [d.decisions for d in dump.days] == [("ship Friday",)]
    # A fact learned in another place now belongs to the place it is imported into.
    assert [f.origin for f in dump.facts] == [TARGET, ""]
    assert dump.done == ["day:2025-08-18", "week:2025-08-11"]


def test_the_fact_counter_is_never_behind_the_fact_ids() -> None:
    """A new /memory remember takes f{fact_seq + 1}: behind the imported ids, it would
    overwrite an imported fact."""
    data = valid_export()
    data["state"]["fact_seq"] = "0"
    assert parse(data).state["fact_seq"] == "2"


def test_last_ms_is_filled_in_from_the_log_when_missing() -> None:
    data = valid_export()
    del data["state"]["last_ms"]
    assert parse(data).state["last_ms"] == "1755680000000"


def test_what_live_input_stores_is_accepted() -> None:
    """A message cut at the cap carries the truncation mark; a replayed line may be from
    year 1; 'auto' is the default language."""
    data = valid_export()
    data["log"][0]["text"] = "a" * CAP + " … [truncated: 1234 more characters]"
    data["log"][0]["ts"] = "0001-01-01T00:00:00-23:59"
    data["state"]["lang"] = "auto"
    dump = parse(data)
    assert len(dump.log[0].text) > CAP
    assert dump.state["lang"] == ""


def test_integers_may_be_json_numbers() -> None:
    data = valid_export()
    data["state"]["msg_count"] = 3
    data["state"]["paused"] = 1
    state = parse(data).state
    assert state["msg_count"] == "3" and state["paused"] == "1"


Edit = Callable[[dict[str, Any]], None]


def put(path: str, value: Any) -> Edit:
    """An edit that sets ``a.b[2].c`` (dots and [n])."""

    def edit(data: dict[str, Any]) -> None:
        steps: list[str | int] = []
        for part in path.replace("[", ".[").split("."):
            steps.append(int(part[1:-1]) if part.startswith("[") else part)
        node: Any = data
        for step in steps[:-1]:
            node = node[step]
        node[steps[-1]] = value

    return edit


def drop(path: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = data
        for step in head:
            node = node[int(step[1:-1])] if step.startswith("[") else node[step]
        del node[last]

    return edit


def swap_log(data: dict[str, Any]) -> None:
    data["log"][0], data["log"][1] = data["log"][1], data["log"][0]


def duplicate_fact(data: dict[str, Any]) -> None:
    data["facts"].append(copy.deepcopy(data["facts"][0]))


BAD: list[tuple[str, Edit, str]] = [
    ("not-an-object", lambda d: d.clear(), "format"),
    ("version-true", put("version", True), "version"),
    ("version-string", put("version", "1"), "version"),
    ("unknown-top", put("extra", 1), "extra"),
    ("scope", put("scope", "not a scope"), "scope"),
    ("exported-at", put("exported_at", "yesterday"), "exported_at"),
    ("state-list", put("state", ["day"]), "state"),
    ("state-unknown", put("state.epoch", "4"), "state.epoch"),
    ("state-unknown-huge", put("state", {"x" * 3_000_000: "1"}), "state.'xxxx"),
    ("state-surrogate-key", put("state", {"\ud800": "1"}), "state.'\\ud800'"),
    # A thread's channel is in its scope's name: a state naming a parent is not an export's.
    ("parent-other-guild", put("state.parent", "discord:200:1"), "state.parent"),
    ("day-format", put("state.day", "20.08.2025"), "state.day"),
    ("day-impossible", put("state.day", "2025-02-30"), "state.day"),
    ("day-future", put("state.day", "2099-01-01"), "state.day"),
    ("day-unicode-digits", put("state.day", "٢٠٢٥-08-20"), "state.day"),
    ("week-pending", put("state.week_pending", "soon"), "state.week_pending"),
    ("tz-unknown", put("state.tz", "Mars/Olympus"), "state.tz"),
    ("tz-directory", put("state.tz", "Asia"), "state.tz"),
    ("tz-path", put("state.tz", "../../etc/passwd"), "state.tz"),
    ("tz-nul", put("state.tz", "Asia/Tokyo\x00"), "state.tz"),
    ("mode", put("state.mode", "loud"), "state.mode"),
    ("lang", put("state.lang", "fr"), "state.lang"),
    ("counter-negative", put("state.msg_count", "-1"), "state.msg_count"),
    ("counter-float", put("state.day_msgs", 1.5), "state.day_msgs"),
    ("counter-bool", put("state.fact_seq", True), "state.fact_seq"),
    ("counter-huge", put("state.created_ms", "9" * 5000), "state.created_ms"),
    ("last-ms-future", put("state.last_ms", "99999999999999"), "state.last_ms"),
    ("last-ms-behind-log", put("state.last_ms", "1755600000000"), "state.last_ms"),
    ("paused-2", put("state.paused", "2"), "state.paused"),
    ("paused-yes", put("state.paused", "yes"), "state.paused"),
    ("refresh-pending", put("state.refresh_pending", "true"), "state.refresh_pending"),
    ("short-upto", put("state.short_upto", "latest"), "state.short_upto"),
    ("tier-type", put("state.overview", ["a"]), "state.overview"),
    ("tier-huge", put("state.long", "z" * 3_000_000), "state.long"),
    ("tiers-at", put("state.tiers_at", "2025-08-19 noon"), "state.tiers_at"),
    ("rollover-naive", put("state.last_rollover", "2025-08-19T00:00:00"), "state.last_rollover"),
    ("log-object", put("log", {"id": "1-0"}), "log"),
    ("log-entry-string", put("log[1]", "hello"), "log[1]"),
    ("log-unknown", put("log[0].mood", "happy"), "log[0].mood"),
    ("log-id-missing", drop("log.[0].id"), "log[0].id"),
    ("log-id-format", put("log[0].id", "x"), "log[0].id"),
    ("log-id-trailing-newline", put("log[0].id", "1755600000000-0\n"), "log[0].id"),
    ("log-id-zero", put("log[0].id", "0-0"), "log[0].id"),
    ("log-id-future", put("log[2].id", "99999999999999-0"), "log[2].id"),
    ("log-id-order", swap_log, "log[1].id"),
    ("log-id-repeated", put("log[1].id", "1755600000000-0"), "log[1].id"),
    ("log-ts-missing", drop("log.[2].ts"), "log[2].ts"),
    ("log-ts-naive", put("log[0].ts", "2025-08-19T10:40:00"), "log[0].ts"),
    ("log-ts-number", put("log[0].ts", 1755600000), "log[0].ts"),
    ("log-ts-future", put("log[0].ts", "2025-08-22T12:00:00+00:00"), "log[0].ts"),
    ("log-ts-before-year-1", put("log[0].ts", "0001-01-01T00:00:00+23:59"), "log[0].ts"),
    ("log-role", put("log[0].role", "system"), "log[0].role"),
    ("log-text-missing", drop("log.[0].text"), "log[0].text"),
    ("log-text-type", put("log[0].text", {"t": 1}), "log[0].text"),
    ("log-text-blank", put("log[0].text", "  \n"), "log[0].text"),
    ("log-text-too-long", put("log[0].text", "w" * (CAP + 200)), "log[0].text"),
    ("log-tokens-negative", put("log[0].tokens", -3), "log[0].tokens"),
    ("log-tokens-string", put("log[0].tokens", "5"), "log[0].tokens"),
    ("log-author", put("log[0].author", 7), "log[0].author"),
    ("log-author-id", put("log[0].author_id", None), "log[0].author_id"),
    ("log-platform-id", put("log[0].platform_id", ["m"]), "log[0].platform_id"),
    ("days-object", put("days", {}), "days"),
    ("day-missing", drop("days.[0].day"), "days[0].day"),
    ("day-date", put("days[0].day", "monday"), "days[0].day"),
    ("day-summary", put("days[0].summary", 3), "days[0].summary"),
    ("day-messages", put("days[0].messages", -1), "days[0].messages"),
    ("day-degraded", put("days[0].degraded", "no"), "days[0].degraded"),
    ("day-decisions-string", put("days[0].decisions", "ship"), "days[0].decisions"),
    ("day-decision-number", put("days[0].decisions", ["a", 2]), "days[0].decisions[1]"),
    ("day-unknown", put("days[0].mood", "x"), "days[0].mood"),
    ("episode-follow-ups", put("episodes[0].follow_ups", [None]), "episodes[0].follow_ups[0]"),
    ("week-date", put("weeks[0].week", ""), "weeks[0].week"),
    ("week-days", put("weeks[0].days", "5"), "weeks[0].days"),
    ("fact-entry", put("facts[0]", ["f1"]), "facts[0]"),
    ("fact-id-missing", drop("facts.[0].id"), "facts[0].id"),
    ("fact-id-type", put("facts[0].id", 1), "facts[0].id"),
    ("fact-id-format", put("facts[0].id", "f 1"), "facts[0].id"),
    ("fact-id-repeated", duplicate_fact, "facts[2].id"),
    ("fact-kind", put("facts[0].kind", "gossip"), "facts[0].kind"),
    ("fact-text-blank", put("facts[1].text", ""), "facts[1].text"),
    ("fact-text-long", put("facts[1].text", "n" * 501), "facts[1].text"),
    ("fact-subject", put("facts[0].subject", 3), "facts[0].subject"),
    ("fact-ts", put("facts[0].ts", "later"), "facts[0].ts"),
    ("fact-message-ids", put("facts[0].message_ids", "1-0"), "facts[0].message_ids"),
    ("fact-message-id", put("facts[0].message_ids", ["x"]), "facts[0].message_ids[0]"),
    ("fact-pinned", put("facts[0].pinned", 1), "facts[0].pinned"),
    ("fact-history", put("facts[1].history", [["old"]]), "facts[1].history[0]"),
    ("fact-origin", put("facts[0].origin", 9), "facts[0].origin"),
    ("fact-unknown", put("facts[0].secret", "x"), "facts[0].secret"),
    ("done-object", put("done", {"day:2025-08-18": 1}), "done"),
    ("done-number", put("done", ["day:2025-08-18", 5]), "done[1]"),
    ("done-format", put("done", ["anything goes"]), "done[0]"),
]


@pytest.mark.parametrize(("edit", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_field_is_refused_naming_it(edit: Edit, field: str) -> None:
    data = valid_export()
    edit(data)
    with pytest.raises(InputError) as info:
        parse(data)
    message = str(info.value)
    assert field in message, message
    assert len(message) <= 400, f"{len(message)} characters"


def test_not_an_export_at_all() -> None:
    for value in (None, [], "memorybot-export", 3):
        with pytest.raises(InputError, match="not a memorybot export"):
            parse(value)
