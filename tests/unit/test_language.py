import pytest

from memory_core.text.language import detect, resolve


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("hello there", "en"),
        ("こんにちは", "ja"),
        ("明日のミーティングは10時からです", "ja"),
        ("Redisのキャッシュを見直しましょう", "ja"),
        ("", "en"),
    ],
)
def test_detect(text: str, lang: str) -> None:
    assert detect(text) == lang


def test_resolve_prefers_the_setting() -> None:
    assert resolve("en", ["こんにちは"]) == "en"
    assert resolve("auto", ["こんにちは"]) == "ja"
    assert resolve("", ["hello"]) == "en"
