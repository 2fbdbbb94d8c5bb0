"""The rules that learn plainly stated facts without a model (memory_core/tiers/stated): what
they learn, in English and Japanese, and the many near misses they must leave alone (a
question, a negation, a condition, hearsay, a quote, a joke), since a fact they invented
would be believed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.models import LogEntry
from memory_core.tiers.stated import facts_in, stated_facts

LEARNED = [
    # profile: about the speaker
    ("I'm vegetarian", "profile", "Alice is vegetarian"),
    ("I am vegan.", "profile", "Alice is vegan"),
    ("btw I'm a vegetarian now.", "profile", "Alice is a vegetarian"),
    ("I\u2019m lactose intolerant", "profile", "Alice is lactose intolerant"),
    ("I'm allergic to peanuts", "profile", "Alice is allergic to peanuts"),
    ("I'm a software engineer", "profile", "Alice is a software engineer"),
    ("I work as a nurse", "profile", "Alice works as a nurse"),
    ("I live in Osaka", "profile", "Alice lives in Osaka"),
    ("I live in New York now.", "profile", "Alice lives in New York"),
    ("I'm from the UK", "profile", "Alice is from the UK"),
    ("I just moved to Kyoto", "profile", "Alice moved to Kyoto"),
    ("I work at Google", "profile", "Alice works at Google"),
    ("my cat is called Mochi", "profile", "Alice's cat is called Mochi"),
    ("My cat's name is Mochi.", "profile", "Alice's cat is called Mochi"),
    ("my little sister is named Hana", "profile", "Alice's little sister is called Hana"),
    ("I have a dog called Pochi", "profile", "Alice has a dog called Pochi"),
    ("my birthday is March 3rd", "profile", "Alice's birthday is March 3rd"),
    ("my birthday is 3 May", "profile", "Alice's birthday is 3 May"),
    # preference: about the speaker
    ("I love green tea", "preference", "Alice loves green tea"),
    ("I really love green tea!", "preference", "Alice really loves green tea"),
    ("I prefer tea over coffee", "preference", "Alice prefers tea over coffee"),
    ("I hate mushrooms", "preference", "Alice hates mushrooms"),
    ("I enjoy hiking too", "preference", "Alice enjoys hiking"),
    ("I'm a big fan of jazz", "preference", "Alice is a big fan of jazz"),
    ("my favourite food is sushi", "preference", "Alice's favourite food is sushi"),
    # decision: the channel's
    ("we decided to ship on Friday", "decision", "Decided to ship on Friday"),
    ("We've decided on Postgres.", "decision", "Decided on Postgres"),
    ("ok, we agreed to meet at 10:30", "decision", "Agreed to meet at 10:30"),
    ("let's go with Postgres", "decision", "Going with Postgres"),
    ("Let's go with Postgres then.", "decision", "Going with Postgres"),
    ("we're going with option B", "decision", "Going with option B"),
    ("Decision: ship on Friday", "decision", "Decision: ship on Friday"),
    # Japanese
    ("私はベジタリアンです", "profile", "Aliceはベジタリアンです"),
    ("ベジタリアンなんです。", "profile", "Aliceはベジタリアンです"),
    ("猫の名前はモチです", "profile", "Aliceの猫の名前はモチです"),
    ("うちの猫の名前はもちです", "profile", "Aliceの猫の名前はもちです"),
    ("犬はポチという名前です", "profile", "Aliceの犬の名前はポチです"),
    ("大阪に住んでいます", "profile", "Aliceは大阪に住んでいます"),
    ("ちなみに、京都に住んでるよ。", "profile", "Aliceは京都に住んでいます"),
    ("大阪出身です", "profile", "Aliceは大阪出身です"),
    ("私はエンジニアです", "profile", "Aliceはエンジニアです"),
    ("卵アレルギーです", "profile", "Aliceは卵アレルギーです"),
    ("緑茶が好きです", "preference", "Aliceは緑茶が好きです"),
    ("私は緑茶が大好きです！", "preference", "Aliceは緑茶が大好きです"),
    ("納豆が苦手です", "preference", "Aliceは納豆が苦手です"),
    ("犬派です", "preference", "Aliceは犬派です"),
    ("好きな食べ物は寿司です", "preference", "Aliceの好きな食べ物は寿司です"),
    ("金曜日にリリースすることに決めました", "decision", "金曜日にリリースすることに決定"),
    (
        "チームで、金曜日にリリースすることに決まりました。",
        "decision",
        "金曜日にリリースすることに決定",
    ),
    ("Postgresでいきましょう", "decision", "Postgresに決定"),
    ("私たちはPostgresに決めました", "decision", "Postgresに決定"),
]

REFUSED = [
    # negations
    "I'm not vegetarian",
    "I am not a vegetarian.",
    "I'm no longer vegan",
    "I don't like green tea",
    "I never liked green tea",
    "we decided not to ship on Friday",
    # questions
    "am I vegetarian?",
    "Am I vegetarian",
    "do you love green tea?",
    "I love green tea, do you?",
    "did we decide to ship on Friday",
    "should we go with Postgres?",
    # conditions, wishes, guesses, the past
    "if I were vegetarian",
    "If I were vegetarian I'd eat more beans.",
    "I'd love to be vegetarian",
    "I wish I were vegetarian",
    "I want to be vegetarian",
    "I think I'm vegetarian",
    "maybe I'm vegetarian",
    "I may be vegetarian",
    "I was vegetarian",
    "I used to be vegetarian",
    "my cat was called Mochi",
    "if we decide to ship on Friday",
    "we might go with Postgres",
    # others, hearsay, quotes
    "Bob said he is vegetarian",
    "Bob is vegetarian",
    "he's vegetarian",
    '"I\'m vegetarian" is what she told me',
    "\u201cI'm vegetarian\u201d",
    "Bob says we decided to ship on Friday",
    "> I'm vegetarian",
    "I love tea `code`",
    # the markers of a joke
    "I'm vegetarian lol",
    "I'm vegetarian /s",
    "yeah right, I'm vegetarian",
    "I'm totally vegetarian",
    "I love Mondays \U0001f644",
    "I love Mondays haha",
    # more than the rule's shape, or a slot that points elsewhere
    "I'm vegetarian and Bob is vegan",
    "I'm tired",
    "I'm sorry",
    "I love you",
    "I love it",
    "I love that idea",
    "I like the new design",
    "I love my cat",
    "my cat is called what again",
    "my imaginary cat is called Mochi",
    "I live in fear",
    "I live in a van",
    "I live in Osaka with my wife",
    "let's go with that",
    "let's go with the flow",
    "we decided to do it",
    "I'm a terrible teacher",
    "I'm a big fan of yours",
    # Japanese
    "私はベジタリアンではありません",
    "ベジタリアンじゃないです",
    "私はベジタリアンですか？",
    "ベジタリアンですか",
    "もし私がベジタリアンなら",
    "ボブはベジタリアンだと言っていました",
    "ボブはベジタリアンです",
    "彼はベジタリアンらしい",
    "「私はベジタリアンです」",
    "ベジタリアンです（笑）",
    "ベジタリアンですｗ",
    "ベジタリアンになりたいです",
    "ベジタリアンかもしれない",
    "ベジタリアン",
    "猫の名前は何ですか",
    "猫の名前はまだ決めていません",
    "猫の名前は秘密です",
    "大阪に住んでいません",
    "大阪に住んでいたら楽しい",
    "大阪に住みたい",
    "あなたが好きです",
    "それが好き",
    "緑茶が好きじゃない",
    "ボブは緑茶が好きです",
    "金曜日にリリースしないことに決めました",
    "金曜日にリリースすることに決めましたか？",
    "金曜日にリリースすることに決めたらしい",
    "それでいきましょう",
    "Postgresでいこうか",
    "立派です",
]


@pytest.mark.parametrize(("said", "kind", "fact"), LEARNED)
def test_a_plainly_stated_fact_is_learned(said: str, kind: str, fact: str) -> None:
    assert facts_in(said, "Alice") == [(kind, fact, kind != "decision")]


@pytest.mark.parametrize("said", REFUSED)
def test_anything_but_a_plain_statement_is_left_alone(said: str) -> None:
    assert facts_in(said, "Alice") == []


def test_a_fact_about_the_speaker_needs_their_name() -> None:
    assert facts_in("I'm vegetarian", "") == []
    assert facts_in("we decided to ship on Friday", "") == [
        ("decision", "Decided to ship on Friday", False)
    ]


def test_each_sentence_of_a_message_is_read_and_code_is_not() -> None:
    said = "Hi all! I'm vegetarian. Is anyone else? We decided to ship on Friday.\n私は猫派です"
    assert facts_in(said, "Alice") == [
        ("profile", "Alice is vegetarian", True),
        ("decision", "Decided to ship on Friday", False),
        ("preference", "Aliceは猫派です", True),
    ]
    assert facts_in("```\nI'm vegetarian\n```", "Alice") == []


def _entry(n: int, text: str, *, author: str = "Alice", role: str = "user") -> LogEntry:
    return LogEntry(
        id=f"{n}-0",
        ts=datetime(2025, 8, 11, 9, n, tzinfo=UTC),
        role="assistant" if role == "assistant" else "user",
        author=author,
        author_id=author.lower(),
        text=text,
        tokens=4,
    )


def test_facts_of_a_chunk_name_who_said_them_and_which_messages() -> None:
    chunk = [
        _entry(1, "I'm vegetarian"),
        _entry(2, "we decided to ship on Friday", author="Bob"),
        _entry(3, "I'm vegetarian!"),  # said again: one fact, both messages
        _entry(4, "I'm vegetarian", author="memorybot", role="assistant"),
        _entry(5, "am I vegetarian?", author="Carol"),
    ]
    facts = stated_facts(chunk)
    assert [(f.kind, f.text, f.subject, f.message_ids) for f in facts] == [
        ("profile", "Alice is vegetarian", "Alice", ("1-0", "3-0")),
        ("decision", "Decided to ship on Friday", "", ("2-0",)),
    ]
