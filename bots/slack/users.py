"""Who is who in a Slack workspace: display names for memory, who may change a channel's
memory, and whose a DM is. Names and admin flags come from ``users.info``, a DM's person from
``conversations.info``; all are cached fleet-wide in Redis (names for a day, admin flags for
a minute: a demoted admin loses rights quickly)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bots.acting import Where
from bots.slack.connect import SLACK_ERRORS, error_code
from bots.slack.text import mentioned_users, plain_text
from config.settings import SlackSettings
from memory_core.errors import StoreError
from memory_core.scopes import Audience, Scope
from memory_core.store.platform_state import PlatformState

log = logging.getLogger(__name__)

NAMES = "slack-user"
ADMINS = "slack-admin"
CHANNELS = "slack-audience"
DMS = "slack-dm"
NAME_TTL_S = 86400
ADMIN_TTL_S = 60
CHANNEL_TTL_S = 600  # a channel made private (or shared) stops counting as public within minutes
DM_TTL_S = 86400  # a DM's people never change


def display_name(user: Mapping[str, Any]) -> str:
    """What people see in Slack: display name, else real name, else the handle."""
    profile = user.get("profile")
    profile = profile if isinstance(profile, Mapping) else {}
    for candidate in (
        profile.get("display_name"),
        profile.get("real_name"),
        user.get("real_name"),
        user.get("name"),
        user.get("id"),
    ):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return "someone"


class SlackDirectory:
    def __init__(self, platform: PlatformState, settings: SlackSettings) -> None:
        self.platform = platform
        self.settings = settings

    async def name(self, client: AsyncWebClient, team_id: str, user_id: str) -> str:
        cached = await self._cached(NAMES, team_id, user_id)
        if cached:
            return cached
        user = await self._fetch(client, team_id, user_id)
        return display_name(user) if user is not None else user_id

    async def names(
        self, client: AsyncWebClient, team_id: str, user_ids: list[str], *, limit: int = 8
    ) -> dict[str, str]:
        """Names of the users mentioned in a message (bounded: a wall of mentions costs at
        most ``limit`` lookups; the rest keep their Slack label)."""
        return {u: await self.name(client, team_id, u) for u in user_ids[:limit]}

    async def memory_text(
        self,
        client: AsyncWebClient,
        team_id: str,
        raw_text: str,
        *,
        bot_user_id: str,
        bot_name: str,
    ) -> str:
        """Slack markup -> what memory keeps, mentions by name: one rendering for live
        messages, edits and a channel's past alike."""
        mentioned = mentioned_users(raw_text, exclude=bot_user_id)
        names = await self.names(client, team_id, mentioned)
        return plain_text(raw_text, bot_user_id=bot_user_id, bot_name=bot_name, names=names)

    async def is_admin(self, client: AsyncWebClient, *, team_id: str, user_id: str) -> bool:
        """Is ``user_id`` an admin of ``team_id``, the workspace whose memory it is?
        Configured admins are, and that workspace's admins and owners: never those of
        another organisation, who speak in its Slack Connect channels (``users.info``
        says their own ``team_id``)."""
        if user_id in self.settings.admin_user_ids:
            return True
        cached = await self._cached(ADMINS, team_id, user_id)
        if cached is not None:
            return cached == "1"
        user = await self._fetch(client, team_id, user_id)
        return user is not None and is_workspace_admin(user, team_id)

    async def where(
        self, client: AsyncWebClient, *, team_id: str, user_id: str, channel_id: str
    ) -> Where:
        """Where ``user_id`` runs a command or a message shortcut. A conversation of the
        workspace is a place (its admins decide); a DM is the app's own DM with them, or a
        DM between people, which a message shortcut or a slash command reaches but the app
        is not in (nobody's to change), or unchecked when Slack could not say."""
        if not channel_id or not Scope.channel_of("slack", team_id, channel_id).is_dm:
            return Where.PLACE
        person = await self._dm_person(client, team_id, channel_id)
        if person is None:
            return Where.UNCHECKED
        return Where.OWN_DM if person == user_id else Where.NOT_SERVED

    async def _dm_person(self, client: AsyncWebClient, team_id: str, channel_id: str) -> str | None:
        """The person whose DM with the app ``channel_id`` is (``conversations.info``:
        ``is_im``, ``user``; im:read); "" for a DM between people (Slack shows an app only
        its own DMs: ``channel_not_found``); None when Slack could not say."""
        cached = await self._cached(DMS, team_id, channel_id)
        if cached is not None:
            return cached
        try:
            response = await client.conversations_info(channel=channel_id)
        except SLACK_ERRORS as exc:
            code = error_code(exc)
            if code != "channel_not_found":
                needs = " (the app needs im:read: add it and reinstall)"
                log.warning(
                    "whose DM %s is in team %s is unchecked: conversations.info failed: %s%s",
                    channel_id,
                    team_id,
                    code,
                    needs if code == "missing_scope" else "",
                )
                return None
            person, ttl_s = "", CHANNEL_TTL_S
        else:
            channel = response.get("channel")
            channel = channel if isinstance(channel, Mapping) else {}
            person = str(channel.get("user") or "") if channel.get("is_im") is True else ""
            ttl_s = DM_TTL_S
        await self._keep(DMS, f"{team_id}:{channel_id}", person, ttl_s)
        return person

    async def audience(self, client: AsyncWebClient, team_id: str, channel_id: str) -> Audience:
        """Who can read ``channel_id``, from ``conversations.info`` (channels:read,
        groups:read), cached for a few minutes: the whole workspace (a public channel), also
        another organisation (Slack Connect: ``is_ext_shared``, or ``is_shared`` beyond an
        Enterprise Grid organisation), or some members. A failed lookup counts as private:
        what is learned there then stays there."""
        cached = await self._cached(CHANNELS, team_id, channel_id)
        if cached is not None:
            return Audience.parse(cached)
        try:
            response = await client.conversations_info(channel=channel_id)
        except SLACK_ERRORS as exc:
            code = error_code(exc)
            log.warning(
                "conversations.info for %s in team %s failed: %s", channel_id, team_id, code
            )
            return Audience.PRIVATE
        channel = response.get("channel")
        audience = channel_audience(channel if isinstance(channel, Mapping) else {})
        await self._keep(CHANNELS, f"{team_id}:{channel_id}", audience.value, CHANNEL_TTL_S)
        return audience

    async def forget_team(self, team_id: str) -> None:
        """The app was uninstalled from ``team_id``: its members' cached names and admin
        flags, its channels' audiences and whose its DMs are go with its memory."""
        for namespace in (NAMES, ADMINS, CHANNELS, DMS):
            await self.platform.forget_cached(namespace, f"{team_id}:")

    async def _fetch(
        self, client: AsyncWebClient, team_id: str, user_id: str
    ) -> Mapping[str, Any] | None:
        try:
            response = await client.users_info(user=user_id)
        except SLACK_ERRORS as exc:
            code = error_code(exc)
            log.warning("users.info for %s in team %s failed: %s", user_id, team_id, code)
            return None
        user = response.get("user")
        if not isinstance(user, Mapping):
            return None
        item = f"{team_id}:{user_id}"
        await self._keep(NAMES, item, display_name(user), NAME_TTL_S)
        await self._keep(
            ADMINS, item, "1" if is_workspace_admin(user, team_id) else "0", ADMIN_TTL_S
        )
        return user

    async def _cached(self, namespace: str, team_id: str, user_id: str) -> str | None:
        try:
            return await self.platform.cached(namespace, f"{team_id}:{user_id}")
        except StoreError as exc:
            log.warning("Slack user cache unavailable: %s", exc)
            return None

    async def _keep(self, namespace: str, item: str, value: str, ttl_s: int) -> None:
        """Cached fleet-wide; a cache that fails is logged, the lookup's answer stands."""
        try:
            await self.platform.cache(namespace, item, value, ttl_s=ttl_s)
        except StoreError as exc:
            log.warning("could not cache Slack %s %s: %s", namespace, item, exc)


