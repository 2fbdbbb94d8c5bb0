"""A Slack workspace export read as sources of the past: which conversations, which scopes,
what text and names, what is left out, how a bad file is refused, how a reading resumes.
Every export here is a zip written for the test."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bots.learn import PAGE_SIZE, SlackExportSource, slack_export_sources
from memory_core.models import Attachment
from memory_core.scopes import Audience
from memory_core.service.past import LearnRefused, PastMessage, PastPage, PastSource

TEAM = "T1"
BOT = "UBOT"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
THREAD = "slack:T1:C1:1704100000.000100"  # general's thread, under its parent's ts
USERS = [
    {"id": "U1", "name": "alice", "real_name": "Alice A", "profile": {"display_name": "Ali"}},
    {"id": "U2", "name": "bob", "profile": {"display_name": "", "real_name": "Bob Real"}},
    {"id": "U3", "name": "carol", "profile": {}},
    {"id": BOT, "name": "memorybot", "is_bot": True, "profile": {"display_name": "memorybot"}},
]
CHANNELS = [
    {"id": "C1", "name": "general", "members": ["U1", "U2"]},
    {"id": "C2", "name": "partners", "is_ext_shared": True},
    {"id": "C3", "name": "quiet"},  # listed, no folder: nothing was said
]
GROUPS = [{"id": "G1", "name": "secret", "members": ["U1"]}]
MPIMS = [{"id": "G2", "name": "mpdm-alice--bob--carol-1", "members": ["U1", "U2", "U3"]}]
DMS = [{"id": "D1", "members": ["U1", "U2"]}]


def msg(ts: str, text: str = "hi", user: str | None = "U1", **fields: Any) -> dict[str, Any]:
    return {"type": "message", "ts": ts, "text": text, **({"user": user} if user else {}), **fields}


GENERAL_DAY_1 = [
    msg("1704100000.000100", "hello <@U2>, see <#C2|partners>", thread_ts="1704100000.000100"),
    msg("1704100060.000200", "yes &amp; more", user="U2", thread_ts="1704100000.000100"),
    msg("1704100100.000300", "<@U3> has joined the channel", user="U3", subtype="channel_join"),
    msg("1704100200.000400", "deploy done", user=None, subtype="bot_message", bot_id="B1"),
    msg("1704100300.000500", "beep", user="UOTHER", bot_id="B2", bot_profile={"name": "ci"}),
    msg("1704100400.000600", "boo", user="U9"),
    msg(
        "1704100500.000700",
        "the plan",
        subtype="file_share",
        files=[
            {
                "name": "plan.pdf",
                "title": "The plan",
                "mimetype": "application/pdf",
                "size": 1234,
                "permalink": "https://t1.slack.com/files/U1/F1/plan.pdf",
            }
        ],
    ),
    msg("1704100600.000800", "noted, <@U1>", user=BOT, bot_id="BB", thread_ts="1704100000.000100"),
    msg("1704100700.000900", "new topic", user="U2", subtype="channel_topic"),
]
GENERAL_DAY_2 = [msg("1704186400.000100", "next day", user="U3")]


def write_zip(path: Path, files: dict[str, object]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            archive.writestr(name, data)
    return path


def export(tmp_path: Path, changes: dict[str, object] | None = None) -> Path:
    """The test workspace's export; ``changes`` replace or add members (None drops one)."""
    files: dict[str, object] = {
        "users.json": USERS,
        "channels.json": CHANNELS,
        "groups.json": GROUPS,
        "mpims.json": MPIMS,
        "dms.json": DMS,
        "integration_logs.json": [],
        "general/2024-01-01.json": GENERAL_DAY_1,
        "general/2024-01-02.json": GENERAL_DAY_2,
        "partners/2024-01-01.json": [msg("1704100000.000100", "hi partners")],
        "secret/2024-01-01.json": [msg("1704100000.000100", "psst")],
        "mpdm-alice--bob--carol-1/2024-01-01.json": [msg("1704100000.000100", "all three")],
        "D1/2024-01-01.json": [msg("1704100000.000100", "just us", user="U2")],
    }
    for name, value in (changes or {}).items():
        if value is None:
            files.pop(name)
        else:
            files[name] = value
    return write_zip(tmp_path / "export.zip", files)


