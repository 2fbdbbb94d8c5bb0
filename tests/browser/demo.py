"""Realistic demo memory for the browser tests and the documentation's screenshots: a game
studio's Discord, a company Slack (with a thread and a Japanese team channel), a DM and a
console scope, ten days of conversation each, fed through the real pipeline so days roll
over, tiers and day records are written (offline: extractive summaries) and facts pinned."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage


@dataclass(frozen=True)
class Place:
    scope: str
    name: str
    people: tuple[str, ...]
    lines: tuple[str, ...]
    notes: tuple[str, ...] = ()
    per_day: int = 6


GENERAL = "discord:811204337740464128:811204338373935124"
DEV = "discord:811204337740464128:902771546180337715"
JAPANESE = "slack:T03JP7Q2L:C05KAIHATSU"
PLACES = (
    Place(
        GENERAL,
        "#general (Acme Games)",
        ("Alice", "Bob", "Carol", "Dave"),
        (
            "Morning! Is the playtest build still going out on Friday?",
            "Yes, Friday 15:00 UTC. Carol is cutting the release branch on Thursday.",
            "I'll bring the new level select screen to the review at 10:00.",
            "The crash on the title screen is fixed in build 0.9.3.",
            "Can someone check the Steam page copy before we publish it?",
            "We decided to keep the soundtrack at 12 tracks for the demo.",
            "Reminder: standup moves to 10:30 on Wednesdays.",
            "Dave prefers bug reports in the #qa channel, not in DMs.",
            "The publisher call went well: they want a vertical slice by October 3.",
            "Pizza for the playtest night? Bob says no pineapple.",
            "Latency in the EU region is down to 42 ms after the server move.",
            "Let's freeze features on the 25th and only fix bugs after that.",
        ),
        notes=(
            "Playtest builds go out on Fridays at 15:00 UTC",
            "Vertical slice due to the publisher on October 3",
        ),
    ),
    Place(
        DEV,
        "#dev (Acme Games)",
        ("Bob", "Erin", "Frank"),
        (
            "The shader cache rebuild takes 4 minutes on CI now, down from 11.",
            "I'm switching the save format to protobuf; old saves get migrated on load.",
            "Who owns the physics tick rate? 60 Hz feels floaty on the Deck.",
            "Merged the input remapping PR, please rebase.",
            "Memory leak in the particle pool: 3 MB per level load. Investigating.",
            "We decided to drop 32-bit Windows support for the demo.",
        ),
        notes=("Physics runs at 60 Hz; revisit after the playtest",),
    ),
    Place(
        "slack:T024BE7LD:C01MARKET",
        "#marketing (Acme Corp)",
        ("Grace", "Heidi", "Ivan"),
        (
            "The trailer cut is 92 seconds; the platform wants 60 for the storefront.",
            "Press kit goes to 40 outlets on the 18th.",
            "Heidi will run the Discord AMA on Saturday at 18:00 CET.",
            "Budget for ads this month: 4,000 EUR, split between TikTok and Reddit.",
            "The wishlist count passed 25,000 this morning!",
        ),
    ),
    Place(
        "slack:T024BE7LD:C01MARKET:1723560000.000200",
        "thread in #marketing (Acme Corp)",
        ("Grace", "Ivan"),
        (
            "Thread for the trailer music licence.",
            "The composer agreed to a perpetual licence for 1,200 EUR.",
            "Contract is signed; invoice due in 30 days.",
        ),
        per_day=2,
    ),
    Place(
        JAPANESE,
        "#開発チーム (東京オフィス)",
        ("佐藤", "鈴木", "高橋"),
        (
            "おはようございます。今日のスタンドアップは10時からです。",
            "ビルド0.9.3でタイトル画面のクラッシュが直りました。",
            "金曜日の15時にプレイテスト版を配布する予定です。",
            "鈴木さんはバグ報告を#qaチャンネルに書いてほしいそうです。",
            "来週の月曜日にパブリッシャーとの打ち合わせがあります。",
            "サーバー移転でレイテンシが42ミリ秒まで下がりました。",
        ),
        notes=("プレイテスト版は毎週金曜15時に配布",),
    ),
    Place(
        "discord:dm:338201144567300097",
        "DM with Carol",
        ("Carol",),
        (
            "Can you remind me what we agreed for the release branch?",
            "Also, I'm off next Tuesday.",
        ),
        per_day=2,
    ),
    Place(
        "console:ops",
        "",
        ("you",),
        ("Redis maxmemory is 2 GB on the new box.", "Backups run at 03:00 UTC."),
        per_day=1,
    ),
)


# Memory settings for the demo: compact sooner than the defaults, so a short demo day
# already has a short tier to show.
DEMO_MEMORY = {"compact_trigger_tokens": 120, "compact_min_messages": 6, "compact_keep_tokens": 60}


async def seed_demo(core: Core, clock: ManualClock, *, days: int = 10) -> list[str]:
    """Feed ``days`` days of chat ending a few minutes ago (today twice as busy); returns
    the scopes made."""
    # Today's messages span up to ~5 hours before "now": early in the UTC day they would
    # fall into yesterday and today's summary would be empty (the page this demo shows),
    # so "now" is at least 10:00 today (the core's clock is a manual one set to it).
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    now = max(now, now.replace(hour=10, minute=0))
    for day in range(days + 1):
        for p_index, place in enumerate(PLACES):
            count = place.per_day * (2 if day == days else 1)
            for i in range(count):
                # Oldest first; the last message of today lands just before now.
                when = now - timedelta(days=days - day, minutes=23 * (count - i) + 3 * p_index)
                clock.set(when)
                line = place.lines[(day * place.per_day + i) % len(place.lines)]
                author = place.people[(day + i) % len(place.people)]
                await core.intake.accept(
                    IncomingMessage(
                        scope=place.scope,
                        text=line,
                        author=author,
                        author_id=author.lower(),
                        place_name=place.name,
                    )
                )
    clock.set(now)
    for place in PLACES:
        for note in place.notes:
            await core.admin.remember(place.scope, note, by=place.people[0])
    await core.admin.set_paused("console:ops", True)
    return [p.scope for p in PLACES]
