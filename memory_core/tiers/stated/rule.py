"""One rule of a language: a sentence's whole shape, the kind of fact it states and how the
fact reads; and how a language's rules are tried on a sentence."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Render = Callable[[re.Match[str], str], str | None]  # (the match, the speaker) -> the fact


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]  # matched against the whole sentence, openers and closers off
    kind: str  # "profile", "preference": about the speaker; "decision": the channel's
    render: Render  # None: a slot of the match says less than the rule needs

    @property
    def about_speaker(self) -> bool:
        return self.kind != "decision"


def first_fact(
    rules: Sequence[Rule], core: str, sentence: str, speaker: str, refuse: re.Pattern[str]
) -> tuple[str, str, bool] | None:
    """(kind, fact text, about the speaker) of the first rule ``core`` is exactly the shape
    of, unless ``refuse`` finds anything in the whole ``sentence`` (looked at last, as few
    sentences match a rule)."""
    for rule in rules:
        found = rule.pattern.fullmatch(core)
        if found is None or (rule.about_speaker and not speaker):
            continue
        text = rule.render(found, speaker)
        if text is not None:
            return None if refuse.search(sentence) else (rule.kind, text, rule.about_speaker)
    return None
