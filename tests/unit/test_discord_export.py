"""DiscordChatExporter's JSON read as sources of the past: places (channels, threads, the
bot's DMs), names, times with their offsets, what is left out, audiences, how a bad file is
refused, how a reading resumes across files. Every file here is written for the test, in
the shape DCE's JSON writer gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bots.learn import PAGE_SIZE, DiscordExportSource, discord_export_sources
from memory_core.models import Attachment
from memory_core.scopes import Audience
from memory_core.service.past import LearnRefused, PastMessage, PastPage, PastSource

GUILD = {"id": "100", "name": "My Server", "iconUrl": "https://cdn.example/icon.png"}
GENERAL = {
    "id": "200",
    "type": "GuildTextChat",
    "categoryId": "150",  # a channel's category: not a parent channel
    "category": "Text Channels",
    "name": "general",
    "topic": None,
}
BOT = "900"
PEOPLE = {
    "1": {"name": "alice", "nickname": "Ali", "isBot": False},
    "2": {"name": "bob", "nickname": None, "isBot": False},
    "7": {"name": "ci-bot", "nickname": "CI", "isBot": True},
    BOT: {"name": "memorybot", "nickname": "memorybot", "isBot": True},
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def message(
    ident: int | str,
    content: str = "hi",
    *,
    author: str = "1",
    kind: str = "Default",
    timestamp: str = "2024-03-01T10:00:00.123+02:00",
    **fields: Any,
) -> dict[str, Any]:
    person = {"id": author, "discriminator": "0000", "color": None, "roles": []}
    return {
        "id": str(ident),
        "type": kind,
        "timestamp": timestamp,
        "timestampEdited": None,
        "callEndedTimestamp": None,
        "isPinned": False,
        "content": content,
        "author": {**person, **PEOPLE[author], "avatarUrl": ""},
        "attachments": [],
        "embeds": [],
        "stickers": [],
        "reactions": [],
        "mentions": [],
        "inlineEmojis": [],
        **fields,
    }


def dce_file(
    path: Path,
    messages: list[Any],
    *,
    guild: dict[str, Any] | None = None,
    channel: dict[str, Any] | None = None,
) -> Path:
    path.write_text(
        json.dumps(
            {
                "guild": guild or GUILD,
                "channel": channel or GENERAL,
                "dateRange": {"after": None, "before": None},
                "exportedAt": "2024-04-01T00:00:00+00:00",
                "messages": messages,
                "messageCount": len(messages),
            }
        ),
        encoding="utf-8",
    )
    return path


async def read(source: PastSource, cursor: str = "", since: datetime = EPOCH) -> list[PastPage]:
    return [page async for page in source.pages(since, cursor)]


def said(pages: list[PastPage]) -> list[PastMessage]:
    return [m for page in pages for m in page.messages]


CAROL = {"id": "3", "name": "carol", "nickname": "Caro"}  # mentioned, never writes
GENERAL_MESSAGES = [
    message(1001, "hello <@3> and @Ali", mentions=[CAROL]),
    message(1002, "hi", author="2", kind="Reply", timestamp="2024-03-01T03:30:00-05:00",
            reference={"messageId": "1001", "channelId": "200", "guildId": "100"}),
    message(1003, "Joined the server.", kind="GuildMemberJoin"),
    message(1004, "Pinned a message.", kind="ChannelPinnedMessage"),
    message(1005, "", kind="20"),  # a slash command's answer: a type DCE has no name for
    message(1006, "build green", author="7"),
    message(1007, "noted, <@1>", author=BOT, kind="Reply"),
    message(1008, "", attachments=[{"id": "5", "url": "https://cdn.example/plan.pdf",
                                    "fileName": "plan.pdf", "fileSizeBytes": 1234}]),
    message(1009, "look", forwardedMessage={
        "timestamp": "2024-02-01T00:00:00+00:00", "content": "the original",
        "attachments": [], "embeds": [], "stickers": []}),
    message(1010, "", stickers=[{"id": "1", "name": "wave"}]),  # nothing memory keeps
]  # fmt: skip


# -- places -------------------------------------------------------------------------------
async def test_a_channel_its_names_times_and_what_is_left_out(tmp_path: Path) -> None:
    path = dce_file(tmp_path / "general.json", GENERAL_MESSAGES)
    (source,) = discord_export_sources([path], bot_user_id=BOT, bot_name="memorybot")
    assert (source.name, source.place) == ("discord-export", "discord:100:200")
    pages = await read(source)
    rows = [(m.scope, m.platform_id, m.author, m.author_id, m.role, m.text) for m in said(pages)]
    assert rows == [
        ("discord:100:200", "1001", "Ali", "1", "user", "hello @Caro and @Ali"),
        ("discord:100:200", "1002", "bob", "2", "user", "hi"),
        # <@1> is in no mentions list: named as the file's messages name its author.
        ("discord:100:200", "1007", "memorybot", BOT, "assistant", "noted, @Ali"),
        ("discord:100:200", "1008", "Ali", "1", "user", ""),
        ("discord:100:200", "1009", "Ali", "1", "user",
         "[forwarded message, its author not given] the original\nlook"),
    ]  # fmt: skip
    # Joined, pinned, the command's answer, the other bot, the sticker.
    assert sum(p.skipped for p in pages) == 5
    first, second = said(pages)[:2]
    # Each time with its own offset: 10:00 at +02:00 and 03:30 at -05:00 are 08:00 and 08:30.
    assert first.ts == datetime(2024, 3, 1, 8, 0, 0, 123000, tzinfo=UTC)
    assert second.ts - first.ts == timedelta(minutes=29, seconds=59, microseconds=877000)
    assert said(pages)[3].attachments == (
        Attachment(name="plan.pdf", size=1234, url="https://cdn.example/plan.pdf"),
    )
    assert {m.place_name for m in said(pages)} == {"#general (My Server)"}


async def test_without_the_bots_id_its_messages_are_another_bots(tmp_path: Path) -> None:
    path = dce_file(tmp_path / "general.json", GENERAL_MESSAGES)
    (source,) = discord_export_sources([path])
    pages = await read(source)
    assert "noted, @Ali" not in [m.text for m in said(pages)]
    assert sum(p.skipped for p in pages) == 6


async def test_an_export_is_private_unless_the_caller_says_public(tmp_path: Path) -> None:
    path = dce_file(tmp_path / "general.json", GENERAL_MESSAGES[:2])
    (unknown,) = discord_export_sources([path])
    pages = await read(unknown)
    assert {m.audience for m in said(pages)} == {Audience.PRIVATE}
    assert "kept as private" in pages[0].notes[0]
    (public,) = discord_export_sources([path], public=True)
    pages = await read(public)
    assert {m.audience for m in said(pages)} == {Audience.SERVER}
    assert pages[0].notes == ()


@pytest.mark.parametrize(
    ("kind", "public", "audience"),
    [
        ("GuildPublicThread", True, Audience.SERVER),
        ("GuildPublicThread", False, Audience.PRIVATE),
        ("GuildPrivateThread", True, Audience.PRIVATE),  # never the whole server's
        ("GuildNewsThread", True, Audience.SERVER),
    ],
)
async def test_a_thread_goes_under_the_parent_dce_names(
    tmp_path: Path, kind: str, public: bool, audience: Audience
) -> None:
    thread = {**GENERAL, "id": "300", "type": kind, "categoryId": "200", "category": "general"}
    path = dce_file(tmp_path / "thread.json", [message(3001)], channel=thread)
    (source,) = discord_export_sources([path], public=public)
    assert source.place == "discord:100:200:300"
    assert [(m.scope, m.audience) for m in said(await read(source))] == [
        ("discord:100:200:300", audience)
    ]


async def test_a_dm_is_learned_as_the_bots_with_its_one_person(tmp_path: Path) -> None:
    dms = {"id": "0", "name": "Direct Messages", "iconUrl": ""}
    dm = {**GENERAL, "id": "400", "type": "DirectTextChat", "categoryId": None, "name": "bob"}
    path = dce_file(
        tmp_path / "dm.json",
        [message(4001, "hey bot", author="2"), message(4002, "hey bob", author=BOT)],
        guild=dms,
        channel=dm,
    )
    (source,) = discord_export_sources([path], bot_user_id=BOT)
    assert source.place == "discord:dm:2"
    rows = [(m.scope, m.role, m.audience, m.place_name) for m in said(await read(source))]
    assert rows == [
        ("discord:dm:2", "user", Audience.DM, "DM: bob"),
        ("discord:dm:2", "assistant", Audience.DM, "DM: bob"),
    ]
    with pytest.raises(LearnRefused, match=r"dm\.json: channel: a DM: .*bot_user_id"):
        discord_export_sources([path])
    between_people = dce_file(
        tmp_path / "people.json",
        [message(4003, author="1"), message(4004, author="2")],
        guild=dms,
        channel=dm,
    )
    with pytest.raises(LearnRefused, match=r"people\.json: messages: a DM where 2 people"):
        discord_export_sources([between_people], bot_user_id=BOT)
    group = dce_file(
        tmp_path / "group.json",
        [message(4005, author="1")],
        guild=dms,
        channel={**dm, "type": "DirectGroupTextChat"},
    )
    with pytest.raises(LearnRefused, match=r"group\.json: channel\.type: a group DM"):
        discord_export_sources([group], bot_user_id=BOT)


async def test_an_empty_channel_is_one_empty_last_page(tmp_path: Path) -> None:
    (source,) = discord_export_sources([dce_file(tmp_path / "quiet.json", [])], public=True)
    assert await read(source) == [PastPage(messages=[], cursor="", skipped=0)]


# -- pages and resuming -------------------------------------------------------------------
def partitions(tmp_path: Path) -> list[Path]:
    """One channel exported in two files of 400 (DCE's --partition), a join every 50th."""
    files = []
    for part in (1, 2):
        messages = [
            message(
                part * 10_000 + i,
                f"m{part}-{i}",
                kind="GuildMemberJoin" if i % 50 == 49 else "Default",
            )
            for i in range(400)
        ]
        files.append(dce_file(tmp_path / f"general [part {part}].json", messages))
    return files


async def test_several_files_of_a_channel_are_one_source_resumed_once(tmp_path: Path) -> None:
    files = partitions(tmp_path)
    sources = discord_export_sources(list(reversed(files)), public=True)
    assert len(sources) == 1
    (source,) = sources
    assert isinstance(source, DiscordExportSource)
    whole = await read(source)
    assert [len(p.messages) for p in whole] == [PAGE_SIZE, 800 - 16 - PAGE_SIZE]
    assert sum(p.skipped for p in whole) == 16
    every = [m.platform_id for m in said(whole)]
    assert len(set(every)) == 784
    assert every[0] == "10000"  # the files in the order of their paths, each in its order

    # The first page ends inside the second file; resuming reads the rest, once.
    position = json.loads(whole[0].cursor)
    assert position["file"].endswith("general [part 2].json")
    assert position["index"] == 110  # 392 kept of part 1, 108 of part 2's first 110
    rest = await read(source, whole[0].cursor)
    assert [m.platform_id for m in whole[0].messages + said(rest)] == every
    assert sum(p.skipped for p in [whole[0], *rest]) == 16
    assert rest[0].notes == ()  # what there is to say was said on the first page


async def test_a_cursor_of_other_files_is_refused(tmp_path: Path) -> None:
    (source,) = discord_export_sources(partitions(tmp_path), public=True)
    cursor = json.dumps({"file": "/elsewhere/general.json", "index": 3})
    with pytest.raises(LearnRefused, match=r"discord:100:200: the cursor names"):
        await read(source, cursor)


# -- bad files ----------------------------------------------------------------------------
def with_message(i: int, **fields: Any) -> list[dict[str, Any]]:
    """Twenty good messages, the ``i``-th changed."""
    messages = [message(5000 + n) for n in range(20)]
    messages[i] = {**messages[i], **fields}
    return messages


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            with_message(12, timestamp="2024-03-01T10:00:00"),
            r"messages\[12\]\.timestamp: not an ISO date with an offset",
        ),
        (
            with_message(3, timestamp="yesterday"),
            r"messages\[3\]\.timestamp: not an ISO date with an offset",
        ),
        (with_message(0, id="abc"), r"messages\[0\]\.id: not a Discord id \(digits\)"),
        (with_message(4, type=None), r"messages\[4\]\.type: missing, or not text"),
        (with_message(5, content=None), r"messages\[5\]\.content: missing, or not text"),
        (with_message(6, author="alice"), r"messages\[6\]\.author: missing, or not an object"),
        (
            with_message(7, author={"id": "1", "name": "alice", "isBot": "no"}),
            r"messages\[7\]\.author\.isBot: missing, or not true or false",
        ),
        (
            with_message(8, attachments=[{"url": "https://x", "fileSizeBytes": 3}]),
            r"messages\[8\]\.attachments\[0\]\.fileName: missing, or not text",
        ),
        (with_message(9, mentions={"id": "1"}), r"messages\[9\]\.mentions: not a list"),
        ([*with_message(0), "hello"], r"messages\[20\]: not a message"),
    ],
)
def test_a_bad_message_is_refused_naming_the_file_and_field(
    tmp_path: Path, messages: list[Any], expected: str
) -> None:
    good = dce_file(tmp_path / "good.json", [message(1)])
    bad = dce_file(tmp_path / "bad.json", messages)
    with pytest.raises(LearnRefused, match=r"/bad\.json: " + expected):
        discord_export_sources([good, bad])  # refused before any source is handed out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"guild": ', r"not JSON \(Expecting value at line 1 column 11\)"),
        ("[]", r"not a DiscordChatExporter JSON export"),
        ('{"channel": {}, "messages": []}', r"guild: missing, or not an object"),
        (
            '{"guild": {"id": "1", "name": "g"}, "channel": {"id": "2", "type": "GuildTextChat",'
            ' "name": "c"}, "messages": {}}',
            r"messages: missing, or not a list",
        ),
        (
            '{"guild": {"id": "G", "name": "g"}, "channel": {"id": "2", "type": "GuildTextChat",'
            ' "name": "c"}, "messages": []}',
            r"guild\.id: not a Discord id",
        ),
        (
            '{"guild": {"id": "1", "name": "g"}, "channel": {"id": "2", "type":'
            ' "GuildPublicThread", "categoryId": null, "name": "t"}, "messages": []}',
            r"channel\.categoryId: empty: a thread \(GuildPublicThread\) whose parent",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_it_and_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LearnRefused, match=r"/bad\.json: " + expected):
        discord_export_sources([path])
    with pytest.raises(LearnRefused, match=r"/missing\.json: no such file"):
        discord_export_sources([tmp_path / "missing.json"])


async def test_a_file_spoilt_after_listing_is_refused_before_its_first_page(
    tmp_path: Path,
) -> None:
    files = partitions(tmp_path)
    (source,) = discord_export_sources(files, public=True)
    dce_file(files[1], with_message(12, timestamp="2024-03-01 10:00"))
    pages = source.pages(EPOCH)
    # The first page would end in the second file: not even the first file's messages go.
    with pytest.raises(LearnRefused, match=r"part 2\]\.json: messages\[12\]\.timestamp"):
        await anext(pages)
