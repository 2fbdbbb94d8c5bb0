"""Hostile Slack traffic end to end, over HTTP: memorybot's real Bolt app (bots/slack/bot.py)
served by ``serve_http``, the fake Slack, a real core on the private Redis, the fake model.

- Signed but malformed events (fields missing or of the wrong type, unknown subtypes, huge
  text, ``event`` that is not an object, channel ids and thread timestamps with odd
  characters) are answered without an exception escaping the app, store nothing under a
  malformed scope or key, and a normal mention is still answered afterwards.
- /memory with nasty text is answered privately with what to fix.
- Unsigned or stale requests are refused (401) and store nothing.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bots.slack.bot import SlackBot, build_app
from bots.slack.connect import serve_http
from memory_core.bootstrap import Core
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import (
    FakeSlack,
    ResponseUrlPost,
    SignedDelivery,
    send_signed,
    slash_command_form_body,
)
from tests.helpers import CoreFactory, all_keys, slack_bot_scopes
from tests.hostile.strategies import hostile_text

BOT_TOKEN = "xoxb-hostile-bot-token"
SECRET = "hostile-signing-secret"
BOT, TEAM, ALICE, C1, DM = "UBOT", "T1", "U1", "C1", "D1"
SCOPE = f"slack:{TEAM}:{C1}"
SLACK_ID = r"[A-Z0-9]+"
SLACK_TS = r"\d+\.\d+"
# What a well-formed key looks like: a Slack scope inside the hash tag (a channel's, a
# person's facts, or a thread's under its channel's tag), a workspace's own (its tree, its
# spend), or one of the fleet-wide keys.
PLACE = rf"\{{slack:{SLACK_ID}:{SLACK_ID}\}}(?:/{SLACK_TS})?"
GOOD_KEY = re.compile(
    rf"^mb:(?:{PLACE}|\{{slack:{SLACK_ID}:user:{SLACK_ID}\}}):[a-z]+$"
    rf"|^mb:\{{server:slack:{SLACK_ID}\}}:(?:places|parents)$"
    rf"|^mb:(?:{PLACE}|\{{(?:server:slack:{SLACK_ID}|b\d+\.\d+)\}})"
    r":spend:\d{4}-\d\d-\d\d$"  # token spend (budgets): a scope's, its workspace's, a bucket's
    rf"|^mb:seen:slack:(?:{SLACK_ID}:{SLACK_ID}:{SLACK_TS}|Ev[A-Za-z0-9]+)$"
    rf"|^mb:cache:slack-[a-z]+:{SLACK_ID}:{SLACK_ID}$"
    r"|^mb:\{b\d+\.\d+\}:(?:scopes|queue|inflight|llm-rate|metrics:\d+)$|^mb:\{fleet\}:[a-z:-]+$"
    r"|^mb:\{rate:[0-9a-f]{20}\}$"  # the pacing of Slack calls (a digest: names nothing)
)


@dataclass
class App:
    fake: FakeSlack
    core: Core
    bot: SlackBot
    url: str

    async def post(self, payload: Any, *, secret: str = SECRET, **kwargs: Any) -> SignedDelivery:
        body = payload if isinstance(payload, str) else json.dumps(payload)
        return await send_signed(self.url, signing_secret=secret, body=body, **kwargs)

    async def event(self, event: Any) -> SignedDelivery:
        payload = self.fake.event_payload(event={})
        payload["event"] = event  # as is: maybe not even an object
        return await self.post(payload)

    async def command(self, text: str) -> ResponseUrlPost:
        fields = self.fake.slash_command_payload(text=text, user_id=ALICE, channel_id=C1)
        sent = await send_signed(
            self.url, signing_secret=SECRET, body=slash_command_form_body(fields)
        )
        assert sent.status == 200, sent
        response_id = fields["response_url"].rsplit("/", 1)[1]

        def found() -> ResponseUrlPost | None:
            return next((r for r in self.fake.responses if r.response_id == response_id), None)

        return await self.fake.wait_for(found, description=f"the answer to /memory {text[:40]}")

    async def still_answers_a_mention(self) -> None:
        """A normal mention after the garbage: stored and answered in its thread."""
        await self.bot.drain()  # anything the garbage set off has finished
        before = len(self.fake.posted_messages)
        mention = self.fake.app_mention_event(
            text=f"<@{BOT}> are you still there?", user_id=ALICE, channel_id=C1
        )
        assert (await self.event(mention)).status == 200
        [*_, reply] = await self.fake.wait_for_messages(count=before + 1)
        await self.bot.drain()
        assert reply.thread_ts == mention["ts"]
        stored = {e.platform_id for e in await self.core.repo.reads.all_entries(SCOPE)}
        assert mention["ts"] in stored

    async def keys_are_well_formed(self) -> None:
        await self.bot.drain()
        bad = [k for k in await all_keys(self.core) if not GOOD_KEY.match(k)]
        assert bad == [], f"malformed keys stored: {bad}"


@pytest.fixture
async def app(make_core: CoreFactory, fake_llm: FakeOpenAI) -> AsyncIterator[App]:
    async with FakeSlack(
        bot_token=BOT_TOKEN, team_id=TEAM, bot_user_id=BOT, scopes=slack_bot_scopes()
    ) as fake:
        fake.add_user(ALICE, "alice", display_name="Alice", is_admin=True)
        fake.add_channel(C1, "general")
        fake.add_channel(DM, DM, is_im=True, user_id=ALICE)
        core = await make_core(
            slack={"bot_token": BOT_TOKEN, "signing_secret": SECRET, "api_base_url": fake.api_url}
        )
        bot = SlackBot(core)
        async with serve_http(build_app(core, bot=bot), host="127.0.0.1", port=0) as url:
            yield App(fake, core, bot, url)
            await bot.drain()


async def test_the_app_has_only_the_scopes_the_manifest_grants(app: App) -> None:
    """What the bot survives here it survives as installed: a call outside the manifest's
    bot scopes would be missing_scope, as in a real workspace."""
    assert app.fake.scopes == frozenset(slack_bot_scopes())
    await app.still_answers_a_mention()
    assert [c.method for c in app.fake.calls if c.error == "missing_scope"] == []


def escaped(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Exceptions that escaped the Bolt app into the HTTP server, or a listener."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR
        and (r.name.startswith("aiohttp") or "listener" in r.getMessage().lower())
    ]


def base_event(app: App, **fields: Any) -> dict[str, Any]:
    event = app.fake.message_event(text="hello", user_id=ALICE, channel_id=C1)
    event.update(fields)
    return {k: v for k, v in event.items() if v is not DROP}


DROP = object()
HUGE = "x" * 200_000

MALFORMED_EVENTS: dict[str, dict[str, Any]] = {
    "no-user": {"user": DROP},
    "no-channel": {"channel": DROP},
    "no-ts": {"ts": DROP},
    "no-text": {"text": DROP},
    "user-int": {"user": 5},
    "user-dict": {"user": {"id": "U1"}},
    "user-list": {"user": ["U1"]},
    "channel-int": {"channel": 7},
    "channel-list": {"channel": ["C1"]},
    "channel-brace": {"channel": "C1:{x}"},
    "channel-colon": {"channel": "C1:C2"},
    "channel-thread-like": {"channel": "C1:1700000000.000100"},
    "channel-space": {"channel": "C 1"},
    "channel-lowercase": {"channel": "c1"},
    "channel-empty": {"channel": ""},
    "ts-garbage": {"ts": "not-a-ts"},
    "ts-huge": {"ts": "9" * 400},
    "ts-float": {"ts": 1700000000.0001},
    "thread-garbage": {"thread_ts": "garbage"},
    "thread-brace": {"thread_ts": "1.2:{x}"},
    "thread-list": {"thread_ts": ["1.2"]},
    "text-int": {"text": 5},
    "text-dict": {"text": {"a": 1}},
    "text-huge": {"text": HUGE},
    "text-markup": {"text": "<!channel> <@U999|x> <#C9|y> &lt;script&gt; ```"},
    "subtype-unknown": {"subtype": "zzz_unknown"},
    "subtype-int": {"subtype": 5},
    "channel-type-int": {"channel_type": 5},
    "deleted-no-ts": {"subtype": "message_deleted", "deleted_ts": DROP},
    "deleted-ts-int": {"subtype": "message_deleted", "deleted_ts": 5},
    "deleted-ts-garbage": {"subtype": "message_deleted", "deleted_ts": "../.."},
    "deleted-previous-str": {"subtype": "message_deleted", "previous_message": "x"},
    "deleted-odd-channel": {"subtype": "message_deleted", "channel": "C1:{x}", "deleted_ts": "1.2"},
    "mention-odd-channel": {"type": "app_mention", "text": f"<@{BOT}> hi", "channel": "C1:C9"},
}


@pytest.mark.parametrize("fields", MALFORMED_EVENTS.values(), ids=MALFORMED_EVENTS.keys())
async def test_malformed_events_are_answered_and_store_nothing_bogus(
    app: App, caplog: pytest.LogCaptureFixture, fields: dict[str, Any]
) -> None:
    """Each malformed event, signed: an HTTP answer, no exception escaping the app, no key
    outside a well-formed Slack scope, and the bot still answers a normal mention."""
    answer = await app.event(base_event(app, **fields))
    assert answer.status in (200, 400, 404), answer  # 400: Bolt could not even read it
    await app.keys_are_well_formed()
    assert escaped(caplog) == []
    await app.still_answers_a_mention()


NOT_AN_EVENT: dict[str, Any] = {
    "event-string": "message",
    "event-null": None,
    "event-list": [{"type": "message"}],
    "event-number": 5,
    "event-empty": {},
    "type-only": {"type": "message"},
}


@pytest.mark.parametrize("event", NOT_AN_EVENT.values(), ids=NOT_AN_EVENT.keys())
async def test_an_event_that_is_not_an_event_is_answered(
    app: App, caplog: pytest.LogCaptureFixture, event: Any
) -> None:
    """``event`` that is not an object (or an empty one): Bolt answers (its own middleware
    refuses it), nothing escapes into the HTTP server, nothing is stored."""
    answer = await app.event(event)
    assert answer.status in (200, 400, 404), answer
    assert [m for m in escaped(caplog) if m.startswith("aiohttp")] == []
    await app.keys_are_well_formed()
    assert await app.core.repo.reads.all_entries(SCOPE) == []
    await app.still_answers_a_mention()


ENVELOPES: dict[str, Any] = {
    "team-brace": {"team_id": "T1:{x}"},
    "team-colon": {"team_id": "T1:C9"},
    "team-int": {"team_id": 5},
    "no-team": {"team_id": None, "context_team_id": None, "authorizations": None},
    "authorizations-str": {"authorizations": "x"},
    "event-id-odd": {"event_id": "Ev:{x}"},
}


@pytest.mark.parametrize("fields", ENVELOPES.values(), ids=ENVELOPES.keys())
async def test_malformed_envelopes_are_answered_and_store_nothing_bogus(
    app: App, caplog: pytest.LogCaptureFixture, fields: dict[str, Any]
) -> None:
    """The event_callback around a good event is itself malformed (odd team ids, wrong
    types): answered, nothing stored under a malformed scope, still serving."""
    payload = app.fake.event_payload(event=base_event(app))
    payload.update(fields)
    answer = await app.post(payload)
    assert answer.status in (200, 400, 404), answer
    assert [m for m in escaped(caplog) if m.startswith("aiohttp")] == []
    await app.keys_are_well_formed()
    await app.still_answers_a_mention()


field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    hostile_text(max_size=40).map(lambda t: t.encode("utf-8", "replace").decode("utf-8")),
    st.lists(st.text(max_size=4), max_size=2),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
    st.sampled_from(
        ("C1", "D1", "U1", BOT, "C1:{x}", "C1:C2", "1700000000.000100", "1.2:{x}", "im")
    ),
    st.sampled_from(("message_deleted", "bot_message", "thread_broadcast", "file_share")),
)
EVENT_FIELDS = (
    "user",
    "channel",
    "ts",
    "thread_ts",
    "text",
    "subtype",
    "channel_type",
    "bot_id",
    "deleted_ts",
    "previous_message",
    "hidden",
    "files",
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(("message", "app_mention")),
    fields=st.dictionaries(st.sampled_from(EVENT_FIELDS), field_values, max_size=6),
)
async def test_random_events_never_escape_or_store_bogus_keys(
    app: App, caplog: pytest.LogCaptureFixture, kind: str, fields: dict[str, Any]
) -> None:
    """Random message and app_mention events (any field, any type): answered (200, or 400
    when Bolt cannot read it), nothing escapes, and every key stored is well formed."""
    event = {**base_event(app), "type": kind, **fields}
    answer = await app.event(event)
    assert answer.status in (200, 400), answer
    await app.keys_are_well_formed()
    assert escaped(caplog) == []


async def test_huge_text_is_stored_cut_and_answered(app: App) -> None:
    """200,000 characters in a mention: stored cut to memory.max_message_chars, answered
    in the thread, each posted message within Slack's limits."""
    mention = app.fake.app_mention_event(text=f"<@{BOT}> {HUGE}", user_id=ALICE, channel_id=C1)
    assert (await app.event(mention)).status == 200
    [reply, *_] = await app.fake.wait_for_messages(count=1)
    await app.bot.drain()
    assert reply.thread_ts == mention["ts"]
    assert all(len(m.text or "") <= 4000 for m in app.fake.posted_messages)
    [entry, _answer] = await app.core.repo.reads.all_entries(SCOPE)
    assert len(entry.text) <= app.core.settings.memory.max_message_chars + 80


