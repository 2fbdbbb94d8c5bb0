"""Deterministic extractive summariser: the stand-in when no LLM is usable.

When no model is configured, or the model fails or answers with garbage, memory still has to
be compacted, so this module picks the sentences that matter most and lays them out in
chronological order, within a token budget. It never invents text: every kept sentence is a
(cleaned) sentence of the input, prefixed with its date and speaker.

The design goals, in order:

1. **Hard budget.** ``count_tokens(result) <= max_tokens`` for every input. Estimates are used
   to choose sentences quickly, but whatever is returned has been measured with the caller's
   own counter, and a last-resort cut (with an ellipsis) or ``""`` covers the rest.
2. **Keep what a human would want remembered**: names, numbers, dates and times, decisions,
   commitments and preferences, and open questions; drop filler ("ok", "lol", うん, 了解) first.
3. **Determinism.** The same input always yields the same output: every ranking key is total
   (score, then recency, then position) and nothing depends on hashing or dict order.
4. **Purity and speed.** No I/O and no global mutable state; regular expressions are compiled
   once at import and each sentence is scanned a handful of times.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["SummaryItem", "extractive_summary"]


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """One piece of conversation to summarise.

    ``speaker`` is a display name such as ``"Alice"``; ``None`` marks an earlier summary being
    carried forward, which is placed first and keeps its own text (a day summary given a
    ``when`` is labelled with that date, like a message). ``when`` should be
    timezone-aware; its calendar date (in its own timezone) becomes the ``[YYYY-MM-DD]`` prefix.
    A naive ``when`` is ordered as if it were UTC rather than rejected.
    """

    text: str
    speaker: str | None = None
    when: datetime | None = None


# --------------------------------------------------------------------------------------------
# Scoring weights. Integers, so that ties are exact and recency really decides them.
# --------------------------------------------------------------------------------------------

_NAME_POINTS = 2  # per distinct name, up to _MAX_NAMES
_MAX_NAMES = 3
_NUMBER_POINTS = 2  # per distinct number, up to _MAX_NUMBERS
_MAX_NUMBERS = 2
_AMOUNT_POINTS = 1  # on top of the number: money and percentages are usually the point
_DATE_POINTS = 3  # any date, weekday, relative day or clock time
_DECISION_POINTS = 4  # decisions, commitments, plans, deadlines, preferences
_EXTRA_DECISION_POINTS = 1  # a second, different decision cue in the same sentence
_SETTLED_POINTS = 1  # "decided", "agreed", 決まった: settled outcomes beat mere intentions
_QUESTION_POINTS = 1  # open questions are worth remembering, a little
_FILLER_POINTS = -6  # acknowledgements and greetings: the first to go
_SUMMARY_POINTS = 4  # earlier memory was already distilled once; do not drop it lightly

# Every layout is counted before it is trusted. A few renders normally suffice (one per round,
# plus a trim when the additive estimate overshoots); the cap keeps a pathological counter
# from turning the budget check into quadratic work.
_MAX_RENDERS = 24
_TRIM_ATTEMPTS = 3
# A sentence whose estimate exceeds the space left by at most this (plus an eighth of its
# cost) is measured for real, at most _MAX_PROBES times per call.
_NEAR_MISS_TOKENS = 2
_MAX_PROBES = 8
# Matching every speaker name against every sentence costs (names x sentences); channels with
# more distinct speakers than this are rare, and the capitalisation rule still finds names.
_MAX_SPEAKER_NAMES = 64

_ELLIPSIS = "…"

# --------------------------------------------------------------------------------------------
# Cleaning: emoji and chat-platform emoji syntax carry no memory, so they are removed before
# splitting and scoring (an emoji-only message disappears entirely).
# --------------------------------------------------------------------------------------------


def _word_set(text: str) -> frozenset[str]:
    """A keyword set written as whitespace-separated words, which keeps long lists readable."""
    return frozenset(text.split())


# Chat-platform emoji syntax and free-standing ASCII emoticons. Only lines containing one of
# ":;=<" can match, which _clean checks first because most lines contain none.
_EMOJI_SYNTAX_RE = re.compile(
    # Every alternative starts with a literal character, with any "not preceded by" check
    # placed after it: that lets the regex engine jump between candidate characters instead
    # of trying each position (a several-fold speed-up on long lines).
    r"<a?:\w{1,64}:\d{5,25}>"  # Discord custom emoji <:name:id>
    r"|<(?<!\S<)3(?!\S)"  # <3
    r"|:(?<![\w:]:)[a-z0-9_+\-]{1,50}:(?::skin-tone-[2-6]:)?(?![\w:])"  # Slack :shortcode:
    r"|:(?<!\S:)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"  # free-standing :) :-( :D
    r"|;(?<!\S;)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"
    r"|=(?<!\S=)[\-^']?[()\[\]dDpP/\\|*3oO]{1,3}(?!\S)"
)
_KEYCAP_RE = re.compile("[0-9#*]\ufe0f?\u20e3")  # 1️⃣: the digit is decoration, not a number
# Single emoji code points (and the invisible characters that glue emoji sequences together),
# plus C0/C1 controls that str.splitlines() does not already treat as line breaks. A plain
# character class lets the regex engine scan fast, which matters: every line passes here.
_EMOJI_CHAR_RE = re.compile(
    "[\U0001f000-\U0001faff"  # pictographs, emoticons, flags, skin tones, symbols
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats (☀ ✅ ❤ ♪)
    "\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55\u231a\u231b\u23e9-\u23f3\u23f8-\u23fa"
    "\u3030\u303d\u3297\u3299\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe\u2934\u2935"
    "\ufe00-\ufe0f\u200d\u20e3"  # variation selectors, zero-width joiner, keycap mark
    "\U000e0020-\U000e007f"  # tag characters (subdivision flags)
    "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]"
)

# --------------------------------------------------------------------------------------------
# Sentence splitting.
# --------------------------------------------------------------------------------------------

# A run of terminators plus any closing quotes or brackets that belong to the sentence.
# One character class first, so that the regex engine can skip quickly to candidates.
_TERMINATOR_RE = re.compile(r"([.!?。！？｡]+)[\"'”’)\]」』）】]*")
# Sentence-final characters after which Japanese text needs no separating space.
_CJK_CLOSERS = frozenset("。！？｡」』）】")
# Japanese pieces when the line has no Latin period: up to and including a terminator run.
_JA_PIECES_RE = re.compile(
    r"[^。！？｡!?]+(?:[。！？｡!?]+[\"'”’)\]」』）】]*)?|[。！？｡!?]+[\"'”’)\]」』）】]*"
)
# A period after these is (almost) never the end of a sentence.
_ABBREVIATIONS = _word_set(
    """
    e.g i.e etc vs cf mr mrs ms dr prof sr jr st mt no fig approx dept est inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec a.m p.m u.s u.k
    """
)

# Recognises the prefix this module writes, so a carried-forward summary keeps its
# attribution per sentence even when the first sentence of its line is dropped.
_SUMMARY_PREFIX_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\] (?:([^\s:\[][^:\n]{0,79}?): )?")

# --------------------------------------------------------------------------------------------
# English cues.
# --------------------------------------------------------------------------------------------

_EN_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['’][A-Za-z]+)*")
# The words of _EN_WORD_RE that start with a capital (the look-behind keeps "McDonald" whole).
_EN_CAPITALISED_RE = re.compile(r"[A-Z](?<![A-Za-z0-9'’][A-Z])[A-Za-z0-9]*(?:['’][A-Za-z]+)*")
_NUMBER_RE = re.compile(r"\d+(?:[.,:/]\d+)*")
_MENTION_RE = re.compile(r"<[@#][!&]?[\w|.\-]{1,80}>|@(?<![\w@]@)[\w.\-]{1,64}")
# Amounts and times are matched on lower-cased text (case-insensitive matching is slower),
# and start with one character class so that the engine skips quickly to candidates.
_EN_AMOUNT_RE = re.compile(
    r"[$€£¥₹\d](?:(?<=[$€£¥₹])\s?\d"
    r"|(?<=\d)\s?(?:%|(?:k|m|bn|usd|eur|gbp|jpy|dollars?|euros?|pounds?|yen|bucks|percent)\b))"
)
_EN_TIME_RE = re.compile(
    r"\d(?<!\w\d)"  # a number that does not continue a word: 3pm, not mp3
    r"(?:\d?(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)"  # 3pm, 10:30 am
    r"|\d?:\d{2}\b"  # 10:30
    r"|\d{3}-\d{1,2}-\d{1,2}\b"  # 2025-08-13
    r"|\d?/\d{1,2}(?:/\d{2,4})?\b"  # 8/13, 8/13/2025
    r"|\d?(?:st|nd|rd|th)\b)"  # 13th
)

_EN_FILLER = _word_set(
    """
    ok okay okey k kk okok lol lmao lmfao rofl haha hahaha hehe heh xd thanks thank thx ty tysm
    np yw yes yeah yea yep yup ya no nope nah sure cool nice great awesome perfect hi hello hey
    heya hiya yo sup morning gm gn night goodnight bye cya brb wow omg hmm hm ah oh ooh uh um
    umm lgtm same true right indeed welcome cheers congrats gg wp ikr idk nvm well alright fine
    noted gotcha see yay woo hooray please pls plz sorry oops whoa ty yass
    """
)
# Words that do not rescue a sentence from being filler ("thank you so much", "sounds good").
_EN_SOFT = _word_set(
    """
    you so much very a lot all guys everyone folks for the that this is sounds good really too
    me man dude again just and it thats that's i u ur yall y'all lots many super totally
    exactly definitely absolutely makes sense got it's kinda
    """
)
_EN_DATE_WORDS = _word_set(
    """
    today tonight tomorrow tmrw tmr tomorow yesterday monday tuesday wednesday thursday friday
    saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays tues thurs
    weds weekend weekends weekday weekdays week weeks month months year years quarter
    morning afternoon evening noon midnight eod eow eom asap o'clock january february april
    june july august september october november december jan feb apr jun jul aug sep sept oct
    nov dec
    """
)
# Words that are dates only when capitalised ("in May", "March 3"), not "may I" or "we march".
_EN_AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar"})
_EN_DECISION_WORDS = _word_set(
    """
    decided decide decides deciding decision decisions agreed agree agrees agreement will won't
    wont shall let's lets plan plans planned planning deadline deadlines due must should need
    needs gotta gonna promise promised promises commit committed commitment confirm confirmed
    schedule scheduled reschedule rescheduled prefer prefers preferred preference favorite
    favourite favorites favourites love loves hate hates dislike dislikes allergic allergy
    vegetarian vegan always never remember remind reminder todo assigned assign responsible
    owner budget approve approved cancel cancelled canceled postpone postponed final finalised
    finalized settled chose chosen choose picked
    """
)
# Cues of a settled outcome rather than an intention or a taste (both languages, as matched).
_SETTLED_CUES = _word_set(
    """
    decided decision decisions agreed agreement deadline deadlines confirmed approved settled
    finalised finalized promised committed scheduled rescheduled cancelled canceled postponed
    決定 決めた 決めました 決まった 決まりました 決まり 確定 約束 締め切り 締切 〆切 期限 合意
    することに ことにした ことにしました ことになった ことになりました 中止 延期
    """
)
# Multi-word cues, matched in the sentence's lower-cased words joined by single spaces.
_EN_DECISION_PHRASE_RE = re.compile(
    r" (?:"
    + "|".join(
        re.escape(phrase)
        for phrase in (
            "have to",
            "has to",
            "going to",
            "don't like",
            "do not like",
            "doesn't like",
            "not a fan",
            "can't stand",
            "action item",
            "make sure",
            "next step",
            "i like",
            "we like",
            "really like",
        )
    )
    + r")(?= )"
)
_LEADING_MONTH_DAY_RE = re.compile(r"\W*(?:May|March|Mar)\.? \d")
# Capitalised words that are not names even in mid-sentence.
_EN_NOT_NAMES = (
    frozenset({"i", "i'm", "i'll", "i've", "i'd"})
    | _EN_FILLER
    | _EN_SOFT
    | _EN_DATE_WORDS
    | _EN_AMBIGUOUS_MONTHS
)

# --------------------------------------------------------------------------------------------
# Japanese cues (matched on NFKC-normalised text, so full-width digits are plain digits).
# --------------------------------------------------------------------------------------------

_KANJI_NUMERAL = "〇一二三四五六七八九十百千万億"
_JA_KATAKANA_RE = re.compile(r"[ァ-ヺ][ァ-ヺー・]*[ァ-ヺー]")
_JA_KATAKANA_NOT_NAMES = _word_set(
    "オッケー オーケー オケ サンキュー ドンマイ ナイス マジ ヤバ ヤバイ ウケ ウケる ワロタ ホント "
    "ダメ イイネ グッド"
)
_JA_HONORIFIC_RE = re.compile(
    r"[一-龯々A-Za-z]{1,8}(?:さん|くん|君|ちゃん|様|さま|氏|先生|先輩|部長|課長|社長)"
)
_JA_QUOTED_RE = re.compile(r"「[^」]{1,40}」|『[^』]{1,40}』")
_KANJI_NUMERAL_RE = re.compile(f"[{_KANJI_NUMERAL}]")  # a cheap gate for the one below
_JA_KANJI_NUMBER_RE = re.compile(
    f"[{_KANJI_NUMERAL}]+(?:円|人|個|回|時|分|日|月|年|件|本|枚|ドル|週間|時間|か月|ヶ月)"
)
_JA_AMOUNT_RE = re.compile(
    rf"[$¥￥]\s?\d|[\d{_KANJI_NUMERAL}]\s?(?:円|ドル|ユーロ|%|パーセント|万)"
)
_JA_NUMERIC_DATE_RE = re.compile(r"\d+(?:月\d*日?|日|時(?:\d+分|半)?|:\d{2})")
_JA_DATE_RE = re.compile(
    r"今日|明日|あした|あす|明後日|あさって|昨日|きのう|一昨日|今週|来週|再来週|先週|今月|来月"
    r"|先月|今年|来年|去年|昨年|週末|平日|午前|午後|今朝|今夜|今晩|夕方|正午|深夜|年末|年始"
    r"|月末|月初|朝|夜|昼|月曜|火曜|水曜|木曜|金曜|土曜|日曜"
)
_JA_DECISION_RE = re.compile(
    r"決定|決めた|決めました|決まった|決まりました|決まり|決める|決めよう|予定|約束|締め切り|締切"
    r"|〆切|期限|することに|ことにした|ことにしました|ことになった|ことになりました|にしよう"
    r"|しよう|しましょう|やろう|やりましょう|つもり|必ず|絶対|しなければ|しないと|なきゃ"
    r"|必要|お願い|担当|任せ|好き|嫌い|苦手|好み|アレルギー|確定|合意|賛成|反対|中止|延期"
    r"|変更|覚えて|忘れないで|宿題|タスク|予算"
    # A sentence ending in a plain volitional/future form is the speaker committing to it.
    r"|します[。！!]?$|いたします[。！!]?$|やります[。！!]?$|おきます[。！!]?$"
)
# A sentence made only of these (and punctuation) is filler. Longer phrases come first so the
# alternation consumes "ありがとうございます" whole rather than stalling after "ありがとう".
_JA_FILLER_UNITS = sorted(
    _word_set(
        """
    うんうん うん ううん はい はーい ええ そうそう そうだね そうですね そうなんだ そうなんですね
    そっか そうか そう なるほど 了解です 了解しました 了解 りょうかい りょ 承知しました 承知
    おk おけ おっけー オッケー オーケー ok ありがとうございます ありがとうございました ありがとう
    あざす どうも すみません ごめんなさい ごめん おはようございます おはよう こんにちは こんばんは
    おやすみなさい おやすみ お疲れ様です お疲れさまです お疲れ様でした お疲れ おつかれさま おつかれ
    おつ 笑 草 へー へぇ ほー ふーん いいね いいですね よろしくお願いします よろしく よろです
    わかった わかりました 分かった 分かりました たしかに 確かに まじか マジか すごい すごいね
    やった わーい でした です ます っす ね よ な ー 〜 ~ w
    """
    ),
    key=lambda unit: (-len(unit), unit),
)
_MAX_JA_FILLER_CHARS = 40  # longer sentences always say something; skip the regex for them
_JA_FILLER_RE = re.compile(
    "(?:" + "|".join(re.escape(unit) for unit in _JA_FILLER_UNITS) + r"|[\W_])+"
)
# Japanese questions often end in か or かな instead of a question mark.
_JA_QUESTION_ENDINGS = ("か", "かな", "か。", "かな。")
# Honorific matches that address everyone rather than naming someone.
_JA_NOT_NAMES = frozenset({"皆さん", "皆様", "皆さま", "お客様"})

# "hahaha", "ahaha", "hehe", "lolol", "lmao", "xD", and Japanese "www" (laughter, not the web).
_LAUGHTER_RE = re.compile(r"a?(?:ha){2,}h?|(?:he){2,}|(?:lo)+l|lmf?a+o+|xd+|w+")
_ELONGATION_RE = re.compile(r"(.)\1{2,}")

_DIGIT_RE = re.compile(r"\d")
_KANA_RE = re.compile(r"[ぁ-ゖァ-ヺ]")
_ALNUM_RE = re.compile(r"[^\W_]")
_DEDUP_TRAILING = " .!?。！？｡…"


# --------------------------------------------------------------------------------------------
# Internal data.
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Sentence:
    """A candidate sentence with everything the selection and rendering need.

    Sentences are stored in output order (summaries first, then chronological), so a
    sentence's index in that list is also its place in the output.
    """

    item_rank: int  # chronological rank of its item; higher is newer (the recency tie-break)
    index: int  # position within its item (the second tie-break)
    text: str
    prefix: str  # "[2025-08-13] Alice: ", or "" for a summary line without one
    group: str  # consecutive kept sentences with the same group share one prefix and line
    is_summary: bool


@dataclass(frozen=True, slots=True)
class _Speakers:
    """Speaker names mentioned in text count as names; matched two ways for speed."""

    ascii_tokens: frozenset[str]  # lower-cased words of Latin-script names ("alice", "smith")
    other_names: tuple[str, ...]  # case-folded non-Latin names, matched as substrings


def extractive_summary(
    items: Sequence[SummaryItem],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    language: str = "en",
) -> str:
    """Summarise ``items`` by keeping their most informative sentences, within ``max_tokens``.

    The result is plain text in chronological order: carried-forward summaries (items whose
    ``speaker`` is ``None``) first with their own text and lines (prefixed with their date if
    they have a ``when`` and the line has no prefix of its own), then the other items, each
    line prefixed like ``[2025-08-13] Alice: ``. Consecutive kept sentences of the same
    speaker on the same day share one line and prefix. ``language`` ("en" or "ja"; "auto"
    guesses from the presence of kana) chooses the sentence splitter and keyword lists.

    ``count_tokens(result) <= max_tokens`` always holds; when not even one sentence fits, the
    best sentence is cut with an ellipsis. Empty or whitespace-only input gives ``""``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    japanese = _is_japanese(language, items)
    speaker_names = _clean_speakers(items)
    sentences = _collect_sentences(items, japanese, speaker_names)
    if not sentences:
        return ""
    speakers = _speaker_names(speaker_names)
    scores = [_score(sentence, japanese, speakers) for sentence in sentences]
    # Best first; newer items win ties, then earlier sentences of the same item. The key is
    # unique per sentence, so the order is total and the output fully deterministic.
    ranking = sorted(
        range(len(sentences)),
        key=lambda i: (-scores[i], -sentences[i].item_rank, sentences[i].index),
    )
    return _select_and_render(sentences, ranking, scores, max_tokens, count_tokens, japanese)


