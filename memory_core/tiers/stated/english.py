"""The English rules: a sentence that is exactly one of a few shapes ("I'm vegetarian", "I
love green tea", "my cat is called Mochi", "I live in Osaka", "we decided to ship on Friday",
"let's go with Postgres"), with nothing in it that turns a statement into something else
(a question, a negation, a condition, hearsay, a quote, a joke's markers)."""

from __future__ import annotations

import re

from memory_core.tiers.stated.rule import Render, Rule, first_fact

# Anything of these anywhere in the sentence, and it states nothing the rules may keep.
_REFUSE = re.compile(
    r"\?"
    # a quote: double quotes, backticks, a single quote that is not an apostrophe
    r"|[\"“”«»`]|(?:^|[\s(])'|'(?=$|[\s),.!;:])"
    # negation
    r"|n't\b|\b(?:not|no|never|nothing|nobody|none|neither|nor|nope|nah|cannot|cant|dont"
    r"|doesnt|didnt|isnt|wasnt|arent|wont|aint|havent|hardly|barely|without|anymore"
    r"|quit|stopped|ex)\b"
    # a condition, a wish, a guess, a plan, the past
    r"|\bmay\b(?! \d)(?<!\d may)(?<!of may)"
    r"|\b(?:if|unless|whether|when|whenever|until|were|would|could|might|maybe|perhaps"
    r"|probably|possibly|suppose|supposedly|apparently|imagine|pretend|pretending|wish|hope"
    r"|hoping|guess|think|thought|believe|seems?|should|shall|gonna|wanna|want|wants"
    r"|planning|plan|kinda|sorta|someday|used|once|almost|nearly|thinking|considering"
    r"|trying|try|like to think)\b|'d\b"
    # hearsay: what someone else says
    r"|\b(?:said|says|say|saying|told|tell|tells|claims?|claimed|according|asked|asks"
    r"|quote|quoting|wrote|writes|mentioned|heard|reckons?|joked|joking|kidding|rumou?r)\b"
    # a joke's markers
    r"|\b(?:lol|lmao|lmfao|rofl|haha\w*|hehe\w*|jk|yeah right|as if|totally|obviously"
    r"|of course|sarcasm|sarcastic|irony|ironic|ironically|literally|sure sure)\b"
    r"|(?:^|\s)/s\b|j/k|;\)|:p\b|\bxd\b|https?://|www\."
    r"|[\U0001F600-\U0001F64F\U0001F910-\U0001F92F\U0001F970-\U0001F97F]",
    re.IGNORECASE,
)
# Openers and closers that add nothing ("btw, I'm vegan", "I live in Osaka now").
_LEAD = re.compile(
    r"^(?:(?:btw|by the way|fyi|fwiw|actually|also|oh|and|but|so|ok|okay|well|yes|yeah|yep"
    r"|anyway|alright|all right|right|great|cool|good|hey|hi|hello|ah|for the record"
    r"|just so you know)\b[\s,!.-]*)+",
    re.IGNORECASE,
)
_TAIL = re.compile(
    r"(?:[\s,]+(?:btw|by the way|fyi|too|as well|now|these days|nowadays|actually|though"
    r"|then|for now|everyone|folks|team|guys|just so you know|for the record))+$",
    re.IGNORECASE,
)

