"""The command line as a new user runs it: real processes, the embedded store or a real
Redis, the fake OpenAI server over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import select
import shutil
import signal
import socket
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
import redis

from tests.browser.support import TOKEN
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CLI, ROOT, START, Run, spawn_memorybot, wait_until_gone


async def test_console_on_the_embedded_default_remembers_across_restarts(cli: CLI) -> None:
    first = await cli(
        "console",
        "--user",
        "Alice",
        stdin="Hi, I'm Alice and I love green tea\nWe decided to ship on Friday\n/memory show\n",
    )
    assert first.code == 0, first.err
    assert "offline mode" in first.err and "embedded Valkey 9." in first.err
    data_dir = cli.home / "data" / "memorybot"
    assert f"socket {data_dir / 'valkey.sock'}" in first.err
    assert first.out.count("No LLM is configured") == 2
    assert "We decided to ship on Friday" in first.out.split("Memory of console:default")[1]
    assert (data_dir / "valkey-aof").is_dir()
    status = await cli("store", "status")  # it stopped with the console, the last process
    assert status.code == 0, status.err
    assert "embedded store: not running" in status.out
    second = await cli("console", stdin="/memory show\n")
    assert second.code == 0, second.err
    assert "2 messages stored" in second.out
    assert "I love green tea" in second.out


async def test_console_replies_one_line_per_input(
    cli: CLI, clean_redis: str, fake_llm: FakeOpenAI
) -> None:
    run = await cli(
        "console",
        "--scope",
        "team",
        "--user",
        "Bob",
        stdin="first question\n\nsecond question\n/memory dance\n/memory show stats\n",
        REDIS_URL=clean_redis,
        OPENAI_BASE_URL=fake_llm.base_url,
    )
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == "ACK: [" + lines[0][6:11] + "] Bob: first question"
    assert lines[1].endswith("Bob: second question")
    assert "unknown /memory command 'dance'" in run.err and "Usage:" in run.err
    assert "messages: 4" in run.out  # two questions, two answers
    assert fake_llm.count("reply") == 2


WHY_CHAT = (
    "the launch code word is papaya\n"
    + "".join(f"unrelated chatter number {i} about lunch\n" for i in range(8))
    + "what is the launch code word?\n/memory why\n"
)
SMALL_WINDOW = {"MEMORYBOT_MEMORY__WINDOW_TOKENS": "60", "MEMORYBOT_MEMORY__WINDOW_MIN_TOKENS": "0"}


@pytest.mark.parametrize("model", ["fake", "offline"])
async def test_memory_why_in_the_console_lists_the_recalled_message(
    cli: CLI, clean_redis: str, fake_llm: FakeOpenAI, model: str
) -> None:
    """A new user's console: an older message recalled for a question, then /memory why
    shows it with its date and author (on the default offline install too)."""
    llm = {"OPENAI_BASE_URL": fake_llm.base_url} if model == "fake" else {}
    run = await cli(
        "console", "--user", "Alice", stdin=WHY_CHAT, REDIS_URL=clean_redis, **SMALL_WINDOW, **llm
    )
    assert run.code == 0, run.err
    answer, why = run.out.split("What the last answer used (asked by Alice, ")
    today = why[:10]  # the console's clock is the real one: the day it was asked
    assert why.count("Recalled messages") == 1
    lines = [x for x in why.splitlines() if x.startswith("- [")]
    [line] = [x for x in lines if x.split("] ", 1)[1].startswith("Alice: the launch code")]
    assert line.startswith(f"- [{today} ")  # its date (and time), then its author
    if model == "offline":
        assert "papaya" in answer.split("No LLM is configured")[-1]  # the reply showed it too
    else:
        assert "papaya" in fake_llm.of("reply")[-1].prompt_text


async def test_memory_why_after_ask_explains_that_answer(cli: CLI, clean_redis: str) -> None:
    env = {"REDIS_URL": clean_redis, **SMALL_WINDOW}
    await cli("console", "--scope", "w", stdin=WHY_CHAT.split("what is")[0], **env)
    asked = await cli("ask", "--scope", "w", "what is the launch code word?", **env)
    assert asked.code == 0, asked.err
    why = await cli("console", "--scope", "w", stdin="/memory why\n", **env)
    assert "What the last answer used (asked by you, " in why.out
    assert "] you: the launch code word is papaya" in why.out


async def test_replay_skips_and_reports_bad_lines(cli: CLI, clean_redis: str) -> None:
    path = cli.home / "chat.jsonl"
    good = {"ts": START.isoformat(), "user": "Alice", "text": "hello"}
    later = {"ts": (START + timedelta(days=1)).isoformat(), "user": "Bob", "text": "next day"}
    path.write_text(
        json.dumps(good)
        + "\n{broken\n\n"
        + json.dumps({**good, "ts": "2025-08-11T09:00:00"})
        + "\n"
        + json.dumps(later)
        + "\n",
        encoding="utf-8",
    )
    strict = await cli("replay", str(path), "--scope", "r", "--strict", REDIS_URL=clean_redis)
    assert strict.code == 1
    assert f"{path}:line 2: not valid JSON" in strict.err
    assert "line 4:" in strict.err and "no UTC offset" in strict.err
    assert "nothing was stored" in strict.err
    assert redis.Redis.from_url(clean_redis).dbsize() == 0
    loose = await cli("replay", str(path), "--scope", "r", "--json", REDIS_URL=clean_redis)
    assert loose.code == 0, loose.err
    report = json.loads(loose.out)
    assert report["stored"] == 2 and [s["line"] for s in report["skipped"]] == [2, 4]
    assert report["days_rolled_over"] == 1 and report["offline"] is True


async def test_ask_dry_run_prints_the_prompt_and_stores_nothing(cli: CLI, clean_redis: str) -> None:
    await cli("console", "--scope", "d", stdin="remember the blue door\n", REDIS_URL=clean_redis)
    client = redis.Redis.from_url(clean_redis, decode_responses=True)
    keys_before = {k: client.type(k) for k in client.keys("*")}
    length = client.xlen("mb:{console:d}:log")
    run = await cli(
        "ask", "--scope", "console:d", "--dry-run", "--json", "which door?", REDIS_URL=clean_redis
    )
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["messages"][-1]["content"].endswith("you: which door?")
    assert any("remember the blue door" in m["content"] for m in data["messages"])
    assert 0 < data["tokens"] <= 3000
    assert client.xlen("mb:{console:d}:log") == length
    assert {k: client.type(k) for k in client.keys("*")} == keys_before


async def test_unreachable_redis_exits_2_naming_redis_url(cli: CLI) -> None:
    run = await cli("ask", "hi", REDIS_URL="redis://:hunter2@127.0.0.1:1/0")
    assert run.code == 2
    assert "REDIS_URL" in run.err and "127.0.0.1:1" in run.err
    assert "hunter2" not in run.err + run.out


async def test_invalid_settings_exit_2_naming_the_field(cli: CLI) -> None:
    (cli.home / "memorybot.toml").write_text('[memory]\nbudget_tokens = "big"\n')
    run = await cli("console", stdin="hi\n")
    assert run.code == 2
    assert "memory.budget_tokens" in run.err and "memorybot.toml" in run.err
    run = await cli("ask", "x", MEMORYBOT_MEMORY__TIMEZONE="Moon/Base", MEMORYBOT_CONFIG="/nope")
    assert run.code == 2 and "/nope" in run.err


async def test_memory_commands_export_import_and_forget(cli: CLI, clean_redis: str) -> None:
    env = {"REDIS_URL": clean_redis}
    await cli("console", "--scope", "src", stdin="alpha beta\ngamma delta\n", **env)
    export = await cli("memory", "export", "--scope", "src", "--out", "dump.json", **env)
    assert export.code == 0, export.err
    imported = await cli("memory", "import", "dump.json", "--scope", "dst", **env)
    assert imported.code == 0 and "Imported 2 messages" in imported.out
    forget = await cli("memory", "forget", "gamma", "--scope", "dst", **env)
    assert forget.code == 0 and "1 messages" in forget.out
    shown = await cli("memory", "show", "--scope", "dst", **env)
    assert "alpha beta" in shown.out and "gamma" not in shown.out
    bad = await cli("memory", "show", "everything", "--scope", "dst", **env)
    assert bad.code == 1 and "Usage:" in bad.err


async def test_memory_forget_me_everywhere_from_the_shell(cli: CLI, clean_redis: str) -> None:
    """A member (U2) spoke in three channels, two threads and their DM of workspace T1;
    another member (U1) in the same places. ``memorybot memory forget me everywhere`` run
    for U2 in one channel removes U2 from all six places and nothing of U1 or elsewhere."""
    env = {"REDIS_URL": clean_redis}
    places = [
        "slack:T1:C1",
        "slack:T1:C2",
        "slack:T1:C3",
        "slack:T1:C1:1772442000.000100",
        "slack:T1:C2:1772442100.000200",
        "slack:T1:D2",
    ]
    lines = []
    for n, place in enumerate([*places, "slack:T9:C1"]):
        for who, uid in (("Bob", "U2"), ("Ann", "U1")):
            text = f"{who}'s words in place {n}"
            lines.append(
                {
                    "ts": f"2025-08-11T09:{n:02d}:00+00:00",
                    "user": who,
                    "user_id": uid,
                    "text": text,
                    "scope": place,
                }
            )
    path = cli.home / "seed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    seeded = await cli("replay", str(path), "--no-reply", **env)
    assert seeded.code == 0, seeded.err
    forget = await cli(
        "memory", "forget", "me", "everywhere", "--scope", "slack:T1:C2", "--user", "U2", **env
    )
    assert forget.code == 0, forget.err
    assert "in 6 places" in forget.out, forget.out
    for n, place in enumerate(places):
        shown = await cli("memory", "show", "--scope", place, **env)
        assert f"Ann's words in place {n}" in shown.out, (place, shown.out)
        assert "Bob's" not in shown.out, (place, shown.out)
    other = await cli("memory", "show", "--scope", "slack:T9:C1", **env)
    assert "Bob's words in place 6" in other.out  # another workspace: another boundary


async def test_console_forget_me_everywhere_reaches_the_threads_and_other_channels(
    cli: CLI, clean_redis: str
) -> None:
    """The console speaks as any member of any place (--scope, --user): Bob talks in a
    channel and in one of its threads, Ann in the thread too; `/memory forget me` in the
    channel takes Bob's thread lines; `forget me everywhere` from another channel takes the
    rest of him."""
    env = {"REDIS_URL": clean_redis}

    async def console(scope: str, user: str, stdin: str) -> str:
        run = await cli("console", "--scope", scope, "--user", user, stdin=stdin, **env)
        assert run.code == 0, run.err
        return run.out

    await console("slack:T1:C1", "U2", "bob in the channel\n")
    await console("slack:T1:C1:1.1", "U2", "bob in the thread\n")
    await console("slack:T1:C1:1.1", "U1", "ann in the thread\n")
    await console("slack:T1:C3", "U2", "bob elsewhere\n")
    out = await console("slack:T1:C1", "U2", "/memory forget me\n")
    assert "in 2 places" in out, out
    thread = await console("slack:T1:C1:1.1", "U1", "/memory show\n")
    assert "ann in the thread" in thread and "bob in the thread" not in thread
    out = await console("slack:T1:C2", "U2", "/memory forget me everywhere\n")
    assert "in 2 places" in out and "slack:T1:C3" not in out.split("Where", 1)[0], out
    assert "bob elsewhere" not in await console("slack:T1:C3", "U1", "/memory show\n")


async def test_rollover_at_a_time(cli: CLI, clean_redis: str) -> None:
    path = cli.home / "c.jsonl"
    lines = [
        {"ts": (START + timedelta(hours=h)).isoformat(), "user": "A", "text": f"item {h}"}
        for h in range(3)
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    await cli("replay", str(path), "--scope", "ro", "--no-reply", REDIS_URL=clean_redis)
    at = (START + timedelta(days=2)).isoformat()
    run = await cli("rollover", "--at", at, "--json", REDIS_URL=clean_redis)
    assert run.code == 0, run.err
    totals = json.loads(run.out)
    assert totals["queued"] == 1 and totals["days_closed"] == 1
    again = json.loads((await cli("rollover", "--at", at, "--json", REDIS_URL=clean_redis)).out)
    assert again["queued"] == 0 and again["days_closed"] == 0


async def test_bench_recall_reports_the_indexes_memory_over_many_scopes(
    cli: CLI, clean_redis: str
) -> None:
    """``bench recall --scopes N --cache-mb M``: the messages spread over N scopes, built one
    after another into a cache of M MB, which evicts the least recently searched; the
    report gives the indexes' bytes per message cached and the process's memory."""
    run = await cli(
        "bench",
        "recall",
        "--sizes",
        "6000",
        "--scopes",
        "4",
        "--cache-mb",
        "1",
        "--queries",
        "3",
        "--json",
        REDIS_URL=clean_redis,
        MEMORYBOT_MEMORY__RECALL_EMBEDDER="off",
    )
    assert run.code == 0, run.err
    [row] = json.loads(run.out)["sizes"]
    assert (row["messages"], row["scopes"], row["cache_mb"], row["builds"]) == (6000, 4, 1, 5)
    assert row["evictions"] >= 1 and row["messages_cached"] < 6000
    assert row["index_mb"] <= 1.0 and 100 < row["index_bytes_per_message"] < 1024
    assert row["loop_stall_build_ms"] >= 0 and row["loop_stall_query_ms"] >= 0
    assert row["rss_before_mb"] > 0 and "peak_within_cache" in row


async def test_bench_ingest_json(cli: CLI, clean_redis: str) -> None:
    run = await cli(
        "bench",
        "ingest",
        "--scopes",
        "3",
        "--messages",
        "300",
        "--json",
        REDIS_URL=clean_redis,
        MEMORYBOT_MEMORY__RECALL_EMBEDDER="local",
    )
    assert run.code == 0, run.err
    result = json.loads(run.out)
    for key in (
        "p50_ms",
        "p99_ms",
        "msgs_per_s",
        "redis_ping_ms",
        "ping_during_run_ms",
        "lane_ping_ms",
    ):
        assert result[key] > 0, key
    assert result["p99_ms"] >= result["p50_ms"]
    # Background embedding on, as in production: every message embedded by the end, by the
    # worker process beside the bench.
    assert result["embedding"] == "worker process"
    assert result["embedded"] == 300 and result["embed_msgs_per_s"] > 0
    assert result["embed_catch_up_s"] >= 0 and result["embed_lag_max_s"] >= 0
    client = redis.Redis.from_url(clean_redis)
    assert client.dbsize() == 0, "the benchmark cleans up after itself"


async def test_doctor(cli: CLI, fake_llm: FakeOpenAI, clean_redis: str) -> None:
    run = await cli(
        "doctor",
        REDIS_URL=clean_redis,
        OPENAI_BASE_URL=fake_llm.base_url,
        OPENAI_API_KEY="sk-secret-value",
    )
    assert "store" in run.out and "Redis at redis://127.0.0.1" in run.out
    assert "sk-secret-value" not in run.out + run.err
    bad = await cli("doctor", REDIS_URL="redis://127.0.0.1:1/0")
    assert bad.code == 1 and "cannot reach Redis" in bad.out


ANSWERED = "Your message is remembered."  # the offline reply's first line: it arrived


async def _console_line(proc: asyncio.subprocess.Process, containing: str) -> str:
    """Read the console's stdout until a line holds ``containing`` (the answer arrived)."""
    assert proc.stdout is not None
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
        assert raw, f"the console ended before printing {containing!r}"
        if containing in raw.decode():
            return raw.decode()


