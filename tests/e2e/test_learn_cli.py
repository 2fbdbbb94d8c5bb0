"""``memorybot learn`` as an admin runs it: an export file written here, a real process, a
real Redis; what is learned lands in the right places once, with names, threads and times;
a bad file is refused before anything is written; what was forgotten stays forgotten."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

from tests.helpers import CLI

TEAM = "T1"
# Within the raw messages' retention (past it, a place keeps only its day records).
DAY = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0) - timedelta(days=6)


def _file(days: int) -> str:
    return f"{(DAY + timedelta(days=days)).date().isoformat()}.json"


def _ts(when: datetime, n: int = 0) -> str:
    return f"{int(when.timestamp())}.{n:06d}"


def _slack_export(path: Path) -> Path:
    """Two public channels (one with a thread), a private one, users.json; 3 days."""
    users = [
        {"id": "U1", "name": "alice", "profile": {"display_name": "Alice", "real_name": "Alice A"}},
        {"id": "U2", "name": "bob", "profile": {"display_name": "", "real_name": "Bob B"}},
    ]
    channels = [
        {"id": "C1", "name": "general", "is_private": False, "members": ["U1", "U2"]},
        {"id": "C2", "name": "random", "is_private": False, "members": ["U1"]},
    ]
    groups = [{"id": "G1", "name": "secret", "is_private": True, "members": ["U1"]}]
    parent = _ts(DAY + timedelta(hours=1))
    files: dict[str, object] = {
        "users.json": users,
        "channels.json": channels,
        "groups.json": groups,
        f"general/{_file(0)}": [
            {"type": "message", "user": "U1", "text": "Carol arrives on March 4", "ts": _ts(DAY)},
            {
                "type": "message",
                "user": "U2",
                "text": "where do we meet her?",
                "ts": parent,
                "thread_ts": parent,
                "reply_count": 1,
            },
            {
                "type": "message",
                "user": "U1",
                "text": "at the north gate",
                "ts": _ts(DAY + timedelta(hours=2)),
                "thread_ts": parent,
            },
            {
                "type": "message",
                "subtype": "channel_join",
                "user": "U2",
                "text": "joined",
                "ts": _ts(DAY, 5),
            },
        ],
        f"general/{_file(2)}": [
            {
                "type": "message",
                "user": "U2",
                "text": "we ship on Friday",
                "ts": _ts(DAY + timedelta(days=2)),
            },
        ],
        f"random/{_file(1)}": [
            {
                "type": "message",
                "user": "U9",
                "text": "hello from the past",
                "ts": _ts(DAY + timedelta(days=1)),
            },
        ],
        f"secret/{_file(1)}": [
            {
                "type": "message",
                "user": "U1",
                "text": "the private plan",
                "ts": _ts(DAY + timedelta(days=1)),
            },
        ],
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, json.dumps(data))
    return path


def _log_texts(url: str, key: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return [fields["t"] for _, fields in client.xrange(key)]
    finally:
        client.close()


async def test_a_slack_export_is_learned_into_its_places_once(
    cli: CLI, clean_redis: str, tmp_path: Path
) -> None:
    export = _slack_export(tmp_path / "export.zip")
    env = {"REDIS_URL": clean_redis}
    first = await cli("learn", "slack-export", str(export), "--team", TEAM, "--yes", **env)
    assert first.code == 0, first.err
    assert "slack:T1:C1 (slack-export): done." in first.out
    assert "1 from bots or the system" in first.out
    general = _log_texts(clean_redis, "mb:{slack:T1:C1}:log")
    assert general == ["Carol arrives on March 4", "where do we meet her?", "we ship on Friday"]
    thread = _log_texts(clean_redis, f"mb:{{slack:T1:C1}}/{_ts(DAY + timedelta(hours=1))}:log")
    assert thread == ["at the north gate"]
    assert _log_texts(clean_redis, "mb:{slack:T1:C2}:log") == ["hello from the past"]
    assert _log_texts(clean_redis, "mb:{slack:T1:G1}:log") == []  # private: not asked for

    again = await cli(
        "learn", "slack-export", str(export), "--team", TEAM, "--yes", "--json", **env
    )
    assert again.code == 0, again.err
    report = json.loads(again.out)
    assert {r["place"]: (r["new"], r["known"]) for r in report["read"]}["slack:T1:C1"] == (0, 4)
    assert len(_log_texts(clean_redis, "mb:{slack:T1:C1}:log")) == 3

    status = await cli("learn", "status", "--scope", "slack:T1:C1", **env)
    assert status.code == 0 and "done" in status.out, status.err

    # Forgotten, then the export learned again: it stays forgotten.
    forget = await cli("memory", "forget", "Carol", "--scope", "slack:T1:C1", **env)
    assert forget.code == 0, forget.err
    third = await cli("learn", "slack-export", str(export), "--team", TEAM, "--yes", **env)
    assert third.code == 0, third.err
    assert _log_texts(clean_redis, "mb:{slack:T1:C1}:log") == [
        "where do we meet her?",
        "we ship on Friday",
    ]


async def test_a_discord_export_is_learned_with_its_thread_names_and_times(
    cli: CLI, clean_redis: str, tmp_path: Path
) -> None:
    def dce(channel: dict[str, str], messages: list[tuple[str, str, str, int]]) -> dict:
        return {
            "guild": {"id": "1", "name": "Memory Lab"},
            "channel": channel,
            "messages": [
                {
                    "id": mid,
                    "type": "Default",
                    "timestamp": (DAY + timedelta(hours=hours)).astimezone().isoformat(),
                    "timestampEdited": None,
                    "content": text,
                    "author": {
                        "id": str(len(author)),  # (a Discord id: digits)
                        "name": author.lower(),
                        "nickname": author,
                        "isBot": False,
                    },
                    "attachments": [],
                }
                for mid, author, text, hours in messages
            ],
        }

    general = tmp_path / "general.json"
    general.write_text(
        json.dumps(
            dce(
                {
                    "id": "2",
                    "type": "GuildTextChat",
                    "name": "general",
                    "categoryId": "9",
                    "category": "Text",
                },
                [("10", "Alice", "we picked Postgres", 0), ("11", "Bob", "for billing", 1)],
            )
        )
    )
    thread = tmp_path / "thread.json"
    thread.write_text(
        json.dumps(
            dce(
                {
                    "id": "3",
                    "type": "GuildPublicThread",
                    "name": "side",
                    "categoryId": "2",
                    "category": "general",
                },
                [("20", "Alice", "a side topic", 2)],
            )
        )
    )
    run = await cli(
        "learn",
        "discord-export",
        str(general),
        str(thread),
        "--public",
        "--yes",
        REDIS_URL=clean_redis,
    )
    assert run.code == 0, run.err
    client = redis.Redis.from_url(clean_redis, decode_responses=True)
    try:
        entries = client.xrange("mb:{discord:1:2}:log")
        assert [(f["a"], f["t"], f["v"]) for _, f in entries] == [
            ("Alice", "we picked Postgres", "1"),
            ("Bob", "for billing", "1"),
        ]
        assert int(entries[0][1]["ts"]) == int(DAY.timestamp() * 1000)
        [(_, side)] = client.xrange("mb:{discord:1:2}/3:log")
        assert side["t"] == "a side topic"
    finally:
        client.close()


async def test_a_bad_export_is_refused_naming_the_file_and_field(
    cli: CLI, clean_redis: str, tmp_path: Path
) -> None:
    bad = tmp_path / "dce.json"
    bad.write_text(
        json.dumps(
            {
                "guild": {"id": "1", "name": "G"},
                "channel": {"id": "2", "type": "GuildTextChat", "name": "general"},
                "messages": [
                    {
                        "id": "10",
                        "type": "Default",
                        "timestamp": "yesterday",
                        "content": "hi",
                        "author": {"id": "5", "name": "al", "isBot": False},
                    }
                ],
            }
        )
    )
    run = await cli("learn", "discord-export", str(bad), "--yes", REDIS_URL=clean_redis)
    assert run.code == 1
    assert "dce.json" in run.err and "messages[0].timestamp" in run.err
    assert _log_texts(clean_redis, "mb:{discord:1:2}:log") == []
