"""Which language a text is in, as far as the bot needs to know: Japanese or English."""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory_core.text.cjk import CJK_CHARACTER

_LATIN = re.compile(r"[A-Za-z]")


def detect(text: str) -> str:
    """'ja' when kana/kanji make up a fair share of the letters, else 'en'."""
    ja = len(CJK_CHARACTER.findall(text))
    latin = len(_LATIN.findall(text))
    # Japanese packs more meaning per character, so a smaller share already means Japanese.
    return "ja" if ja and ja * 3 >= latin else "en"


def detect_many(texts: Iterable[str]) -> str:
    return detect(" ".join(texts))


def resolve(setting: str, texts: Iterable[str]) -> str:
    """A scope's language setting ('auto', 'en', 'ja' or '') applied to some text."""
    if setting in ("en", "ja"):
        return setting
    return detect_many(texts)


def reply_language(scope_setting: str | None, default: str, texts: Iterable[str]) -> str:
    """The language the bot answers in, everywhere it answers (a reply, its apology, the
    prompt): the scope's setting, else the bot's (``memory.language``); 'auto' decided by
    the text at hand."""
    return resolve(scope_setting or default, texts)
