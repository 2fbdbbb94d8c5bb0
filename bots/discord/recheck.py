"""Deletes and edits made while the bot was away.

A gateway session that resumes gets what it missed; one that cannot (the bot restarted, or
Discord refused the RESUME and a fresh session began) does not: a message deleted or edited
meanwhile would stay in memory as it was. So on every fresh session (``on_ready``) the bot
reads the recent history of the places that were active lately and brings memory in line:
what is no longer there is forgotten, what was edited is updated. Bounded: the
``RECHECK_PLACES`` most recently active places of the last ``RECHECK_HOURS`` hours of this
client's servers (and DMs), ``RECHECK_MESSAGES`` messages each, one after the other so that
Discord's rate limits hold (discord.py waits them out).
"""

from __future__ import annotations

import logging
from datetime import timedelta

import discord

from bots.discord.events import attachments_of, message_text
from memory_core import calendar
from memory_core.bootstrap import Core
from memory_core.errors import MemorybotError
from memory_core.scopes import Scope

log = logging.getLogger(__name__)

RECHECK_PLACES = 50
RECHECK_HOURS = 48
RECHECK_MESSAGES = 100
SCAN = 2_000  # the most recently active scopes looked at


async def recheck_recent(bot: discord.Client, core: Core, *, bot_name: str) -> int:
    """Bring the recent memory of the active places in line with Discord; how many stored
    messages changed (forgotten or edited)."""
    since = calendar.to_ms(core.clock.now() - timedelta(hours=RECHECK_HOURS))
    guilds = {str(g.id) for g in bot.guilds}
    try:
        active = await core.repo.scopes(offset=0, limit=SCAN)
    except MemorybotError as exc:  # Redis away: the next fresh session tries again
        log.warning("could not re-check recent places after a fresh session: %s", exc)
        return 0
    places = [s for s, last in active if last >= since and _ours(s, guilds)][:RECHECK_PLACES]
    changed = 0
    for scope in places:
        try:
            changed += await _recheck(bot, core, scope, bot_name)
        except (discord.HTTPException, MemorybotError) as exc:
            log.warning("could not re-check %s after a fresh session: %s", scope, exc)
    if changed:
        log.warning(
            "re-checked %d places after a fresh session: %d messages changed", len(places), changed
        )
    return changed


def _ours(scope: str, guilds: set[str]) -> bool:
    place = Scope.of(scope)
    if place.platform != "discord" or place.person:
        return False
    return bool(place.dm_user) or place.server in guilds


async def _recheck(bot: discord.Client, core: Core, scope: str, bot_name: str) -> int:
    place = Scope.of(scope)
    channel_id = int(place.thread or place.channel or 0)
    if place.dm_user:
        user = await bot.fetch_user(int(place.dm_user))
        channel: object = user.dm_channel or await user.create_dm()
    else:
        channel = bot.get_channel(channel_id) or await bot.fetch_channel(channel_id)
    if not isinstance(channel, discord.abc.Messageable):
        return 0
    history = [m async for m in channel.history(limit=RECHECK_MESSAGES)]  # newest first
    if not history:
        return 0
    oldest = calendar.to_ms(history[-1].created_at)
    seen = {str(m.id): m for m in history}
    me = bot.user
    stored = await core.repo.entries_from(scope, oldest, limit=RECHECK_MESSAGES * 3)
    changed = 0
    for entry in stored:
        if not entry.platform_id.isdigit() or int(entry.platform_id) < int(history[-1].id):
            continue  # the console's, a replay's; or older than what was read
        message = seen.get(entry.platform_id)
        if message is None:
            changed += await core.conversation.delete(scope, [(entry.platform_id, entry.ts)])
        elif entry.role == "user" and me is not None:
            text = message_text(message, bot_id=me.id, bot_name=bot_name)
            if await core.conversation.edit(
                scope, entry.platform_id, text, when=entry.ts, attachments=attachments_of(message)
            ):
                changed += 1
    return changed
