"""Prompt templates per language, loaded from ``config/prompts/<lang>.toml``.

Templates use ``$name`` placeholders (:class:`string.Template`) so the JSON shapes shown to
the model keep their braces. Values substituted in are data; the fencing of user text
(escaping closing tags) is done by the caller, which knows which text is untrusted.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

LANGUAGES = ("en", "ja")


@dataclass(frozen=True, slots=True)
class PromptSet:
    language: str
    persona: str
    memory_rules: str
    size_hint: str
    headings: dict[str, str]
    summary_system: str
    compact: str
    refresh: str
    week_block: str
    week_fields: str
    offline_reply: str
    offline_found: str  # above the messages that look relevant to the question
    offline_unrelated: str  # nothing remembered looks relevant
    offline_nothing: str  # nothing remembered here but the message itself
    apology: str
    store_down: str
    caption: str  # the instruction sent with an image to the vision model
    ui: dict[str, str]

    def render(self, template: str, **values: object) -> str:
        """Fill a template; a missing placeholder is a bug, so it raises KeyError."""
        return Template(template).substitute({k: str(v) for k, v in values.items()})

    def say(self, key: str, **values: object) -> str:
        """A user-facing sentence from the [ui] table."""
        return self.render(self.ui[key], **values)

    def size(self, tokens: int) -> str:
        """Say a size the model understands: words in English, characters in Japanese."""
        words = max(10, round(tokens * 0.75 / 10) * 10)
        return self.render(self.size_hint, words=words, chars=tokens)


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"prompt file: [{name}] must be a table")
    return value


@cache
def load_prompts(language: str) -> PromptSet:
    """The prompt set for ``language`` ("en" or "ja"); anything else falls back to English."""
    lang = language if language in LANGUAGES else "en"
    raw = resources.files("config").joinpath("prompts", f"{lang}.toml").read_text("utf-8")
    data = tomllib.loads(raw)
    summary = _section(data, "summary")
    offline = _section(data, "offline")
    errors = _section(data, "errors")
    return PromptSet(
        language=lang,
        persona=data["persona"],
        memory_rules=data["memory_rules"],
        size_hint=data["size_hint"],
        headings={str(k): str(v) for k, v in _section(data, "headings").items()},
        summary_system=summary["system"],
        compact=summary["compact"],
        refresh=summary["refresh"],
        week_block=summary["week_block"],
        week_fields=summary["week_fields"],
        offline_reply=offline["reply"],
        offline_found=offline["found"],
        offline_unrelated=offline["unrelated"],
        offline_nothing=offline["nothing"],
        apology=errors["apology"],
        store_down=errors["store_down"],
        caption=_section(data, "vision")["caption"],
        ui={str(k): str(v) for k, v in _section(data, "ui").items()},
    )