# --------------------------------------------------------------------------------------------
# Preparing sentences.
# --------------------------------------------------------------------------------------------


def _is_japanese(language: str, items: Sequence[SummaryItem]) -> bool:
    """Map the language setting to the Japanese or English rules.

    Anything starting with "ja" ("ja", "ja-JP") is Japanese; "auto" looks for kana, which
    only Japanese uses; everything else gets the English rules rather than an error, because
    this code runs exactly when something else has already gone wrong.
    """
    code = language.strip().lower()
    if code.startswith("ja"):
        return True
    if code == "auto":
        return any(_KANA_RE.search(item.text) for item in items)
    return False


def _clean(text: str) -> str:
    """Remove emoji and control characters and collapse whitespace within one line.

    The cheap membership tests skip regular expressions that cannot match, which is most of
    them for most lines. The result contains no whitespace other than single spaces.
    """
    if ":" in text or ";" in text or "=" in text or "<" in text:
        text = _EMOJI_SYNTAX_RE.sub(" ", text)
    if "\u20e3" in text:
        text = _KEYCAP_RE.sub(" ", text)
    if not (text.isascii() and text.isprintable()):
        text = _EMOJI_CHAR_RE.sub(" ", text)
    return " ".join(text.split())


def _clean_speaker(name: str) -> str:
    """A display name fit for a one-line prefix; keeps emoji only if nothing else is left."""
    cleaned = _clean(name)
    return cleaned or " ".join(name.split())


