"""Budget settings and /memory config values: what is accepted, and errors that say what
to fix; which guild or workspace a scope's bill goes to."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from memory_core.errors import InputError
from memory_core.fleet.spending import server_of
from memory_core.service.budget import parse_limit


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("10", "10"),
        ("50,000", "50000"),
        ("1_000", "1000"),
        ("off", "off"),
        ("0", "off"),
        ("OFF", "off"),
        ("default", ""),
        ("007", "7"),
    ],
)
def test_limits_an_admin_may_type(typed: str, stored: str) -> None:
    assert parse_limit(typed, setting="daily_tokens") == stored


@pytest.mark.parametrize("typed", ["lots", "-5", "1e6", "10k", "", "9" * 13])
def test_limits_refused_say_what_to_type(typed: str) -> None:
    with pytest.raises(InputError, match=r"daily_tokens takes a number of tokens per day, 'off'"):
        parse_limit(typed, setting="daily_tokens")


@pytest.mark.parametrize(
    ("scope", "server"),
    [
        ("discord:1:2", "discord:1"),
        ("discord:1:2:3", "discord:1"),
        ("discord:dm:5", None),
        ("slack:T1:C1", "slack:T1"),
        ("slack:T1:D1", "slack:T1"),  # a Slack DM is still on its workspace's bill
        ("console:team", None),
        ("discord:1:user:9", "discord:1"),
    ],
)
def test_the_server_a_scope_bills(scope: str, server: str | None) -> None:
    assert server_of(scope) == server


def test_budget_settings_errors_name_the_field_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYBOT_BUDGET__DAILY_TOKENS", "-1")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "budget.daily_tokens" in str(info.value)
    assert "MEMORYBOT_BUDGET__DAILY_TOKENS" in str(info.value)
    monkeypatch.delenv("MEMORYBOT_BUDGET__DAILY_TOKENS")
    monkeypatch.setenv("MEMORYBOT_BUDGET__SERVERS", '{"guild 1": 5}')
    with pytest.raises(SettingsError, match=r"use discord:<guild id> or slack:<team id>"):
        load_settings()
    monkeypatch.setenv("MEMORYBOT_BUDGET__SERVERS", '{"discord:1": 5000}')
    assert load_settings().budget.servers == {"discord:1": 5000}
