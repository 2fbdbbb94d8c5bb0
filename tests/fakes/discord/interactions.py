"""Slash commands, context menus, buttons, selects and modals on the fake Discord: option building,
registration and context checks, and creating the interactions.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import copy
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .models import (
    _CONTEXT_NAMES,
    ALL_PERMISSIONS,
    CHAT_INPUT,
    CONTEXT_BOT_DM,
    CONTEXT_GUILD,
    CONTEXT_PRIVATE_CHANNEL,
    DEFAULT_BOT_PERMISSIONS,
    GUILD_INSTALL,
    JSON,
    MESSAGE_COMMAND,
    MESSAGE_CONTEXT_MENU_COMMAND,
    REFERENCE_DEFAULT,
    USER_INSTALL,
    FakeChannel,
    FakeDiscordError,
    FakeInteraction,
    FakeMember,
    FakeUser,
    OptionValue,
    SentMessage,
    _walk_custom_ids,
)
from .validation import _InteractionState

if TYPE_CHECKING:
    pass


class InteractionsMixin:
    """Invoke commands and components; build and check interactions."""

    async def invoke_command(
        self,
        *,
        name: str,
        channel_id: int,
        user_id: int,
        options: Mapping[str, OptionValue] | Sequence[JSON] | None = None,
        guild_command: bool | None = None,
        resolved: JSON | None = None,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user runs a slash command (INTERACTION_CREATE type 2).

        Args:
            name: Command path, e.g. ``"memory"``, ``"memory show"`` or
                ``"memory config set"``; the fake builds the SUB_COMMAND_GROUP / SUB_COMMAND
                option tree from it.
            channel_id: Where it is invoked (a DM channel from :meth:`dm_channel_id` works).
            user_id: The invoking user (must be a member for guild channels).
            options: Leaf options, either ``{"name": value}`` (type inferred: str, int, float,
                bool, or FakeUser/FakeMember/FakeChannel/FakeRole with ``resolved`` filled in)
                or raw option objects.
            guild_command: Put ``guild_id`` in ``data`` (a guild-scoped command). Default:
                true if the command was synced to this guild.
            resolved: Extra raw ``resolved`` data.
            timeout: How long to wait for a connected gateway session.
            created_ago: Seconds between Discord creating the interaction and the bot
                receiving it (gateway or event-loop lag): its ID is dated that far back and
                that much of the 3-second window is already gone.
        """
        parts = name.split()
        if not parts:
            raise FakeDiscordError("empty command name")
        channel = self._channel(channel_id)
        leaf_options, leaf_resolved = self._build_options(channel, options)
        merged_resolved = self._merge_resolved(leaf_resolved, resolved or {})
        tree: list[JSON] = leaf_options
        # Build from the leaf upwards: the last path element is a SUB_COMMAND (1), an element
        # in between is a SUB_COMMAND_GROUP (2).
        for depth in range(len(parts) - 1, 0, -1):
            option_type = 1 if depth == len(parts) - 1 else 2
            tree = [{"type": option_type, "name": parts[depth], "options": tree}]
        top = parts[0]
        scope = self._command_scope(top, channel.guild_id, guild_command, CHAT_INPUT)
        self._check_registered(scope, parts, CHAT_INPUT)
        owners = self._check_context(scope, parts, channel, user_id, CHAT_INPUT)
        data: JSON = {
            "id": str(self._command_id(scope, top, CHAT_INPUT)),
            "name": top,
            "type": CHAT_INPUT,
            "options": tree,
        }
        if scope is not None:
            data["guild_id"] = str(scope)
        if merged_resolved:
            data["resolved"] = merged_resolved
        return await self._create_interaction(
            interaction_type=2,
            channel=channel,
            user_id=user_id,
            data=data,
            timeout=timeout,
            created_ago=created_ago,
            owners=owners,
        )

    async def invoke_message_command(
        self,
        *,
        name: str,
        channel_id: int,
        user_id: int,
        message_id: int | SentMessage | JSON,
        guild_command: bool | None = None,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user runs a message context-menu command ("Apps" on a message): INTERACTION_CREATE
        type 2 whose ``data`` is ``{"id", "name", "type": 3, "target_id", "resolved":
        {"messages": {target_id: <the message>}}}`` plus ``guild_id`` for a guild-scoped
        command (Application Commands, "Message Commands").

        The resolved message is the full message object as stored (REST shape, content
        included even for a bot without MESSAGE_CONTENT: the docs exempt "the message a message
        context menu command is used on"); discord.py turns it into the ``discord.Message``
        a ``ContextMenu`` callback receives. It also works on an old message in an archived
        thread discord.py never cached: the interaction's ``channel`` then describes the
        thread (``parent_id``, ``thread_metadata``) and discord.py builds a ``Thread`` from it.

        Checks as :meth:`invoke_command`: the command (``name`` as registered, spaces and
        capitals included) must be registered with type 3 and offered in this context; the
        user must be a member and must see the message (View Channel; a private thread only as
        a member or thread manager); the message must be in ``channel_id``.
        """
        channel = self._channel(channel_id)
        target = self._stored_message(message_id)
        if int(target["channel_id"]) != channel.id:
            raise FakeDiscordError(
                f"message {target['id']} is in channel {target['channel_id']}, not {channel.id}"
            )
        if not self._user_can_view(channel, user_id):
            raise FakeDiscordError(f"user {user_id} cannot see channel {channel.id}")
        scope = self._command_scope(name, channel.guild_id, guild_command, MESSAGE_COMMAND)
        self._check_registered(scope, [name], MESSAGE_COMMAND)
        owners = self._check_context(scope, [name], channel, user_id, MESSAGE_COMMAND)
        data: JSON = {
            "id": str(self._command_id(scope, name, MESSAGE_COMMAND)),
            "name": name,
            "type": MESSAGE_COMMAND,
            "target_id": target["id"],
            "resolved": {"messages": {target["id"]: copy.deepcopy(target)}},
        }
        if scope is not None:
            data["guild_id"] = str(scope)
        return await self._create_interaction(
            interaction_type=2,
            channel=channel,
            user_id=user_id,
            data=data,
            timeout=timeout,
            created_ago=created_ago,
            owners=owners,
        )

    async def click_button(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        user_id: int,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user clicks a button on a bot message (INTERACTION_CREATE type 3).

        ``message`` may be an ID, a :class:`SentMessage` or a payload; the fake sends the
        message's *current* state (after edits), which is what discord.py's view store needs.
        ``created_ago`` as in :meth:`invoke_command`.
        """
        return await self._component_interaction(
            message=message,
            custom_id=custom_id,
            user_id=user_id,
            component_type=2,
            values=None,
            timeout=timeout,
            created_ago=created_ago,
        )

    async def select_options(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        values: Sequence[str],
        user_id: int,
        component_type: int = 3,
        timeout: float = 5.0,
    ) -> FakeInteraction:
        """A user picks values in a select menu (component type 3 = string select)."""
        return await self._component_interaction(
            message=message,
            custom_id=custom_id,
            user_id=user_id,
            component_type=component_type,
            values=list(values),
            timeout=timeout,
        )

    async def submit_modal(
        self,
        *,
        interaction: FakeInteraction,
        values: Mapping[str, str],
        user_id: int | None = None,
        timeout: float = 5.0,
    ) -> FakeInteraction:
        """Submit the modal the bot opened in response to ``interaction`` (type 5).

        ``values`` maps text-input ``custom_id`` to the typed text.
        """
        state = self._interactions.get(interaction.id)
        if state is None or state.modal is None:
            raise FakeDiscordError(
                f"the bot did not answer interaction {interaction.id} with a modal"
            )
        modal = state.modal
        data: JSON = {
            "custom_id": modal["custom_id"],
            "components": self._modal_submit_components(modal.get("components", []), values),
        }
        channel = self._channel(interaction.channel_id)
        return await self._create_interaction(
            interaction_type=5,
            channel=channel,
            user_id=user_id or interaction.user_id,
            data=data,
            timeout=timeout,
        )

    def age_interaction(self, interaction: FakeInteraction, seconds: float) -> None:
        """Pretend ``seconds`` passed for ``interaction``'s token (past 15 minutes it expires)."""
        self._interactions[interaction.id].token_expires_at -= seconds

    # ------------------------------------------------------------------ interactions

    def _build_options(
        self, channel: FakeChannel, options: Mapping[str, OptionValue] | Sequence[JSON] | None
    ) -> tuple[list[JSON], JSON]:
        if options is None:
            return [], {}
        if not isinstance(options, Mapping):
            return [dict(o) for o in options], {}
        built: list[JSON] = []
        resolved: JSON = {}
        for option_name, value in options.items():
            option_type, raw_value = self._option_type_and_value(channel, value, resolved)
            built.append({"type": option_type, "name": option_name, "value": raw_value})
        return built, resolved

    def _option_type_and_value(
        self, channel: FakeChannel, value: OptionValue, resolved: JSON
    ) -> tuple[int, Any]:
        # bool before int: bool is a subclass of int
        if isinstance(value, bool):
            return 5, value
        if isinstance(value, int):
            return 4, value
        if isinstance(value, float):
            return 10, value
        if isinstance(value, str):
            return 3, value
        if isinstance(value, FakeMember | FakeUser):
            user = value.user if isinstance(value, FakeMember) else value
            resolved.setdefault("users", {})[str(user.id)] = user.to_payload()
            member = value if isinstance(value, FakeMember) else None
            if member is None and channel.guild_id is not None:
                member = self.guilds[channel.guild_id].members.get(user.id)
            if member is not None:
                member_payload = member.to_payload(with_user=False)
                member_payload["permissions"] = str(
                    self.permissions_for(member.guild_id, user.id, channel.id)
                )
                resolved.setdefault("members", {})[str(user.id)] = member_payload
            return 6, str(user.id)
        if isinstance(value, FakeChannel):
            chan_payload = self._channel_payload(value)
            if value.guild_id is not None and channel.guild_id is not None:
                # The invoking user's permissions in the referenced channel.
                chan_payload["permissions"] = str(ALL_PERMISSIONS)
            resolved.setdefault("channels", {})[str(value.id)] = chan_payload
            return 7, str(value.id)
        role = value
        resolved.setdefault("roles", {})[str(role.id)] = role.to_payload()
        return 8, str(role.id)

    @staticmethod
    def _merge_resolved(first: JSON, second: JSON) -> JSON:
        merged: JSON = {k: dict(v) for k, v in first.items()}
        for key, values in second.items():
            merged.setdefault(key, {}).update(values)
        return merged

    def _command_scope(
        self, name: str, guild_id: int | None, guild_command: bool | None, command_type: int
    ) -> int | None:
        if guild_command is None:
            registered = self._commands.get(guild_id, {}) if guild_id is not None else {}
            guild_command = (command_type, name) in registered
        if guild_command:
            if guild_id is None:
                raise FakeDiscordError("guild commands cannot be invoked in DMs")
            if not self._bot_in(self.guilds[guild_id]):
                raise FakeDiscordError(
                    f"the app is no longer in guild {guild_id}: its guild commands are gone there"
                )
            return guild_id
        return None

    @staticmethod
    def _command_label(path: Sequence[str], command_type: int) -> str:
        if command_type == CHAT_INPUT:
            return "/" + " ".join(path)
        kind = "message" if command_type == MESSAGE_COMMAND else "user"
        return f"{kind} command {path[0]!r}"

    def _check_registered(self, scope: int | None, path: Sequence[str], command_type: int) -> None:
        """Users can only invoke what the application registered (synced), down to the
        subcommand, with the command's type: anything else is a mistake in the test."""
        node: JSON | None = self._commands.get(scope, {}).get((command_type, path[0]))
        for part in path[1:]:
            if node is None:
                break
            node = next(
                (
                    option
                    for option in node.get("options") or []
                    if option.get("type") in (1, 2) and option.get("name") == part
                ),
                None,
            )
        if node is None:
            where = "globally" if scope is None else f"in guild {scope}"
            raise FakeDiscordError(
                f"{self._command_label(path, command_type)} is not registered {where}: the bot "
                "must sync it (or the test register_commands() it) before a user can invoke it"
            )

    def _context_of(self, channel: FakeChannel) -> int:
        """GUILD in a server; BOT_DM only in the bot's own DM; a DM between people or a
        group DM is PRIVATE_CHANNEL."""
        if channel.guild_id is not None:
            return CONTEXT_GUILD
        return CONTEXT_BOT_DM if self.is_bot_dm(channel) else CONTEXT_PRIVATE_CHANNEL

    def _check_context(
        self,
        scope: int | None,
        path: Sequence[str],
        channel: FakeChannel,
        user_id: int,
        command_type: int,
    ) -> JSON:
        """Discord shows a global command only in the interaction contexts its ``contexts``
        allow (all when unset; a ``dm_permission`` of false takes the bot's DM away), and only
        where one of its ``integration_types`` put the app: a guild install serves the server
        and the bot's DM, a user install (of the invoking user) any place, and is the only one
        that reaches a PRIVATE_CHANNEL. Returns ``authorizing_integration_owners``."""
        context = self._context_of(channel)
        if scope is not None:  # guild commands have no contexts: only their guild
            return {str(GUILD_INSTALL): str(scope)}
        command = self._commands.get(scope, {})[(command_type, path[0])]
        contexts = command.get("contexts")
        if contexts is None:
            # Discord's deprecated dm_permission, read when a command sets no contexts.
            no_dm = command.get("dm_permission") is False
            contexts = [c for c in _CONTEXT_NAMES if not (no_dm and c == CONTEXT_BOT_DM)]
        installs = command.get("integration_types")
        installs = [GUILD_INSTALL] if installs is None else [int(i) for i in installs]
        owners: JSON = {}
        # the guild install only serves guilds the bot is (still) in
        installed_here = channel.guild_id is None or self._bot_in(self.guilds[channel.guild_id])
        if GUILD_INSTALL in installs and context != CONTEXT_PRIVATE_CHANNEL and installed_here:
            owners[str(GUILD_INSTALL)] = str(channel.guild_id or 0)
        if USER_INSTALL in installs and user_id in self.user_installs:
            owners[str(USER_INSTALL)] = str(user_id)
        if context not in [int(c) for c in contexts] or not owners:
            raise FakeDiscordError(
                f"{self._command_label(path, command_type)} is not offered in "
                f"{_CONTEXT_NAMES[context]}: its contexts are {contexts} and integration_types "
                f"{installs}"
                + ("" if user_id in self.user_installs else " (the user has not installed the app)")
            )
        return owners

    def _command_id(self, scope: int | None, name: str, command_type: int) -> int:
        key = (scope, command_type, name)
        if key not in self._command_ids:
            self._command_ids[key] = self._ids.next()
        return self._command_ids[key]

    async def _component_interaction(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        user_id: int,
        component_type: int,
        values: list[str] | None,
        timeout: float,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid}")
        available = _walk_custom_ids(stored.get("components", []))
        if custom_id not in available:
            raise FakeDiscordError(
                f"message {mid} has no component {custom_id!r}; it has {available!r}"
            )
        data: JSON = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            data["values"] = values
        channel = self._channel(int(stored["channel_id"]))
        return await self._create_interaction(
            interaction_type=3,
            channel=channel,
            user_id=user_id,
            data=data,
            message=stored,
            timeout=timeout,
            created_ago=created_ago,
        )

    @staticmethod
    def _modal_submit_components(
        components: Sequence[JSON], values: Mapping[str, str]
    ) -> list[JSON]:
        submitted: list[JSON] = []
        for component in components:
            ctype = component.get("type")
            if ctype == 1:  # action row containing text inputs
                submitted.append(
                    {
                        "type": 1,
                        "components": InteractionsMixin._modal_submit_components(
                            component.get("components", []), values
                        ),
                    }
                )
            elif ctype == 18:  # label wrapping one component
                inner = InteractionsMixin._modal_submit_components([component["component"]], values)
                submitted.append({"type": 18, "component": inner[0]})
            elif ctype == 4:  # text input
                custom_id = str(component["custom_id"])
                submitted.append(
                    {"type": 4, "custom_id": custom_id, "value": values.get(custom_id, "")}
                )
        return submitted

    async def _create_interaction(
        self,
        *,
        interaction_type: int,
        channel: FakeChannel,
        user_id: int,
        data: JSON,
        timeout: float,
        message: JSON | None = None,
        created_ago: float = 0.0,
        owners: JSON | None = None,
    ) -> FakeInteraction:
        if created_ago < 0:
            raise FakeDiscordError("an interaction cannot be created in the future")
        user = self.add_user(user_id)
        iid = self._ids.back_dated(created_ago) if created_ago else self._ids.next()
        token = f"aW50ZXJhY3Rpb246{iid}:{secrets.token_urlsafe(48)}".replace(":", "_")
        guild_id = channel.guild_id
        channel_payload = self._channel_payload(channel)
        payload: JSON = {
            "id": str(iid),
            "application_id": str(self.application_id),
            "type": interaction_type,
            "data": data,
            "token": token,
            "version": 1,
            "locale": "en-US",
            "entitlements": [],
            "entitlement_sku_ids": [],
            "attachment_size_limit": 10 * 1024 * 1024,
            "channel_id": str(channel.id),
            "channel": channel_payload,
        }
        if guild_id is not None:
            guild = self.guilds[guild_id]
            member = guild.members.get(user.id)
            if member is None:
                raise FakeDiscordError(
                    f"user {user.id} is not a member of guild {guild_id}; add_member() first"
                )
            member_perms = self.permissions_for(guild_id, user.id, channel.id)
            channel_payload["permissions"] = str(member_perms)
            payload.update(
                guild_id=str(guild_id),
                guild={"id": str(guild_id), "locale": "en-US", "features": []},
                guild_locale="en-US",
                member={**member.to_payload(), "permissions": str(member_perms)},
                app_permissions=str(self.permissions_for(guild_id, self.bot_user.id, channel.id)),
                context=CONTEXT_GUILD,
                authorizing_integration_owners=owners or {"0": str(guild_id)},
            )
        else:
            if user.id not in channel.recipient_ids:
                raise FakeDiscordError(f"user {user.id} is not in DM {channel.id}")
            payload.update(
                user=user.to_payload(),
                # In a DM with the bot the app has the "DM" permission set Discord computes.
                app_permissions=str(DEFAULT_BOT_PERMISSIONS),
                context=self._context_of(channel),
                authorizing_integration_owners=owners or {"0": "0"},
            )
        if message is not None:
            payload["message"] = copy.deepcopy(message)
        interaction = FakeInteraction(
            id=iid,
            token=token,
            type=interaction_type,
            application_id=self.application_id,
            channel_id=channel.id,
            guild_id=guild_id,
            user_id=user.id,
            payload=payload,
        )
        await self._wait_for_owner_session(guild_id, timeout)
        loop = asyncio.get_running_loop()
        # Discord counts the 3 seconds from the interaction's creation (the time in its ID),
        # not from when the bot happens to read it.
        deadline = (
            None
            if self.interaction_ack_timeout is None
            else loop.time() - created_ago + self.interaction_ack_timeout
        )
        state = _InteractionState(
            interaction=interaction,
            deadline=deadline,
            token_expires_at=loop.time() - created_ago + self.interaction_token_lifetime,
        )
        if message is not None:
            state.component_message_id = int(message["id"])
        self._interactions[iid] = state
        self._interactions_by_token[token] = state
        self.interactions.append(interaction)
        self._dispatch("INTERACTION_CREATE", payload, guild_id=guild_id, intent=None)
        await self._flush_sessions(guild_id)
        return interaction

    def _original_response_shape(self, state: _InteractionState) -> dict[str, Any]:
        """The original response to a message command is a CONTEXT_MENU_COMMAND message
        (type 23) with ``message_reference`` and ``referenced_message`` pointing to the
        message the command ran on (Message resource, interaction metadata
        ``target_message_id``). Other responses keep the fake's plain shape."""
        data = state.interaction.payload.get("data") or {}
        if state.interaction.type != 2 or data.get("type") != MESSAGE_COMMAND:
            return {}
        target = self.messages.get(int(data["target_id"]))
        channel_id = target["channel_id"] if target else str(state.interaction.channel_id)
        reference: JSON = {
            "type": REFERENCE_DEFAULT,
            "message_id": str(data["target_id"]),
            "channel_id": channel_id,
        }
        if state.interaction.guild_id is not None:
            reference["guild_id"] = str(state.interaction.guild_id)
        return {"reference": reference, "message_type": MESSAGE_CONTEXT_MENU_COMMAND}

    def _interaction_metadata(self, state: _InteractionState) -> JSON:
        interaction = state.interaction
        metadata: JSON = {
            "id": str(interaction.id),
            "type": interaction.type,
            "user": self.users[interaction.user_id].to_payload(),
            "authorizing_integration_owners": interaction.payload.get(
                "authorizing_integration_owners", {}
            ),
        }
        if state.component_message_id is not None:
            metadata["interacted_message_id"] = str(state.component_message_id)
        if interaction.type == 2:
            metadata["name"] = interaction.payload["data"].get("name")
            if interaction.payload["data"].get("type") == MESSAGE_COMMAND:
                metadata["target_message_id"] = interaction.payload["data"]["target_id"]
        return metadata
