"""The command line as a new user runs it: real processes, the embedded store or a real
Redis, the fake OpenAI server over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest
import redis

from tests.browser.support import TOKEN
from tests.conftest import START, wait_until_gone
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import ROOT, spawn_memorybot

LEGACY = ROOT / "tests" / "data" / "legacy-memorybot-store.json"


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


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    return CLI(tmp_path)


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


async def test_bench_ingest_json(cli: CLI, clean_redis: str) -> None:
    run = await cli(
        "bench", "ingest", "--scopes", "3", "--messages", "300", "--json", REDIS_URL=clean_redis
    )
    assert run.code == 0, run.err
    result = json.loads(run.out)
    for key in ("p50_ms", "p99_ms", "msgs_per_s", "redis_ping_ms"):
        assert result[key] > 0, key
    assert result["p99_ms"] >= result["p50_ms"]
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
    await _console_line(proc, "Genmaicha on Mondays")
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
        await _console_line(console, "The launch checklist lives in the wiki")
        shown = await cli("memory", "show", "--scope", "default")
        assert shown.code == 0, shown.err
        assert "The launch checklist lives in the wiki" in shown.out
        metrics = await _get_metrics(port)
        assert "memorybot_" in metrics
        assert dashboard.returncode is None and console.returncode is None
        console.stdin.write(b"Second line while the others run\n")
        await console.stdin.drain()
        await _console_line(console, "Second line while the others run")
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


async def test_an_old_json_snapshot_is_migrated_on_first_start(cli: CLI) -> None:
    data_dir = cli.home / "data" / "memorybot"
    data_dir.mkdir(parents=True)
    shutil.copy(LEGACY, data_dir / "memorybot-store.json")
    shown = await cli("memory", "show", "--scope", "default")
    assert shown.code == 0, shown.err
    assert "imported" in shown.err and "memorybot-store.json" in shown.err
    assert "2 messages stored" in shown.out
    team = await cli("console", "--scope", "team", stdin="/memory show\n")
    assert "The release train leaves at noon" in team.out
    assert not (data_dir / "memorybot-store.json").exists()
    assert (data_dir / "memorybot-store.json.imported").is_file()
    assert "imported" not in team.err  # once


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