# Words that make a slot point somewhere else: a pronoun, a clause, "the thing we said".
_POINTING = frozenset(
    """
    i me my mine myself you your yours yourself u ur y'all he him his she her hers they them
    their theirs it its this that these those everyone everybody someone somebody anyone
    anybody nobody everything something anything nothing whatever what who whom whose which
    where why how because since though although while but so or
    """.split()
)
_ARTICLES = frozenset({"the", "a", "an"})
_JUDGING = frozenset(
    """
    good bad great terrible awful horrible lousy crap crappy shitty lazy stupid dumb amazing
    awesome brilliant genius best worst better worse real total complete fake wannabe
    wanna-be future aspiring failed frustrated glorified so-called proud poor
    """.split()
)
_DIETS = (
    r"vegetarian|vegan|pescatarian|pescetarian|teetotal|teetotaller|teetotaler|gluten-free"
    r"|lactose intolerant|lactose-intolerant|coeliac|celiac|diabetic|retired|left-handed"
)
_JOBS = (
    r"engineer|developer|programmer|designer|teacher|nurse|doctor|student|lawyer|accountant"
    r"|architect|artist|writer|journalist|chef|researcher|scientist|professor|manager"
    r"|consultant|analyst|photographer|musician|pharmacist|dentist|vet|veterinarian"
    r"|translator|editor|freelancer|firefighter|pilot|farmer|mechanic|electrician|carpenter"
    r"|plumber|librarian|therapist|psychologist|economist|physicist|chemist|biologist"
    r"|mathematician|intern|illustrator|animator|entrepreneur|founder|barista|paramedic"
)
_KIN = (
    r"cat|dog|kitten|puppy|pet|rabbit|bunny|hamster|guinea pig|parrot|bird|budgie|fish"
    r"|goldfish|turtle|tortoise|snake|lizard|horse|son|daughter|kid|baby|wife|husband"
    r"|partner|boyfriend|girlfriend|fiance|fiancee|fiancé|fiancée|brother|sister|mom|mum"
    r"|mother|dad|father"
)
_MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_I_AM = r"i(?:'m| am| m)"
_WE = r"we(?:'ve| have)?"
_WORD = r"[^\W\d_][\w'&+#.-]*"  # a word: a letter, then letters, digits and a few signs
_TOKEN = r"[\w'&+#./:-]+"  # a word or a number ("at 10:30", "v2.1")
_NAME = r"[^\W\d_][\w'-]*"
_OBJECT = rf"(?P<x>{_TOKEN}(?: {_TOKEN}){{0,4}})"
_PLACE = rf"(?P<x>{_WORD}(?:,? {_WORD}){{0,3}})"


def match(sentence: str, speaker: str) -> tuple[str, str, bool] | None:
    """(kind, fact text, about the speaker) when ``sentence`` is exactly one rule's shape."""
    core = _LEAD.sub("", sentence.rstrip(".! "))
    if core.split(" ", 1)[0].lower().rstrip(":,") not in _FIRST_WORDS:
        return None  # (most sentences: no rule starts so)
    core = _TAIL.sub("", core).strip(" ,")
    return first_fact(_RULES, core, sentence, speaker, _REFUSE)


def _words(text: str) -> list[str]:
    return [word.strip(",.") for word in text.lower().split()]


def _plain(slot: str, *, articles: bool = False) -> bool:
    """A slot that says what it is by itself: no pronoun or clause word, and (unless
    ``articles``) no leading article ("the idea", "a thing": what was just said)."""
    words = _words(slot)
    if not words or any(word in _POINTING for word in words):
        return False
    return articles or words[0] not in _ARTICLES


def _proper(slot: str) -> bool:
    """Every word capitalised, or a small word between capitalised ones ("the UK", "Isle
    of Man"): a place's or a company's name, never "fear" or "a van"."""
    words = slot.split()
    if words[0] == "the":
        words = words[1:]
    return bool(words) and all(
        word[0].isupper() or (0 < i < len(words) - 1 and word in ("of", "de", "la", "on"))
        for i, word in enumerate(words)
    )


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _diet(m: re.Match[str], name: str) -> str | None:
    return f"{name} is {m['x']}"


def _allergy(m: re.Match[str], name: str) -> str | None:
    return f"{name} is allergic to {m['x']}" if _plain(m["x"], articles=True) else None


def _job(m: re.Match[str], name: str) -> str | None:
    if any(word in _JUDGING or word in _POINTING for word in _words(m["x"])):
        return None
    verb = "works as" if m["v"].lower().startswith("i work") else "is"
    return f"{name} {verb} {m['a'].lower()} {m['x']}"


def _place(verb: str) -> Render:
    def render(m: re.Match[str], name: str) -> str | None:
        return f"{name} {verb} {m['x']}" if _proper(m["x"]) else None

    return render


def _called(m: re.Match[str], name: str) -> str | None:
    modifier = (m["mod"] or "").strip().lower()
    if modifier in _JUDGING | _POINTING | {"imaginary", "dream", "virtual", "future"}:
        return None
    if _words(m["n"])[0] in _POINTING | {"after", "by", "for", "like", "from", "as", "in"}:
        return None
    kin = f"{modifier} {m['k'].lower()}".strip()
    if "has" in m.groupdict():
        return f"{name} has {m['a'].lower()} {kin} called {m['n']}"
    return f"{_possessive(name)} {kin} is called {m['n']}"


def _birthday(m: re.Match[str], name: str) -> str | None:
    return f"{_possessive(name)} birthday is {m['d']}"


def _likes(m: re.Match[str], name: str) -> str | None:
    if not _plain(m["x"]):
        return None
    adverb = f"{m['adv'].lower()} " if m["adv"] else ""
    return f"{name} {adverb}{m['v'].lower()}s {m['x']}"