async def read(source: PastSource, cursor: str = "", since: datetime = EPOCH) -> list[PastPage]:
    return [page async for page in source.pages(since, cursor)]


def messages(pages: list[PastPage]) -> list[PastMessage]:
    return [m for page in pages for m in page.messages]


def by_place(sources: list[PastSource]) -> dict[str, PastSource]:
    return {source.place: source for source in sources}


# -- which conversations ------------------------------------------------------------------
async def test_public_channels_only_unless_private_ones_are_asked_for(tmp_path: Path) -> None:
    path = export(tmp_path)
    public = slack_export_sources(path, TEAM)
    assert [s.place for s in public] == ["slack:T1:C1", "slack:T1:C2", "slack:T1:C3"]
    assert {s.name for s in public} == {"slack-export"}
    # The admin is told, once, what was not read.
    assert [(await read(s))[0].notes for s in public] == [
        (
            "1 private channel, 1 group DM, 1 DM in the export were not read: only public "
            "channels are learned unless private ones are asked for (include_private)",
        ),
        (),
        (),
    ]
    everything = slack_export_sources(path, TEAM, include_private=True)
    assert [(await read(s))[0].notes for s in everything] == [()] * 6
    assert [s.place for s in everything] == [
        "slack:T1:C1",
        "slack:T1:C2",
        "slack:T1:C3",
        "slack:T1:G1",
        "slack:T1:G2",
        "slack:T1:D1",
    ]


async def test_each_conversation_has_its_audience(tmp_path: Path) -> None:
    sources = by_place(slack_export_sources(export(tmp_path), TEAM, include_private=True))
    audiences = {}
    for place in ("slack:T1:C1", "slack:T1:C2", "slack:T1:G1", "slack:T1:G2", "slack:T1:D1"):
        said = messages(await read(sources[place]))
        assert said, place
        audiences[place] = {m.audience for m in said}
    assert audiences == {
        "slack:T1:C1": {Audience.SERVER},
        "slack:T1:C2": {Audience.SHARED},  # is_ext_shared: Slack Connect
        "slack:T1:G1": {Audience.PRIVATE},
        "slack:T1:G2": {Audience.PRIVATE},
        "slack:T1:D1": {Audience.DM},
    }
    # Each in its own scope: nothing private lands in a public channel's.
    group_dm = messages(await read(sources["slack:T1:G2"]))
    assert [(m.scope, m.text, m.place_name) for m in group_dm] == [
        ("slack:T1:G2", "all three", "group DM: mpdm-alice--bob--carol-1")
    ]
    dm = messages(await read(sources["slack:T1:D1"]))  # its folder is named by its id
    assert [(m.scope, m.author, m.place_name) for m in dm] == [
        ("slack:T1:D1", "Bob Real", "DM: Ali, Bob Real")
    ]


# -- what is read -----------------------------------------------------------------------
async def test_names_threads_times_and_text_as_the_live_door_has_them(tmp_path: Path) -> None:
    general = by_place(slack_export_sources(export(tmp_path), TEAM, bot_user_id=BOT))
    said = messages(await read(general["slack:T1:C1"]))
    rows = [(m.scope, m.platform_id, m.author, m.author_id, m.role, m.text) for m in said]
    assert rows == [
        # A thread's parent stays in the channel; its replies are the thread's.
        ("slack:T1:C1", "1704100000.000100", "Ali", "U1", "user", "hello @Bob Real, see #partners"),
        (THREAD, "1704100060.000200", "Bob Real", "U2", "user", "yes & more"),
        ("slack:T1:C1", "1704100400.000600", "deleted user", "U9", "user", "boo"),
        ("slack:T1:C1", "1704100500.000700", "Ali", "U1", "user", "the plan"),
        (THREAD, "1704100600.000800", "memorybot", BOT, "assistant", "noted, @Ali"),
        ("slack:T1:C1", "1704186400.000100", "carol", "U3", "user", "next day"),
    ]  # fmt: skip
    assert said[0].ts == datetime(2024, 1, 1, 9, 6, 40, 100, tzinfo=UTC)
    assert said[1].ts == datetime(2024, 1, 1, 9, 7, 40, 200, tzinfo=UTC)
    assert said[3].attachments == (
        Attachment(
            name="plan.pdf",
            kind="application/pdf",
            size=1234,
            description="The plan",
            url="https://t1.slack.com/files/U1/F1/plan.pdf",
        ),
    )
    assert {m.place_name for m in said} == {"#general"}


