"""Scoring a candidate sentence: how much a human would want it remembered.

Names, numbers, dates and times, decisions, commitments and preferences, and open questions
score; filler ("ok", "lol", うん, 了解) scores below zero, so it is the first to go.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memory_core.tiers.extractive.candidates import Sentence

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
# Matching every speaker name against every sentence costs (names x sentences); channels with
# more distinct speakers than this are rare, and the capitalisation rule still finds names.
_MAX_SPEAKER_NAMES = 64


def _word_set(text: str) -> frozenset[str]:
    """A keyword set written as whitespace-separated words, which keeps long lists readable."""
    return frozenset(text.split())


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
_ALNUM_RE = re.compile(r"[^\W_]")


@dataclass(frozen=True, slots=True)
class Speakers:
    """Speaker names mentioned in text count as names; matched two ways for speed."""

    ascii_tokens: frozenset[str]  # lower-cased words of Latin-script names ("alice", "smith")
    other_names: tuple[str, ...]  # case-folded non-Latin names, matched as substrings


def known_speakers(speaker_names: dict[str, str]) -> Speakers:
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
    return Speakers(frozenset(ascii_tokens), tuple(sorted(others))[:_MAX_SPEAKER_NAMES])


def score(sentence: Sentence, japanese: bool, speakers: Speakers) -> int:
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


def _is_filler(plain: str, lowered: list[str], japanese: bool, speakers: Speakers) -> bool:
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
