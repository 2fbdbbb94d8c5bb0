"""The pure parts of the Discord front door: scopes, allow-lists, readable text, embed paging."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots.commands import CommandResult
from bots.discord.commands import interaction_language
from bots.discord.events import Place, is_allowed, place_for, readable_text
from bots.discord.ui import LIMITS, EmbedLimits, paginate
from config.settings import DiscordSettings
from memory_core.scopes import Scope


def test_scopes_of_channels_threads_and_dms() -> None:
    channel = place_for(guild_id=1, channel_id=2, parent_id=None, user_id=9)
    assert (channel.scope, channel.is_dm) == ("discord:1:2", False)
    # A thread's scope names its channel, as the gateway does: the two are one subtree.
    thread = place_for(guild_id=1, channel_id=3, parent_id=2, user_id=9)
    assert thread.scope == "discord:1:2:3"
    assert Scope.of(thread.scope).parent == Scope.of("discord:1:2")
    dm = place_for(guild_id=None, channel_id=77, parent_id=None, user_id=9)
    assert (dm.scope, dm.is_dm) == ("discord:dm:9", True)


@pytest.mark.parametrize(
    ("allow", "place", "expected"),
    [
        ({}, Place("discord:dm:9", None, 5), True),
        ({"allowed_guild_ids": [1]}, Place("discord:1:2", 1, 2), True),
        ({"allowed_guild_ids": [1]}, Place("discord:4:2", 4, 2), False),
        ({"allowed_guild_ids": [1]}, Place("discord:dm:9", None, 5), False),
        ({"allowed_channel_ids": [2]}, Place("discord:1:2", 1, 2), True),
        ({"allowed_channel_ids": [2]}, Place("discord:1:2:3", 1, 3, 2), True),
        ({"allowed_channel_ids": [2]}, Place("discord:1:8", 1, 8), False),
        ({"allowed_guild_ids": [4], "allowed_channel_ids": [2]}, Place("x:1:2", 1, 2), False),
    ],
)
def test_allow_lists(allow: dict[str, Any], place: Place, expected: bool) -> None:
    assert is_allowed(place, DiscordSettings(**allow)) is expected


def test_mentions_become_names() -> None:
    text = readable_text(
        "<@42> ask <@!7> and <@&5> in <#3>, not <@999> or <#888>",
        bot_id=42,
        bot_name="memorybot",
        users={7: "Alice"},
        roles={5: "ops"},
        channels={3: "general"},
    )
    assert text == "@memorybot ask @Alice and @ops in #general, not <@999> or <#888>"


def test_a_bare_mention_is_not_empty() -> None:
    kwargs: dict[str, Any] = {"bot_id": 42, "bot_name": "mb", "users": {}, "roles": {}}
    assert readable_text("  <@42>  ", channels={}, **kwargs) == "@mb"
    assert readable_text("   ", channels={}, **kwargs) == ""


@pytest.mark.parametrize(("locale", "language"), [("ja", "ja"), ("en-US", None), ("de", None)])
def test_interaction_language(locale: str, language: str | None) -> None:
    interaction: Any = SimpleNamespace(locale=locale)
    assert interaction_language(interaction) == language


def _check_limits(messages: list[list[Any]], limits: EmbedLimits) -> None:
    for embeds in messages:
        assert 1 <= len(embeds) <= limits.embeds
        total = 0
        for embed in embeds:
            assert len(embed.title) <= limits.title
            assert len(embed.description) <= limits.description
            assert len(embed.fields) <= limits.fields
            for name, value in embed.fields:
                assert 0 < len(name) <= limits.field_name
                assert 0 < len(value) <= limits.field_value
            assert embed.title or embed.description or embed.fields
            total += embed.size()
        assert total <= limits.total


def test_a_result_without_sections_has_no_embeds() -> None:
    assert paginate(CommandResult(title="Forgot fact f3.")) == []


def test_sections_become_description_and_fields() -> None:
    result = CommandResult(
        title="Memory of discord:1:2",
        sections=[("", "3 messages stored"), ("Facts", "`f1` likes tea"), ("Empty", "")],
    )
    [[embed]] = paginate(result)
    assert embed.title == "Memory of discord:1:2"
    assert embed.description == "3 messages stored"
    assert embed.fields == [("Facts", "`f1` likes tea")]


def test_a_huge_result_is_paged_within_every_limit() -> None:
    facts = "\n".join(f"`f{i}` " + "word " * 60 for i in range(300))
    result = CommandResult(title="T" * 300, sections=[("", "info " * 2000), ("Facts", facts)])
    messages = paginate(result)
    assert len(messages) > 5
    _check_limits(messages, LIMITS)
    shown = "\n".join(v for embeds in messages for e in embeds for _, v in e.fields)
    assert all(f"`f{i}` " in shown for i in range(300))


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=600)


@settings(max_examples=60, deadline=None)
@given(
    title=_text,
    sections=st.lists(st.tuples(st.sampled_from(["", "A", "Longer heading"]), _text), max_size=12),
)
def test_paging_keeps_small_limits(title: str, sections: list[tuple[str, str]]) -> None:
    small = EmbedLimits(
        title=50, description=200, field_name=40, field_value=100, fields=4, total=600, embeds=3
    )
    messages = paginate(CommandResult(title=title, sections=sections), small)
    _check_limits(messages, small)
