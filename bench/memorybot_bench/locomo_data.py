"""LoCoMo's data as the evaluation reads it: conversations of timed turns and the questions
of categories 1-4, with LoCoMo's loose session times and evidence ids made regular.

LoCoMo is CC BY-NC 4.0: :data:`ATTRIBUTION` goes wherever its results are shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.calendar import zone
from memory_core.errors import InputError

ATTRIBUTION = (
    "LoCoMo: Maharana et al., 'Evaluating Very Long-Term Conversational Memory of LLM Agents' "
    "(ACL 2024), github.com/snap-research/LoCoMo. License CC BY-NC 4.0; used for evaluation only."
)
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TURN_GAP = timedelta(seconds=30)  # a session's turns, spaced like a live chat


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # as in the data: what evidence recall looks for
    stored: str  # what memorybot is given: the text plus the photo caption, if any
    ts: datetime


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # normalised dia ids, each a turn of the conversation


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int = 0  # evidence ids that name no turn, even after normalising


_SESSION_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*$",
    re.I,
)
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
# Full names and the usual abbreviations ("Sep", "Sept").
_MONTHS = {
    name: number
    for number, full in enumerate(_MONTH_NAMES, start=1)
    for name in (full, full[:3], full[:4])
}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.I)


def parse_session_time(text: str, tz: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware datetime in ``tz`` (12 am is midnight)."""
    match = _SESSION_TIME.match(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise InputError(f"session time {text!r} is not like '1:56 pm on 8 May, 2023'")
    hour, minute = int(match.group(1)), int(match.group(2))
    if not 1 <= hour <= 12 or minute > 59:
        raise InputError(f"session time {text!r} has no such hour")
    hour = hour % 12 + (12 if match.group(3).lower() == "p" else 0)
    try:
        return datetime(int(match.group(6)), month, int(match.group(4)), hour, minute).replace(
            tzinfo=zone(tz)
        )
    except ValueError as exc:
        raise InputError(f"session time {text!r}: {exc}") from exc


def normalize_evidence(raw: str) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``: ``"D8:6; D9:17"`` is two ids, ``"D:11:26"``
    is ``D11:26``, ``"D30:05"`` is ``D30:5``; text with no id in it (``"D"``) gives none."""
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE.findall(raw)]


def _turn_id(raw: str) -> str:
    ids = normalize_evidence(raw)
    return ids[0] if len(ids) == 1 else raw.strip()


def parse_locomo(
    data: Any,
    *,
    tz: str = "UTC",
    conversations: int | None = None,
    questions_per_conversation: int | None = None,
) -> list[Conversation]:
    """LoCoMo's JSON (a list of samples) as conversations with timed turns and the questions
    of categories 1-4 (5, adversarial, has no answer to find)."""
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise InputError("a LoCoMo file is a JSON list of samples with 'conversation' and 'qa'")
    result: list[Conversation] = []
    for index, sample in enumerate(data[:conversations]):
        name = str(sample.get("sample_id") or f"sample-{index + 1}")
        conv = sample.get("conversation")
        qa = sample.get("qa", [])
        if not isinstance(conv, dict) or not isinstance(qa, list):
            raise InputError(f"{name}: 'conversation' must be an object and 'qa' a list")
        turns = _turns(name, conv, tz)
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        dropped = 0
        for item in qa:
            if not isinstance(item, dict) or item.get("category") not in CATEGORIES:
                continue
            if item.get("answer") is None or not str(item.get("question", "")).strip():
                continue
            ids: list[str] = []
            for raw in item.get("evidence") or []:
                for dia_id in normalize_evidence(str(raw)) or [str(raw)]:
                    if dia_id not in known:
                        dropped += 1
                    elif dia_id not in ids:
                        ids.append(dia_id)
            questions.append(
                Question(
                    text=str(item["question"]).strip(),
                    answer=str(item["answer"]),
                    category=int(item["category"]),
                    evidence=tuple(ids),
                )
            )
        result.append(
            Conversation(name, tuple(turns), tuple(questions[:questions_per_conversation]), dropped)
        )
    return result


def _turns(name: str, conv: dict[str, Any], tz: str) -> list[Turn]:
    sessions = sorted(
        (int(key.split("_")[1]), value)
        for key, value in conv.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    turns: list[Turn] = []
    for number, session in sessions:
        raw_time = conv.get(f"session_{number}_date_time")
        if not isinstance(raw_time, str):
            raise InputError(f"{name}: session_{number} has no session_{number}_date_time")
        start = parse_session_time(raw_time, tz)
        for i, turn in enumerate(session):
            text = " ".join(str(turn.get("text") or "").split())
            caption = " ".join(str(turn.get("blip_caption") or "").split())
            stored = f"{text} [shares a photo: {caption}]".strip() if caption else text
            if not stored or not turn.get("dia_id"):
                continue  # nothing was said: nothing to remember or to find
            ts = start + i * TURN_GAP
            if turns and ts <= turns[-1].ts:
                ts = turns[-1].ts + timedelta(seconds=1)  # time never runs backwards
            speaker = str(turn.get("speaker") or "someone")
            turns.append(Turn(_turn_id(str(turn["dia_id"])), speaker, text, stored, ts))
    if not turns:
        raise InputError(f"{name}: the conversation has no turns (session_1, session_2, ...)")
    return turns


def load_locomo(
    path: Path,
    *,
    tz: str = "UTC",
    conversations: int | None = None,
    questions_per_conversation: int | None = None,
) -> list[Conversation]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from exc
    return parse_locomo(
        data,
        tz=tz,
        conversations=conversations,
        questions_per_conversation=questions_per_conversation,
    )
