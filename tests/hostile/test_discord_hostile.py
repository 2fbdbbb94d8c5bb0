"""Hostile Discord traffic end to end: the real discord.py client of ``bots.discord.bot``
against the fake Discord, a real core on the private Redis and the fake model.

- Messages with odd content (empty, over 4,000 characters, only mentions, zero-width and
  right-to-left marks, ``@everyone``, nested code fences, control characters) are stored
  under the right scope and answered without pinging anyone, and the bot keeps serving.
  (Lone surrogates are not sent: Discord cannot store them, and discord.py's gateway
  decoder rejects them before any bot code runs; the core's handling of them is proven in
  test_message_text.)
- /memory with nasty arguments is answered privately with what to fix.
- Interactions whose options do not match the command (wrong types, missing, unknown,
  extra) get a private answer instead of "This interaction failed", and never destroy
  memory on a value that only looks true.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import discord
import pytest

from memory_core.bootstrap import Core
from memory_core.store.keys import bucket_tags
from tests.fakes.discord import (
    JSON,
    FakeChannel,
    FakeDiscord,
    FakeGuild,
    FakeInteraction,
    FakeMember,
    InteractionResponse,
    SentMessage,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, all_keys
from tests.observed_discord import WAIT, ObservedBot


@dataclass
class World:
    fake: FakeDiscord
    bot: ObservedBot
    core: Core
    guild: FakeGuild
    general: FakeChannel
    thread: FakeChannel
    alice: FakeMember
    admin: FakeMember

    def scope(self, channel: FakeChannel) -> str:
        """Its scope: a thread's names its channel (discord:G:C:T)."""
        if channel.is_thread:
            return f"discord:{channel.guild_id}:{channel.parent_id}:{channel.id}"
        return f"discord:{channel.guild_id}:{channel.id}"

    async def say(self, channel: FakeChannel, text: str, *, mention: bool = True) -> JSON:
        sent = await self.fake.send_message(
            channel_id=channel.id, author_id=self.alice.user.id, content=text, mentions_bot=mention
        )
        await self.bot.handled(sent)
        return sent

    async def command(
        self, name: str, member: FakeMember | None = None, options: Any = None
    ) -> tuple[FakeInteraction, InteractionResponse]:
        interaction = await self.fake.invoke_command(
            name=name,
            channel_id=self.general.id,
            user_id=(member or self.admin).user.id,
            options=options,
        )
        return interaction, await self.fake.wait_for_response(interaction, timeout=WAIT)


@pytest.fixture
async def hostile_world(make_core: CoreFactory, fake_llm: FakeOpenAI) -> AsyncIterator[World]:
    core = await make_core()
    async with FakeDiscord() as fake:
        guild = fake.add_guild(name="Hostile Lab")
        general = fake.add_text_channel(guild.id, "general")
        thread = fake.add_thread(general.id, "side")
        alice = fake.add_member(guild.id, name="alice")
        admin = fake.add_member(guild.id, name="root", manage_guild=True)
        bot = ObservedBot(core)
        # /memory as an earlier sync left it: the fake only lets users invoke registered commands
        fake.register_commands([c.to_dict(bot.tree) for c in bot.tree.get_commands()])
        async with fake.running(bot):
            yield World(fake, bot, core, guild, general, thread, alice, admin)


def answer_text(response: InteractionResponse) -> str:
    parts = [response.content or ""]
    for embed in response.embeds:
        parts += [embed.get("title") or "", embed.get("description") or ""]
        parts += [f"{f['name']}\n{f['value']}" for f in embed.get("fields", [])]
    return "\n".join(parts)


def assert_never_pings(messages: list[SentMessage]) -> None:
    """Every answer was sent with allowed_mentions that ping nobody but the asker."""
    for message in messages:
        allowed = message.allowed_mentions
        assert allowed is not None, f"no allowed_mentions on {message.content!r}"
        assert allowed.get("parse") == [], allowed
        assert not allowed.get("users") and not allowed.get("roles"), allowed
        assert len(message.content or "") <= 2000


def unhandled(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors discord.py logged for exceptions that escaped an event or command handler."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("discord") and r.levelno >= logging.ERROR
    ]


ODD_CONTENT = {
    "only-the-mention": "",
    "long": "word " * 900,  # 4,500 characters: Nitro users may send 4,000
    "only-mentions": "<@123456789012345678> <@&223456789012345678> <#323456789012345678>",
    "zero-width": "\u200b\u200c\u200d\ufeff hi \u200b",
    "everyone": "@everyone @here please say @everyone back to me",
    "nested-fences": "```md\n```py\nprint('```')\n```\n~~~\n```",
    "rtl": "\u202eevil\u202c \u2067right-to-left\u2069 \u200f",
    "markdown-html": "**bold** <b>html</b> [link](https://example.com) > quote",
    "japanese": "明日の会議は10時からです。@everyone に伝えて",
    "control": "\x00\x07\x1b[31m red",
}


