"""Settings: env beats the TOML file beats defaults; errors name the field and how to set it."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings, SettingsError, load_settings


def test_defaults_without_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.memory.budget_tokens == 3000
    assert s.llm.offline
    assert s.store.redis_url is None


def test_precedence_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "memorybot.toml"
    cfg.write_text('[memory]\nbudget_tokens = 2000\ntimezone = "Asia/Tokyo"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORYBOT_MEMORY__BUDGET_TOKENS", "2500")
    monkeypatch.setenv("REDIS_URL", "redis://example:6379/0")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    s = load_settings()
    assert s.memory.budget_tokens == 2500
    assert s.memory.timezone == "Asia/Tokyo"
    assert s.store.redis_url is not None
    assert s.store.redis_url.get_secret_value() == "redis://example:6379/0"
    assert not s.llm.offline


def test_invalid_value_names_field_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYBOT_MEMORY__BUDGET_TOKENS", "lots")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "memory.budget_tokens" in str(info.value)
    assert "MEMORYBOT_MEMORY__BUDGET_TOKENS" in str(info.value)


@pytest.mark.parametrize("value", ["0", "-5", "a lot", "2000000"])
def test_a_bad_recall_cache_size_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MEMORYBOT_MEMORY__RECALL_CACHE_MB", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "memory.recall_cache_mb" in str(info.value)
    assert "MEMORYBOT_MEMORY__RECALL_CACHE_MB" in str(info.value)


def test_the_recall_cache_size_is_read_and_defaults_to_fit_a_small_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().memory.recall_cache_mb == 256  # a 1 GB machine, beside the model
    monkeypatch.setenv("MEMORYBOT_MEMORY__RECALL_CACHE_MB", "64")
    assert load_settings().memory.recall_cache_mb == 64


def test_bad_file_names_the_file_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[memory]\ntimezone = "Mars/Olympus"\nbudgett = 3\n')
    with pytest.raises(SettingsError) as info:
        load_settings(cfg)
    message = str(info.value)
    assert "memory.timezone" in message and "Mars/Olympus" in message
    assert "memory.budgett" in message and "unknown setting" in message
    assert str(cfg) in message


def test_unparsable_toml_and_missing_file(tmp_path: Path) -> None:
    cfg = tmp_path / "broken.toml"
    cfg.write_text("[memory\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(cfg)
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_secrets_are_not_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("DISCORD_TOKEN", "discord-secret-token")
    s = load_settings()
    dumped = repr(s) + str(s.model_dump())
    assert "sk-very-secret" not in dumped
    assert "discord-secret-token" not in dumped


def test_secret_values_lists_every_secret_setting_and_the_redis_password() -> None:
    """The one list the reply masking reads: each SecretStr setting, wherever it is, and
    the Redis password as written in the URL, decoded, and from a query parameter."""
    s = Settings.model_validate(
        {
            "store": {"redis_url": "redis://admin:p%40ss-word-1@db:6379/0?Password=query-pass-2"},
            "llm": {"api_key": "sk-key"},
            "discord": {"token": "discord-token"},
            "slack": {
                "bot_token": "xoxb-bot",
                "app_token": "xapp-app",
                "signing_secret": "signing",
            },
            "dashboard": {"token": "dash-token"},
        }
    )
    found = s.secret_values()
    assert set(found) == {
        "redis://admin:p%40ss-word-1@db:6379/0?Password=query-pass-2",
        "p%40ss-word-1",
        "p@ss-word-1",
        "query-pass-2",
        "sk-key",
        "discord-token",
        "xoxb-bot",
        "xapp-app",
        "signing",
        "dash-token",
    }
    assert len(found) == len(set(found))
    assert Settings().secret_values() == []


def test_example_file_matches_the_defaults() -> None:
    example = Path(__file__).parents[2] / "memorybot.example.toml"
    from_file = load_settings(example)
    defaults = Settings()
    assert from_file.memory == defaults.memory
    assert from_file.llm.model_dump(exclude={"api_key", "base_url"}) == defaults.llm.model_dump(
        exclude={"api_key", "base_url"}
    )
    assert from_file.bot == defaults.bot


def _too_long(tmp_path: Path) -> Path:
    return tmp_path / ("x" * 5_000)  # ENAMETOOLONG: a name longer than the OS allows


def _directory(tmp_path: Path) -> Path:
    return tmp_path


def _symlink_loop(tmp_path: Path) -> Path:
    loop = tmp_path / "loop.toml"
    os.symlink(loop, loop)  # ELOOP
    return loop


def _through_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("")
    return tmp_path / "plain" / "memorybot.toml"  # ENOTDIR


UNREADABLE_CONFIG: dict[str, Callable[[Path], Path]] = {
    "too-long": _too_long,
    "directory": _directory,
    "symlink-loop": _symlink_loop,
    "through-a-file": _through_a_file,
}


@pytest.mark.parametrize("how", ["env", "argument"])
@pytest.mark.parametrize("make", UNREADABLE_CONFIG.values(), ids=UNREADABLE_CONFIG.keys())
def test_a_config_path_that_cannot_be_read_is_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[Path], Path], how: str
) -> None:
    """Whatever the OS says about the path (too long, a directory, a symlink loop), the
    error is a SettingsError that names where the path came from, and stays short."""
    path = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    if how == "env":
        monkeypatch.setenv("MEMORYBOT_CONFIG", str(path))
    with pytest.raises(SettingsError) as info:
        load_settings(path if how == "argument" else None)
    message = str(info.value)
    assert "MEMORYBOT_CONFIG" in message and "--config" in message, message
    assert len(message) < 400, message


def test_an_unreadable_default_file_is_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """./memorybot.toml that is a directory or a symlink loop: say so, and how to use another."""
    (tmp_path / "memorybot.toml").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "memorybot.toml" in str(info.value) and "MEMORYBOT_CONFIG" in str(info.value)
