"""Reading the password out of a Redis URL, written the way people write them: one rule for
masking the URL in output (memory_core.store.server.mask_url) and for the secrets a reply must never
show (Settings.secret_values).

The userinfo is everything between "//" and the LAST "@" before the host: a password may
hold "@", "/", "?", "#", ":" and spaces unencoded, so the first delimiter after "//" proves
nothing (urllib stops at the first "/", "?" or "#" and reads a piece of such a password as
the host or port). An "@" after "?password=" belongs to that query password.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

# "password=" in a URL's query; its value runs to the next "&" (which ends a query value for
# every URL parser, redis-py's included) or to the end, "#" and spaces included.
QUERY_PASSWORD = re.compile(r"([?&]password=)([^&]*)", re.IGNORECASE)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?://)?")


def split_userinfo(url: str) -> tuple[str, str | None, str]:
    """``(scheme, userinfo, rest)``: ``redis://u:p@h/0`` -> ``("redis://", "u:p", "h/0")``.
    No userinfo: None."""
    scheme = _SCHEME.match(url)
    head = scheme.group(0) if scheme else ""
    body = url[len(head) :]
    query_password = QUERY_PASSWORD.search(body)
    at = body.rfind("@", 0, query_password.start() if query_password else len(body))
    if at < 0:
        return head, None, body
    return head, body[:at], body[at + 1 :]


def url_passwords(url: str) -> list[str]:
    """The passwords a Redis URL carries (after the first ":" of the userinfo, and in
    ``?password=``), each as written and percent-decoded."""
    _, userinfo, rest = split_userinfo(url)
    written = [userinfo.partition(":")[2]] if userinfo else []
    written += [m.group(2) for m in QUERY_PASSWORD.finditer(rest)]
    return list(
        dict.fromkeys(form for value in written if value for form in (value, unquote(value)))
    )


def mask_url(url: str) -> str:
    """Hide the password in a Redis URL: redis://user:secret@host -> redis://user:***@host,
    whatever the password holds ("@", "#", "/", "?", ":", "%", spaces), a userinfo without
    a colon (redis://secret@host: people put passwords there) and ?password=secret."""
    head, userinfo, rest = split_userinfo(url)
    rest = QUERY_PASSWORD.sub(r"\1***", rest)
    if userinfo is None:
        return head + rest
    user, colon, _ = userinfo.partition(":")
    return f"{head}{user}{colon}***@{rest}" if colon else f"{head}***@{rest}"
