"""Test helpers that read Redis directly, to check what is really stored, and that run
``memorybot`` as a user does."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from config.settings import Settings
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.scopes import Audience
from memory_core.service.past import PastMessage, PastPage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import RecordedRequest, default_answer

ROOT = Path(__file__).resolve().parents[1]
SLACK_MANIFEST = ROOT / "slack-manifest.yaml"  # the Slack app memorybot ships


def slack_manifest_list(key: str) -> list[str]:
    """The items of the YAML list under ``key:`` in the Slack manifest (one ``- item  #
    comment`` per line)."""
    lines = SLACK_MANIFEST.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    items: list[str] = []
    for line in lines[start + 1 :]:
        match = re.match(r"\s+- ([\w.:-]+)", line)
        if match is None:
            break
        items.append(match.group(1))
    return items


def slack_bot_scopes() -> list[str]:
    """The bot scopes an install of the manifest grants, no more: every FakeSlack that runs
    memorybot gets these (``FakeSlack(scopes=...)``), so a call the manifest does not allow
    fails with ``missing_scope`` as it would in a real workspace."""
    return slack_manifest_list("bot")


async def scope_values(core: Core, scope: str, *, memory_only: bool = False) -> list[str]:
    """Every key name and value stored for ``scope``, found by SCAN (not by our key list).
    ``memory_only``: without the token spend counters, which a forget keeps on purpose
    (the budget; they hold counts and member ids, no text), and without the record of what
    was forgotten, kept on purpose too (so learning the past never brings it back) once it
    is checked to hold digests and times only."""
    client: Any = core.store.client
    values: list[str] = []
    async for key in client.scan_iter(match=core.store.keys.scope_pattern(scope), count=500):
        if memory_only and key.startswith(core.store.keys.spend_scope(scope, "")):
            continue
        if memory_only and key == core.store.keys.scope(scope).gone:
            gone = (await key_values(core, key))[1:]
            marks = all(
                f in ("all", "v", "tmax") or f.startswith(("all:", "m:", "u:", "t:"))
                for f in gone[0::2]
            )
            assert marks and all(v.isdigit() for v in gone[1::2]), f"text in {key}: {gone}"
            continue
        values += await key_values(core, key)
    return values


async def forgotten(core: Core, scope: str) -> bool:
    """Whether nothing of ``scope`` is left but its counters: the state holding only its
    forget generation (so nothing computed from the old memory can be written back) and
    its fact counter (so no fact id is given twice)."""
    return forget_counters_only(await scope_values(core, scope, memory_only=True), core, scope)


def forget_counters_only(values: list[str], core: Core, scope: str) -> bool:
    """Whether ``values`` (of :func:`scope_values`) are a forgotten scope's: its state key
    with its epoch and, if any fact was ever made, its fact counter."""
    fields = values[1::2]
    return (
        values[:1] == [core.store.keys.scope(scope).state]
        and "epoch" in fields
        and set(fields) <= {"epoch", "fact_seq"}
        and len(values) == 1 + 2 * len(fields)
    )


async def key_values(core: Core, key: str) -> list[str]:
    """A key's name and everything stored in it, as strings."""
    client: Any = core.store.client
    values = [key]
    kind = await client.type(key)
    if kind == "string":
        values.append(await client.get(key) or "")
    elif kind == "hash":
        for field, value in (await client.hgetall(key)).items():
            values += [field, value]
    elif kind == "list":
        values += await client.lrange(key, 0, -1)
    elif kind == "set":
        values += list(await client.smembers(key))
    elif kind == "zset":
        values += [m for m, _ in await client.zrange(key, 0, -1, withscores=True)]
    elif kind == "stream":
        for entry_id, fields in await client.xrange(key):
            values.append(entry_id)
            for field, value in fields.items():
                values += [field, value]
    elif kind != "none":  # gone since it was listed
        raise AssertionError(f"unexpected key type {kind} for {key}")
    return values


def quoting_facts(*needles: str) -> Callable[[RecordedRequest], str]:
    """A fake model (``FakeOpenAI.responder``) whose summaries quote what they are given, as
    the default one does, and whose compactions also turn any of ``needles`` into facts:
    one for the channel, one about each speaker who said it. The worst case for forgetting."""

    def answer(request: RecordedRequest) -> str:
        text = default_answer(request)
        if request.purpose != "compact":
            return text
        data = json.loads(text)
        said = re.search(r"<messages>(.*?)</messages>", request.prompt_text, re.S)
        for needle in needles:
            for line in (said.group(1) if said else "").splitlines():
                if needle in line and ": " in line:
                    speaker = line.split(": ", 1)[0].rsplit(" ", 1)[-1]
                    data["facts"] += [
                        {"kind": "decision", "subject": "", "text": f"we noted {needle}"},
                        {"kind": "profile", "subject": speaker, "text": f"{speaker}: {needle}"},
                    ]
        return json.dumps(data)

    return answer


