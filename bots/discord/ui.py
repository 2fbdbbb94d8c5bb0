"""How /memory answers look on Discord: embeds paged within Discord's limits, the ephemeral
send (with follow-ups for extra pages), and the Confirm/Cancel buttons of ``forget all``.

:func:`paginate` is pure (plain dataclasses, no discord objects), so the limits are tested
without a client; :func:`to_embed` turns a page into a ``discord.Embed``.
"""

from __future__ import annotations

import io
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import discord

from bots.commands import CommandResult
from bots.discord.replies import MESSAGE_LIMIT
from memory_core.text.chunks import split_message

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EmbedLimits:
    """Discord's embed limits (https://discord.com/developers/docs/resources/message#embed-object-embed-limits)."""

    title: int = 256
    description: int = 4096
    field_name: int = 256
    field_value: int = 1024
    fields: int = 25
    total: int = 6000  # all titles, descriptions, field names and values of one message
    embeds: int = 10  # per message


LIMITS = EmbedLimits()


@dataclass
class EmbedPage:
    title: str = ""
    description: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)

    def size(self) -> int:
        return (
            len(self.title) + len(self.description) + sum(len(n) + len(v) for n, v in self.fields)
        )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def paginate(result: CommandResult, limits: EmbedLimits = LIMITS) -> list[list[EmbedPage]]:
    """Messages of embeds for a result: untitled sections go into descriptions, titled ones
    become fields (long bodies continue in further fields), and a new embed or message starts
    whenever a limit would be passed. An empty list: the result has no sections."""
    if not result.sections:
        return []
    untitled = "\n\n".join(body for heading, body in result.sections if not heading and body)
    descriptions = split_message(untitled, limits.description) if untitled else []
    fields: list[tuple[str, str]] = []
    for heading, body in result.sections:
        if not heading or not body.strip():
            continue
        for i, chunk in enumerate(split_message(body, limits.field_value)):
            name = heading if i == 0 else f"{heading} ({i + 1})"
            fields.append((_clip(name, limits.field_name), chunk))

    messages: list[list[EmbedPage]] = [[EmbedPage(title=_clip(result.title, limits.title))]]
    used = len(messages[0][0].title)

    def start_embed(size: int) -> EmbedPage:
        nonlocal used
        if len(messages[-1]) >= limits.embeds or used + size > limits.total:
            messages.append([])
            used = 0
        page = EmbedPage()
        messages[-1].append(page)
        return page

    current = messages[0][0]
    for i, text in enumerate(descriptions):
        if i > 0 or used + len(text) > limits.total:
            current = start_embed(len(text))
        current.description = text
        used += len(text)
    for name, value in fields:
        size = len(name) + len(value)
        if len(current.fields) >= limits.fields or used + size > limits.total:
            current = start_embed(size)
        current.fields.append((name, value))
        used += size
    # Discord rejects an empty embed (a result whose sections are all blank).
    messages = [[page for page in message if page.size()] for message in messages]
    return [message for message in messages if message]


def to_embed(page: EmbedPage, *, colour: discord.Colour) -> discord.Embed:
    embed = discord.Embed(title=page.title or None, description=page.description or None)
    embed.colour = colour
    for name, value in page.fields:
        embed.add_field(name=name, value=value, inline=False)
    return embed


async def send_ephemeral(interaction: discord.Interaction, **kwargs: Any) -> None:
    """Answer, or follow up when the interaction was already answered (deferred)."""
    if interaction.response.is_done():
        await interaction.followup.send(ephemeral=True, **kwargs)
    else:
        await interaction.response.send_message(ephemeral=True, **kwargs)


async def send_result(
    interaction: discord.Interaction,
    result: CommandResult,
    *,
    view: discord.ui.View | None = None,
    too_big: str = "",
) -> None:
    """Show a command's result to the invoking user only; extra pages as follow-ups."""
    colour = discord.Colour.blurple() if result.ok else discord.Colour.red()
    pages = [[to_embed(p, colour=colour) for p in message] for message in paginate(result)]
    first: dict[str, Any] = {}
    if pages:
        first["embeds"] = pages[0]
    else:
        first["content"] = _clip(result.title, MESSAGE_LIMIT)
    if view is not None:
        first["view"] = view
    if result.file is not None:
        name, data = result.file
        if len(data) <= interaction.filesize_limit:
            first["file"] = discord.File(io.BytesIO(data), filename=name)
        else:
            first["content"] = _clip(f"{result.title}\n{too_big}", MESSAGE_LIMIT)
    await send_ephemeral(interaction, **first)
    for embeds in pages[1:]:
        await interaction.followup.send(embeds=embeds, ephemeral=True)