def _chronological(items: Sequence[SummaryItem]) -> list[SummaryItem]:
    """Summaries first, then the other items; each group sorted by time."""
    summaries = [item for item in items if item.speaker is None]
    messages = [item for item in items if item.speaker is not None]
    return _by_time(summaries) + _by_time(messages)


def _by_time(items: list[SummaryItem]) -> list[SummaryItem]:
    """Sort by ``when``; an item without one keeps its place after the item before it.

    A caller that sets no times therefore gets its own order back. The sort is stable and
    the key includes the input position, hence deterministic.
    """
    keyed: list[tuple[float, int, SummaryItem]] = []
    last = float("-inf")
    for position, item in enumerate(items):
        if item.when is not None:
            when = item.when if item.when.tzinfo is not None else item.when.replace(tzinfo=UTC)
            last = when.timestamp()
        keyed.append((last, position, item))
    keyed.sort(key=lambda entry: (entry[0], entry[1]))
    return [item for _, _, item in keyed]


def _clean_speakers(items: Sequence[SummaryItem]) -> dict[str, str]:
    """Clean each distinct display name once; channels have few speakers and many messages."""
    names: dict[str, str] = {}
    for item in items:
        if item.speaker is not None and item.speaker not in names:
            names[item.speaker] = _clean_speaker(item.speaker)
    return names