async def all_keys(core: Core) -> list[str]:
    client: Any = core.store.client
    return [k async for k in client.scan_iter(match="*", count=1000)]


NAMES = ["Alice", "Bob", "Carol", "Dave"]
WORDS = (
    "release deploy coffee meeting budget tokyo plan review docs bug cache latency weekend "
    "trip photo music garden train dinner movie lunch project deadline design test"
).split()


def conversation(
    start: datetime, *, days: int, per_day: int, seed: int = 1, spread_hours: float = 12.0
) -> Iterator[tuple[datetime, str, str]]:
    """A synthetic multi-party chat: (time, author, text), per_day messages a day."""
    rng = random.Random(seed)
    for day in range(days):
        base = start + timedelta(days=day)
        step = timedelta(hours=spread_hours) / per_day
        for i in range(per_day):
            author = rng.choice(NAMES)
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30)))
            yield base + step * i, author, f"d{day}m{i} {author} says {words}"


async def feed(
    core: Core,
    clock: ManualClock,
    scope: str,
    messages: Iterator[tuple[datetime, str, str]] | list[tuple[datetime, str, str]],
    *,
    reply: bool = False,
    public: bool = False,
) -> int:
    """Store ``messages`` (or have them answered); ``public``: said where the whole guild or
    workspace can see it."""
    count = 0
    for when, author, text in messages:
        clock.set(when)
        msg = IncomingMessage(
            scope=scope,
            text=text,
            author=author,
            author_id=author.lower(),
            audience=Audience.SERVER if public else Audience.PRIVATE,
        )
        if reply:
            await converse(core, replace(msg, direct=True))
        else:
            await core.intake.accept(msg)
        count += 1
    return count


async def spawn_memorybot(
    home: Path, *args: str, env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """``memorybot ARGS`` in its own process, run from ``home`` with HOME and the data
    directory there; of this environment only PATH goes in (no MEMORYBOT_* or keys leak in)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli.main",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=home,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "data"),
            "PYTHONIOENCODING": "utf-8",
            # The code beside these tests, not whichever checkout is pip-installed.
            "PYTHONPATH": str(ROOT),
            # Recall by words alone (a test about meaning passes its own setting).
            "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "off",
            **(env or {}),
        },
    )


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d (.+?): (.*)$")
FactsFor = Callable[[list[tuple[str, str]]], list[dict[str, str]]]


def _tagged(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
    return match.group(1).strip() if match else ""


def sentence_summaries(facts: FactsFor | None = None) -> Callable[[RecordedRequest], str]:
    """A fake model that summarises as an LLM does: one sentence per message, naming its
    speaker ("alice said that ..."), after the previous summary; ``facts`` gives the facts
    to extract from the (speaker, text) lines of a compaction."""

    def answer(request: RecordedRequest) -> str:
        if request.purpose != "compact":
            return default_answer(request)
        lines = [
            (m.group(1), m.group(2).strip().rstrip("."))
            for line in _tagged(request.prompt_text, "messages").splitlines()
            if (m := _LOG_LINE.match(line.strip()))
        ]
        said = " ".join(f"{who} said that {text}." for who, text in lines)
        previous = _tagged(request.prompt_text, "previous")
        summary = f"{previous} {said}".strip()
        return json.dumps({"summary": summary, "facts": facts(lines) if facts else []})

    return answer


def telling_facts(lines: list[tuple[str, str]]) -> list[dict[str, str]]:
    """What a model would extract from (speaker, text) lines in the trust tests: a profile
    fact for a line about a pregnancy, a preference for one about green tea."""
    out = []
    for who, text in lines:
        if "pregnant" in text:
            out.append({"kind": "profile", "subject": who, "text": f"{who} is pregnant"})
        if "green tea" in text:
            out.append({"kind": "preference", "subject": who, "text": f"{who} likes green tea"})
    return out


AOF = ("--appendonly", "yes", "--appendfsync", "always")  # a test Redis that keeps its data


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 30 s) for a counter of the code under test: there is no event to wait on."""
    async with asyncio.timeout(30):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


@dataclass
class Run:
    code: int
    out: str
    err: str


class CLI:
    def __init__(self, home: Path) -> None:
        self.home = home

    async def __call__(self, *args: str, stdin: str = "", **env: str) -> Run:
        proc = await spawn_memorybot(self.home, *args, env=env)
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=90)
        assert proc.returncode is not None
        return Run(proc.returncode, out.decode(), err.decode())


