"""Who may act on a place's memory, and on one of its messages: one rule for every front
door. A door says what the platform told it (where the command runs; whether the person is
an admin of the server or workspace the memory belongs to) and never guesses it from an id;
the rule here decides.

Where a command, a message shortcut or a context-menu command runs (:class:`Where`):

- a place the bot serves (a channel, a thread, a group DM it is in): admins change its
  shared memory; the author of a message may make it forget that message;
- the bot's own DM with the person: it is theirs, they do everything there;
- a place the bot does not serve (a DM or group DM between people, which a Slack message
  shortcut or a Discord user install reaches; a server the bot was not added to): nobody
  does anything. The bot keeps no memory of it and writes none;
- unchecked (the platform could not say): nothing changes either.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# Admin-only where the command changes a memory the whole channel shares.
ADMIN_ACTIONS = frozenset(
    {
        "forget_all",
        "forget_text",
        "forget_fact",
        "remember",
        "export",
        "pause",
        "resume",
        "config",
        "learn",
    }
)
# What anybody may run anywhere: it reads and writes no memory.
ANYWHERE_ACTIONS = frozenset({"help"})


class Where(StrEnum):
    """Where something is run, as the platform says."""

    PLACE = "place"  # a channel, thread or group DM the bot serves
    OWN_DM = "own_dm"  # the bot's own DM with the person who acts
    NOT_SERVED = "not_served"  # a DM or group DM between people, a server without the bot
    UNCHECKED = "unchecked"  # the platform could not say whose place it is

    @property
    def serves(self) -> bool:
        """The bot keeps this place's memory."""
        return self in (Where.PLACE, Where.OWN_DM)


class Asked(Protocol):
    """What is asked (a :class:`bots.commands.Command`): the action, its argument, and for
    a message, its author (``key``)."""

    @property
    def action(self) -> str: ...

    @property
    def arg(self) -> str: ...

    @property
    def key(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Actor:
    """Who runs a command. ``is_admin``: may change this place's shared memory (build it
    with :func:`actor_for`, which applies the rule)."""

    user_id: str
    name: str
    is_admin: bool
    where: Where = Where.PLACE


def actor_for(*, user_id: str, name: str, where: Where, server_admin: bool) -> Actor:
    """The person who acts, as the rule sees them. ``server_admin``: an admin of the server
    or workspace the memory belongs to (never of another organisation in a shared
    channel: the door checks it against the platform). The bot's DM is its person's; in a
    place the bot serves its server's admins are admins; nobody is anywhere else."""
    is_admin = where is Where.OWN_DM or (where is Where.PLACE and server_admin)
    return Actor(user_id=user_id, name=name, is_admin=is_admin, where=where)


def refusal(actor: Actor, command: Asked) -> tuple[str, dict[str, str]] | None:
    """Why ``actor`` may not run ``command`` where they are: a prompt key of the ``[ui]``
    table with its values, or None when they may."""
    action = command.action
    if not actor.where.serves and action not in ANYWHERE_ACTIONS:
        key = "not_served" if actor.where is Where.NOT_SERVED else "place_unchecked"
        return key, {}
    own_fact = action == "forget_fact" and command.arg.startswith("me:")
    if action in ADMIN_ACTIONS and not actor.is_admin and not own_fact:
        return "not_admin", {"action": action.replace("_", " ")}
    author = bool(actor.user_id) and actor.user_id == command.key
    if action == "forget_message" and not actor.is_admin and not author:
        return "not_author", {}  # a message is its author's, or an admin's to forget
    return None