def _collect_sentences(
    items: Sequence[SummaryItem], japanese: bool, speaker_names: dict[str, str]
) -> list[_Sentence]:
    """Split every item into cleaned, de-duplicated sentences in output order."""
    sentences: list[_Sentence] = []
    seen: set[str] = set()
    for rank, item in enumerate(_chronological(items)):
        is_summary = item.speaker is None
        date = f"[{item.when.date().isoformat()}] " if item.when is not None else ""
        item_prefix = date
        if not is_summary:
            speaker = speaker_names[item.speaker] if item.speaker is not None else ""
            item_prefix = date + (f"{speaker}: " if speaker else "")
        index = 0
        for line_no, raw_line in enumerate(item.text.splitlines()):
            prefix, group, line = item_prefix, f"L{item_prefix}", raw_line
            if is_summary:
                # Earlier summaries keep their own text and their own lines. A line that
                # starts with a prefix we wrote before lends it to each of its sentences, so
                # they stay attributed when the first is dropped; other lines get the
                # summary's date, if it has one (a day summary folded into the week).
                group = f"R{rank}:{line_no}"
                match = _SUMMARY_PREFIX_RE.match(raw_line.lstrip())
                if match is not None:
                    name = _clean_speaker(match.group(2) or "")
                    prefix = f"[{match.group(1)}] " + (f"{name}: " if name else "")
                    group = f"L{prefix}"
                    line = raw_line.lstrip()[match.end() :]
            elif not item_prefix:
                group = f"R{rank}"
            for text in _split_sentences(_clean(line), japanese):
                key = _dedup_key(text)
                if key in seen:
                    continue
                seen.add(key)
                sentences.append(_Sentence(rank, index, text, prefix, group, is_summary))
                index += 1
    return sentences