async def _kill_embedded_server(cli: CLI) -> None:
    """SIGKILL the embedded Valkey server: no SHUTDOWN, no last fsync."""
    pid = int((cli.home / "data" / "memorybot" / "valkey.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_until_gone(pid)


async def test_a_message_and_a_forget_two_seconds_before_kill_9_survive(cli: CLI) -> None:
    """The console and the embedded server are killed two seconds after a message and a
    confirmed forget: after a restart the message is remembered and the forgotten text gone
    (the forget waited for the fsync; the message was written before its reply)."""
    said = await cli("console", stdin="I like hojicha\nI like sencha\n")
    assert said.code == 0, said.err
    proc = await spawn_memorybot(cli.home, "console")
    assert proc.stdin is not None
    proc.stdin.write(b"/memory forget hojicha\n")
    await proc.stdin.drain()
    answer = await _console_line(proc, "Forgot")
    assert "hojicha" in answer and "1 messages" in answer
    proc.stdin.write(b"Genmaicha on Mondays\n")
    await proc.stdin.drain()
    await _console_line(proc, ANSWERED)
    await asyncio.sleep(2)  # the scenario itself: the crash comes two seconds later
    proc.kill()
    await asyncio.wait_for(proc.wait(), timeout=10)
    await _kill_embedded_server(cli)
    shown = await cli("console", stdin="/memory show\n")
    assert shown.code == 0, shown.err
    assert "I like sencha" in shown.out and "Genmaicha on Mondays" in shown.out
    assert "hojicha" not in shown.out
    export = await cli("memory", "export")
    assert export.code == 0, export.err
    assert "sencha" in export.out and "Genmaicha" in export.out and "hojicha" not in export.out


async def test_console_memory_show_and_dashboard_run_side_by_side(cli: CLI) -> None:
    """One embedded server for every memorybot process of the data directory: the console
    stays open while another process reads its messages and the dashboard serves beside."""
    console = await spawn_memorybot(cli.home, "console", "--user", "Alice")
    assert console.stdin is not None and console.stderr is not None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dashboard = await spawn_memorybot(
        cli.home, "dashboard", "--port", str(port), env={"DASHBOARD_TOKEN": TOKEN}
    )
    try:
        console.stdin.write(b"The launch checklist lives in the wiki\n")
        await console.stdin.drain()
        await _console_line(console, ANSWERED)
        shown = await cli("memory", "show", "--scope", "default")
        assert shown.code == 0, shown.err
        assert "The launch checklist lives in the wiki" in shown.out
        metrics = await _get_metrics(port)
        assert "memorybot_" in metrics
        assert dashboard.returncode is None and console.returncode is None
        console.stdin.write(b"Second line while the others run\n")
        await console.stdin.drain()
        await _console_line(console, ANSWERED)
        status = await cli("store", "status")
        assert "running: valkey-server 9." in status.out and "in use by memorybot" in status.out
    finally:
        console.stdin.close()
        await asyncio.wait_for(console.wait(), timeout=30)
        dashboard.send_signal(signal.SIGTERM)
        await asyncio.wait_for(dashboard.wait(), timeout=30)
    assert console.returncode == 0
    status = await cli("store", "status")  # the last process stopped it
    assert "embedded store: not running" in status.out


async def _get_metrics(port: int) -> str:
    """GET /metrics of the dashboard, waiting for it to listen."""
    deadline = asyncio.get_running_loop().time() + 60
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(
                    f"http://127.0.0.1:{port}/metrics",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                ) as response:
                    assert response.status == 200
                    return await response.text()
            except aiohttp.ClientConnectorError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.1)


MARKUP_TEXT = "ok :thumbsup: [bold]x[/bold] :100: [red]"


async def test_ask_json_prints_user_text_and_scope_exactly(cli: CLI) -> None:
    """Emoji codes and rich markup in what a user typed, or in a scope name, are data."""
    run = await cli("ask", "--scope", "discord:100:2", "--dry-run", "--json", MARKUP_TEXT)
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["scope"] == "discord:100:2"
    assert data["messages"][-1]["content"].endswith(f"you: {MARKUP_TEXT}")
    assert '"scope": "discord:100:2"' in run.out and MARKUP_TEXT in run.out
    prompt = await cli("ask", "--scope", "discord:100:2", "--dry-run", MARKUP_TEXT)
    assert prompt.code == 0, prompt.err
    assert f"you: {MARKUP_TEXT}" in prompt.out


async def test_console_and_memory_commands_echo_user_text_exactly(cli: CLI) -> None:
    run = await cli("console", "--scope", "discord:100:2", stdin=f"{MARKUP_TEXT}\n/memory show\n")
    assert run.code == 0, run.err
    assert f"you: {MARKUP_TEXT}" in run.out
    assert "Memory of discord:100:2" in run.out and "Scope: discord:100:2" in run.err
    shown = await cli("memory", "show", "--scope", "discord:100:2")
    assert shown.code == 0, shown.err
    assert "Memory of discord:100:2" in shown.out and MARKUP_TEXT in shown.out
    exported = await cli("memory", "export", "--scope", "discord:100:2")
    assert json.loads(exported.out)["log"][0]["text"] == MARKUP_TEXT


async def test_doctor_prints_paths_exactly(cli: CLI) -> None:
    data_dir = cli.home / "tea:thumbsup:[bold]x[/bold]"
    run = await cli("doctor", MEMORYBOT_STORE__DATA_DIR=str(data_dir), COLUMNS="400")
    assert run.code == 0, run.out + run.err
    assert str(data_dir) in run.out


async def test_doctor_and_store_status_say_which_server_runs_where(cli: CLI) -> None:
    data_dir = cli.home / "data" / "memorybot"
    run = await cli("doctor", COLUMNS="1000")
    assert run.code == 0, run.out + run.err
    for said in ("embedded Valkey 9.", f"socket {data_dir / 'valkey.sock'}", "valkey-server"):
        assert said in run.out, run.out
    assert str(data_dir / "valkey-aof") in run.out and str(data_dir / "valkey.log") in run.out
    status = await cli("store", "status")
    assert status.code == 0, status.err
    assert "embedded store: not running" in status.out  # doctor's server stopped with it
    assert f"data: {data_dir / 'valkey-aof'}" in status.out
    stop = await cli("store", "stop")
    assert stop.code == 0 and "not running" in stop.out


async def test_help_shows_brackets(cli: CLI) -> None:
    run = await cli("--help", COLUMNS="400")
    assert run.code == 0, run.err
    assert "show [overview|tiers|facts|stats]" in run.out
    memory = await cli("memory", "--help", COLUMNS="400")
    assert "show [overview|tiers|facts|stats]" in memory.out


@pytest.mark.parametrize(
    ("door", "token"), [("--discord", "DISCORD_TOKEN"), ("--slack", "SLACK_BOT_TOKEN")]
)
async def test_run_without_a_token_says_which_and_exits_2(cli: CLI, door: str, token: str) -> None:
    """After `pip install -e .` alone, each front door starts or names what is missing."""
    run = await cli("run", door)
    assert run.code == 2, run.err
    assert f"error: {token} is not set" in run.err
    assert "Traceback" not in run.err + run.out


def without_modules(home: Path, *modules: str) -> dict[str, str]:
    """An environment whose Python cannot import ``modules``, as if they were not installed
    (a sitecustomize marks them absent: an import raises ModuleNotFoundError)."""
    site = home / "site-without"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        f"import sys\nsys.modules.update(dict.fromkeys({list(modules)!r}))\n", encoding="utf-8"
    )
    return {"PYTHONPATH": f"{site}:{ROOT}"}