def channel_audience(channel: Mapping[str, Any]) -> Audience:
    """A ``conversations.info`` channel object's audience."""
    shared_beyond_org = (
        channel.get("is_shared") is True and channel.get("is_org_shared") is not True
    )
    if (
        channel.get("is_ext_shared") is True
        or channel.get("is_pending_ext_shared") is True
        or shared_beyond_org
    ):
        return Audience.SHARED
    if channel.get("is_im") is True:
        return Audience.DM
    if channel.get("is_channel") is True and channel.get("is_private") is False:
        return Audience.SERVER
    return Audience.PRIVATE


_ADMIN_FLAGS = ("is_admin", "is_owner", "is_primary_owner")


def is_workspace_admin(user: Mapping[str, Any], team_id: str) -> bool:
    """An admin or owner of ``team_id``: their own workspace's (``team_id`` of
    ``users.info``), or, on Enterprise Grid, of the organisation whose workspaces
    (``enterprise_user.teams``) include it. An admin of another organisation is none."""
    if user.get("team_id") == team_id:
        return any(bool(user.get(flag)) for flag in _ADMIN_FLAGS)
    grid = user.get("enterprise_user")
    if isinstance(grid, Mapping) and team_id in (grid.get("teams") or ()):
        return any(bool(grid.get(flag)) for flag in _ADMIN_FLAGS)
    return False