def _dedup_key(text: str) -> str:
    """Sentences equal up to case, width, spacing and final punctuation are duplicates."""
    normal = text if text.isascii() else unicodedata.normalize("NFKC", text)
    return normal.casefold().rstrip(_DEDUP_TRAILING)


def _split_sentences(line: str, japanese: bool) -> list[str]:
    """Split one cleaned line into sentences.

    CJK terminators (。！？) always end a sentence. Latin ones need a following space (or the
    end of the line) in English, which keeps 3.5, URLs and "e.g.x" whole; a period is also
    not a boundary after a known abbreviation or an initial, or before a lower-case word or a
    digit ("e.g. the", "p.m. tomorrow"). In Japanese, where no space follows, ! and ? end a
    sentence wherever they are. Sentences without a letter or digit ("...", "?!") are dropped.
    """
    if not line:
        return []
    if japanese and "." not in line:
        # Every terminator is a boundary here, so the regex alone can do the splitting.
        pieces = _JA_PIECES_RE.findall(line)
        return [piece.strip() for piece in pieces if _ALNUM_RE.search(piece)]
    pieces = []
    start = 0
    for match in _TERMINATOR_RE.finditer(line):
        end = match.end()
        if _is_boundary(line, match, japanese):
            pieces.append(line[start:end].strip())
            start = end
    pieces.append(line[start:].strip())
    return [piece for piece in pieces if _ALNUM_RE.search(piece)]


def _is_boundary(line: str, match: re.Match[str], japanese: bool) -> bool:
    """Decide whether the terminator run ``match`` ends a sentence (see _split_sentences).

    ``line`` is cleaned, so the only whitespace in it is single spaces.
    """
    run = match.group(1)
    if not run.isascii():
        return True  # a CJK terminator
    bang = "!" in run or "?" in run
    if japanese and bang:
        return True
    end = match.end()
    if end < len(line) and line[end] != " ":
        return False
    if bang:
        return True
    following = line[end + 1 : end + 2]
    if following and (following.islower() or following.isdigit()):
        return False
    start = match.start()
    token = line[line.rfind(" ", 0, start) + 1 : start].lstrip("([{\"'“‘")
    return not (token.lower() in _ABBREVIATIONS or (len(token) == 1 and token.isupper()))


def _speaker_names(speaker_names: dict[str, str]) -> _Speakers:
    """Collect the speakers' names so that mentions of them in text count as names."""
    ascii_tokens: set[str] = set()
    others: set[str] = set()
    for name in speaker_names.values():
        if name.isascii():
            ascii_tokens.update(
                token.lower() for token in _EN_WORD_RE.findall(name) if len(token) >= 2
            )
        else:
            others.update(part.casefold() for part in name.split() if len(part) >= 2)
    # Sorting makes the cap (and so the result) independent of set iteration order.
    return _Speakers(frozenset(ascii_tokens), tuple(sorted(others))[:_MAX_SPEAKER_NAMES])


# --------------------------------------------------------------------------------------------
# Scoring.
# --------------------------------------------------------------------------------------------


def _score(sentence: _Sentence, japanese: bool, speakers: _Speakers) -> int:
    """Score one sentence; higher means more worth remembering (weights at the top).

    This runs once per sentence, so regular expressions whose match needs a character the
    sentence does not have (a digit, an @) are skipped.
    """
    bonus = _SUMMARY_POINTS if sentence.is_summary else 0
    text = sentence.text
    plain = text if text.isascii() else unicodedata.normalize("NFKC", text)
    names: set[str] = set()
    if "@" in plain or "<" in plain:
        # Raw mention syntax (<@123456789>) is a name, not a number.
        names.update(mention.casefold() for mention in _MENTION_RE.findall(plain))
        if names:
            plain = _MENTION_RE.sub(" ", plain)
    words = _EN_WORD_RE.findall(plain)
    lowered = [word.lower() for word in words]
    if "’" in plain:
        lowered = [word.replace("’", "'") for word in lowered]
    has_digit = _DIGIT_RE.search(plain) is not None

    if not has_digit and _is_filler(plain, lowered, japanese, speakers):
        return _FILLER_POINTS + bonus

    names.update(speakers.ascii_tokens.intersection(lowered))
    if speakers.other_names:
        folded = plain.casefold()
        names.update(name for name in speakers.other_names if name in folded)
    if japanese:
        names.update(_japanese_names(plain, words, lowered))
    else:
        names.update(_english_capitalised_names(plain, words))

    numbers = set(_NUMBER_RE.findall(plain)) if has_digit else set()
    dated = _has_english_date(plain, words, lowered, has_digit)
    decisions = _english_decision_cues(lowered)
    if japanese:
        if _KANJI_NUMERAL_RE.search(plain):
            numbers.update(_JA_KANJI_NUMBER_RE.findall(plain))
        dated = (
            dated
            or (has_digit and _JA_NUMERIC_DATE_RE.search(plain) is not None)
            or _JA_DATE_RE.search(plain) is not None
        )
        decisions.update(_JA_DECISION_RE.findall(plain))

    score = bonus + _NAME_POINTS * min(len(names), _MAX_NAMES)
    score += _NUMBER_POINTS * min(len(numbers), _MAX_NUMBERS)
    if numbers and (
        _EN_AMOUNT_RE.search(plain.lower()) or (japanese and _JA_AMOUNT_RE.search(plain))
    ):
        score += _AMOUNT_POINTS
    if dated:
        score += _DATE_POINTS
    if decisions:
        score += _DECISION_POINTS + (_EXTRA_DECISION_POINTS if len(decisions) > 1 else 0)
        if not _SETTLED_CUES.isdisjoint(decisions):
            score += _SETTLED_POINTS
    if _is_question(plain, japanese):
        score += _QUESTION_POINTS
    return score + _length_points(plain, lowered, japanese)