@pytest.mark.parametrize(
    "args",
    [("bench", "report", "--from", "figures.json"), ("bench", "all", "--quick")],
    ids=["report", "all"],
)
async def test_bench_without_its_extra_names_the_pip_install(
    cli: CLI, args: tuple[str, ...]
) -> None:
    (cli.home / "figures.json").write_text("{}", encoding="utf-8")
    env = without_modules(cli.home, "matplotlib", "langchain_classic", "langchain_openai")
    run = await cli(*args, **env)
    assert run.code == 2, run.out + run.err
    assert "install it with: pip install -e '.[bench]'" in run.err
    assert "Traceback" not in run.err + run.out


# -- text that is not UTF-8, binary files, Discord unreachable, pause offline (issue 25) -----
async def run_bytes(cli: CLI, *args: str, stdin: bytes, **env: str) -> Run:
    """``memorybot ARGS`` with raw bytes on stdin (``CLI`` takes text)."""
    proc = await spawn_memorybot(cli.home, *args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=90)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


# How stdin decodes what is not UTF-8: "strict" (PYTHONIOENCODING=utf-8, a UTF-8 locale)
# raises UnicodeDecodeError; "surrogateescape" (a C locale) hands over lone surrogates,
# which the sentence encoder then fails to encode (recall by meaning, as installed).
NOT_UTF8_STDIN = {
    "strict": {"PYTHONIOENCODING": "utf-8"},
    "surrogateescape": {
        "PYTHONIOENCODING": "utf-8:surrogateescape",
        "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "local",
        "MEMORYBOT_MEMORY__RECALL_WAIT_S": "300",  # the model's loading may outlast 2 s
    },
}