async def test_bots_joins_and_topic_changes_are_left_out_and_counted(tmp_path: Path) -> None:
    general = by_place(slack_export_sources(export(tmp_path), TEAM))
    pages = await read(general["slack:T1:C1"])
    # Without the bot's id, its message is another bot's.
    assert sum(p.skipped for p in pages) == 5  # join, bot_message, other bot, the bot, topic
    assert "noted, @Ali" not in [m.text for m in messages(pages)]


async def test_a_person_of_another_organisation_keeps_the_name_slack_wrote(
    tmp_path: Path,
) -> None:
    shared = [msg("1704100000.000100", "hello", user="UEXT", user_profile={"real_name": "Eve X"})]
    path = export(tmp_path, {"partners/2024-01-01.json": shared})
    said = messages(await read(by_place(slack_export_sources(path, TEAM))["slack:T1:C2"]))
    assert [(m.author, m.author_id) for m in said] == [("Eve X", "UEXT")]


async def test_an_empty_channel_is_one_empty_last_page(tmp_path: Path) -> None:
    quiet = by_place(slack_export_sources(export(tmp_path), TEAM))["slack:T1:C3"]
    assert await read(quiet) == [PastPage(messages=[], cursor="", skipped=0)]


async def test_messages_before_since_are_not_handed_over(tmp_path: Path) -> None:
    general = by_place(slack_export_sources(export(tmp_path), TEAM))["slack:T1:C1"]
    since = datetime(2024, 1, 2, tzinfo=UTC)
    assert [m.text for m in messages(await read(general, since=since))] == ["next day"]


# -- pages and resuming -------------------------------------------------------------------
def busy_channel(tmp_path: Path) -> SlackExportSource:
    """1,203 people's messages over three days, a join every 100th."""
    days: dict[str, object] = {}
    count = 0
    for day, size in (("01", 700), ("02", 3), ("03", 600)):
        said = []
        for _ in range(size):
            count += 1
            subtype = {"subtype": "channel_join"} if count % 100 == 0 else {}
            said.append(msg(f"17041{count:05d}.000100", f"m{count}", **subtype))
        days[f"general/2024-01-{day}.json"] = said
    path = export(tmp_path, days)
    source = by_place(slack_export_sources(path, TEAM))["slack:T1:C1"]
    assert isinstance(source, SlackExportSource)
    return source


async def test_pages_hold_at_most_500_and_resuming_reads_the_rest_once(tmp_path: Path) -> None:
    source = busy_channel(tmp_path)
    whole = await read(source)
    assert [len(p.messages) for p in whole] == [PAGE_SIZE, PAGE_SIZE, 1303 - 13 - 1000]
    assert sum(p.skipped for p in whole) == 13
    assert [bool(p.cursor) for p in whole] == [True, True, False]
    every = [m.platform_id for m in messages(whole)]
    assert len(every) == len(set(every)) == 1290

    # Stopped after the first page (it ends inside the first day file): the rest, once.
    first = whole[0]
    assert json.loads(first.cursor)["file"] == "general/2024-01-01.json"
    rest = await read(source, first.cursor)
    resumed = [m.platform_id for m in first.messages] + [m.platform_id for m in messages(rest)]
    assert resumed == every
    assert sum(p.skipped for p in [first, *rest]) == 13
    # And from the second page's cursor (in the third day file).
    assert messages(await read(source, whole[1].cursor)) == whole[2].messages


