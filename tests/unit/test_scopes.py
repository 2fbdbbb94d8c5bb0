import pytest

from memory_core.errors import InvalidScope
from memory_core.scopes import boundary_of, check_parent, parse_scope
from memory_core.store.keys import KeySchema


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("team", "console:team"),
        ("console:team", "console:team"),
        ("discord:1:2", "discord:1:2"),
        ("discord:dm:42", "discord:dm:42"),
        ("slack:T1:C1:1700000000.000100", "slack:T1:C1:1700000000.000100"),
        ("  spaced  ", "console:spaced"),
    ],
)
def test_parse_scope(text: str, scope: str) -> None:
    assert parse_scope(text) == scope


@pytest.mark.parametrize(
    "bad", ["", "a b", "discord:{1}:2", "discord:", "x::y", "Discord:1", "a" * 300]
)
def test_parse_scope_rejects_with_a_hint(bad: str) -> None:
    with pytest.raises(InvalidScope, match="scope"):
        parse_scope(bad)


def test_boundaries() -> None:
    assert boundary_of("discord:1:2") == "discord:1"
    assert boundary_of("discord:1:user:9") == "discord:1"
    assert boundary_of("discord:dm:9") == "discord:dm:9"
    assert boundary_of("slack:T1:C1:123.4") == "slack:T1"
    assert boundary_of("console:x") == "console:x"


def test_parent_only_within_the_same_guild() -> None:
    assert check_parent("discord:1:3", "discord:1:2") == "discord:1:2"
    assert check_parent("discord:1:3", None) is None
    with pytest.raises(InvalidScope, match="different guild"):
        check_parent("discord:1:3", "discord:2:2")
    with pytest.raises(InvalidScope):
        check_parent("discord:dm:5", "discord:dm:6")


def test_every_key_of_a_scope_shares_its_hash_tag() -> None:
    keys = KeySchema("mb").scope("discord:1:2")
    for key in keys.all():
        assert "{discord:1:2}" in key
        assert key.startswith("mb:")
    assert len(set(keys.all())) == len(keys.all())
