"""Who may use the dashboard: the token, signed session cookies, CSRF tokens, a login throttle.

There are no accounts: whoever knows DASHBOARD_TOKEN is the admin. Logging in trades the token
for a session cookie, so the token itself is typed once and never stored in the browser.

Sessions are stateless, so any number of dashboard processes sharing one token accept each
other's cookies. The cookie is a session id signed and timestamped by ``itsdangerous`` (the
signing Starlette's and Flask's sessions use: HMAC-SHA256 under a key derived from the token and
a salt), valid ``SESSION_TTL_S`` from login; changing DASHBOARD_TOKEN therefore ends every
session. The CSRF token of a session is itsdangerous's signature of its id under another salt,
so it needs no storage either and differs per session. Logout clears the cookie and also
revokes its id in this process (a copied cookie would otherwise stay valid until it expires).

Not Starlette's ``SessionMiddleware``: it signs the same way, but it sets the cookie again on
every response (a session would never expire while in use), fixes the cookie's Secure flag
when the app is built (not by the request's scheme), and has no revocation or bearer token for
/metrics; what is left here is only which id a cookie names and when it expires.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import deque
from dataclasses import dataclass

from itsdangerous import BadData, Signer, URLSafeTimedSerializer

COOKIE_NAME = "mb_session"
SESSION_TTL_S = 8 * 3600
_SESSION_SALT = "memorybot dashboard session"
_CSRF_SALT = "memorybot dashboard csrf"
# The cookies: HMAC-SHA256 (itsdangerous defaults to SHA-1), as the CSRF signer below.
_SIGNING = {"digest_method": hashlib.sha256, "key_derivation": "hmac"}
MAX_COOKIE = 200  # a cookie longer than ours is not ours: refused before any work


@dataclass(frozen=True, slots=True)
class Session:
    sid: str
    expires: int  # unix seconds
    csrf: str


class SessionSigner:
    """Issues and checks session cookies and bearer tokens for one DASHBOARD_TOKEN."""

    def __init__(self, token: str, *, ttl_s: int = SESSION_TTL_S) -> None:
        if not token.strip():
            raise ValueError("the dashboard token is empty")
        self._token = token.encode()
        self._cookies = URLSafeTimedSerializer(token, salt=_SESSION_SALT, signer_kwargs=_SIGNING)
        self._csrf = Signer(
            token, salt=_CSRF_SALT, digest_method=hashlib.sha256, key_derivation="hmac"
        )
        self.ttl_s = ttl_s
        self._revoked: dict[str, int] = {}  # session id -> its expiry (then it can be dropped)

    # -- the token ---------------------------------------------------------------------
    def token_matches(self, candidate: str) -> bool:
        return secrets.compare_digest(candidate.encode(), self._token)

    def bearer_matches(self, authorization: str | None) -> bool:
        """``Authorization: Bearer <token>``, for scrapers of /metrics."""
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(value.strip())

    # -- sessions ----------------------------------------------------------------------
    def csrf_for(self, sid: str) -> str:
        return self._csrf.get_signature(sid).decode("ascii")

    def issue(self) -> tuple[str, Session]:
        """A new session, from now: (cookie value, session)."""
        cookie = self._cookies.dumps(secrets.token_urlsafe(18))
        session = self._read(cookie)
        assert session is not None
        return cookie, session

    def verify(self, cookie: str | None, *, now: float | None = None) -> Session | None:
        """The session a cookie stands for, or None if it is forged, expired or revoked."""
        session = self._read(cookie)
        if session is None or session.sid in self._revoked:
            return None
        return session if session.expires > (now if now is not None else time.time()) else None

    def _read(self, cookie: str | None) -> Session | None:
        """The session a cookie names if it is ours (signed under this token), expired or not."""
        if not cookie or len(cookie) > MAX_COOKIE:
            return None
        try:
            sid, signed_at = self._cookies.loads(cookie, return_timestamp=True)
        except BadData:  # a bad signature, timestamp or payload
            return None
        if not isinstance(sid, str):
            return None
        return Session(sid, int(signed_at.timestamp()) + self.ttl_s, self.csrf_for(sid))

    def csrf_matches(self, session: Session, sent: str | None) -> bool:
        return bool(sent) and secrets.compare_digest(str(sent).encode(), session.csrf.encode())

    def revoke(self, session: Session, *, now: float | None = None) -> None:
        moment = now if now is not None else time.time()
        self._revoked = {sid: exp for sid, exp in self._revoked.items() if exp > moment}
        self._revoked[session.sid] = session.expires


class LoginThrottle:
    """Slows down guessing: after a few failed logins from one address, each further answer
    waits longer (up to ``max_delay_s``). Per process and in memory: a speed bump for a
    dashboard bound to localhost or behind a proxy, not an account lockout (which would let
    anyone lock the admin out)."""

    def __init__(
        self,
        *,
        free_failures: int = 3,
        window_s: float = 600.0,
        max_delay_s: float = 5.0,
        max_clients: int = 10_000,
    ) -> None:
        self.free_failures = free_failures
        self.window_s = window_s
        self.max_delay_s = max_delay_s
        self.max_clients = max_clients
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._failures.get(client, deque())
        while times and times[0] < now - self.window_s:
            times.popleft()
        return times

    def delay_for(self, client: str, *, now: float | None = None) -> float:
        """How long to wait before answering this client's next failed login."""
        moment = now if now is not None else time.monotonic()
        excess = len(self._recent(client, moment)) - self.free_failures
        if excess < 0:
            return 0.0
        return float(min(self.max_delay_s, 0.25 * 2**excess))

    def failed(self, client: str, *, now: float | None = None) -> None:
        moment = now if now is not None else time.monotonic()
        if client not in self._failures and len(self._failures) >= self.max_clients:
            self._failures.clear()  # bounded memory beats perfect bookkeeping here
        times = self._recent(client, moment)
        times.append(moment)
        self._failures[client] = times

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a local path only (no open redirect to another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    if target.startswith(("/login", "/logout")):
        return "/"
    return target
