"""Secrets never leak. Every secret memorybot knows (the OpenAI key, the Discord and Slack
tokens, the signing secret, the dashboard token and the Redis password) is set to a unique
marker, and everything memorybot emits is searched for each marker: the output of real CLI
processes (working, failing to start, failing to reach Redis, failing at the model), log
records at DEBUG of a core that stores, answers, summarises and meets a model that refuses
the key (and one that echoes it back in its error), exports, /memory answers, ``repr`` and
``str`` of the settings, and exception messages. A hit names the secret and the place."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from bots.commands import Actor
from bots.frontdoor import run_command
from config.settings import Settings, load_settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.errors import LLMUnavailable, MemorybotError, StoreUnavailable
from memory_core.models import IncomingMessage
from memory_core.prompt.answers import MASK
from memory_core.store.server import mask_url, open_store
from memorybot_testkit.converse import converse, converse_streamed
from memorybot_testkit.redis_servers import LocalRedis
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.fakes.slack import serve_web_app
from tests.helpers import START, scope_values, spawn_memorybot
from tests.observed_discord import ObservedBot

TAG = uuid.uuid4().hex[:10]
PASSWORD = f"S3cretPw{TAG}"
SECRETS: dict[str, str] = {
    "OPENAI_API_KEY": f"sk-proj-LEAKCHECK{TAG}openai",
    "DISCORD_TOKEN": f"MTAxLEAKCHECK{TAG}.discord.token",
    "SLACK_BOT_TOKEN": f"xoxb-LEAKCHECK{TAG}-bot",
    "SLACK_APP_TOKEN": f"xapp-1-LEAKCHECK{TAG}-app",
    "SLACK_SIGNING_SECRET": f"signLEAKCHECK{TAG}secret",
    "DASHBOARD_TOKEN": f"dashLEAKCHECK{TAG}token",
    "the Redis password": PASSWORD,
}
# Passwords written in the other places a Redis URL can hold them; each half is a marker,
# so a mask that stops at the first "@" is caught too.
AT_PASSWORD = (f"AtPwLeft{TAG}", f"AtPwRight{TAG}")
QUERY_PASSWORD = f"QueryPw{TAG}"
MARKERS: dict[str, str] = {
    **SECRETS,
    "a Redis password with '@' (left half)": AT_PASSWORD[0],
    "a Redis password with '@' (right half)": AT_PASSWORD[1],
    "a Redis password in the URL query": QUERY_PASSWORD,
}


def assert_clean(text: str, where: str) -> None:
    """Fail, naming the secret and the place, if any marker occurs in ``text``."""
    for name, marker in MARKERS.items():
        at = text.find(marker)
        if at >= 0:
            context = text[max(0, at - 80) : at + len(marker) + 40]
            pytest.fail(f"{name} leaked in {where}: ...{context}...")


class PasswordRedis(LocalRedis):
    """A private redis-server that requires a password (the URL carries it)."""

    def __init__(self, password: str) -> None:
        self.password = password
        super().__init__(extra=("--requirepass", password))

    def _wait(self) -> None:
        self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"
        super()._wait()


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[PasswordRedis]:
    server = PasswordRedis(PASSWORD)
    try:
        yield server
    finally:
        server.stop()


def secret_env(redis_url: str, llm_url: str) -> dict[str, str]:
    env = {name: value for name, value in SECRETS.items() if name.isupper()}
    return {**env, "REDIS_URL": redis_url, "OPENAI_BASE_URL": llm_url}


@asynccontextmanager
async def key_echoing_llm() -> AsyncIterator[str]:
    """An OpenAI-compatible server that refuses every request and, like some proxies (and
    OpenAI itself, partly masked), quotes the Authorization header back in its error."""

    async def refuse(request: web.Request) -> web.Response:
        status = int(request.match_info["status"])
        error = {
            "message": f"Incorrect API key provided: {request.headers.get('Authorization')}",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
        return web.json_response({"error": error}, status=status)

    app = web.Application()
    app.router.add_route("*", "/{status:\\d+}/v1/{tail:.*}", refuse)
    async with serve_web_app(app) as url:
        yield url


# -- settings --------------------------------------------------------------------------
def test_settings_never_show_their_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``repr``, ``str``, dumps (Python and JSON) of the settings and of each section."""
    monkeypatch.chdir(tmp_path)
    for name, value in secret_env(f"redis://:{PASSWORD}@127.0.0.1:1/0", "http://x/v1").items():
        monkeypatch.setenv(name, value)
    s = load_settings()
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() in MARKERS.values()
    views = {
        "repr(settings)": repr(s),
        "str(settings)": str(s),
        "settings.model_dump()": str(s.model_dump()),
        "settings.model_dump_json()": s.model_dump_json(),
        "settings.model_dump(mode='json')": json.dumps(s.model_dump(mode="json")),
    }
    for section in Settings.model_fields:
        value = getattr(s, section)
        views[f"repr(settings.{section})"] = repr(value)
        views[f"str(settings.{section})"] = str(value)
    for where, text in views.items():
        assert_clean(text, where)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://admin:{PASSWORD}@127.0.0.1:1/0",
        f"rediss://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://:{AT_PASSWORD[0]}@{AT_PASSWORD[1]}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={QUERY_PASSWORD}",
        f"redis://127.0.0.1:1/0?db=0&Password={QUERY_PASSWORD}&x=1",
        f"unix://:{PASSWORD}@/tmp/nonexistent-memorybot.sock?db=0",
    ],
    ids=["password", "user-password", "tls", "at-in-password", "query", "query-mixed", "unix"],
)
async def test_unreachable_redis_errors_hide_the_password(url: str, tmp_path: Path) -> None:
    """Every way a Redis URL carries a password: the error that stops start-up names the
    URL with the password masked, and so does the store description."""
    assert_clean(mask_url(url), f"mask_url({url!r})")
    settings = load_settings(None, store={"redis_url": url, "connect_timeout_s": 1.0})
    with pytest.raises(StoreUnavailable) as info:
        await open_store(settings.store)
    assert "REDIS_URL" in str(info.value)
    assert_clean(str(info.value), "the StoreUnavailable message")
    assert_clean(repr(info.value), "repr(StoreUnavailable)")