def _is_filler(plain: str, lowered: list[str], japanese: bool, speakers: _Speakers) -> bool:
    """True for acknowledgements, laughter, thanks and greetings with nothing else in them.

    Names are allowed ("thanks Bob!"); the caller has already ruled out digits ("ok, 3pm"
    says something).
    """
    saw_filler = False
    for word in lowered:
        if word in _EN_FILLER:
            saw_filler = True
        elif word in _EN_SOFT or word in speakers.ascii_tokens:
            continue
        else:
            squeezed = _squeeze(word)
            if squeezed in _EN_FILLER or _is_laughter(squeezed):
                saw_filler = True
            else:
                return False
    # Whatever is not a Latin word must be Japanese filler or punctuation.
    rest = _EN_WORD_RE.sub(" ", plain) if lowered else plain
    if not _ALNUM_RE.search(rest):
        return saw_filler
    if not japanese or len(rest) > _MAX_JA_FILLER_CHARS:
        return False
    return _JA_FILLER_RE.fullmatch(rest.casefold()) is not None


def _squeeze(word: str) -> str:
    """Undo chat elongation ("okkk", "lolll", "yesss" -> "ok", "lol", "yes")."""
    return _ELONGATION_RE.sub(r"\1", word) if len(word) > 3 else word


def _is_laughter(word: str) -> bool:
    """Recognise "hahaha", "hehe", "lololol", "lmaooo" and friends."""
    return _LAUGHTER_RE.fullmatch(word) is not None


def _english_capitalised_names(plain: str, words: list[str]) -> set[str]:
    """Capitalised words after the first word: proper nouns, products, acronyms.

    Sentences mostly in capitals are shouting, where capitals mean nothing. The regex finds
    the (few) capitalised words directly, which is much faster than testing every word.
    """
    capitalised = _EN_CAPITALISED_RE.findall(plain)
    if capitalised and words and words[0][0].isupper():
        capitalised = capitalised[1:]  # the first word is capitalised by grammar
    names = {word.lower() for word in capitalised} - _EN_NOT_NAMES
    if names and len(words) >= 3:
        shouted = sum(1 for word in capitalised if word.isupper()) + words[0].isupper()
        if shouted * 5 > len(words) * 3:
            return set()
    return names


def _japanese_names(plain: str, words: list[str], lowered: list[str]) -> set[str]:
    """Katakana words, names with honorifics, 「quoted」 terms and Latin proper nouns.

    Japanese has no sentence-initial capital, so any capitalised Latin word counts.
    """
    names = {run for run in _JA_KATAKANA_RE.findall(plain) if run not in _JA_KATAKANA_NOT_NAMES}
    names.update(name for name in _JA_HONORIFIC_RE.findall(plain) if name not in _JA_NOT_NAMES)
    if "「" in plain or "『" in plain:
        names.update(_JA_QUOTED_RE.findall(plain))
    names.update(
        low
        for word, low in zip(words, lowered, strict=True)
        if word[0].isupper() and len(word) > 1 and low not in _EN_NOT_NAMES
    )
    return names


def _has_english_date(plain: str, words: list[str], lowered: list[str], has_digit: bool) -> bool:
    """Weekdays, months, relative days, clock times and numeric dates."""
    if not _EN_DATE_WORDS.isdisjoint(lowered):
        return True
    if not _EN_AMBIGUOUS_MONTHS.isdisjoint(lowered):
        # "May" mid-sentence, or "May 5" at the start, is the month; "may I" is not.
        for position, low in enumerate(lowered):
            capitalised = low in _EN_AMBIGUOUS_MONTHS and words[position][0].isupper()
            if capitalised and (position > 0 or _LEADING_MONTH_DAY_RE.match(plain)):
                return True
    return has_digit and _EN_TIME_RE.search(plain.lower()) is not None


def _english_decision_cues(lowered: list[str]) -> set[str]:
    """Distinct decision, commitment and preference cues among the words."""
    cues = set(_EN_DECISION_WORDS.intersection(lowered))
    if len(lowered) > 1:
        joined = f" {' '.join(lowered)} "
        if "'ll " in joined:
            cues.add("'ll")  # we'll, I'll, she'll
        cues.update(_EN_DECISION_PHRASE_RE.findall(joined))
    return cues


def _is_question(plain: str, japanese: bool) -> bool:
    """Sentences ending in a question mark (or Japanese か, かな) may be open questions."""
    stripped = plain.rstrip(" \"'”’)」』）】")
    if stripped.endswith(("?", "？")):
        return True
    return japanese and stripped.endswith(_JA_QUESTION_ENDINGS)


def _length_points(plain: str, lowered: list[str], japanese: bool) -> int:
    """A little credit for substance, in coarse steps so that recency still decides ties."""
    if japanese:
        size = len(plain)  # characters, punctuation included: the steps are coarse anyway
        return 2 if size >= 20 else 1 if size >= 8 else 0
    size = len(lowered)
    return 2 if size >= 10 else 1 if size >= 4 else 0


# --------------------------------------------------------------------------------------------
# Selection within the budget, and rendering.
# --------------------------------------------------------------------------------------------


