import pytest

from memory_core.errors import InvalidScope
from memory_core.scopes import Audience, Scope, parse_scope
from memory_core.store.keys import KeySchema, bucket_of


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("team", "console:team"),
        ("console:team", "console:team"),
        ("discord:1:2", "discord:1:2"),
        ("discord:1:2:3", "discord:1:2:3"),
        ("discord:dm:42", "discord:dm:42"),
        ("slack:T1:C1:1700000000.000100", "slack:T1:C1:1700000000.000100"),
        ("  spaced  ", "console:spaced"),
    ],
)
def test_parse_scope(text: str, scope: str) -> None:
    assert parse_scope(text) == scope


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "a b",
        "discord:{1}:2",
        "discord:",
        "x::y",
        "Discord:1",
        "a" * 300,
        "discord:1",  # a server is no place
        "discord:1:2:3:4",  # no thread under a thread
        "discord:dm:1:2",
        "slack:T1:user",
        "slack:T1:C1:1.2:3",
    ],
)
def test_parse_scope_rejects_with_a_hint(bad: str) -> None:
    with pytest.raises(InvalidScope, match="scope"):
        parse_scope(bad)


# (scope, kind, server key, root, parent, boundary)
TREE = [
    ("discord:1:2", "channel", "discord:1", "discord:1:2", None, "discord:1"),
    ("discord:1:2:3", "thread", "discord:1", "discord:1:2", "discord:1:2", "discord:1"),
    ("discord:1:user:9", "person", "discord:1", "discord:1:user:9", None, "discord:1"),
    ("discord:dm:9", "dm", None, "discord:dm:9", None, "discord:dm:9"),
    ("slack:T1:C1", "channel", "slack:T1", "slack:T1:C1", None, "slack:T1"),
    ("slack:T1:C1:123.4", "thread", "slack:T1", "slack:T1:C1", "slack:T1:C1", "slack:T1"),
    ("slack:T1:D1", "dm", "slack:T1", "slack:T1:D1", None, "slack:T1"),
    ("slack:T1:D1:123.4", "thread", "slack:T1", "slack:T1:D1", "slack:T1:D1", "slack:T1"),
    ("console:x", "place", None, "console:x", None, "console:x"),
    ("replay:a:b", "place", None, "replay:a:b", None, "replay:a:b"),
]


@pytest.mark.parametrize(("scope", "kind", "server", "root", "parent", "boundary"), TREE)
def test_where_a_scope_sits_in_the_tree(
    scope: str, kind: str, server: str | None, root: str, parent: str | None, boundary: str
) -> None:
    place = Scope.of(scope)
    assert place.kind == kind
    assert place.server_key == server
    assert place.root.key == root
    assert (place.parent.key if place.parent else None) == parent
    assert place.boundary == boundary


@pytest.mark.parametrize(
    ("scope", "user", "person"),
    [
        ("discord:1:2", "7", "discord:1:user:7"),
        ("discord:1:2:3", "7", "discord:1:user:7"),  # a thread's person is the server's
        ("slack:T1:C1:123.4", "U7", "slack:T1:user:U7"),
        ("discord:dm:7", "7", None),  # nothing learned in a DM leaves it
        ("slack:T1:D1", "U7", None),
        ("slack:T1:D1:1.2", "U7", None),
        ("console:x", "al", None),
        ("discord:1:user:7", "7", None),
        ("discord:1:2", "bot", None),
        ("discord:1:2", "", None),
    ],
)
def test_person_scopes(scope: str, user: str, person: str | None) -> None:
    found = Scope.of(scope).person_scope(user)
    assert (found.key if found else None) == person


def test_thread_scopes_only_under_channels() -> None:
    assert Scope.of("slack:T1:C1").thread_scope("1.2").key == "slack:T1:C1:1.2"
    for place in ("slack:T1:C1:1.2", "discord:1:user:7", "console:x"):
        with pytest.raises(InvalidScope):
            Scope.of(place).thread_scope("1.3")


def test_audiences_say_what_travels() -> None:
    assert [a.value for a in Audience if a.lets_facts_out] == ["server"]
    assert {a.value for a in Audience if a.lets_facts_in} == {"server", "private"}
    assert Audience.parse("shared") is Audience.SHARED
    assert Audience.parse("nonsense") is Audience.PRIVATE


def test_every_key_of_a_scope_shares_its_hash_tag() -> None:
    keys = KeySchema("mb").scope("discord:1:2")
    for key in keys.all():
        assert "{discord:1:2}" in key
        assert key.startswith("mb:")
    assert len(set(keys.all())) == len(keys.all())


def test_a_threads_keys_share_its_channels_hash_tag_and_not_its_keys() -> None:
    schema = KeySchema("mb")
    channel, thread = schema.scope("slack:T1:C1"), schema.scope("slack:T1:C1:1.2")
    for key in thread.all():
        assert key.startswith("mb:{slack:T1:C1}/1.2:")
    assert not set(thread.all()) & set(channel.all())
    assert thread.root_state == channel.state
    assert thread.threads == channel.threads in channel.all()
    assert thread.threads not in thread.all()
    assert bucket_of("slack:T1:C1:1.2") == bucket_of("slack:T1:C1")
    pattern = schema.scope_pattern("slack:T1:C1")
    assert pattern == "mb:{slack:T1:C1}:*"  # a channel's own keys, not its threads'