# Passwords as people write them into REDIS_URL, unencoded: any printable character, with the
# URL delimiters ("#", "/", "?", "@", ":", "%", "&", "=") and spaces drawn often.
DELIMITERS = "#/?@:%&= "
password_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(DELIMITERS),
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
    ),
    min_size=1,
    max_size=40,
)
user_name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", max_size=8)
HOSTS = ("127.0.0.1:1", "localhost", "redis.example.com:6380", "[::1]:6379", "10.0.0.7")
TAILS = ("", "/0", "/3", "/0?db=3", "?socket_timeout=5&db=1")


@given(
    scheme=st.sampled_from(["redis", "rediss"]),
    user=user_name,
    password=password_text,
    host=st.sampled_from(HOSTS),
    tail=st.sampled_from(TAILS),
)
def test_mask_url_hides_any_password_in_the_user_info(
    scheme: str, user: str, password: str, host: str, tail: str
) -> None:
    """The user info is everything between "//" and the last "@": whatever the password
    holds, the masked URL is the URL with exactly the password replaced."""
    url = f"{scheme}://{user}:{password}@{host}{tail}"
    assert mask_url(url) == f"{scheme}://{user}:***@{host}{tail}"


@given(password=password_text.filter(lambda p: ":" not in p))
def test_mask_url_hides_a_password_without_user_or_colon(password: str) -> None:
    """redis://secret@host: read as a user name by redis-py, but people put passwords there."""
    assert mask_url(f"redis://{password}@127.0.0.1:1/0") == "redis://***@127.0.0.1:1/0"
    assert (
        mask_url(f"unix://:{password}@/tmp/redis.sock?db=0") == "unix://:***@/tmp/redis.sock?db=0"
    )


