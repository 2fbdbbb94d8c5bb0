"""What both export readers share: how a bad file is reported, and how a conversation's
messages become pages with a cursor.

An export is read in files (a Slack conversation's day files, DiscordChatExporter's JSON
files), each a list of messages. A position is (file, index): the next message to read. A
page ends after at most :data:`PAGE_SIZE` kept messages, and its cursor is the position
after the last message it consumed, so resuming from it reads the rest exactly once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_core.service.past import LearnRefused, PastMessage, PastPage

PAGE_SIZE = 500

# A read file: each message kept (a PastMessage) or left out (None: a bot's, a system
# message), in the file's order.
Entries = Sequence[PastMessage | None]


def bad_file(where: str, field: str, problem: str) -> LearnRefused:
    """The refusal for a file that is not what its reader expects: which file (inside a zip:
    the zip and its member), which field, what is wrong with it."""
    return LearnRefused(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


def parse_json(data: bytes, where: str) -> object:
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise bad_file(where, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise bad_file(
            where, "", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc


@dataclass(frozen=True, slots=True)
class Position:
    file: str  # the file's key in its source (a day file's name, a JSON file's path)
    index: int  # the next message of that file to read

    @property
    def cursor(self) -> str:
        return json.dumps({"file": self.file, "index": self.index}, ensure_ascii=False)


def start_of(cursor: str, files: Sequence[str], *, place: str) -> Position:
    """Where a cursor says to go on; the first file's start for ""."""
    if not cursor:
        return Position(files[0] if files else "", 0)
    try:
        fields = json.loads(cursor)
        position = Position(str(fields["file"]), int(fields["index"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise LearnRefused(f"{place}: the cursor {cursor!r} is not an export's position") from exc
    if position.file not in files or position.index < 0:
        raise LearnRefused(
            f"{place}: the cursor names {position.file!r} at {position.index}, which this "
            "export does not have: the files changed since; learn this place again from "
            "the beginning"
        )
    return position


async def paged(
    files: Sequence[str],
    read: Callable[[str], Awaitable[Entries]],
    *,
    since: datetime,
    cursor: str,
    place: str,
    notes: tuple[str, ...] = (),
) -> AsyncIterator[PastPage]:
    """The pages of ``files`` (in that order) from ``cursor`` on: each file is ``read``
    whole (and so checked whole) before anything of it is handed over. Messages said
    before ``since`` are left out and not counted; ``notes`` go with the first page of a
    reading from the beginning."""
    start = start_of(cursor, files, place=place)
    messages: list[PastMessage] = []
    skipped = 0
    pending_notes = notes if not cursor else ()
    for file in files[files.index(start.file) if files else 0 :]:
        entries = await read(file)
        first = start.index if file == start.file else 0
        if first > len(entries):
            raise LearnRefused(
                f"{place}: the cursor is at message {first} of {file}, which has "
                f"{len(entries)}: the file changed since; learn this place again"
            )
        for index in range(first, len(entries)):
            entry = entries[index]
            if entry is None:
                skipped += 1
            elif entry.ts >= since:
                messages.append(entry)
            if len(messages) == PAGE_SIZE:
                after = Position(file, index + 1).cursor
                yield PastPage(messages, cursor=after, skipped=skipped, notes=pending_notes)
                messages, skipped, pending_notes = [], 0, ()
    yield PastPage(messages, cursor="", skipped=skipped, notes=pending_notes)
