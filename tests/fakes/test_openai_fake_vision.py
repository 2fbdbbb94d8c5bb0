"""The fake OpenAI server refuses what OpenAI's chat completions refuse in a message's content
(the API reference's content parts), so a caption call that passes here is shaped right."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.fakes.openai_server import content_error

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def image_part(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_a_caption_request_as_memorybot_sends_it_is_accepted() -> None:
    content = [{"type": "text", "text": "Describe it."}, image_part(data_url(PNG), detail="low")]
    assert content_error([{"role": "user", "content": content}]) is None
    assert content_error([{"role": "system", "content": "plain text is fine"}]) is None


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([], "non-empty"),
        ([{"role": "user", "content": []}], "non-empty array"),
        ([{"role": "user", "content": [{"type": "image", "url": "x"}]}], "type must be"),
        ([{"role": "user", "content": [{"type": "text", "content": "x"}]}], "a text part"),
        ([{"role": "system", "content": [image_part(data_url(PNG))]}], "only allowed in user"),
        ([{"role": "user", "content": [image_part(data_url(PNG), size=1)]}], "only url and"),
        ([{"role": "user", "content": [image_part(data_url(PNG), detail="max")]}], "detail"),
        ([{"role": "user", "content": [image_part("http://x/p.png")]}], "https URL or a base64"),
        ([{"role": "user", "content": [image_part("data:image/png;base64,@@")]}], "https URL"),
        ([{"role": "user", "content": [image_part(data_url(PNG, "image/bmp"))]}], "unsupported"),
        ([{"role": "user", "content": [image_part(data_url(b"GIF89a", "image/png"))]}], "valid"),
    ],
)
def test_content_openai_refuses_is_refused(messages: list[Any], says: str) -> None:
    problem = content_error(messages)
    assert problem is not None and says in problem
