import pytest

from bots.commands import Command, parse_command
from memory_core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/memory", Command("help")),
        ("/memory show", Command("show", arg="overview")),
        ("memory show facts", Command("show", arg="facts")),
        ("show tiers", Command("show", arg="tiers")),
        ("/memory forget all", Command("forget_all")),
        ("/memory forget all confirm", Command("forget_all", confirmed=True)),
        ("/memory forget me", Command("forget_me")),
        ("/memory forget fact f3", Command("forget_fact", arg="f3")),
        ("/memory forget my old address", Command("forget_text", arg="my old address")),
        ("/memory remember standup is at 10", Command("remember", arg="standup is at 10")),
        ("/memory export", Command("export")),
        ("/memory pause", Command("pause")),
        ("/memory resume", Command("resume")),
        ("/memory config mode all", Command("config", key="mode", arg="all")),
        ("/memory config timezone Asia/Tokyo", Command("config", key="timezone", arg="Asia/Tokyo")),
        ("/memory config language JA", Command("config", key="language", arg="ja")),
    ],
)
def test_parse(text: str, command: Command) -> None:
    assert parse_command(text) == command


@pytest.mark.parametrize(
    "text",
    [
        "/memory dance",
        "/memory show everything",
        "/memory forget",
        "/memory forget fact",
        "/memory forget all now",
        "/memory remember",
        "/memory export please",
        "/memory config mode loud",
        "/memory config colour blue",
        "/memory config language fr",
        "/memory learn 0",
        "/memory learn lots",
        "/memory learn 30 confirm",
    ],
)
def test_bad_commands_get_usage_help(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_command(text)
    assert "Usage:" in str(info.value)
    assert "/memory show" in str(info.value)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/memory learn", Command("learn")),
        ("/memory learn 30", Command("learn", arg="30")),
        ("/memory learn 007", Command("learn", arg="7")),
        ("/memory learn CONFIRM", Command("learn", key="confirm")),
        ("/memory learn cancel", Command("learn", key="cancel")),
        ("/memory learn status", Command("learn", key="status")),
    ],
)
def test_learn_commands(text: str, command: Command) -> None:
    assert parse_command(text) == command
