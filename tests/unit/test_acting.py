"""Who may act, and where (bots/acting.py): the one rule both doors use, as a table of
cases; and who is an admin of the Slack workspace a memory belongs to."""

from __future__ import annotations

from typing import Any

import pytest

from bots.acting import Where, actor_for, refusal
from bots.commands import Command
from bots.slack.users import is_workspace_admin

ME = "U1"
PLACE, OWN_DM, NOT_SERVED, UNCHECKED = (
    Where.PLACE,
    Where.OWN_DM,
    Where.NOT_SERVED,
    Where.UNCHECKED,
)
MINE = Command("forget_message", arg="1.2", key=ME)
THEIRS = Command("forget_message", arg="1.2", key="U2")
REMEMBER = Command("remember", arg="a note")


@pytest.mark.parametrize(
    ("where", "server_admin", "command", "refused"),
    [
        # A place the bot serves: admins change the shared memory, authors their message.
        (PLACE, False, REMEMBER, "not_admin"),
        (PLACE, True, REMEMBER, None),
        (PLACE, False, MINE, None),
        (PLACE, False, THEIRS, "not_author"),
        (PLACE, True, THEIRS, None),
        (PLACE, False, Command("show"), None),
        (PLACE, False, Command("forget_fact", arg="me:f1"), None),  # a fact about oneself
        (PLACE, False, Command("forget_fact", arg="f1"), "not_admin"),
        # The bot's own DM is its person's, whatever they are in the server.
        (OWN_DM, False, REMEMBER, None),
        (OWN_DM, False, THEIRS, None),
        (OWN_DM, False, Command("forget_all", confirmed=True), None),
        # A DM between people, a server without the bot: nobody, for nothing (but help).
        (NOT_SERVED, True, REMEMBER, "not_served"),
        (NOT_SERVED, True, THEIRS, "not_served"),
        (NOT_SERVED, False, MINE, "not_served"),
        (NOT_SERVED, False, Command("show"), "not_served"),
        (NOT_SERVED, False, Command("forget_me_everywhere"), "not_served"),
        (NOT_SERVED, False, Command("help"), None),
        # The platform could not say: nothing changes.
        (UNCHECKED, True, REMEMBER, "place_unchecked"),
        (UNCHECKED, False, MINE, "place_unchecked"),
    ],
)
def test_who_may_act_where(
    where: Where, server_admin: bool, command: Command, refused: str | None
) -> None:
    actor = actor_for(user_id=ME, name="Me", where=where, server_admin=server_admin)
    denied = refusal(actor, command)
    assert (denied[0] if denied else None) == refused


def test_only_the_bots_own_dm_and_a_served_places_admins_are_admins() -> None:
    def admin(where: Where, server_admin: bool) -> bool:
        return actor_for(user_id=ME, name="", where=where, server_admin=server_admin).is_admin

    assert admin(OWN_DM, False) and admin(PLACE, True)
    assert not any(admin(w, True) for w in (NOT_SERVED, UNCHECKED))
    assert not admin(PLACE, False)


@pytest.mark.parametrize(
    ("user", "admin_of_t1"),
    [
        ({"team_id": "T1", "is_admin": True}, True),
        ({"team_id": "T1", "is_owner": True}, True),
        ({"team_id": "T1"}, False),
        # Slack Connect: an owner of another organisation is nobody's admin here.
        ({"team_id": "T2", "is_owner": True, "is_primary_owner": True}, False),
        # Enterprise Grid: the organisation's admins administer each of its workspaces.
        ({"team_id": "T9", "enterprise_user": {"teams": ["T9", "T1"], "is_admin": True}}, True),
        ({"team_id": "T9", "enterprise_user": {"teams": ["T9"], "is_admin": True}}, False),
        ({"team_id": "T9", "is_admin": True, "enterprise_user": {"teams": ["T1"]}}, False),
    ],
)
def test_an_admin_of_the_workspace_the_memory_belongs_to(
    user: dict[str, Any], admin_of_t1: bool
) -> None:
    assert is_workspace_admin(user, "T1") is admin_of_t1
