"""Budget settings and /memory config values: what is accepted, and errors that say what
to fix; which guild or workspace a scope's bill goes to."""

from __future__ import annotations

import pytest

from config.settings import Settings, SettingsError, load_settings
from memory_core.clock import ManualClock
from memory_core.errors import InputError, StoreUnavailable
from memory_core.fleet.spending import Overrides, SpendLedger, server_of
from memory_core.llm.usage import SpendTag, current_tag
from memory_core.models import IncomingMessage
from memory_core.service.budget import Budget, parse_limit
from memory_core.store.keys import KeySchema
from tests.helpers import START


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


class UnreachableLedger(SpendLedger):
    """A ledger whose Redis is away (the check's read fails as the store's reads do)."""

    async def overrides(self, scope: str) -> Overrides:
        raise StoreUnavailable("Redis is unreachable: connection refused")


async def test_a_budget_that_cannot_be_read_never_silences_the_bot() -> None:
    settings = Settings(budget={"daily_tokens": 10})
    ledger = UnreachableLedger(None, KeySchema(), clock=ManualClock(START), default_tz="UTC")
    budget = Budget(settings=settings, ledger=ledger, clock=ManualClock(START))
    msg = IncomingMessage(scope="discord:1:2", text="hi", author="Ann", author_id="7")
    # The reply goes ahead, with nothing held.
    assert await budget.admit(msg, prompt_tokens=100, language="en") == (None, None)
    assert current_tag() == SpendTag("discord:1:2", "7", "Ann")  # and is still counted
    assert await budget.over("discord:1:2") is False  # summaries keep the model