@given(
    password=password_text.filter(lambda p: "&" not in p),
    key=st.sampled_from(["password", "Password", "PASSWORD"]),
    before=st.sampled_from(["?", "?db=0&"]),
    after=st.sampled_from(["", "&db=1"]),
)
def test_mask_url_hides_any_password_in_the_query(
    password: str, key: str, before: str, after: str
) -> None:
    """?password=...: up to the next "&" (which ends a query value for every URL parser)."""
    url = f"redis://127.0.0.1:1/0{before}{key}={password}{after}"
    assert mask_url(url) == f"redis://127.0.0.1:1/0{before}{key}=***{after}"


@given(user=user_name, password=password_text, host=st.sampled_from(HOSTS))
def test_any_redis_password_is_a_secret_replies_are_masked_for(
    user: str, password: str, host: str
) -> None:
    """Settings.secret_values (what a reply is searched for) reads the URL as mask_url
    does: a password holding "#", "/" or "?" is still the password."""
    settings = Settings(store={"redis_url": f"redis://{user}:{password}@{host}/0"})
    assert password in settings.secret_values()


def test_mask_url_leaves_urls_without_a_password_alone() -> None:
    for url in ("redis://127.0.0.1:6379/0", "unix:///tmp/redis.sock?db=0", "redis://h/0?db=1"):
        assert mask_url(url) == url


# -- a running core --------------------------------------------------------------------
@dataclass
class Emitted:
    """Everything a core said, collected for the search."""

    texts: dict[str, str]

    def add(self, where: str, text: str) -> None:
        self.texts[where] = self.texts.get(where, "") + text + "\n"

    def check(self) -> None:
        for where, text in self.texts.items():
            assert_clean(text, where)


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Every record at every level, with its arguments and formatted traceback."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) for record in caplog.records)


