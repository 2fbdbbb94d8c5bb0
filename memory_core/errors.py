"""memorybot's exception tree, in one place.

Library errors (redis, openai, pydantic, json) are translated at the edge with
``raise SomeMemorybotError(...) from exc`` so that callers catch one family and every
message says what to fix: the environment variable, the setting, the line of the file.

    MemorybotError
    ├── ConfigError            invalid settings (names the field and its env var)
    ├── StoreError             Redis / embedded store problems
    │   └── StoreUnavailable   cannot reach REDIS_URL (CLI exits with status 2)
    ├── LLMError               the language model failed
    │   ├── LLMUnavailable     network error, timeout, 5xx, rate limit after retries
    │   ├── LLMBadOutput       empty text or malformed JSON (the caller falls back)
    │   └── LLMOffline         no key and no base URL: there is no model to call
    ├── ContextUnavailable     a front door cannot read a thread's first message now
    ├── InputError             bad user input (the message says what to fix)
    │   ├── EmptyMessage
    │   ├── InvalidScope
    │   ├── ReplayLineError    carries the line number
    │   ├── UnknownTimezone    a timezone name the tz database does not have
    │   └── UsageError         an unknown or malformed /memory command
    └── PermissionDenied       an admin-only operation by a non-admin

Where library errors become ours, once each; code above these boundaries catches only this
tree, never ``redis.RedisError`` or ``openai.APIError`` beside it:

- Redis: ``memory_core/store/redis_errors.py``. Only ``memory_core/store`` talks to Redis
  (nothing else imports redis); its classes are wrapped by ``translates_redis_errors``, and
  within the package a function or step of its own runs inside ``redis_errors_translated()``.
  Unreachable is StoreUnavailable, a refused command StoreError.
- Opening the store (a Redis URL, the embedded Valkey server): ``memory_core/store/server.py``
  and ``memory_core/store/embedded.py``.
- The model: ``memory_core/llm/client.py`` (LLMUnavailable, LLMBadOutput, LLMOffline).
- Settings: ``config/settings.py`` raises its own ``SettingsError`` (config sits below the
  core and does not import it); front doors report it like a ConfigError (exit status 2).
- Platform libraries (discord.py, Slack Bolt): their connection code in ``bots/`` raises
  ConfigError for a refused token.
"""

from __future__ import annotations


class MemorybotError(Exception):
    """Base class of every error memorybot raises on purpose."""


class ConfigError(MemorybotError):
    """Settings are invalid; the message names the field and how to set it."""


class StoreError(MemorybotError):
    """The store (Redis or the embedded store) failed."""


class StoreUnavailable(StoreError):
    """The configured Redis cannot be reached."""


class LLMError(MemorybotError):
    """The language model call failed."""


class LLMUnavailable(LLMError):
    """Network error, timeout, server error or rate limit that retries did not cure."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMBadOutput(LLMError):
    """The model answered, but with empty text or malformed JSON."""


class LLMOffline(LLMError):
    """No model is configured (neither OPENAI_API_KEY nor OPENAI_BASE_URL)."""


class ContextUnavailable(MemorybotError):
    """A front door could not read, from its platform, the first message of a thread whose
    start memory lacks (unreachable, rate limited, refused); the prompt goes without it and
    it is asked for again at the next reply there."""


class AttachmentUnavailable(MemorybotError):
    """A front door could not fetch a file's bytes for its caption (gone, refused, too
    big, not an image); the message stays as it was stored."""


class InputError(MemorybotError):
    """Bad input from a user or a file; the message says what to fix."""


class EmptyMessage(InputError):
    """A message with no text: there is nothing to remember."""


class InvalidScope(InputError):
    """A scope string that does not name a conversation place."""


class ReplayLineError(InputError):
    """A malformed line in a replay file."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


class UnknownTimezone(InputError):
    """A timezone name (a setting, a command, a scope's stored one) that does not exist."""


class UsageError(InputError):
    """An unknown or malformed ``/memory`` command; the message carries the usage help."""


class PermissionDenied(MemorybotError):
    """An admin-only operation was asked for by someone who is not an admin."""