@pytest.mark.parametrize("decoding", list(NOT_UTF8_STDIN))
async def test_console_keeps_a_line_that_is_not_utf8_and_the_lines_after_it(
    cli: CLI, clean_redis: str, decoding: str
) -> None:
    """`printf 'caf\\xe9 au lait\\nnext line\\n' | memorybot console`: the Latin-1 line is
    kept with U+FFFD for the byte, said in one line, and the console reads on."""
    env = {"REDIS_URL": clean_redis, **NOT_UTF8_STDIN[decoding]}
    run = await run_bytes(cli, "console", stdin=b"caf\xe9 au lait\nnext line\n", **env)
    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    notes = [line for line in run.err.splitlines() if "not UTF-8" in line]
    assert notes == [
        "! line 1 is not UTF-8 text: it was kept with U+FFFD in place of the bytes that are "
        "not; set your terminal (or the file you pipe in) to UTF-8"
    ]
    assert run.out.count("No LLM is configured") == 2  # both lines answered
    shown = await cli("memory", "show", "--scope", "default", REDIS_URL=clean_redis)
    assert shown.code == 0, shown.err
    assert "2 messages stored" in shown.out
    assert "you: caf\ufffd au lait" in shown.out and "you: next line" in shown.out


async def test_console_reads_on_through_random_bytes(cli: CLI, clean_redis: str) -> None:
    """2 KB of random bytes (a fixed seed), then a line: the console stays up, remembers
    the line after the noise, exits 0."""
    noise = random.Random(25).randbytes(2048)
    stdin = b"before the noise\n" + noise + b"\nafter the noise\n"
    run = await run_bytes(cli, "console", stdin=stdin, REDIS_URL=clean_redis)
    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    assert "is not UTF-8 text" in run.err
    shown = await cli("memory", "show", "--scope", "default", REDIS_URL=clean_redis)
    assert shown.code == 0, shown.err
    assert "you: after the noise" in shown.out
    stored = int(shown.out.split(" messages stored")[0].split()[-1])
    assert stored >= 3  # before, some of the noise, after


