"""REST handlers of the fake Discord for interactions: callbacks, follow-ups and @original webhook
messages, and application command sync.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .models import (
    CHAT_INPUT,
    EPHEMERAL_FLAG,
    JSON,
    LOADING_FLAG,
    MAX_COMMAND_DESCRIPTION,
    MAX_COMMAND_OPTIONS,
    MESSAGE_COMMAND,
    USER_COMMAND,
    FakeChannel,
    Followup,
    InteractionResponse,
    MessageEdit,
    SyncedCommands,
    _opt_str,
)
from .validation import (
    _ApiError,
    _Call,
    _form_error,
    _form_error_at,
    _InteractionState,
    _too_long,
    _valid_chat_input_name,
)

if TYPE_CHECKING:
    pass


class InteractionRoutesMixin:
    """REST routes for interaction callbacks, webhooks and command sync."""

    # -- interactions ----------------------------------------------------------------------

    def _live_interaction(self, call: _Call) -> _InteractionState:
        state = self._interactions.get(call.int_param("interaction_id"))
        if state is None or state.interaction.token != call.params["token"]:
            raise _ApiError(404, 10062, "Unknown interaction")
        loop = asyncio.get_running_loop()
        if (
            state.response_type is None
            and state.deadline is not None
            and (loop.time() > state.deadline)
        ):
            # Discord forgets unanswered interactions after 3 seconds.
            raise _ApiError(404, 10062, "Unknown interaction")
        if state.response_type is not None:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        return state

    async def _interaction_callback(self, call: _Call) -> web.Response:
        state = self._live_interaction(call)
        payload = call.payload
        response_type = int(payload.get("type") or 0)
        data: JSON = dict(payload.get("data") or {})
        interaction = state.interaction
        channel = self._interaction_channel(state)
        files = call.body.files
        resource: JSON | None = {"type": response_type}
        message: JSON | None = None

        if response_type in (4, 7):
            self._validate_message_payload(data, files)
        if response_type == 4:  # CHANNEL_MESSAGE_WITH_SOURCE
            self._require_non_empty(data, files)
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content=str(data.get("content") or ""),
                embeds=list(data.get("embeds") or []),
                components=list(data.get("components") or []),
                flags=int(data.get("flags") or 0),
                attachments=self._stored_attachments(channel.id, files),
                webhook=True,
                interaction_metadata=self._interaction_metadata(state),
                **self._original_response_shape(state),
            )
            state.original_message_id = int(message["id"])
            self._echo_bot_message("MESSAGE_CREATE", message)
        elif response_type == 5:  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE ("thinking...")
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content="",
                flags=(int(data.get("flags") or 0) & EPHEMERAL_FLAG) | LOADING_FLAG,
                webhook=True,
                interaction_metadata=self._interaction_metadata(state),
                **self._original_response_shape(state),
            )
            state.original_message_id = int(message["id"])
            self._echo_bot_message("MESSAGE_CREATE", message)
        elif response_type in (6, 7):  # DEFERRED_UPDATE_MESSAGE / UPDATE_MESSAGE
            if state.component_message_id is None:
                raise _ApiError(400, 40004, "Interaction response type requires a message")
            state.original_message_id = state.component_message_id
            if response_type == 7:
                message = self.messages[state.component_message_id]
                self._apply_edit(message, data, files)
                self._echo_bot_message("MESSAGE_UPDATE", message)
            else:
                resource = None
        elif response_type == 9:  # MODAL
            if interaction.type == 5:
                raise _ApiError(400, 40004, "Cannot respond to a modal submit with a modal")
            state.modal = data
            resource = None
        elif response_type not in (1, 8, 12):
            raise _form_error("type", "BASE_TYPE_CHOICES", f"Value {response_type} is invalid")

        state.response_type = response_type
        self.interaction_responses.append(
            InteractionResponse(
                interaction_id=interaction.id,
                token=interaction.token,
                type=response_type,
                data=data,
                attachments=list(files),
                message_id=state.original_message_id,
                at=time.monotonic(),
            )
        )
        if call.request.query.get("with_response") not in ("1", "true", "True"):
            return self._no_content(kind="interaction_callback")
        callback: JSON = {
            "interaction": {
                "id": str(interaction.id),
                "type": interaction.type,
                "response_message_id": _opt_str(state.original_message_id),
                "response_message_loading": response_type == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & EPHEMERAL_FLAG),
            }
        }
        if resource is not None and message is not None:
            resource["message"] = message
        if resource is not None:
            callback["resource"] = resource
        return self._json(callback, kind="interaction_callback")

    def _interaction_channel(self, state: _InteractionState) -> FakeChannel:
        """The interaction's channel; deleted since, nothing can be posted there."""
        channel = self.channels.get(state.interaction.channel_id)
        if channel is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        return channel

    def _webhook_interaction(self, call: _Call) -> _InteractionState:
        state = self._interactions_by_token.get(call.params["token"])
        if call.int_param("app_id") != self.application_id or state is None:
            raise _ApiError(404, 10015, "Unknown Webhook")
        if asyncio.get_running_loop().time() > state.token_expires_at:
            raise _ApiError(401, 50027, "Invalid Webhook Token")
        if state.response_type is None:
            # Follow-ups and @original only exist once the interaction was acknowledged.
            raise _ApiError(404, 10015, "Unknown Webhook")
        return state

    def _webhook_target(self, call: _Call, state: _InteractionState) -> JSON:
        raw = call.params["message_id"]
        mid = state.original_message_id if raw == "@original" else int(raw)
        message = self.messages.get(mid) if mid is not None else None
        if message is None:
            raise _ApiError(404, 10008, "Unknown Message")
        return message

    async def _create_followup(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        payload = call.payload
        files = call.body.files
        self._validate_message_payload(payload, files)
        self._require_non_empty(payload, files)
        channel = self._interaction_channel(state)
        loading = self._loading_response(state)
        if loading is not None:
            # The first follow-up after a deferred response is the answer the "thinking..."
            # message waited for: it replaces that message (as Edit Original Interaction
            # Response would), and stays as ephemeral, or as public, as the defer made it.
            message = loading
            self._apply_edit(message, payload, files)
            event = "MESSAGE_UPDATE"
        else:
            metadata = self._interaction_metadata(state)
            if state.original_message_id is not None:
                metadata["original_response_message_id"] = str(state.original_message_id)
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content=str(payload.get("content") or ""),
                embeds=list(payload.get("embeds") or []),
                components=list(payload.get("components") or []),
                flags=int(payload.get("flags") or 0),
                attachments=self._stored_attachments(channel.id, files),
                webhook=True,
                interaction_metadata=metadata,
            )
            event = "MESSAGE_CREATE"
        self.followups.append(
            Followup(
                interaction_id=state.interaction.id,
                token=state.interaction.token,
                message_id=int(message["id"]),
                channel_id=channel.id,
                payload=payload,
                attachments=list(files),
                at=time.monotonic(),
                message_flags=int(message.get("flags") or 0),
                replaced_loading=loading is not None,
            )
        )
        self._echo_bot_message(event, message)
        if call.request.query.get("wait") in ("1", "true", "True"):
            return self._json(message, kind="webhook")
        return self._no_content(kind="webhook")

    def _loading_response(self, state: _InteractionState) -> JSON | None:
        """The deferred response's "thinking..." message, while nothing has filled it yet."""
        if state.response_type != 5 or state.original_message_id is None:
            return None
        message = self.messages.get(state.original_message_id)
        if message is None or not int(message.get("flags") or 0) & LOADING_FLAG:
            return None
        return message

    async def _get_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        return self._json(self._webhook_target(call, state), kind="webhook")

    async def _edit_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        message = self._webhook_target(call, state)
        self._validate_message_payload(call.payload, call.body.files)
        self._apply_edit(message, call.payload, call.body.files)
        self.edits.append(
            MessageEdit(
                message_id=int(message["id"]),
                channel_id=int(message["channel_id"]),
                via="interaction",
                payload=call.payload,
                attachments=list(call.body.files),
                interaction_id=state.interaction.id,
                at=time.monotonic(),
            )
        )
        self._echo_bot_message("MESSAGE_UPDATE", message)
        return self._json(message, kind="webhook")

    async def _delete_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        message = self._webhook_target(call, state)
        self._delete_stored_message(self.channels[int(message["channel_id"])], message)
        return self._no_content(kind="webhook")

    # -- application commands -------------------------------------------------------------

    def _command_guild(self, call: _Call) -> int | None:
        if call.int_param("app_id") != self.application_id:
            raise _ApiError(
                403, 20012, "You are not authorized to perform this action on this application"
            )
        guild_id = call.params.get("guild_id")
        if guild_id is None:
            return None
        guild = self.guilds.get(int(guild_id))
        if guild is None or not self._bot_in(guild):
            raise _ApiError(403, 50001, "Missing Access")
        return int(guild_id)

    @staticmethod
    def _validate_command(command: Any, at: Sequence[str | int] = ()) -> tuple[int, str]:
        """Refuse what Discord refuses when registering a command (Application Commands,
        "Application Command Structure" and "Naming"); returns its ``(type, name)`` key.

        CHAT_INPUT (1): a lowercase name matching
        ``^[-_'\\p{L}\\p{N}\\p{sc=Deva}\\p{sc=Thai}]{1,32}$``, a description of 1-100
        characters, at most 25 options. USER (2) and MESSAGE (3) context menus: a name of
        1-32 characters that may have capitals and spaces, no description
        (APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION_INVALID; an empty string passes, it is
        what Discord itself returns) and no options
        (APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS_INVALID). Errors are nested under the
        command's index for a bulk overwrite, as Discord nests them.
        """
        if not isinstance(command, dict):
            raise _form_error_at(
                at,
                "MODEL_TYPE_CONVERT",
                "Only dictionaries may be used in a ModelType",
            )
        raw_type = command.get("type", CHAT_INPUT)
        if raw_type not in (CHAT_INPUT, USER_COMMAND, MESSAGE_COMMAND) or isinstance(
            raw_type, bool
        ):
            # PRIMARY_ENTRY_POINT (4) exists only for apps with an Activity.
            raise _form_error_at(
                (*at, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3}."
            )
        command_type = int(raw_type)
        name = command.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 32:
            raise _form_error_at(
                (*at, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
            )
        description = command.get("description")
        options = command.get("options")
        if command_type == CHAT_INPUT:
            if not _valid_chat_input_name(name):
                raise _form_error_at(
                    (*at, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            if description is None:
                raise _form_error_at(
                    (*at, "description"), "BASE_TYPE_REQUIRED", "This field is required"
                )
            if not isinstance(description, str) or not (
                1 <= len(description) <= MAX_COMMAND_DESCRIPTION
            ):
                raise _form_error_at(
                    (*at, "description"),
                    "BASE_TYPE_BAD_LENGTH",
                    f"Must be between 1 and {MAX_COMMAND_DESCRIPTION} in length.",
                )
            if options is not None and len(options) > MAX_COMMAND_OPTIONS:
                raise _too_long((*at, "options"), MAX_COMMAND_OPTIONS)
        else:
            if description:
                raise _form_error_at(
                    (*at, "description"),
                    "APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION_INVALID",
                    "Context menu commands cannot have description",
                )
            if options:
                raise _form_error_at(
                    (*at, "options"),
                    "APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS_INVALID",
                    "Context menu commands cannot have options",
                )
        return command_type, name

    def _store_command(self, scope: int | None, command: JSON) -> tuple[JSON, bool]:
        """Store a validated command; returns it as Discord returns it, and whether it is new."""
        command_type, name = self._validate_command(command)
        defaults: JSON = {
            "type": command_type,
            "description": "",
            "default_member_permissions": None,
            "dm_permission": True,
            "nsfw": False,
        }
        if command_type == CHAT_INPUT:
            defaults["options"] = []
        stored: JSON = {
            **defaults,
            **command,
            "type": command_type,
            "id": str(self._command_id(scope, name, command_type)),
            "application_id": str(self.application_id),
            "version": str(self._ids.next()),
        }
        if command_type != CHAT_INPUT:
            stored["description"] = ""  # "an empty string (instead of null) when fetching"
            stored.pop("options", None)
        if scope is not None:
            stored["guild_id"] = str(scope)
        registered = self._commands.setdefault(scope, {})
        is_new = (command_type, name) not in registered
        registered[(command_type, name)] = stored
        return stored, is_new

    async def _get_commands(self, call: _Call) -> web.Response:
        scope = self._command_guild(call)
        return self._json(list(self._commands.get(scope, {}).values()), kind="commands")

    async def _put_commands(self, call: _Call) -> web.Response:
        scope = self._command_guild(call)
        body = call.body.json
        if not isinstance(body, list):
            raise _form_error("_root", "LIST_TYPE_CONVERT", "Must be an array.")
        keys = [self._validate_command(command, (index,)) for index, command in enumerate(body)]
        if len(set(keys)) != len(keys):
            # names are unique per type within a scope
            raise _form_error_at(
                (),
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                "Application command names must be unique",
            )
        self._commands[scope] = {}
        stored = [self._store_command(scope, dict(command))[0] for command in body]
        self.synced_commands.append(SyncedCommands(guild_id=scope, commands=list(body)))
        return self._json(stored, kind="commands")

    async def _upsert_command(self, call: _Call) -> web.Response:
        """POST upserts by (type, name): 201 for a new command, 200 when it replaced one."""
        scope = self._command_guild(call)
        stored, is_new = self._store_command(scope, call.payload)
        return self._json(stored, status=201 if is_new else 200, kind="commands")
