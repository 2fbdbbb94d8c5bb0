"""A local fake of Discord (REST API + gateway) for end-to-end tests of discord.py bots.

The fake is an aiohttp server bound to ``127.0.0.1`` on an ephemeral port. An unmodified
discord.py 2.x client is pointed at it by patching three class attributes (see
:meth:`FakeDiscord.patch_client`):

* ``discord.http.Route.BASE`` - every REST URL is built from it;
* ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` - a plain ``Client`` never asks
  ``GET /gateway/bot``, it connects straight to this URL;
* ``discord.asset.Asset.BASE`` - so that an accidental avatar download hits the fake (and is
  recorded as an unknown route) instead of the internet.

Typical use::

    async with FakeDiscord() as fake:          # starts the server and patches discord.py
        guild = fake.add_guild(name="g")
        channel = fake.add_text_channel(guild.id, "general")
        alice = fake.add_member(guild.id, name="alice")
        client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        async with fake.running(client):       # logs in, waits for on_ready, closes at the end
            await fake.send_message(channel_id=channel.id, author_id=alice.user.id, content="hi")
            [reply] = await fake.wait_for_messages(channel.id, 1)

The fake models what Discord does closely enough that bot bugs show up here rather than in
production: payloads follow the API v10 shapes, snowflakes are real time-based IDs serialised as
strings, the gateway uses ``zlib-stream`` transport compression exactly like Discord, intents
filter what is dispatched (including the privileged MESSAGE_CONTENT rules), guild events are
routed to the shard that owns the guild, interactions must be acknowledged within 3 seconds and
only once, and messages longer than 2000 characters are rejected.

It is never more lenient than Discord's documentation (issue 17): embeds over any documented
limit are refused with 50035 Invalid Form Body, interaction tokens expire after 15 minutes
(401, 50027 Invalid Webhook Token), only registered (synced, or ``register_commands``) commands
can be invoked, and only in the contexts their ``contexts`` and ``integration_types`` allow
(a group DM only through a user install), the first follow-up after a deferred response fills
the "thinking..." message and is as ephemeral as the defer was, and MESSAGE_CREATE/UPDATE and
THREAD_CREATE reach the bot only for channels it can view and for private threads it is a
member of (or may manage).

Beyond messages and slash commands the fake plays what people and Discord do to a bot: message
context-menu commands (``invoke_message_command``), forwards (``message_snapshots``), polls and
their POLL_RESULT message, voice messages, forum tags, deleted channels and threads, a
channel's permission overwrites changed (``set_overwrites``: the bot losing sight of it), the
bot being removed from a guild or a guild going through an outage, the past a bot can only
read in history (``past_message``: members, other bots, the bot itself, system messages) and
the threads it lists, and the bot losing its gateway
connection (``disconnect_bot`` / ``wait_for_reconnect``) while things happen that it is never
told about (``while_away=True``, ``delete_message_quietly``, ``edit_message_quietly``), which
it can only find again in channel history.

Everything the bot does is recorded on the instance (``sent_messages``, ``edits``, ``typing``,
``interaction_responses``, ``followups``, ``synced_commands``, ``unknown_routes``...), and the
``wait_for_*`` coroutines let tests wait for those records instead of sleeping.

discord.py details this fake depends on (checked against discord.py 2.7):

* JSON bodies are only decoded when ``Content-Type`` is exactly ``application/json``;
  aiohttp's ``json_response`` appends ``; charset=utf-8`` and discord.py would then see a str.
* A 429 without a ``Via`` header is treated as a Cloudflare ban (HTTPException, no retry).
* The gateway URL carries ``compress=zlib-stream`` (``zstd-stream`` if ``zstandard`` is
  importable); both are implemented.
* ``on_ready`` fires ``guild_ready_timeout`` (default 2 s) after the last GUILD_CREATE: tests
  should build clients with ``guild_ready_timeout=0.05``.
* ``AutoShardedClient`` sleeps 5 s in ``before_identify_hook`` before every shard but the
  first; override the hook in tests.
* GUILD_CREATE with ``"unavailable": false`` means "became available", without the key
  "joined"; the fake sends the former after READY and the latter for guilds added later.
* A failed ``client.start()`` (e.g. ``LoginFailure``) leaves the HTTP session open; call
  ``client.close()`` or aiohttp warns about an unclosed session.
* After a dropped connection discord.py always tries RESUME first; when that is refused (op 9
  ``false``) it IDENTIFYs again, and its default ``before_identify_hook`` sleeps 5 s before any
  IDENTIFY but the first: override the hook in tests that reconnect.
* discord.py drops a deleted channel's cached threads itself (``on_thread_delete`` for each):
  Discord sends no THREAD_DELETE for them, and neither does the fake.

Where things are (``FakeDiscord`` is put together from one mixin per concern):

* ``server.py``: the aiohttp app, discord.py patching, ``running``, the route table, request
  handling and unknown routes (``_build_routes`` lists every REST route the fake implements);
* ``rest.py``: REST handlers for users, the application, channels, messages, reactions,
  typing, threads, guilds and members; ``rest_interactions.py``: interaction callbacks,
  follow-ups, ``@original`` and command sync;
* ``gateway.py``: compression, sessions (identify, resume, ready, member chunks, reconnects)
  and dispatching to the shard that owns a guild;
* ``interactions.py``: invoking commands and components, registration and context checks;
* ``state.py``: building the world (``add_*``, overwrites, deletions, outages, failure
  injection: ``fail_next`` by kind of route, ``fail_route`` for one route and resource);
  ``people.py``: what users do (messages, edits, forwards, DMs, polls, voice messages);
* ``rest_threads.py``: listing threads (a guild's active ones, a channel's or forum's archived
  public and private ones, with Discord's permission rules and paging);
* ``ratelimits.py``: per-route rate-limit budgets, on by default for the routes a bot answers
  through (five messages or edits per five seconds in a channel...; ``set_route_budget`` for
  others): real ``X-RateLimit-*`` headers and 429s past the budget, per channel, guild or
  webhook;
* ``payloads.py``: the payloads sent to discord.py and permission computation;
  ``waits.py``: the ``wait_for_*`` helpers;
* ``models.py``: constants and documented limits, enums, the world's objects and the records;
  ``validation.py``: API errors, the embed limits check and the request plumbing.
"""