# Discord-only wording (buttons and their outcomes); the command texts come from the shared
# prompt files through bots.commands.
TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "confirm": "Confirm",
        "cancel": "Cancel",
        "cancelled": "Cancelled: nothing was forgotten.",
        "timed_out": "No answer: nothing was forgotten.",
        "not_yours": "Only the person who asked can answer this.",
        "not_here": "Memory is not enabled in this channel.",
        "too_big": "The export is larger than Discord allows here; use "
        "`memorybot memory export --scope {scope}` on the server.",
        "failed": "That /memory command could not be run. Try `/memory show`; "
        "if this keeps happening, an admin can re-register the commands "
        "(`memorybot run --sync-commands`).",
    },
    "ja": {
        "confirm": "削除する",
        "cancel": "キャンセル",
        "cancelled": "キャンセルしました。何も削除していません。",
        "timed_out": "応答がなかったため、何も削除していません。",
        "not_yours": "この操作はコマンドを実行した人だけができます。",
        "not_here": "このチャンネルではメモリーが有効になっていません。",
        "too_big": "エクスポートが Discord の上限を超えています。サーバーで "
        "`memorybot memory export --scope {scope}` を使ってください。",
        "failed": "この /memory コマンドは実行できませんでした。`/memory show` をお試しください。"
        "繰り返し起きる場合は、管理者がコマンドを再登録できます"
        "（`memorybot run --sync-commands`）。",
    },
}


def texts_for(language: str | None) -> dict[str, str]:
    return TEXTS["ja" if language == "ja" else "en"]


class ConfirmView(discord.ui.View):
    """Confirm / Cancel for a destructive command. Only ``owner_id`` may press; nothing
    happens on Cancel or when the view times out."""

    def __init__(
        self,
        *,
        owner_id: int,
        on_confirm: Callable[[discord.Interaction], Awaitable[str]],
        texts: dict[str, str],
        timeout: float,
        action: str = "forget-all",
    ) -> None:
        super().__init__(timeout=timeout)
        self.owner_id = owner_id
        self.on_confirm = on_confirm
        self.texts = texts
        self.origin: discord.Interaction | None = None  # set once sent, to edit on timeout
        # Unique ids: several confirmations may be open at once, in several channels.
        nonce = secrets.token_hex(6)
        self.confirm.label, self.cancel.label = texts["confirm"], texts["cancel"]
        self.confirm.custom_id = f"memory:{action}:confirm:{nonce}"
        self.cancel.custom_id = f"memory:{action}:cancel:{nonce}"

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id == self.owner_id:
            return True
        await interaction.response.send_message(self.texts["not_yours"], ephemeral=True)
        return False

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction, button: discord.ui.Button[ConfirmView]
    ) -> None:
        self.stop()
        # Acknowledge first: forgetting a channel can outlast Discord's 3 seconds, and an
        # unacknowledged click expires (10062) with the memory already gone.
        await interaction.response.defer()
        outcome = await self.on_confirm(interaction)
        await interaction.edit_original_response(
            content=_clip(outcome, MESSAGE_LIMIT), embeds=[], view=None
        )

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(
        self, interaction: discord.Interaction, button: discord.ui.Button[ConfirmView]
    ) -> None:
        self.stop()
        await interaction.response.edit_message(content=self.texts["cancelled"], view=None)

    async def on_timeout(self) -> None:
        if self.origin is None:
            return
        try:
            await self.origin.edit_original_response(content=self.texts["timed_out"], view=None)
        except discord.HTTPException as exc:  # the message may be gone; nothing was deleted
            log.debug("could not mark a confirmation as timed out: %s", exc)