def _fan(m: re.Match[str], name: str) -> str | None:
    size = f"{m['size'].lower()} " if m["size"] else ""
    return f"{name} is a {size}fan of {m['x']}" if _plain(m["x"], articles=True) else None


def _favourite(m: re.Match[str], name: str) -> str | None:
    if not (_plain(m["c"]) and _plain(m["x"], articles=True)):
        return None
    return f"{_possessive(name)} {m['f'].lower()} {m['c'].lower()} is {m['x']}"


def _decided(m: re.Match[str], name: str) -> str | None:
    if any(word in _POINTING - {"that", "our", "we", "us"} for word in _words(m["x"])):
        return None
    verb = m["v"].lower().capitalize()
    particle = m.groupdict().get("p")
    return f"{verb} {particle.lower()} {m['x']}" if particle else f"{verb}: {m['x']}"


def _going_with(m: re.Match[str], name: str) -> str | None:
    return f"Going with {m['x']}" if _plain(m["x"]) else None


def _rule(pattern: str, kind: str, render: Render) -> Rule:
    return Rule(re.compile(pattern, re.IGNORECASE), kind, render)


_ACTION = rf"(?P<x>{_TOKEN}(?: {_TOKEN}){{0,11}})"
_KIN_NAME = rf"(?P<mod>{_NAME} )?(?P<k>{_KIN})"
_NAMED = rf"(?P<n>{_NAME}(?: {_NAME})?)"
# The words a rule's sentence starts with.
_FIRST_WORDS = frozenset(
    "i i'm im my we we've we're we'll let's lets let decision final decided".split()
)
_RULES: tuple[Rule, ...] = (
    _rule(rf"{_I_AM} (?P<x>(?:(?:a|an) )?(?:{_DIETS}))", "profile", _diet),
    _rule(rf"{_I_AM} allergic to (?P<x>{_WORD}(?: {_WORD}){{0,2}})", "profile", _allergy),
    _rule(
        rf"(?P<v>{_I_AM}|i work as) (?P<a>a|an) (?P<x>(?:{_WORD} ){{0,2}}(?:{_JOBS}))",
        "profile",
        _job,
    ),
    _rule(rf"i (?:really )?live in {_PLACE}", "profile", _place("lives in")),
    _rule(rf"i (?:just |recently )?moved to {_PLACE}", "profile", _place("moved to")),
    _rule(rf"{_I_AM} (?:originally )?from {_PLACE}", "profile", _place("is from")),
    _rule(rf"{_I_AM} based in {_PLACE}", "profile", _place("is based in")),
    _rule(rf"i work at {_PLACE}", "profile", _place("works at")),
    _rule(rf"i work for {_PLACE}", "profile", _place("works for")),
    _rule(
        rf"my {_KIN_NAME}(?:'s name is| is called| is named| goes by) {_NAMED}",
        "profile",
        _called,
    ),
    _rule(
        rf"(?P<has>i have|i've got) (?P<a>a|an) {_KIN_NAME} (?:called|named) {_NAMED}",
        "profile",
        _called,
    ),
    _rule(
        rf"my birthday is (?:on )?(?P<d>(?:{_MONTHS}) \d{{1,2}}(?:st|nd|rd|th)?"
        rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS}))",
        "profile",
        _birthday,
    ),
    _rule(
        rf"i (?:(?P<adv>really|also|absolutely|truly|genuinely) )?"
        rf"(?P<v>love|like|prefer|enjoy|adore|hate|dislike|detest|loathe) {_OBJECT}",
        "preference",
        _likes,
    ),
    _rule(rf"{_I_AM} (?:a|an) (?:(?P<size>big|huge) )?fan of {_OBJECT}", "preference", _fan),
    _rule(
        rf"my (?P<f>favorite|favourite) (?P<c>{_WORD}(?: {_WORD})?) is {_OBJECT}",
        "preference",
        _favourite,
    ),
    _rule(
        rf"{_WE} (?:(?:just|finally|all|now|officially) )?(?P<v>decided|agreed)"
        rf"(?: (?P<p>to|on|that))? {_ACTION}",
        "decision",
        _decided,
    ),
    _rule(rf"(?P<v>decision|final decision|decided): {_ACTION}", "decision", _decided),
    _rule(
        rf"(?:let's|lets|let us|we'll|we will|we're|we are) (?:just )?go(?:ing)? with {_OBJECT}",
        "decision",
        _going_with,
    ),
)
