"""The offline reply as a newcomer meets it (`memorybot console`, no LLM key): a real process,
lines in, replies out. It answers a question with the messages relevant to it (their date,
time and author), from the working window too, and `/memory why` lists them; a question
nothing remembered relates to is told so; in Japanese too."""

from __future__ import annotations

import re

from tests.helpers import CLI

CHATTER = [
    "the coffee machine is broken again",
    "did anyone see the game last night?",
    "yes, what a finish",
    "lunch at the noodle place today?",
    "sure, at noon",
    "I'll bring the slides for the review",
    "the printer on floor 2 is out of toner",
]
CAROL = "Carol arrives on March 4 at the north gate"
WHY = "What the last answer used (asked by Alice, "


def replies(out: str, intro: str) -> list[str]:
    """The console's output cut at each offline reply, the text before the first dropped."""
    return out.split(intro)[1:]


async def test_a_question_seven_messages_later_is_answered_and_why_lists_it(
    cli: CLI, clean_redis: str
) -> None:
    stdin = "\n".join([CAROL, *CHATTER, "When does Carol arrive?", "/memory why", ""])
    run = await cli("console", "--user", "Alice", stdin=stdin, REDIS_URL=clean_redis)
    assert run.code == 0, run.err
    answer, why = replies(run.out, "No LLM is configured")[-1].split(WHY)
    found = re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d)\] (.+)$", answer, re.M)
    assert [line for _, line in found] == [f"Alice: {CAROL}"], answer  # nothing else
    [(when, _)] = found
    assert why.startswith(when[:10])  # said today (the console's clock is the real one)
    assert f"- [{when}] Alice: {CAROL}" in why.split("Recalled messages", 1)[1]
    assert "Nothing I remember here looks related" not in answer


async def test_a_question_nothing_relates_to_is_told_so(cli: CLI, clean_redis: str) -> None:
    """No word in common, only stop words, or one telling word of several ("review": recall
    finds the slides for the review, which do not answer)."""
    asked = [
        "what is the wifi password?",
        "how are you doing?",
        "what did the review board decide about the budget?",
    ]
    run = await cli(
        "console",
        "--user",
        "Alice",
        stdin="\n".join([CAROL, *CHATTER, *asked, ""]),
        REDIS_URL=clean_redis,
    )
    assert run.code == 0, run.err
    for answer in replies(run.out, "No LLM is configured")[-3:]:
        assert "Nothing I remember here looks related to your question." in answer
        assert not re.search(r"^\[\d{4}-", answer, re.M)  # no line shown
    why = await cli("console", "--user", "Alice", stdin="/memory why\n", REDIS_URL=clean_redis)
    assert "No older message was recalled for it." in why.out


SAKURA = "さくらさんは3月4日に北門に到着します。"
CHATTER_JA = [
    "今日は雨が降っていますね。",
    "駅前の本屋で新しい小説を買いました。",
    "週末はサッカーの試合を見に行きます。",
    "昼ごはんはラーメンにしました。",
    "会議の資料は明日までに送ります。",
    "二階のプリンターのトナーが切れています。",
    "コーヒーマシンがまた壊れました。",
]


async def test_a_japanese_question_finds_the_japanese_line(cli: CLI, clean_redis: str) -> None:
    stdin = "\n".join(
        [
            "/memory config language ja",
            SAKURA,
            *CHATTER_JA,
            "さくらさんはいつ到着しますか？",
            "/memory why",
            "猫の名前は何でしたか？",
            "",
        ]
    )
    run = await cli("console", "--user", "たろう", stdin=stdin, REDIS_URL=clean_redis)
    assert run.code == 0, run.err
    *_, answered, cat = replies(run.out, "LLMが設定されていないため")
    answer, why = answered.split("What the last answer used (asked by たろう, ")
    assert "質問に関係がありそうな記憶（関係の深い順）:" in answer
    found = re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d)\] (.+)$", answer, re.M)
    assert [line for _, line in found] == [f"たろう: {SAKURA}"], answer
    [(when, _)] = found
    assert f"- [{when}] たろう: {SAKURA}" in why.split("Recalled messages", 1)[1]
    assert "質問に関係がありそうなものは見つかりませんでした" in cat
    assert not re.search(r"^\[\d{4}-", cat, re.M)