async def test_interactive_console_keeps_a_line_that_is_not_utf8(
    cli: CLI, clean_redis: str
) -> None:
    """On a terminal (stdin and stdout a pty: input() reads through readline), a Latin-1
    line is kept and the console goes on to the next line (whose offline reply shows the
    kept line: it asks about it) and /quit."""
    leader, follower = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli.main",
        "console",
        stdin=follower,
        stdout=follower,
        stderr=asyncio.subprocess.PIPE,
        cwd=cli.home,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(cli.home),
            "XDG_DATA_HOME": str(cli.home / "data"),
            "PYTHONIOENCODING": "utf-8",
            "PYTHONPATH": str(ROOT),
            "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "off",
            "REDIS_URL": clean_redis,
            "TERM": "dumb",
        },
    )
    os.close(follower)
    screen = bytearray()

    def read_until(text: bytes) -> None:
        deadline = time.monotonic() + 60
        while text not in screen:
            assert time.monotonic() < deadline, bytes(screen)
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    screen.extend(os.read(leader, 4096))
                except OSError:  # the console is gone: nothing more will come
                    raise AssertionError(bytes(screen)) from None

    try:
        os.write(leader, b"caf\xe9 au lait\n")  # the terminal holds it until input() reads
        await asyncio.to_thread(read_until, b"Your message is remembered.")
        os.write(leader, b"who said au lait?\n")
        await asyncio.to_thread(read_until, b"] you: caf\xef\xbf\xbd au lait")
        os.write(leader, b"/quit\n")
        code = await asyncio.wait_for(proc.wait(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(leader)
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert code == 0, err
    assert "! line 1 is not UTF-8 text" in err
    shown = await cli("memory", "show", "--scope", "default", REDIS_URL=clean_redis)
    assert "you: caf\ufffd au lait" in shown.out and "you: who said au lait?" in shown.out


async def test_ask_with_an_argument_that_is_not_utf8(cli: CLI, clean_redis: str) -> None:
    """`memorybot ask $'caf\\xe9 au lait'`: the byte reaches Python as a lone surrogate
    (argv is decoded with surrogateescape); kept as U+FFFD, said in one line, answered (and
    the next question about it is answered with it)."""
    env = {"REDIS_URL": clean_redis, "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "local"}
    # A str with a surrogateescape'd byte is passed to the child as that byte, 0xe9.
    run = await cli("ask", "caf\udce9 au lait", **env)
    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    assert "warning: TEXT is not UTF-8 text" in run.err
    assert "No LLM is configured" in run.out
    # Recall waited for whole: on a busy machine, loading the local model could outlast the
    # live default (memory.recall_wait_s), and the answer would show nothing recalled.
    again = await cli("ask", "who said au lait?", MEMORYBOT_MEMORY__RECALL_WAIT_S="300", **env)
    assert "] you: caf\ufffd au lait" in again.out
    shown = await cli("memory", "show", "--scope", "default", REDIS_URL=clean_redis)
    assert "you: caf\ufffd au lait" in shown.out


async def test_replay_reports_a_latin1_line_by_number_and_keeps_the_rest(
    cli: CLI, clean_redis: str, fake_llm: FakeOpenAI
) -> None:
    """A transcript with a Latin-1 line and a line whose JSON holds a "\\ud800" escape,
    replayed with replies and recall by meaning: the Latin-1 line is reported by number
    and skipped, the escape is stored as U+FFFD, every other line is stored."""
    path = cli.home / "chat.jsonl"
    ts = [(START + timedelta(minutes=i)).isoformat() for i in range(4)]
    lines = [
        json.dumps({"ts": ts[0], "user": "Alice", "text": "hello"}).encode(),
        b'{"ts": "' + ts[1].encode() + b'", "user": "Bob", "text": "caf\xe9 au lait"}',
        json.dumps({"ts": ts[2], "user": "Carol", "text": "lone \ud800 escape"}).encode(),
        json.dumps({"ts": ts[3], "user": "Dave", "text": "the last line"}).encode(),
    ]
    assert b"\\ud800" in lines[2]
    path.write_bytes(b"\n".join(lines) + b"\n")
    env = {
        "REDIS_URL": clean_redis,
        "OPENAI_BASE_URL": fake_llm.base_url,
        "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "local",
    }
    run = await cli("replay", str(path), "--scope", "r", "--json", **env)
    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    report = json.loads(run.out)
    assert report["stored"] == 3 and report["replies"] == 3
    at = lines[1].index(b"\xe9") + 1
    reason = f"not UTF-8 text (byte 0xe9 at byte {at} of the line): save the file as UTF-8"
    assert report["skipped"] == [{"line": 2, "reason": reason}]
    shown = await cli("memory", "show", "--scope", "r", REDIS_URL=clean_redis)
    assert "Carol: lone \ufffd escape" in shown.out and "Dave: the last line" in shown.out


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, noted, closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


EXPORT_HINT = "memorybot export (the UTF-8 JSON file 'memorybot memory export --out FILE' writes)"


@pytest.mark.parametrize("kind", ["png", "program"])
async def test_memory_import_of_a_binary_file_says_what_it_expects(
    cli: CLI, clean_redis: str, kind: str
) -> None:
    """`memorybot memory import picture.png` (or /bin/true): one line naming the file,
    what is wrong and what is expected; exit status 1; nothing written."""
    if kind == "png":
        path = cli.home / "picture.png"
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(64))
    else:
        found = shutil.which("true")
        assert found is not None
        path = Path(found)
    run = await cli("memory", "import", str(path), "--scope", "dst", REDIS_URL=clean_redis)
    assert run.code == 1, run.out + run.err
    assert run.err.splitlines() == [
        f"error: cannot import {path}: it is a binary file, not a {EXPORT_HINT}"
    ]
    assert redis.Redis.from_url(clean_redis).dbsize() == 0


async def test_memory_import_of_a_file_that_is_not_utf8(cli: CLI, clean_redis: str) -> None:
    """An export saved as Latin-1 by an editor: refused in one line naming the byte and its
    line, exit status 1, nothing written."""
    env = {"REDIS_URL": clean_redis}
    await cli("console", "--scope", "src", stdin="un café au lait\n", **env)
    export = await cli("memory", "export", "--scope", "src", "--out", "dump.json", **env)
    assert export.code == 0, export.err
    dump = cli.home / "dump.json"
    text = json.dumps(json.loads(dump.read_text(encoding="utf-8")), indent=1, ensure_ascii=False)
    dump.write_bytes(text.encode("latin-1"))
    line = text[: text.index("café")].count("\n") + 1
    client = redis.Redis.from_url(clean_redis)
    keys = sorted(client.keys("*"))
    run = await cli("memory", "import", "dump.json", "--scope", "dst", **env)
    assert run.code == 1, run.out + run.err
    assert run.err.splitlines() == [
        f"error: cannot import dump.json: it is not UTF-8 text (byte 0xe9 on line {line}); "
        f"save it as UTF-8, or give a {EXPORT_HINT}"
    ]
    assert sorted(client.keys("*")) == keys  # nothing written


async def test_run_discord_unreachable_says_so_in_one_line_and_exits_2(cli: CLI) -> None:
    """`memorybot run --discord` when Discord cannot be reached (the API base a closed port
    on 127.0.0.1: nothing leaves this machine): one line naming what failed and what to
    check, exit status 2, as docs/discord.md promises and the Slack door does."""
    base = f"http://127.0.0.1:{closed_port()}"
    run = await cli(
        "run", "--discord", DISCORD_TOKEN="not-a-real-token", MEMORYBOT_DISCORD__API_BASE=base
    )
    assert run.code == 2, run.err
    assert "Traceback" not in run.err + run.out
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, run.err
    assert errors[0].startswith(f"error: cannot reach Discord at {base} to log in (")
    assert f"check discord.api_base (MEMORYBOT_DISCORD__API_BASE={base})" in errors[0]
    assert "not-a-real-token" not in run.err + run.out


PAUSED = {
    "en": ("Memory is paused here, so your message was NOT remembered", "Your message is"),
    "ja": ("記憶が一時停止中のため、このメッセージは記憶していません", "メッセージは記憶しました"),
}


@pytest.mark.parametrize("language", list(PAUSED))
async def test_offline_reply_while_paused_says_the_message_was_not_remembered(
    cli: CLI, clean_redis: str, language: str
) -> None:
    """`/memory pause`, then a message: the offline reply says memory is paused and the
    message was not remembered (not "Your message is remembered"); /memory show agrees."""
    said, remembered = PAUSED[language]
    stdin = (
        f"/memory config language {language}\n"
        "kept before the pause\n"
        "/memory pause\n"
        "the secret said while paused\n"
        "/memory show\n"
    )
    run = await cli("console", "--scope", "p", stdin=stdin, REDIS_URL=clean_redis)
    assert run.code == 0, run.err
    # The first reply says it was remembered, the second (paused) that it was not.
    assert run.out.count(remembered) == 1 and run.out.count(said) == 1, run.out
    assert run.out.index(remembered) < run.out.index(said)
    shown = await cli("memory", "show", "--scope", "p", REDIS_URL=clean_redis)
    assert "kept before the pause" in shown.out
    assert "the secret said while paused" not in shown.out


async def test_memory_remember_with_an_argument_that_is_not_utf8(
    cli: CLI, clean_redis: str
) -> None:
    """`memorybot memory remember $'caf\\xe9 au lait'`: the note is kept with U+FFFD for the
    byte (said in one line), not a UnicodeEncodeError when the answer is printed."""
    env = {"REDIS_URL": clean_redis, "PYTHONIOENCODING": "utf-8"}
    run = await cli("memory", "remember", "caf\udce9 au lait", "--scope", "n", **env)
    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    assert run.err.startswith("warning: the command is not UTF-8 text")
    facts = await cli("memory", "show", "facts", "--scope", "n", **env)
    assert "caf\ufffd au lait" in facts.out


async def test_a_console_reply_waits_for_recall_at_most_recall_wait_s(
    cli: CLI, clean_redis: str
) -> None:
    """A channel of 4,000 messages (replayed): a console asked about its first line with
    ``memory.recall_wait_s`` at 1 ms answers at once without recalling it (the index is
    still being built) and ends cleanly with the build unfinished; a console with the
    default 2 s recalls it."""
    now = datetime.now(UTC)
    lines = [{"ts": (now - timedelta(hours=3)).isoformat(), "user": "Carol", "text": PELICAN}]
    lines += [
        {
            "ts": (now - timedelta(hours=2, seconds=-i)).isoformat(),
            "user": f"u{i % 3}",
            "text": f"chatter note {i % 40} about the {i % 7} plan",
        }
        for i in range(4000)
    ]
    path = cli.home / "big.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    env = {"REDIS_URL": clean_redis, "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "off"}
    stored = await cli("replay", str(path), "--scope", "big", "--no-reply", **env)
    assert stored.code == 0, stored.err
    question = "what is the launch code word?\n"
    hurried = await cli(
        "console", "--scope", "big", stdin=question, MEMORYBOT_MEMORY__RECALL_WAIT_S="0.001", **env
    )
    assert hurried.code == 0, hurried.err
    assert "No LLM is configured" in hurried.out and "pelican" not in hurried.out
    assert "Traceback" not in hurried.err
    patient = await cli("console", "--scope", "big", stdin=question, **env)
    assert patient.code == 0, patient.err
    assert PELICAN in patient.out


PELICAN = "the launch code word is pelican"


async def test_the_console_embeds_in_a_worker_and_stops_it_on_exit(
    cli: CLI, clean_redis: str
) -> None:
    """`memorybot` (the console) with the local model: what is said is embedded by the
    worker process it started, with no extra command; when the console ends, the worker
    has left (its status is gone from the fleet's view) and no helper process remains."""
    env = {"REDIS_URL": clean_redis, "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "local"}
    before = await asyncio.to_thread(helper_processes, clean_redis)
    lines = "".join(f"remember the garden note {i}\n" for i in range(6))
    run = await cli("console", stdin=lines, **env)
    assert run.code == 0, run.err
    client = redis.Redis.from_url(clean_redis, decode_responses=True)
    vectors = [k for k in client.scan_iter("*:vec")]
    assert vectors, "the console's messages were embedded"
    assert sum(client.hlen(k) for k in vectors) >= 6
    assert client.hgetall("mb:{fleet}:embedders") == {}
    assert await asyncio.to_thread(helper_processes, clean_redis) - before == set()


async def test_the_console_s_two_helpers_map_one_copy_of_the_model_s_weights(
    tmp_path: Path, clean_redis: str
) -> None:
    """The embedding worker and the query embedder, started by the console, read the
    model's weights from the same files (one copy in memory for both, and in the CPU's
    caches), not each a private copy of its own."""
    env = {"REDIS_URL": clean_redis, "MEMORYBOT_MEMORY__RECALL_EMBEDDER": "local"}
    before = await asyncio.to_thread(helper_processes, clean_redis)
    console = await spawn_memorybot(tmp_path, "console", env=env)
    try:
        # A helper maps the files one by one as it loads: wait until both have mapped
        # every array they will (the same set twice in a row), or the deadline.
        deadline = time.monotonic() + 90
        mapped: dict[str, set[tuple[str, str]]] = {}
        settled = 0
        while time.monotonic() < deadline:
            pids = await asyncio.to_thread(helper_processes, clean_redis) - before
            seen = {pid: weight_files(pid) for pid in pids}
            whole = len(seen) == 2 and all(
                {Path(f).name for _, f in m} >= WEIGHT_FILES for m in seen.values()
            )
            settled = settled + 1 if whole and seen == mapped else 0
            mapped = seen
            if settled >= 3:
                break
            await asyncio.sleep(0.2)
        assert len(mapped) == 2, f"two helpers, each mapping the weights: {mapped}"
        worker, query = mapped.values()
        assert worker == query  # the same files (device and inode), not copies
        assert {Path(f).name for _, f in worker} >= WEIGHT_FILES
    finally:
        assert console.stdin is not None
        console.stdin.close()
        await asyncio.wait_for(console.wait(), timeout=60)
    assert await asyncio.to_thread(helper_processes, clean_redis) - before == set()


WEIGHT_FILES = {"table.npy", "proj_W.npy", "cnn_W.npy", "w1.0.npy", "p3.npy"}


def weight_files(pid: str) -> set[tuple[str, str]]:
    """(device:inode, path) of the shared weights files process ``pid`` maps."""
    found = set()
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and "/weights/usem3-" in parts[5]:
                found.add((f"{parts[3]}:{parts[4]}", parts[5]))
    return found


def helper_processes(redis_url: str) -> set[str]:
    """The pids of the embedding helpers running on this machine for the store at
    ``redis_url`` (they inherit its REDIS_URL: another memorybot's helpers, started
    meanwhile by someone else on the machine, are not this console's)."""
    found = set()
    mark = f"REDIS_URL={redis_url}".encode()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            ours = mark in (proc / "environ").read_bytes().split(b"\0")
            if ours and b"memory_core.recall.worker" in (proc / "cmdline").read_bytes():
                found.add(proc.name)
    return found