def markup_texts(response: ResponseUrlPost) -> list[str]:
    """The fallback text and every mrkdwn text in the blocks (plain_text is never parsed)."""
    found = [response.text or ""]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn" and isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(response.blocks or [])
    return found


NASTY_COMMANDS = {
    "tz-traversal": ("config timezone ../../etc/passwd", "unknown timezone"),
    "tz-directory": ("config timezone Asia", "unknown timezone"),
    "tz-entity": ("config timezone Asia/Tokyo&lt;", "unknown timezone"),
    "fact-traversal": ("forget fact me:../../", "no fact"),
    "remember-huge": ("remember " + "y" * 3000, "at most 500"),
    "remember-channel-ping": ("remember &lt;!channel&gt; meeting at 10", "Remembered"),
    "verb-japanese": ("全部忘れて", "Usage"),
    "control": ("show \x1b[31m", "Usage"),
    "html": ("<script>alert(1)</script>", "Usage"),
}


@pytest.mark.parametrize(("text", "says"), NASTY_COMMANDS.values(), ids=NASTY_COMMANDS.keys())
async def test_memory_command_with_nasty_text_answers_privately(
    app: App, text: str, says: str
) -> None:
    """/memory through Bolt with nasty text: an ephemeral answer (escaped: it can never
    ping the channel) saying what to fix, and the bot keeps serving."""
    response = await app.command(text)
    assert response.response_type == "ephemeral"
    shown = json.dumps(response.body, ensure_ascii=False)
    assert says in shown, shown[:500]
    for parsed in markup_texts(response):  # what Slack parses for mentions and links
        assert "<!" not in parsed and "<script>" not in parsed, parsed
    assert (await app.core.repo.reads.state(SCOPE)).tz == ""
    await app.still_answers_a_mention()


async def test_unsigned_and_stale_requests_are_refused(app: App) -> None:
    """One unsigned-by-us and one stale request: 401, nothing stored, nothing called."""
    event = base_event(app, type="app_mention", text=f"<@{BOT}> hi")
    payload = app.fake.event_payload(event=event)
    assert (await app.post(payload, secret="not-the-secret")).status == 401
    stale = await app.post(payload, timestamp=int(time.time()) - 10 * 60)
    assert stale.status == 401
    await app.bot.drain()
    assert await all_keys(app.core) == []
    assert app.fake.calls == []
