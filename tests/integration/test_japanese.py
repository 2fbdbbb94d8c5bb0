"""Japanese conversations: Japanese summary prompts, a Japanese persona, names kept."""

from __future__ import annotations

from datetime import timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.conftest import START, CoreFactory
from tests.fakes.openai_server import FakeOpenAI

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
                await core.pipeline.ingest(
                    IncomingMessage(scope="discord:9:9", text=f"{text}（{i}）", author=author)
                )
        clock.set(START + timedelta(days=day + 1))
    reply = await core.pipeline.handle(
        IncomingMessage(
            scope="discord:9:9", text="会議はいつでしたっけ？", author="たろう", direct=True
        )
    )
    assert reply is not None and reply.kind == "llm"
    compact = fake_llm.of("compact")[0]
    assert "日記形式の要約" in compact.prompt_text and "さくら" in compact.prompt_text
    refresh = fake_llm.of("refresh")[0]
    assert "総合記憶" in refresh.prompt_text
    system = fake_llm.of("reply")[0].messages[0]["content"]
    assert system.startswith("あなたはmemorybotです")
    days = await core.repo.days("discord:9:9")
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
        await core.pipeline.ingest(IncomingMessage(scope="j", text=text, author=author))
    state = await core.repo.state("console:j")
    assert state.short, "offline mode still summarises"
    assert "5万円" in state.short or "14時" in state.short
    reply = await core.pipeline.handle(
        IncomingMessage(scope="j", text="何を覚えてる？", author="さくら", direct=True)
    )
    assert reply is not None and reply.kind == "offline"
    assert "LLMが設定されていない" in reply.text