def _render(sentences: list[_Sentence], kept: list[int], japanese: bool) -> str:
    """Lay kept sentences out chronologically, sharing a prefix within a run of one group."""
    lines: list[str] = []
    parts: list[str] = []
    group: str | None = None
    for position in sorted(kept):
        sentence = sentences[position]
        if sentence.group != group:
            if parts:
                lines.append("".join(parts))
            group = sentence.group
            parts = [sentence.prefix + sentence.text]
        else:
            # Japanese sentences that end in 。 need no space; everything else does.
            joiner = "" if japanese and parts[-1][-1] in _CJK_CLOSERS else " "
            parts.append(joiner + sentence.text)
    if parts:
        lines.append("".join(parts))
    return "\n".join(lines)


class _CostModel:
    """Estimates what one more sentence adds to the rendered layout, in tokens.

    A sentence that joins a neighbour's line costs only its text; one that starts a line also
    pays for its prefix and a newline, and one that lands inside another speaker's run splits
    that run, which then needs its prefix a second time. Estimates are summed, so they are
    exact only for additive counters; every layout is counted for real before it is trusted.
    Costs are cached per sentence and per prefix (consecutive messages share prefixes).
    """

    def __init__(self, sentences: list[_Sentence], count_tokens: Callable[[str], int]) -> None:
        self._sentences = sentences
        self._count = count_tokens
        self._prefix_costs: dict[str, int] = {"": 0}
        self._line_costs: dict[int, int] = {}
        self._join_costs: dict[int, int] = {}

    def _prefix(self, prefix: str) -> int:
        if prefix not in self._prefix_costs:
            self._prefix_costs[prefix] = self._count(prefix)
        return self._prefix_costs[prefix]

    def marginal(self, position: int, kept: list[int]) -> int:
        """The estimated cost of adding ``position`` to the sorted ``kept`` positions."""
        sentences = self._sentences
        group = sentences[position].group
        at = bisect_left(kept, position)
        before = sentences[kept[at - 1]].group if at > 0 else None
        after = sentences[kept[at]] if at < len(kept) else None
        if group in (before, after.group if after is not None else None):
            if position not in self._join_costs:
                self._join_costs[position] = self._count(" " + sentences[position].text)
            return self._join_costs[position]
        if position not in self._line_costs:
            self._line_costs[position] = self._count(sentences[position].text + "\n")
        cost = self._prefix(sentences[position].prefix) + self._line_costs[position]
        if after is not None and before == after.group:
            cost += self._prefix(after.prefix)  # the run we split needs its prefix again
        return cost


class _Probe:
    """Settles near misses by counting the real layout, a bounded number of times.

    Summed estimates run a little high for counters that round each piece up, so a sentence
    that would fit exactly can look a token or two too big. Without a second opinion the
    best sentence would then lose its place to smaller, less important ones.
    """

    def __init__(
        self,
        sentences: list[_Sentence],
        max_tokens: int,
        count_tokens: Callable[[str], int],
        japanese: bool,
    ) -> None:
        self._sentences = sentences
        self._max_tokens = max_tokens
        self._count = count_tokens
        self._japanese = japanese
        self._left = _MAX_PROBES

    def slack_with(self, kept: list[int], position: int) -> int | None:
        """The real tokens left if ``position`` joined ``kept``; None if it does not fit."""
        if self._left <= 0:
            return None
        self._left -= 1
        positions = list(kept)
        insort(positions, position)
        used = self._count(_render(self._sentences, positions, self._japanese))
        return self._max_tokens - used if used <= self._max_tokens else None


def _greedy(
    candidates: list[int],
    kept: list[int],
    budget: int,
    costs: _CostModel,
    probe: _Probe,
) -> list[tuple[int, int]]:
    """Add candidates (best first) to ``kept`` while the estimated cost fits ``budget``.

    A candidate that does not fit is skipped so that smaller ones can still use the space;
    one that misses by a little is measured for real first (see _Probe).
    Returns the added positions with their estimated costs, in the order they were added.
    """
    added: list[tuple[int, int]] = []
    for position in candidates:
        if budget <= 0:
            break
        cost = costs.marginal(position, kept)
        if cost <= budget:
            insort(kept, position)
            added.append((position, cost))
            budget -= cost
            continue
        if cost - budget <= _NEAR_MISS_TOKENS + cost // 8:
            slack = probe.slack_with(kept, position)
            if slack is not None:
                insort(kept, position)
                added.append((position, cost))
                budget = slack  # measured, so earlier estimation errors are gone too
    return added


def _select_and_render(
    sentences: list[_Sentence],
    ranking: list[int],
    scores: list[int],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    japanese: bool,
) -> str:
    """Choose sentences in rank order within the budget and return the verified layout.

    Filler (negative score) is all or nothing: it is kept only when the whole conversation
    fits, because a summary that had to drop anything should not spend tokens on "lol".
    Only a conversation of nothing but filler is trimmed filler by filler.
    If nothing fits at all, the best sentence is cut to the budget.
    """
    content = [position for position in ranking if scores[position] >= 0]
    filler = [position for position in ranking if scores[position] < 0]
    fill = _Filler(sentences, max_tokens, count_tokens, japanese)
    fill.add(content if content else filler)
    if content and filler and len(fill.kept) == len(content):
        everything = _render(sentences, list(range(len(sentences))), japanese)
        if count_tokens(everything) <= max_tokens:
            return everything
    if not fill.kept:
        return _cut_best(sentences[ranking[0]], max_tokens, count_tokens, japanese)
    return fill.text