async def test_odd_messages_are_stored_and_answered_without_pings(
    hostile_world: World, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """Each odd message mentions the bot: stored in the channel's scope with its id, and
    answered within Discord's limits with allowed_mentions that ping nobody; the bot keeps
    serving and no handler raised."""
    scope = hostile_world.scope(hostile_world.general)
    sent = [await hostile_world.say(hostile_world.general, text) for text in ODD_CONTENT.values()]
    replies = await hostile_world.fake.wait_for_messages(
        hostile_world.general.id, len(sent), timeout=WAIT
    )
    assert_never_pings(replies)
    stored = {e.platform_id: e for e in await hostile_world.core.repo.reads.all_entries(scope)}
    for message in sent:
        entry = stored[str(message["id"])]
        assert entry.author == "alice" and entry.text.startswith("@memorybot")
    assert any("@everyone" in (r.content or "") for r in replies), "the echo holds @everyone"
    last = await hostile_world.say(hostile_world.general, "still there?")
    await hostile_world.fake.wait_for_messages(
        hostile_world.general.id, len(sent) + 1, timeout=WAIT
    )
    assert str(last["id"]) in {
        e.platform_id for e in await hostile_world.core.repo.reads.all_entries(scope)
    }
    assert unhandled(caplog) == []


async def test_messages_without_text_are_ignored_and_threads_keep_their_scope(
    hostile_world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A message with no text at all is not remembered; odd messages in a thread land in
    the thread's scope, never the channel's, and nothing is stored under a bogus key."""
    await hostile_world.say(hostile_world.general, "", mention=False)
    await hostile_world.say(hostile_world.thread, "\u200b@everyone ```", mention=True)
    await hostile_world.fake.wait_for_messages(hostile_world.thread.id, 1, timeout=WAIT)
    assert (
        await hostile_world.core.repo.reads.all_entries(hostile_world.scope(hostile_world.general))
        == []
    )
    thread_log = await hostile_world.core.repo.reads.all_entries(
        hostile_world.scope(hostile_world.thread)
    )
    assert [e.role for e in thread_log] == ["user", "assistant"]
    guild = hostile_world.guild.id
    buckets = set(bucket_tags())
    for key in await all_keys(hostile_world.core):
        if key.startswith("mb:{"):
            scope = key[4 : key.index("}")]
            if scope in buckets or scope == "fleet":  # the fleet-wide keys' own tags
                continue
            if scope.startswith("rate:"):  # the pacing of Discord calls (a digest)
                continue
            if scope == f"server:discord:{guild}":  # the guild's token spend (budgets)
                continue
            assert scope.startswith(f"discord:{guild}:"), key
    assert unhandled(caplog) == []


async def test_a_dm_with_odd_content_stays_in_the_dm_scope(hostile_world: World) -> None:
    """DMs are always answered; the odd text is remembered under discord:dm:<user>."""
    for text in ("@everyone", "x" * 4100, "\u202e```"):
        sent = await hostile_world.fake.send_dm(user_id=hostile_world.alice.user.id, content=text)
        await hostile_world.bot.handled(sent)
    dm = hostile_world.fake.dm_channel_id(hostile_world.alice.user.id)
    replies = await hostile_world.fake.wait_for_messages(dm, 3, timeout=WAIT)
    assert_never_pings(replies)
    log = await hostile_world.core.repo.reads.all_entries(
        f"discord:dm:{hostile_world.alice.user.id}"
    )
    assert [e.role for e in log] == ["user", "assistant"] * 3


NASTY_COMMANDS: dict[str, tuple[str, dict[str, str], str]] = {
    # (command, options, what the private answer says)
    "tz-traversal": ("memory config timezone", {"value": "../../etc/passwd"}, "unknown timezone"),
    "tz-nul": ("memory config timezone", {"value": "Asia/Tokyo\x00"}, "unknown timezone"),
    "tz-directory": ("memory config timezone", {"value": "Asia"}, "unknown timezone"),
    "tz-long": ("memory config timezone", {"value": "Europe/" + "x" * 300}, "unknown timezone"),
    "fact-traversal": ("memory forget fact", {"fact_id": "me:../../"}, "no fact"),
    "fact-key": ("memory forget fact", {"fact_id": "mb:{discord:1:2}:facts"}, "no fact"),
    "remember-huge": ("memory remember", {"text": "z" * 5000}, "at most 500"),
    "remember-markup": ("memory remember", {"text": "@everyone **x** ```"}, "Remembered"),
    "forget-text-blank": ("memory forget text", {"text": "\u200b"}, "at least 2"),
}


@pytest.mark.parametrize(
    ("name", "options", "says"), NASTY_COMMANDS.values(), ids=NASTY_COMMANDS.keys()
)
async def test_slash_commands_with_nasty_arguments_answer_privately(
    hostile_world: World,
    caplog: pytest.LogCaptureFixture,
    name: str,
    options: dict[str, str],
    says: str,
) -> None:
    """Through Discord's app-command path: an ephemeral answer saying what to fix (or
    done), the channel's settings untouched by a refused value, and the bot keeps serving."""
    _, response = await hostile_world.command(name, options=options)
    assert response.ephemeral
    assert says in answer_text(response), answer_text(response)
    assert (
        await hostile_world.core.repo.reads.state(hostile_world.scope(hostile_world.general))
    ).tz == ""
    _, shown = await hostile_world.command("memory show", member=hostile_world.alice)
    assert shown.ephemeral and "Memory of" in answer_text(shown)
    assert unhandled(caplog) == []


MALFORMED: dict[str, tuple[str, list[JSON]]] = {
    "int-for-text": ("memory remember", [{"type": 4, "name": "text", "value": 5}]),
    "missing-required": ("memory remember", []),
    "unknown-subcommand": ("memory dance", []),
    "unknown-group": ("memory secret reveal", []),
    "unknown-option": ("memory show", [{"type": 3, "name": "nope", "value": "x"}]),
    "bad-choice": ("memory show", [{"type": 3, "name": "section", "value": "everything"}]),
    "mode-not-a-choice": ("memory config mode", [{"type": 3, "name": "value", "value": "loud"}]),
    "list-value": ("memory forget text", [{"type": 3, "name": "text", "value": ["a", "b"]}]),
    "null-value": ("memory forget fact", [{"type": 3, "name": "fact_id", "value": None}]),
    "extra-option": (
        "memory pause",
        [{"type": 3, "name": "why", "value": "because"}, {"type": 5, "name": "x", "value": 1}],
    ),
}


def register_stale_memory(hostile_world: World) -> None:
    """Discord still has subcommands an earlier version of the bot registered (the fake lets
    users invoke registered commands only)."""
    [memory] = [
        c.to_dict(hostile_world.bot.tree)
        for c in hostile_world.bot.tree.get_commands(type=discord.AppCommandType.chat_input)
    ]
    stale: list[JSON] = [
        {"type": 1, "name": "dance", "description": "removed since"},
        {
            "type": 2,
            "name": "secret",
            "description": "removed since",
            "options": [{"type": 1, "name": "reveal", "description": "removed since"}],
        },
    ]
    hostile_world.fake.register_commands([{**memory, "options": [*memory["options"], *stale]}])


@pytest.mark.parametrize(("name", "options"), MALFORMED.values(), ids=MALFORMED.keys())
async def test_interactions_with_unexpected_options_are_answered(
    hostile_world: World, caplog: pytest.LogCaptureFixture, name: str, options: list[JSON]
) -> None:
    """Options of the wrong type, missing, unknown or extra, and commands the bot does not
    have (Discord and the bot disagree on the command tree): a private answer, never
    silence, and the bot keeps serving."""
    register_stale_memory(hostile_world)
    _, response = await hostile_world.command(name, options=options)
    assert response.ephemeral, response
    assert answer_text(response).strip()
    _, shown = await hostile_world.command("memory show")
    assert shown.ephemeral and "Memory of" in answer_text(shown)
    assert [m for m in unhandled(caplog) if "Ignoring exception" in m] == []


@pytest.mark.parametrize("value", ["false", "no", 0, "0", [], "yes"])
async def test_forget_all_never_trusts_a_value_that_only_looks_true(
    hostile_world: World, value: object
) -> None:
    """``confirm`` must be the boolean true: a string ("false", "yes"), 0 or a list
    asks for confirmation instead of deleting the channel's memory."""
    scope = hostile_world.scope(hostile_world.general)
    await hostile_world.say(hostile_world.general, "keep this memory", mention=False)
    _, response = await hostile_world.command(
        "memory forget all", options=[{"type": 5, "name": "confirm", "value": value}]
    )
    assert response.ephemeral
    assert "Confirm" in str(response.components) or "cannot be undone" in answer_text(response)
    assert [e.text for e in await hostile_world.core.repo.reads.all_entries(scope)] == [
        "keep this memory"
    ]


async def test_a_genuine_confirm_still_forgets(hostile_world: World) -> None:
    """The boolean true from Discord still skips the buttons (the fix keeps the feature)."""
    scope = hostile_world.scope(hostile_world.general)
    await hostile_world.say(hostile_world.general, "forget this", mention=False)
    _, response = await hostile_world.command("memory forget all", options={"confirm": True})
    assert "Forgot everything" in answer_text(response)
    assert await hostile_world.core.repo.reads.all_entries(scope) == []
