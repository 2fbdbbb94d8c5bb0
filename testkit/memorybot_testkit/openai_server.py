"""A local fake of an OpenAI-compatible server (aiohttp), for tests and benchmarks.

It records every request, answers with scripted or default replies, and fails, rate-limits,
delays or returns garbage on demand. The real ``openai`` client is pointed at it through its
base URL; nothing is mocked inside the client.

Default answers are deterministic and carry the input forward, so tests can see that text
flowed through: a reply echoes the last user message; a summary call returns JSON whose
fields quote the start of the conversation text it was given.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PURPOSE_HEADER = "X-Memorybot-Purpose"


@dataclass
class RecordedRequest:
    purpose: str
    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def prompt_text(self) -> str:
        return "\n".join(_text_of(m.get("content", "")) for m in self.messages)

    @property
    def images(self) -> list[bytes]:
        """The images sent (decoded from their data URLs), in order."""
        return [
            _data_url(part["image_url"]["url"])[1]
            for m in self.messages
            if isinstance(m.get("content"), list)
            for part in m["content"]
            if part.get("type") == "image_url"
        ]


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return str(content)


# The image formats OpenAI's vision input takes, by the bytes they start with.
_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_DATA_URL = re.compile(r"data:([\w/+.-]+);base64,([A-Za-z0-9+/=]*)")


def _data_url(url: str) -> tuple[str, bytes]:
    """(MIME type, bytes) of a base64 data URL; ValueError when it is not a valid image."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise ValueError("image_url.url must be an https URL or a base64 data URL")
    mime = match.group(1)
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"invalid base64 image data: {exc}") from exc
    if mime not in _IMAGE_MAGIC:
        raise ValueError(f"unsupported image type {mime}: use png, jpeg, gif or webp")
    if not data.startswith(_IMAGE_MAGIC[mime]):
        raise ValueError(f"the image data is not a valid {mime} image")
    return mime, data


def content_error(messages: Any) -> str | None:
    """Why OpenAI's chat completions would refuse these messages' content (400), or None:
    a string, or (in a user message) an array of ``text`` and ``image_url`` parts, each
    shaped as the API reference says; an image only as an https or base64 data URL of a
    supported format."""
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            continue
        if not isinstance(content, list) or not content:
            return f"messages[{i}].content must be a string or a non-empty array of parts"
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if set(part) != {"type", "text"} or not isinstance(part["text"], str):
                    return f"{where}: a text part is {{type, text: string}}"
                continue
            if kind != "image_url":
                return f"{where}.type must be 'text' or 'image_url'"
            if message.get("role") != "user":
                return f"{where}: image content is only allowed in user messages"
            image = part.get("image_url")
            if set(part) != {"type", "image_url"} or not isinstance(image, dict):
                return f"{where}: an image part is {{type, image_url: {{url, detail?}}}}"
            if set(image) - {"url", "detail"} or image.get("detail", "auto") not in (
                "auto",
                "low",
                "high",
            ):
                return f"{where}.image_url: only url and detail (auto, low, high)"
            url = image.get("url")
            if not isinstance(url, str):
                return f"{where}.image_url.url must be a string"
            if not url.startswith("https://"):
                try:
                    _data_url(url)
                except ValueError as exc:
                    return f"{where}.image_url.url: {exc}"
    return None


@dataclass
class Fault:
    kind: str  # "status", "ratelimit", "malformed", "empty", "timeout"
    status: int = 500
    retry_after: float = 0.0
    purposes: tuple[str, ...] = ()  # empty = any purpose


Responder = Callable[[RecordedRequest], Awaitable[str | None] | str | None]