class _Filler:
    """Fills the budget with candidates in rounds, trusting only counted layouts.

    Each round selects greedily against the slack that is really left, renders, and counts
    with the caller's counter. A round that overshoots (the estimate is only additive) drops
    its lowest-ranked additions, first by the estimated excess, then by binary search; the
    next round then fills the space that shared prefixes saved. The number of renders is
    bounded, so a strange counter costs quality, never time.
    """

    def __init__(
        self,
        sentences: list[_Sentence],
        max_tokens: int,
        count_tokens: Callable[[str], int],
        japanese: bool,
    ) -> None:
        self._sentences = sentences
        self._max_tokens = max_tokens
        self._count = count_tokens
        self._japanese = japanese
        self._costs = _CostModel(sentences, count_tokens)
        self._probe = _Probe(sentences, max_tokens, count_tokens, japanese)
        self.kept: list[int] = []  # sorted positions, i.e. in output order
        self.text = ""
        self.used = 0

    def add(self, ranking: list[int]) -> None:
        """Add what fits of ``ranking`` (best first) to the kept layout."""
        renders = 0
        while renders < _MAX_RENDERS and self.used < self._max_tokens:
            taken = set(self.kept)
            pending = [position for position in ranking if position not in taken]
            trial = list(self.kept)
            slack = self._max_tokens - self.used
            added = _greedy(pending, trial, slack, self._costs, self._probe)
            if not added:
                return
            verified = _verify_round(
                self._sentences,
                self.kept,
                added,
                self._max_tokens,
                self._count,
                self._japanese,
                _MAX_RENDERS - renders,
            )
            renders += verified.renders
            if verified.kept is None:
                return  # nothing of this round fits: more rounds would choose the same
            self.kept, self.text, self.used = verified.kept, verified.text, verified.used


@dataclass(frozen=True, slots=True)
class _Round:
    """The outcome of verifying one round of additions."""

    kept: list[int] | None  # the new kept positions, or None if no addition fitted
    text: str
    used: int
    renders: int


def _verify_round(
    sentences: list[_Sentence],
    kept: list[int],
    added: list[tuple[int, int]],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    japanese: bool,
    render_allowance: int,
) -> _Round:
    """Find the longest best-first part of ``added`` whose layout (with ``kept``) fits."""
    renders = 0

    def attempt(count: int) -> tuple[list[int], str, int]:
        nonlocal renders
        renders += 1
        positions = sorted(kept + [position for position, _ in added[:count]])
        layout = _render(sentences, positions, japanese)
        return positions, layout, count_tokens(layout)

    # Overshoots are usually a few tokens, so first drop just enough by the estimates.
    count = len(added)
    smallest_failure = count + 1
    for _ in range(_TRIM_ATTEMPTS):
        if count == 0 or renders >= render_allowance:
            break
        positions, layout, layout_used = attempt(count)
        if layout_used <= max_tokens:
            return _Round(positions, layout, layout_used, renders)
        smallest_failure = count
        excess = layout_used - max_tokens
        while count > 0 and excess > 0:
            count -= 1
            excess -= added[count][1]
    # The estimates are off for this counter: binary search on how many to keep.
    best = _Round(None, "", 0, renders)
    low, high = 1, smallest_failure - 1
    while low <= high and renders < render_allowance:
        middle = (low + high) // 2
        positions, layout, layout_used = attempt(middle)
        if layout_used <= max_tokens:
            best = _Round(positions, layout, layout_used, renders)
            low = middle + 1
        else:
            high = middle - 1
    return _Round(best.kept, best.text, best.used, renders)


def _cut_best(
    sentence: _Sentence, max_tokens: int, count_tokens: Callable[[str], int], japanese: bool
) -> str:
    """Cut the best sentence at a character boundary so that it fits, marking the cut.

    Tries, in order: prefix + cut + "…"; the whole sentence without its prefix; cut + "…"
    without the prefix; a bare cut. ``""`` is the answer only when not one character fits.
    """
    text, prefix = sentence.text, sentence.prefix
    if count_tokens(prefix + text) <= max_tokens:
        return prefix + text
    limit = len(text) - 1  # the whole text was just ruled out

    def fits(candidate: str) -> bool:
        return count_tokens(candidate) <= max_tokens

    if prefix:
        cut = _longest_fitting(limit, lambda k: fits(prefix + text[:k].rstrip() + _ELLIPSIS))
        if cut is not None:
            return _prefer_word_boundary(cut, text, prefix, japanese, max_tokens, count_tokens)
        if fits(text):
            return text  # the whole sentence is worth more than its attribution
    cut = _longest_fitting(limit, lambda k: fits(text[:k].rstrip() + _ELLIPSIS))
    if cut is not None:
        return _prefer_word_boundary(cut, text, "", japanese, max_tokens, count_tokens)
    # Not even one character and an ellipsis fit: try bare characters, then give up.
    cut = _longest_fitting(limit, lambda k: fits(text[:k]))
    return text[:cut] if cut is not None else ""


def _longest_fitting(limit: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``k`` in ``1..limit`` with ``fits(k)``, or None if not even 1 fits.

    Gallops up from 1 and then bisects, so the strings counted stay within about twice the
    final cut: a megabyte-long sentence cut to a 50-token budget is never counted whole.
    Assumes longer text never costs fewer tokens; when a counter breaks that, the answer
    may be shorter than possible but ``fits`` has still approved it.
    """
    if limit < 1 or not fits(1):
        return None
    good, bad = 1, limit + 1
    while good < limit:
        trial = min(good * 2, limit)
        if not fits(trial):
            bad = trial
            break
        good = trial
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def _prefer_word_boundary(
    cut: int,
    text: str,
    prefix: str,
    japanese: bool,
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> str:
    """Back off to the last space when that loses little, so no word is left half-written.

    Japanese has no spaces between words, so there the character cut stands.
    """
    fallback = prefix + text[:cut].rstrip() + _ELLIPSIS
    if japanese:
        return fallback
    space = text.rfind(" ", 0, cut + 1)
    kept = text[:space].rstrip(" ,;:-")
    if space <= cut // 2 or not kept:
        return fallback
    candidate = prefix + kept + _ELLIPSIS
    return candidate if count_tokens(candidate) <= max_tokens else fallback