async def secret_core(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_url: str, llm_url: str
) -> Core:
    monkeypatch.chdir(tmp_path)
    for name, value in secret_env(redis_url, llm_url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEMORYBOT_LLM__MAX_RETRIES", "0")
    monkeypatch.setenv("MEMORYBOT_MEMORY__COMPACT_TRIGGER_TOKENS", "100")
    monkeypatch.setenv("MEMORYBOT_MEMORY__COMPACT_MIN_MESSAGES", "2")
    return await build_core(load_settings(), clock=ManualClock(START), background=False)


async def exercise(core: Core, scope: str, emitted: Emitted) -> None:
    """Messages, replies, a summary, a day rollover, /memory show and export."""
    emitted.add("Core.describe()", "\n".join(core.describe()))
    filler = "the release moves to Friday and the budget is fine " * 4
    for i in range(4):
        reply = await converse(
            core, IncomingMessage(scope=scope, text=f"{filler} {i}", author="Alice", direct=True)
        )
        assert reply is not None
        emitted.add("reply texts", reply.text)
    assert isinstance(core.clock, ManualClock)
    core.clock.advance(timedelta(days=1))
    await converse(core, IncomingMessage(scope=scope, text="next day", author="Bob"))
    admin = Actor(user_id="u1", name="Alice", is_admin=True)
    for command in ("show tiers", "show stats", "show facts", "export", "config mode loud"):
        result = await run_command(core, scope=scope, command=command, actor=admin)
        emitted.add(f"/memory {command}", result.text())
        if result.file is not None:
            emitted.add("the export file", result.file[1].decode())
    emitted.add("admin.export()", json.dumps(await core.admin.export(scope)))
    prompt = await core.replier.build_prompt(IncomingMessage(scope=scope, text="hi", author="Q"))
    emitted.add("the reply prompt", json.dumps(prompt.messages))


async def test_core_logs_and_outputs_hide_secrets(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    locked_redis: PasswordRedis,
    fake_llm: FakeOpenAI,
) -> None:
    """A core on the password-protected Redis with the key set: it stores, answers,
    summarises, rolls a day over, then the model refuses the key (401) and fails (500).
    The key really was sent; no log record, answer, export or exception shows it."""
    caplog.set_level(logging.DEBUG)
    core = await secret_core(monkeypatch, tmp_path, locked_redis.url, fake_llm.base_url)
    emitted = Emitted({})
    try:
        await exercise(core, "discord:1:2", emitted)
        fake_llm.fail_next(1, status=401, purposes=("reply",))
        refused = await converse(
            core,
            IncomingMessage(scope="discord:1:2", text="are you there?", author="A", direct=True),
        )
        assert refused is not None and refused.kind == "apology"
        fake_llm.fail_next(20, status=500)
        for i in range(3):
            failed = await converse(
                core,
                IncomingMessage(scope="discord:1:3", text=f"hello again {i} " * 30, author="A"),
            )
            assert failed is None  # not addressed; the summary calls fail in maintenance
        with pytest.raises(LLMUnavailable) as info:
            await core.llm.complete([{"role": "user", "content": "x"}], purpose="reply")
        emitted.add("LLMUnavailable", f"{info.value} {info.value!r}")
    finally:
        await core.close()
    sent = {r.headers.get("Authorization", "") for r in fake_llm.requests}
    assert f"Bearer {SECRETS['OPENAI_API_KEY']}" in sent, "the key must have been in play"
    assert any(r.purpose == "compact" for r in fake_llm.requests)
    emitted.add("log records (DEBUG)", log_text(caplog))
    emitted.check()


async def test_a_model_that_echoes_the_key_does_not_make_memorybot_echo_it(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    locked_redis: PasswordRedis,
) -> None:
    """The model's error body quotes the key back (401 for replies, 500 for summaries):
    memorybot's answers, logs, tracebacks and exception messages still never show it."""
    caplog.set_level(logging.DEBUG)
    emitted = Emitted({})
    async with key_echoing_llm() as llm_url:
        for status in (401, 500):
            url = f"{llm_url}/{status}/v1"
            core = await secret_core(monkeypatch, tmp_path, locked_redis.url, url)
            try:
                for i in range(4):
                    reply = await converse(
                        core,
                        IncomingMessage(
                            scope=f"slack:T1:C{status}",
                            text=f"tell me something {i} " * 20,
                            author="A",
                            direct=True,
                        ),
                    )
                    assert reply is not None and reply.kind == "apology"
                    emitted.add(f"apologies ({status})", reply.text)
                try:
                    await core.llm.complete([{"role": "user", "content": "x"}], purpose="compact")
                except MemorybotError as exc:
                    emitted.add(f"exception message ({status})", f"{exc}\n{exc!r}")
            finally:
                await core.close()
    emitted.add("log records (DEBUG)", log_text(caplog))
    emitted.check()


# -- a model that says a secret in its answer ---------------------------------------------
def secret_saying_answer(request: RecordedRequest) -> str | None:
    """A reply that repeats the API key it was sent with (and, as a prompt injection could
    get a model to, every other secret memorybot holds)."""
    if request.purpose != "reply":
        return None
    key = request.headers.get("Authorization", "").removeprefix("Bearer ")
    others = ", ".join(value for name, value in SECRETS.items() if name != "OPENAI_API_KEY")
    return f"Sure! My API key is {key} and I also know {others}. Anything else?"


def assert_no_half(text: str, where: str) -> None:
    """Not even the first half of a secret: what a streamed edit cut at a piece boundary
    would show."""
    for name, secret in SECRETS.items():
        half = secret[: len(secret) // 2]
        assert half not in text, f"the first half of {name} leaked in {where}: {text!r}"


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_a_secret_in_the_models_answer_is_masked_when_sent_streamed_and_stored(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    locked_redis: PasswordRedis,
    fake_llm: FakeOpenAI,
    streamed: bool,
) -> None:
    """The model's answer holds the key and the other secrets, streamed in 7-character
    pieces (each secret spans several): the replies, every streamed text, everything
    stored for the scope (messages and the summaries made of them) and the logs show none
    of them, nor the first half of any."""
    caplog.set_level(logging.DEBUG)
    fake_llm.responder = secret_saying_answer
    fake_llm.stream_piece_chars = 7
    core = await secret_core(monkeypatch, tmp_path, locked_redis.url, fake_llm.base_url)
    emitted = Emitted({})
    shown: list[str] = []

    async def progress(text: str) -> None:
        shown.append(text)

    scope = "discord:9:9"
    try:
        for i in range(3):
            reply = await converse_streamed(
                core,
                IncomingMessage(
                    scope=scope, text=f"what is your key? {i}", author="A", direct=True
                ),
                progress if streamed else None,
            )
            assert reply is not None and reply.kind == "llm"
            assert MASK in reply.text and reply.text.endswith("Anything else?"), reply.text
            emitted.add("reply texts", reply.text)
        stored = await scope_values(core, scope)
        assert any("Anything else?" in value for value in stored)
        emitted.add("the scope's values in Redis", "\n".join(stored))
    finally:
        await core.close()
    assert f"Bearer {SECRETS['OPENAI_API_KEY']}" in {
        r.headers.get("Authorization") for r in fake_llm.requests
    }
    assert len(shown) >= (30 if streamed else 0)
    for i, text in enumerate(shown):
        emitted.add(f"streamed text {i}", text)
    emitted.add("log records (DEBUG)", log_text(caplog))
    emitted.check()
    for where, text in emitted.texts.items():
        assert_no_half(text, where)


async def test_a_secret_in_the_models_answer_never_reaches_discord(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    locked_redis: PasswordRedis,
    fake_llm: FakeOpenAI,
) -> None:
    """Through the Discord front door, streaming: the draft as posted, every edit, the
    final message, the scope's Redis values and the logs hold no secret nor half of one."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("MEMORYBOT_DISCORD__STREAM_REPLIES", "true")
    monkeypatch.setenv("MEMORYBOT_DISCORD__STREAM_INTERVAL_S", "0.2")
    fake_llm.responder = secret_saying_answer
    fake_llm.stream_piece_chars = 7
    fake_llm.stream_piece_delay = 0.03  # about 1 s in all: several edits
    core = await secret_core(monkeypatch, tmp_path, locked_redis.url, fake_llm.base_url)
    emitted = Emitted({})
    try:
        async with FakeDiscord() as fake_discord:
            guild = fake_discord.add_guild(name="Leak Lab")
            channel = fake_discord.add_text_channel(guild.id, "general")
            alice = fake_discord.add_member(guild.id, name="alice")
            async with fake_discord.running(ObservedBot(core)) as bot:
                trigger = await fake_discord.send_message(
                    channel_id=channel.id,
                    author_id=alice.user.id,
                    content="what is your key?",
                    mentions_bot=True,
                )
                await bot.handled(trigger)
            [reply] = fake_discord.sent_messages
            final = str(fake_discord.messages[reply.id]["content"])
            assert MASK in final and final.endswith("Anything else?"), final
            edits = [e.content or "" for e in fake_discord.edits if e.message_id == reply.id]
            assert len(edits) >= 2, edits
            emitted.add("the posted draft", reply.content or "")
            for i, text in enumerate(edits):
                emitted.add(f"Discord edit {i}", text)
            emitted.add("the final Discord message", final)
        stored = await scope_values(core, f"discord:{guild.id}:{channel.id}")
        emitted.add("the scope's values in Redis", "\n".join(stored))
    finally:
        await core.close()
    emitted.add("log records (DEBUG)", log_text(caplog))
    emitted.check()
    for where, text in emitted.texts.items():
        assert_no_half(text, where)


# -- real CLI processes ------------------------------------------------------------------
@dataclass
class Run:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def check(self) -> None:
        where = f"`memorybot {' '.join(self.args)}`"
        assert "Traceback" not in self.err, f"{where} crashed:\n{self.err[-3000:]}"
        assert_clean(self.out, f"the stdout of {where}")
        assert_clean(self.err, f"the stderr of {where}")


async def cli(home: Path, *args: str, env: Mapping[str, str], stdin: str = "") -> Run:
    proc = await spawn_memorybot(home, *args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=90)
    assert proc.returncode is not None
    return Run(args, proc.returncode, out.decode(), err.decode())


async def test_cli_output_hides_secrets(
    tmp_path: Path, locked_redis: PasswordRedis, fake_llm: FakeOpenAI
) -> None:
    """doctor, ask --dry-run --json, ask, memory show/export, console, replay with bad
    lines, and rollover, all verbose, with every secret set: none in stdout or stderr."""
    env = secret_env(locked_redis.url, fake_llm.base_url)
    replay = tmp_path / "chat.jsonl"
    replay.write_text(
        json.dumps({"ts": START.isoformat(), "user": "Alice", "text": "hello"})
        + "\n{broken\n"
        + json.dumps({"ts": "2025-08-11T09:00:00", "user": "B", "text": "no offset"})
        + "\n"
        + json.dumps({"ts": START.isoformat(), "user": "B", "text": "x", "scope": "a:{b}"})
        + "\n",
        encoding="utf-8",
    )
    console_lines = "hello there\n/memory show\n/memory export\n/memory config timezone Asia\n"
    runs = await asyncio.gather(
        cli(tmp_path, "-v", "doctor", env=env),
        cli(tmp_path, "-v", "ask", "--dry-run", "--json", "--scope", "s1", "hi", env=env),
        cli(tmp_path, "-v", "ask", "--scope", "s2", "what do you know?", env=env),
        cli(tmp_path, "-v", "memory", "export", "--scope", "s2", env=env),
        cli(tmp_path, "-v", "console", "--scope", "s3", env=env, stdin=console_lines),
        cli(tmp_path, "-v", "replay", str(replay), "--scope", "s5", "--json", env=env),
        cli(tmp_path, "-v", "replay", str(replay), "--strict", env=env),
        cli(tmp_path, "-v", "rollover", "--json", env=env),
    )
    for run in runs:
        run.check()
    assert runs[0].code == 0 and "Redis at redis://:***@127.0.0.1" in runs[0].out, runs[0]
    assert json.loads(runs[1].out)["messages"], runs[1].err
    assert runs[4].code == 0 and "unknown timezone" in runs[4].err
    assert f"Bearer {SECRETS['OPENAI_API_KEY']}" in {
        r.headers.get("Authorization") for r in fake_llm.requests
    }


async def test_cli_failures_hide_secrets(
    tmp_path: Path, locked_redis: PasswordRedis, fake_llm: FakeOpenAI
) -> None:
    """The ways start-up and work fail: invalid settings, a TOML file holding the secrets
    and a bad value, unreachable Redis (password in the user info, after an '@' and in the
    query), a wrong Redis password, and a model that refuses or echoes the key."""
    env = secret_env(locked_redis.url, fake_llm.base_url)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text(
        f'[llm]\napi_key = "{SECRETS["OPENAI_API_KEY"]}"\ntimeout_s = "soon"\n'
        f'[slack]\nsigning_secret = "{SECRETS["SLACK_SIGNING_SECRET"]}"\nbot_token = 5\n'
        f'[dashboard]\ntoken = {{ value = "{SECRETS["DASHBOARD_TOKEN"]}" }}\n'
        f'[store]\nredis_url = "redis://:{PASSWORD}@127.0.0.1:1/0"\nbogus = 1\n',
        encoding="utf-8",
    )
    unreachable = (
        f"redis://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://:{AT_PASSWORD[0]}@{AT_PASSWORD[1]}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={QUERY_PASSWORD}",
        locked_redis.url.replace(PASSWORD, f"{PASSWORD}x"),  # wrong password
    )
    jobs = [
        cli(tmp_path, "-v", "--config", str(bad_toml), "console", env=env, stdin="hi\n"),
        cli(tmp_path, "ask", "hi", env={**env, "MEMORYBOT_MEMORY__BUDGET_TOKENS": "lots"}),
        cli(tmp_path, "ask", "hi", env={**env, "MEMORYBOT_DISCORD__ADMIN_USER_IDS": "a, b"}),
        *(cli(tmp_path, "-v", "ask", "hi", env={**env, "REDIS_URL": url}) for url in unreachable),
        cli(tmp_path, "-v", "doctor", env={**env, "REDIS_URL": unreachable[1]}),
    ]
    runs = await asyncio.gather(*jobs)
    for run in runs:
        run.check()
    for run in runs[:3]:
        assert run.code == 2, run
    assert "llm.timeout_s" in runs[0].err and str(bad_toml) in runs[0].err
    for run in runs[3:]:
        assert run.code in (1, 2), run
        assert "REDIS_URL" in run.err + run.out or "Redis" in run.err + run.out, run
    async with key_echoing_llm() as llm_url:
        refused = await asyncio.gather(
            cli(tmp_path, "-v", "ask", "hi", env={**env, "OPENAI_BASE_URL": f"{llm_url}/401/v1"}),
            cli(tmp_path, "-v", "doctor", env={**env, "OPENAI_BASE_URL": f"{llm_url}/401/v1"}),
            cli(
                tmp_path,
                "-v",
                "console",
                env={
                    **env,
                    "OPENAI_BASE_URL": f"{llm_url}/500/v1",
                    "MEMORYBOT_LLM__MAX_RETRIES": "1",
                    "MEMORYBOT_LLM__BACKOFF_BASE_S": "0.01",
                },
                stdin="first\nsecond\nthird\n",
            ),
        )
    for run in refused:
        run.check()
    assert "Sorry" in refused[0].out and "refused" in refused[1].out


# Passwords holding the delimiters that end a URL's host part; each piece is a marker, so a
# fragment read as a host or port by a URL parser is caught too.
DELIMITED = {
    "hash": f"Hash{TAG}#Pw{TAG}",
    "slash": f"Slash{TAG}/Pw{TAG}",
    "question": f"Quest{TAG}?Pw{TAG}",
    "digits-hash": f"4242#Pw{TAG}",  # read as "port 4242" when the "#" ends the host part
    "space-percent": f"Sp {TAG}%zzPw{TAG}",
}


def assert_no_piece(text: str, password: str, where: str) -> None:
    assert_clean(text, where)
    for piece in re.split(r"[#/?@: %]", password):
        if len(piece) >= 4:
            assert piece not in text, f"{piece!r} of the password {password!r} leaked in {where}"


@pytest.mark.parametrize("password", DELIMITED.values(), ids=DELIMITED.keys())
async def test_start_up_failure_and_doctor_hide_a_password_with_delimiters(
    password: str, tmp_path: Path
) -> None:
    """REDIS_URL='redis://:pa#ss@127.0.0.1:1/0': neither `doctor` nor the line that stops
    start-up prints the password or a piece of it, and both say what to fix."""
    env = {
        "REDIS_URL": f"redis://:{password}@127.0.0.1:1/0",
        "MEMORYBOT_STORE__CONNECT_TIMEOUT_S": "1",
    }
    runs = await asyncio.gather(
        cli(tmp_path, "ask", "hi", env=env),
        cli(tmp_path, "doctor", env={**env, "COLUMNS": "400"}),
    )
    for run in runs:
        run.check()
        assert_no_piece(run.out + run.err, password, f"`memorybot {' '.join(run.args)}`")
        assert (
            "REDIS_URL" in run.out + run.err and "redis://:***@127.0.0.1:1/0" in run.out + run.err
        )
    assert runs[0].code == 2 and runs[1].code == 1