PAPAYA = "The code word is papaya, agreed with the tangerine squad."
"""What the ``papaya`` fixture's model answers (tests/conftest.py)."""


async def lock_expired(client: Any, key: str, *, within_s: float = 10.0) -> None:
    """Wait until Redis has expired the lock ``key`` (its PX), polling its PTTL.

    A lock's expiry is Redis's own (SET NX PX; memory_core/store/records.py ``real_ms``):
    no clock of ours can move it, so a test of what happens once a dead holder's lock runs
    out waits in real time, with a lock TTL made short for the purpose. It waits for the
    expiry itself rather than for a guessed duration, and fails if it does not come."""
    deadline = time.monotonic() + within_s
    while await client.pttl(key) != -2:  # -2: no such key (-1 would be a lock with no TTL)
        assert time.monotonic() < deadline, f"the lock {key} did not expire within {within_s} s"
        await asyncio.sleep(0.02)


def wait_until_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            return
        if state == "Z":  # exited; its parent (init, for a daemon) has yet to reap it
            return
        time.sleep(0.02)
    raise RuntimeError(f"process {pid} is still running after {timeout} s")


def make_settings(
    *,
    redis_url: str | None = None,
    cluster: bool = False,
    llm_url: str | None = None,
    data_dir: Path | None = None,
    memory: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
    **sections: Any,
) -> Settings:
    store = {"cluster": cluster, **(store or {})}
    if redis_url:
        store["redis_url"] = redis_url
    if data_dir:
        store["data_dir"] = data_dir
    llm_section: dict[str, Any] = {"max_retries": 0, "backoff_base_s": 0.0, "timeout_s": 5.0}
    if llm_url:
        llm_section["base_url"] = llm_url
    llm_section.update(llm or {})
    # Recall by words alone unless a test is about meaning (the local model costs a second
    # to load and CPU per message: tests of other things stay fast).
    memory = {"recall_embedder": "off", **(memory or {})}
    return Settings(store=store, llm=llm_section, memory=memory, **sections)


START = datetime(2025, 8, 11, 9, 0, tzinfo=UTC)  # a Monday


CoreFactory = Callable[..., Awaitable[Core]]


def manual_maintenance(core: Core) -> None:
    """Maintenance only when the test calls ``core.maintenance.maintain``: a message that
    makes it due runs nothing, so a test drives each step itself."""
    core.maintenance.manual = True


class ListSource:
    """A :class:`~memory_core.service.past.PastSource` over a list (learning's core tests;
    the platforms' sources are tested against the fake Discord and Slack): pages of
    ``page`` messages, newest first as the platforms give them, the cursor the number of
    messages handed over. ``stop_after``: raise after that many pages (a learn cut short)."""

    name = "list"

    def __init__(
        self, place: str, messages: list[PastMessage], *, page: int = 50, stop_after: int = 0
    ) -> None:
        self.place = place
        self.messages = sorted(messages, key=lambda m: m.ts, reverse=True)
        self.page = page
        self.stop_after = stop_after
        self.pages_given = 0

    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        at = int(cursor or 0)
        wanted = [m for m in self.messages if m.ts >= since]
        while at < len(wanted):
            if self.stop_after and self.pages_given >= self.stop_after:
                raise ConnectionError("the source went away")
            batch = wanted[at : at + self.page]
            at += len(batch)
            self.pages_given += 1
            yield PastPage(messages=batch, cursor=str(at) if at < len(wanted) else "")


def past_chat(
    scope: str, start: datetime, *, days: int, per_day: int, prefix: str = "m"
) -> list[PastMessage]:
    """A past multi-party chat, as a source hands it over (public, ids ``<prefix><n>``)."""
    return [
        PastMessage(
            scope=scope,
            platform_id=f"{prefix}{n}",
            ts=when,
            text=text,
            author=author,
            author_id=f"U{author}",
            audience=Audience.SERVER,
        )
        for n, (when, author, text) in enumerate(
            conversation(start, days=days, per_day=per_day, seed=7)
        )
    ]


def answer_to(question: int) -> str:
    """A long answer to "question <n>", written in about three seconds by the fake model
    (60 pieces, 50 ms apart): what streaming tests watch grow."""
    return f"Answer {question}: " + " ".join(f"w{question}.{i}" for i in range(200))


def answering(request: Any) -> str | None:
    """The fake model's responder for streaming tests: each "question <n>" gets
    :func:`answer_to` of ``n`` (other purposes: the fake's default)."""
    if request.purpose != "reply":
        return None
    found = re.search(r"question (\d+)", str(request.messages[-1].get("content", "")))
    return answer_to(int(found.group(1))) if found else None