def _between(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
    return match.group(1).strip() if match else ""


SAME_MEANING = {"feline": "cat", "kitty": "cat", "kitten": "cat", "pet": "cat", "pets": "cat"}
FUNCTION_WORDS = {"any", "the", "and", "with", "was", "what", "who", "how", "you", "are", "did"}


def embed_text(text: str, dims: int = 64) -> list[float]:
    """Content words only, as a meaning model would weigh them."""
    vec = [0.0] * dims
    for word in re.findall(r"[a-z]{3,}", text.lower()):
        if word in FUNCTION_WORDS:
            continue
        word = SAME_MEANING.get(word, word)
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
    return vec


def default_answer(request: RecordedRequest) -> str:
    """A deterministic answer that shows what it was given."""
    if request.purpose == "reply":
        last = request.messages[-1].get("content", "") if request.messages else ""
        return f"ACK: {str(last)[:200]}"
    if request.purpose == "caption":
        # What a vision model reads in the picture: here, the words written in its bytes.
        words = re.findall(rb"[A-Za-z][A-Za-z ,.'-]{3,}", b"".join(request.images))
        return "A picture showing " + " ".join(w.decode() for w in words)[:300] + "."
    text = request.prompt_text
    if request.purpose == "compact":
        previous = _between(text, "previous")
        messages = _between(text, "messages")
        merged = (previous + " | " if previous else "") + messages.replace("\n", " / ")
        return json.dumps({"summary": "S: " + merged[:600], "facts": []}, ensure_ascii=False)
    days = _between(text, "days").replace("\n", " / ")
    long = _between(text, "long")
    answer = {"mid": "MID: " + days[:500], "overview": "OV: " + (long[:200] + " " + days[:300])}
    if "<week>" in text:
        week = _between(text, "week").replace("\n", " / ")
        answer["week"] = "WEEK: " + week[:500]
        answer["long"] = "LONG: " + (long[:300] + " " + week[:300])
    return json.dumps(answer, ensure_ascii=False)


@dataclass
class FakeOpenAI:
    """Start with ``await fake.start()``; point clients at ``fake.base_url``."""

    host: str = "127.0.0.1"
    delay: float = 0.0
    slow: dict[str, float] = field(default_factory=dict)  # extra delay by purpose
    chaos: float = 0.0  # share of requests that fail at random (500, 429, timeout, garbage)
    chaos_seed: int = 1
    # Requests that failed, and every request, in order (left out of the repr: a property
    # test's failing example would print megabytes of prompts instead of its plan).
    faulted: list[RecordedRequest] = field(default_factory=list, repr=False)
    down: bool = False  # every request fails with 503 while True
    responder: Responder | None = None  # None: default_answer
    requests: list[RecordedRequest] = field(default_factory=list, repr=False)
    _faults: list[Fault] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _rng: random.Random | None = None
    chaos_timeout_s: float = 2.0  # how long a "timeout" answer hangs (above the client's)
    stream_piece_chars: int = 20  # a streamed answer comes in pieces of this many characters
    stream_piece_delay: float = 0.0  # ...this many seconds apart (a slow model)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # full history grows past 1 MB
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server: Any = site._server  # aiohttp keeps the listening socket here
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops (a slow answer must not hold up
        the test that stops it)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- failure injection -------------------------------------------------------------
    def fail_next(
        self, count: int = 1, *, status: int = 500, purposes: tuple[str, ...] = ()
    ) -> None:
        self._faults.extend(Fault("status", status=status, purposes=purposes) for _ in range(count))

    def rate_limit_next(
        self, count: int = 1, *, retry_after: float = 0.05, purposes: tuple[str, ...] = ()
    ) -> None:
        self._faults.extend(
            Fault("ratelimit", status=429, retry_after=retry_after, purposes=purposes)
            for _ in range(count)
        )

    def malformed_next(self, count: int = 1, *, purposes: tuple[str, ...] = ()) -> None:
        self._faults.extend(Fault("malformed", purposes=purposes) for _ in range(count))

    def empty_next(self, count: int = 1, *, purposes: tuple[str, ...] = ()) -> None:
        self._faults.extend(Fault("empty", purposes=purposes) for _ in range(count))

    def timeout_next(self, count: int = 1, *, seconds: float = 5.0) -> None:
        self._faults.extend(Fault("timeout", retry_after=seconds) for _ in range(count))

    # -- queries -----------------------------------------------------------------------
    def of(self, purpose: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.purpose == purpose]

    def count(self, *purposes: str) -> int:
        if not purposes:
            return len(self.requests)
        return sum(1 for r in self.requests if r.purpose in purposes)

    # -- handlers ----------------------------------------------------------------------
    def _chaos(self, purpose: str) -> Fault | None:
        if not self.chaos:
            return None
        if self._rng is None:
            self._rng = random.Random(self.chaos_seed)
        if self._rng.random() >= self.chaos:
            return None
        kinds = ["status", "ratelimit", "timeout"]
        kinds.append("empty" if purpose == "reply" else "malformed")
        kind = self._rng.choice(kinds)
        if kind == "status":
            return Fault("status", status=self._rng.choice([500, 502, 503]))
        if kind == "ratelimit":
            return Fault("ratelimit", status=429, retry_after=0.05)
        if kind == "timeout":
            return Fault("timeout", retry_after=self.chaos_timeout_s)
        return Fault(kind)

    def _take_fault(self, purpose: str) -> Fault | None:
        for i, fault in enumerate(self._faults):
            if not fault.purposes or purpose in fault.purposes:
                return self._faults.pop(i)
        return None

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        """Deterministic 64-dimension bag-of-words vectors, where a few words share a meaning
        (so tests can show a match by meaning that no shared word explains)."""
        body = await request.json()
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        self.requests.append(
            RecordedRequest(
                "embed", str(body.get("model", "")), [], body, dict(request.headers), time.time()
            )
        )
        if self.down:
            return _error(503, "the fake LLM is down")
        data = [
            {"object": "embedding", "index": i, "embedding": embed_text(text)}
            for i, text in enumerate(texts)
        ]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        recorded = RecordedRequest(
            purpose=request.headers.get(PURPOSE_HEADER, "unknown"),
            model=str(body.get("model", "")),
            messages=list(body.get("messages", [])),
            body=body,
            headers=dict(request.headers),
            at=time.time(),
        )
        self.requests.append(recorded)
        if (problem := content_error(body.get("messages"))) is not None:
            return _error(400, problem)
        if (problem := stream_options_error(body)) is not None:
            return _error(400, problem)
        if self.delay or recorded.purpose in self.slow:
            await self._pause(self.delay + self.slow.get(recorded.purpose, 0.0))
        if self.down:
            return _error(503, "the fake LLM is down")
        fault = self._take_fault(recorded.purpose) or self._chaos(recorded.purpose)
        if fault is not None:
            self.faulted.append(recorded)
        text: str | None
        if fault is not None and fault.kind == "status":
            return _error(fault.status, "injected failure")
        if fault is not None and fault.kind == "ratelimit":
            return _error(429, "rate limited", headers={"Retry-After": str(fault.retry_after)})
        if fault is not None and fault.kind == "timeout":
            await self._pause(fault.retry_after)
            return _error(504, "too slow")
        if fault is not None and fault.kind == "malformed":
            text = "this is {not json" if recorded.purpose != "reply" else "\u0000"
        elif fault is not None and fault.kind == "empty":
            text = ""
        else:
            text = await self._answer(recorded)
            if text is None:
                text = default_answer(recorded)
        if body.get("stream"):
            return await self._stream(request, recorded, text)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": recorded.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": fake_usage(recorded, text),
            }
        )

    async def _answer(self, recorded: RecordedRequest) -> str | None:
        if self.responder is None:
            return None
        answer = self.responder(recorded)
        if asyncio.iscoroutine(answer) or isinstance(answer, Awaitable):
            return await answer
        return answer

    async def _stream(
        self, request: web.Request, recorded: RecordedRequest, text: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        size = max(1, self.stream_piece_chars)
        pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        # OpenAI: with stream_options.include_usage, every chunk carries "usage": null and
        # one extra chunk before [DONE] has "choices": [] and the whole request's usage.
        with_usage = bool((recorded.body.get("stream_options") or {}).get("include_usage"))
        for i, piece in enumerate(pieces):
            if i and self.stream_piece_delay:
                await self._pause(self.stream_piece_delay)
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            await response.write(_event(recorded, delta, None, with_usage=with_usage))
        # As OpenAI does: a last chunk with an empty delta and the finish reason.
        await response.write(_event(recorded, {}, "stop", with_usage=with_usage))
        if with_usage:
            await response.write(_usage_event(recorded, text))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _event(
    recorded: RecordedRequest,
    delta: dict[str, str],
    finish: str | None,
    *,
    with_usage: bool = False,
) -> bytes:
    """One server-sent event of a streamed chat completion."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": recorded.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if with_usage:
        chunk["usage"] = None
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _usage_event(recorded: RecordedRequest, text: str) -> bytes:
    """The last chunk of a stream asked for its usage: no choices, the request's usage."""
    chunk = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": recorded.model,
        "choices": [],
        "usage": fake_usage(recorded, text),
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def fake_prompt_tokens(recorded: RecordedRequest) -> int:
    return max(1, len(recorded.prompt_text) // 4)


def fake_usage(recorded: RecordedRequest, text: str) -> dict[str, int]:
    """The usage figures the fake reports: about four characters a token, at least one."""
    prompt, completion = fake_prompt_tokens(recorded), max(1, len(text) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def stream_options_error(body: dict[str, Any]) -> str | None:
    """What OpenAI refuses about ``stream_options``: only with ``stream: true``, and an
    object whose ``include_usage`` is a boolean."""
    if "stream_options" not in body or body["stream_options"] is None:
        return None
    if not body.get("stream"):
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    options = body["stream_options"]
    if not isinstance(options, dict):
        return "Invalid type for 'stream_options': expected an object."
    if "include_usage" in options and not isinstance(options["include_usage"], bool):
        return "Invalid type for 'stream_options.include_usage': expected a boolean."
    return None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "fake_error", "code": status}},
        status=status,
        headers=headers,
    )