from __future__ import annotations

from .models import (
    DEFAULT_BOT_PERMISSIONS,
    DEFAULT_EVERYONE_PERMISSIONS,
    EPHEMERAL_FLAG,
    INTERACTION_TOKEN_LIFETIME,
    JSON,
    ChannelType,
    DispatchRecord,
    FakeChannel,
    FakeDiscordError,
    FakeDiscordTimeout,
    FakeForumTag,
    FakeGuild,
    FakeInteraction,
    FakeMember,
    FakeRole,
    FakeUser,
    Followup,
    IdentifyRecord,
    Intent,
    InteractionResponse,
    MessageEdit,
    Permission,
    PermissionOverwrite,
    ReactionRecord,
    RequestRecord,
    ResumeRecord,
    RouteKind,
    SentMessage,
    SyncedCommands,
    TypingEvent,
    UnknownRoute,
    UploadedFile,
)
from .server import FakeDiscord

__all__ = [
    "DEFAULT_BOT_PERMISSIONS",
    "DEFAULT_EVERYONE_PERMISSIONS",
    "EPHEMERAL_FLAG",
    "INTERACTION_TOKEN_LIFETIME",
    "JSON",
    "ChannelType",
    "DispatchRecord",
    "FakeChannel",
    "FakeDiscord",
    "FakeDiscordError",
    "FakeDiscordTimeout",
    "FakeForumTag",
    "FakeGuild",
    "FakeInteraction",
    "FakeMember",
    "FakeRole",
    "FakeUser",
    "Followup",
    "IdentifyRecord",
    "Intent",
    "InteractionResponse",
    "MessageEdit",
    "Permission",
    "PermissionOverwrite",
    "ReactionRecord",
    "RequestRecord",
    "ResumeRecord",
    "RouteKind",
    "SentMessage",
    "SyncedCommands",
    "TypingEvent",
    "UnknownRoute",
    "UploadedFile",
]