@pytest.mark.parametrize(
    "cursor",
    ['{"file": "general/2023-12-31.json", "index": 0}', "not json", '{"file": "x"}'],
)
async def test_a_cursor_this_export_does_not_have_is_refused(tmp_path: Path, cursor: str) -> None:
    general = by_place(slack_export_sources(export(tmp_path), TEAM))["slack:T1:C1"]
    with pytest.raises(LearnRefused, match=r"slack:T1:C1: the cursor"):
        await read(general, cursor)


# -- bad files ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"channels.json": b"[{"}, r"export\.zip, channels\.json: not JSON \(.* line 1 column 3\)"),
        ({"channels.json": {"id": "C1"}}, r"export\.zip, channels\.json: not a JSON list"),
        (
            {"channels.json": [{"id": "C1", "name": "general"}, {"id": "c-2", "name": "x"}]},
            r"export\.zip, channels\.json: \[1\]\.id: not a Slack channel id",
        ),
        (
            {"channels.json": [{"id": "C1", "name": "../up"}]},
            r"export\.zip, channels\.json: \[0\]\.name: not a channel name",
        ),
        ({"users.json": None}, r"export\.zip: no users\.json \(nor org_users\.json\)"),
        (
            {"users.json": [{"id": "U1"}, {"name": "nobody"}]},
            r"export\.zip, users\.json: \[1\]\.id: not a Slack user id",
        ),
    ],
)
def test_a_bad_list_is_refused_naming_the_member_and_field(
    tmp_path: Path, changes: dict[str, object], expected: str
) -> None:
    with pytest.raises(LearnRefused, match=expected):
        slack_export_sources(export(tmp_path, changes), TEAM)


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        ([msg("1704186400.000100"), msg("yesterday")], r"\[1\]\.ts: not a Slack timestamp"),
        ([msg("1704186400.000100", thread_ts=17041)], r"\[0\]\.thread_ts: not a Slack timestamp"),
        ([msg("1704186400.000100", user="alice")], r"\[0\]\.user: not a Slack user id"),
        ([msg("1704186400.000100", text=["hi"])], r"\[0\]\.text: not text"),
        ([msg("1704186400.000100", files={"name": "x"})], r"\[0\]\.files: not a list"),
        (["hello"], r"\[0\]: not a message"),
        ({"messages": []}, r"not a JSON list"),
        (b'["\xc3\x28"]', r"not UTF-8 text"),
        (b'[{"ts": "1.1"', r"not JSON \(Expecting .* line 1 column 14\)"),
    ],
)
async def test_a_bad_day_file_is_refused_before_anything_of_it_is_handed_over(
    tmp_path: Path, day: object, expected: str
) -> None:
    # The bad file is the conversation's second: its first is fine, and still not handed over.
    path = export(tmp_path, {"general/2024-01-02.json": day})
    general = by_place(slack_export_sources(path, TEAM))["slack:T1:C1"]
    pages = general.pages(EPOCH)
    with pytest.raises(LearnRefused, match=r"export\.zip, general/2024-01-02\.json: " + expected):
        await anext(pages)


def test_what_is_not_a_zip_or_not_there_is_refused(tmp_path: Path) -> None:
    not_zip = tmp_path / "export.zip"
    not_zip.write_text("hello")
    with pytest.raises(LearnRefused, match=r"export\.zip: not a zip file"):
        slack_export_sources(not_zip, TEAM)
    with pytest.raises(LearnRefused, match=r"missing\.zip: no such file"):
        slack_export_sources(tmp_path / "missing.zip", TEAM)
    with pytest.raises(LearnRefused, match=r"'t-1' is not a Slack team id"):
        slack_export_sources(export(tmp_path), "t-1")
