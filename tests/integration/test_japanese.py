"""Japanese conversations: Japanese summary prompts, a Japanese persona, names kept."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory

LINES = [
    ("さくら", "明日の14時に渋谷でミーティングをしましょう。"),
    ("たろう", "了解です。資料は私が準備します。"),
    ("さくら", "予算は5万円までに決めました。"),
    ("はなこ", "来週の金曜日に大阪へ出張する予定です。"),
]


async def test_japanese_chat_uses_japanese_prompts(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={
            "compact_trigger_tokens": 200,
            "compact_min_messages": 8,
            "compact_keep_tokens": 20,
        },
    )
    for day in range(2):
        for i in range(3):
            for author, text in LINES:
                clock.advance(timedelta(minutes=3))
                await core.intake.accept(
                    IncomingMessage(scope="discord:9:9", text=f"{text}（{i}）", author=author)
                )
        clock.set(START + timedelta(days=day + 1))
    reply = await converse(
        core,
        IncomingMessage(
            scope="discord:9:9", text="会議はいつでしたっけ？", author="たろう", direct=True
        ),
    )
    assert reply is not None and reply.kind == "llm"
    compact = fake_llm.of("compact")[0]
    assert "日記形式の要約" in compact.prompt_text and "さくら" in compact.prompt_text
    refresh = fake_llm.of("refresh")[0]
    assert "総合記憶" in refresh.prompt_text
    system = fake_llm.of("reply")[0].messages[0]["content"]
    assert system.startswith("あなたはmemorybotです")
    days = await core.repo.reads.days("discord:9:9")
    assert days and "渋谷" in days[0].summary


async def test_japanese_offline_extractive_keeps_names_and_numbers(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        offline=True,
        memory={
            "compact_trigger_tokens": 100,
            "compact_min_messages": 4,
            "compact_keep_tokens": 0,
            "short_tokens": 80,
        },
    )
    filler = [("たろう", "うん"), ("はなこ", "了解")] * 4
    for author, text in filler + LINES + LINES:
        clock.advance(timedelta(minutes=1))
        await core.intake.accept(IncomingMessage(scope="j", text=text, author=author))
    state = await core.repo.reads.state("console:j")
    assert state.short, "offline mode still summarises"
    assert "5万円" in state.short or "14時" in state.short
    reply = await converse(
        core, IncomingMessage(scope="j", text="何を覚えてる？", author="さくら", direct=True)
    )
    assert reply is not None and reply.kind == "offline"
    assert "LLMが設定されていない" in reply.text


def _recalled(system: str) -> str:
    """The recall section of a Japanese system prompt (summaries may quote messages too)."""
    heading = "## 関連する過去の発言"
    return system.split(heading, 1)[1].split("\n## ", 1)[0] if heading in system else ""


FILLER_JA = [
    ("たろう", "今日は雨が降っていますね。"),
    ("はなこ", "駅前の本屋で新しい小説を買いました。"),
    ("たろう", "週末はサッカーの試合を見に行きます。"),
    ("はなこ", "昼ごはんはラーメンにしました。"),
]


async def said_long_ago(core: Core, clock: ManualClock, text: str, *, days: int) -> None:
    """さくら says ``text``, then ``days`` days of 40 filler messages each follow; the
    vectors are made as the background makes them live."""
    clock.advance(timedelta(minutes=1))
    await core.intake.accept(IncomingMessage(scope="j", text=text, author="さくら"))
    for day in range(1, days + 1):
        clock.set(START + timedelta(days=day))
        for i in range(40):
            author, filler = FILLER_JA[i % len(FILLER_JA)]
            clock.advance(timedelta(minutes=2))
            await core.intake.accept(
                IncomingMessage(scope="j", text=f"{filler}（{i}）", author=author)
            )
    assert core.recall is not None
    await core.recall.embed_backlog("console:j")


@pytest.mark.parametrize("embedder", ["off", "local"])
async def test_japanese_facts_are_recalled_from_long_ago(
    make_core: CoreFactory, embedder: str
) -> None:
    """A Japanese fact said days and hundreds of messages ago reaches the prompt, by words
    alone and with the local multilingual model (which must not crowd it out)."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"recall_embedder": embedder})
    await said_long_ago(core, clock, "予算は5万円までに決めました。", days=3)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="j", text="予算はいくらに決めましたか？", author="たろう")
    )
    assert "予算は5万円までに決めました" in _recalled(prompt.messages[0]["content"])


async def test_japanese_is_recalled_by_meaning_with_the_local_model(
    make_core: CoreFactory,
) -> None:
    """No shared word or bigram (猫 / ペット): the local model still brings the message back."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"recall_embedder": "local"})
    await said_long_ago(core, clock, "先月から猫を飼い始めました。", days=2)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="j", text="ペットはいる？", author="たろう")
    )
    assert "猫を飼い始めました" in _recalled(prompt.messages[0]["content"])
