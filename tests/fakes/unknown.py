"""Requests the fakes do not implement, kept for the whole test whatever the test clears.

A fake Discord answers a route it does not know with 404 (and lists it in ``unknown_routes``);
a fake Slack answers an API method it does not know with ``unknown_method`` (``unknown_methods``)
and a path outside its routes with 404. Either way the bot called something the fake cannot
vouch for: the test proved nothing about that call. Each fake also reports such a request
here, where ``clear_records()`` does not reach, and tests/conftest.py fails every test that
leaves one behind (``check``), unless it is marked ``calls_unknown_routes``.
"""

from __future__ import annotations

_received: list[str] = []


def record(platform: str, method: str, path: str) -> None:
    """A fake received ``method path``, which it does not implement."""
    _received.append(f"{platform}: {method} {path}")


def take() -> list[str]:
    """What the fakes received that they do not implement, since the last ``take``."""
    taken = list(_received)
    _received.clear()
    return taken


def check(received: list[str]) -> str | None:
    """The failure message for requests to unknown routes, or None when there were none."""
    if not received:
        return None
    lines = "\n".join(f"  {line}" for line in received)
    return (
        "the fake received requests it does not implement (a route or method the bot calls "
        f"must be implemented by the fake, as the platform documents it):\n{lines}"
    )
