"""The fake OpenAI server treats ``stream_options`` as OpenAI documents it: allowed only with
``stream: true``, an object whose ``include_usage`` is a boolean; and only then does a
stream end with the usage chunk (``choices: []``), every other chunk carrying
``usage: null``."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI, stream_options_error


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"stream_options": {"include_usage": True}}, "only allowed when 'stream' is enabled"),
        ({"stream": False, "stream_options": {}}, "only allowed when 'stream' is enabled"),
        ({"stream": True, "stream_options": "yes"}, "expected an object"),
        ({"stream": True, "stream_options": {"include_usage": 1}}, "expected a boolean"),
    ],
)
def test_stream_options_openai_refuses_are_refused(body: dict[str, Any], says: str) -> None:
    problem = stream_options_error(body)
    assert problem is not None and says in problem


def test_stream_options_as_memorybot_sends_them_are_accepted() -> None:
    assert stream_options_error({"stream": True, "stream_options": {"include_usage": True}}) is None
    assert stream_options_error({"stream": False}) is None


async def chunks(fake: FakeOpenAI, **body: Any) -> list[dict[str, Any]]:
    request = {"model": "m", "messages": [{"role": "user", "content": "hello"}], **body}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake.base_url}/chat/completions", json=request) as response,
    ):
        assert response.status == 200, await response.text()
        raw = await response.text()
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


async def test_the_usage_chunk_comes_only_when_asked_for(fake_llm: FakeOpenAI) -> None:
    plain = await chunks(fake_llm, stream=True)
    assert all("usage" not in c and c["choices"] for c in plain)
    asked = await chunks(fake_llm, stream=True, stream_options={"include_usage": True})
    *pieces, last = asked
    assert all(c["usage"] is None and c["choices"] for c in pieces)
    assert last["choices"] == [] and last["usage"]["total_tokens"] > 0
    usage = last["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_stream_options_without_stream_is_a_400(fake_llm: FakeOpenAI) -> None:
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "stream_options": {"include_usage": True},
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake_llm.base_url}/chat/completions", json=request) as response,
    ):
        assert response.status == 400
        assert "stream" in (await response.json())["error"]["message"]
