"""The language model: any OpenAI-compatible endpoint, or none (offline mode).

One client for the process, with its own retries (so a 429's Retry-After is honoured and
every attempt is counted), a concurrency limit, and counters by purpose for the
dashboard, the benchmarks and the CLI reports.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from config.settings import LLMSettings
from memory_core.errors import LLMBadOutput, LLMOffline, LLMUnavailable

Purpose = Literal["reply", "compact", "refresh", "caption"]
ChatMessage = Mapping[str, str]
# Told the API's usage figures after each successful call: (purpose, prompt, completion).
# The budget counts with it (memory_core.fleet.spending); it must never raise.
UsageHook = Callable[[str, int, int], Awaitable[None]]
PURPOSE_HEADER = "X-Memorybot-Purpose"
T = TypeVar("T")
log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True, slots=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str


@dataclass(slots=True)
class PurposeStats:
    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class LLMStats:
    by_purpose: dict[str, PurposeStats] = field(default_factory=dict)

    def of(self, purpose: str) -> PurposeStats:
        return self.by_purpose.setdefault(purpose, PurposeStats())

    def calls(self, *purposes: str) -> int:
        chosen = purposes or tuple(self.by_purpose)
        return sum(self.of(p).calls for p in chosen)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            p: {
                "calls": s.calls,
                "failures": s.failures,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "seconds": round(s.seconds, 3),
            }
            for p, s in sorted(self.by_purpose.items())
        }


class LLM(Protocol):
    offline: bool
    stats: LLMStats

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        json_output: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResult: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose = "reply",
        max_tokens: int | None = None,
    ) -> AsyncGenerator[str, None]: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def describe_image(
        self, image: bytes, *, mime: str, instruction: str, max_tokens: int
    ) -> ChatResult: ...

    async def close(self) -> None: ...


class RateLimiter(Protocol):
    async def acquire(self) -> None: ...


class OfflineLLM:
    """No model configured: every call says so, and callers use their offline paths."""

    offline = True

    def __init__(self) -> None:
        self.stats = LLMStats()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        json_output: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResult:
        raise LLMOffline("no LLM is configured: set OPENAI_API_KEY or OPENAI_BASE_URL")

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose = "reply",
        max_tokens: int | None = None,
    ) -> AsyncGenerator[str, None]:
        raise LLMOffline("no LLM is configured: set OPENAI_API_KEY or OPENAI_BASE_URL")
        yield ""  # pragma: no cover - makes this an async generator

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise LLMOffline("no LLM is configured: set OPENAI_API_KEY or OPENAI_BASE_URL")

    async def describe_image(
        self, image: bytes, *, mime: str, instruction: str, max_tokens: int
    ) -> ChatResult:
        raise LLMOffline("no LLM is configured: set OPENAI_API_KEY or OPENAI_BASE_URL")

    async def close(self) -> None:
        return None


def _sendable(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as JSON can carry them: lone surrogates (a "\\ud800" escape in a
    platform's JSON) are not UTF-8 and would fail the request, so they become "?". Content
    that is not a string (a caption call's content parts) is ours, and sent as it is."""
    return [
        {
            k: v.encode("utf-8", "replace").decode("utf-8") if isinstance(v, str) else v
            for k, v in m.items()
        }
        for m in messages
    ]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                continue
            return value / 1000 if name.endswith("-ms") else value
    return None


class OpenAICompatLLM:
    """AsyncOpenAI pointed at OpenAI, Azure, Ollama, vLLM, LM Studio, OpenRouter..."""

    offline = False

    def __init__(
        self,
        settings: LLMSettings,
        *,
        limiter: RateLimiter | None = None,
        on_usage: UsageHook | None = None,
    ) -> None:
        import openai  # imported here: it takes a second, and offline mode never needs it

        self._settings = settings
        self._limiter = limiter
        self._on_usage = on_usage
        self._client = openai.AsyncOpenAI(
            # Local servers (Ollama, vLLM) need no key, but the client insists on one.
            api_key=settings.api_key.get_secret_value() if settings.api_key else "not-needed",
            base_url=settings.base_url or None,
            timeout=settings.timeout_s,
            max_retries=0,  # retries are ours: counted, and Retry-After honoured
        )
        self._calls_at_once = asyncio.Semaphore(settings.concurrency)
        self.stats = LLMStats()

    def _model(self, purpose: Purpose) -> str:
        if purpose == "caption":
            return self._settings.vision_model or self._settings.chat_model
        return self._settings.chat_model if purpose == "reply" else self._settings.summary_model

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        json_output: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResult:
        result = await self._retrying(
            purpose, lambda: self._call_once(messages, purpose, json_output, max_tokens)
        )
        stats = self.stats.of(purpose)
        stats.prompt_tokens += result.prompt_tokens
        stats.completion_tokens += result.completion_tokens
        await self._used(purpose, result.prompt_tokens, result.completion_tokens)
        return result

    async def _used(self, purpose: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Tell the usage hook (the budget) what a call cost; a hook that fails is logged,
        never the caller's failure."""
        if self._on_usage is None or not (prompt_tokens or completion_tokens):
            return
        try:
            await self._on_usage(purpose, prompt_tokens, completion_tokens)
        except Exception:
            log.exception("could not count the tokens of a %s call", purpose)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of ``texts`` with the configured embedding model, in order."""
        model = self._settings.embedding_model
        if not model:
            raise LLMOffline("no embedding model is configured (llm.embedding_model)")

        async def once() -> list[list[float]]:
            import openai

            async with self._calls_at_once:
                if self._limiter is not None:
                    await self._limiter.acquire()
                try:
                    response = await self._client.embeddings.create(
                        model=model,
                        input=[t.encode("utf-8", "replace").decode("utf-8") for t in texts],
                        extra_headers={PURPOSE_HEADER: "embed"},
                    )
                except openai.OpenAIError as exc:
                    raise self._translate(exc, model) from exc
            vectors = [
                list(item.embedding) for item in sorted(response.data, key=lambda d: d.index)
            ]
            if len(vectors) != len(texts):
                raise LLMBadOutput(f"{model} returned {len(vectors)} embeddings for {len(texts)}")
            usage = getattr(response, "usage", None)
            await self._used("embed", int(getattr(usage, "prompt_tokens", 0) or 0), 0)
            return vectors

        return await self._retrying("embed", once)

    async def describe_image(
        self, image: bytes, *, mime: str, instruction: str, max_tokens: int
    ) -> ChatResult:
        """One caption call to the vision model: ``instruction`` and the image as a data
        URL in one user message (OpenAI's content parts), with our retries and counters
        (purpose "caption"). The bytes live only in this request."""
        if not self._settings.vision_model:
            raise LLMOffline("no vision model is configured (llm.vision_model)")
        url = f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
        content: list[dict[str, Any]] = [
            {"type": "text", "text": instruction},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        messages: list[Mapping[str, Any]] = [{"role": "user", "content": content}]
        result = await self._retrying(
            "caption", lambda: self._call_once(messages, "caption", False, max_tokens)
        )
        stats = self.stats.of("caption")
        stats.prompt_tokens += result.prompt_tokens
        stats.completion_tokens += result.completion_tokens
        await self._used("caption", result.prompt_tokens, result.completion_tokens)
        return result

    async def _retrying(self, purpose: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` with our retries: back-off with jitter, Retry-After honoured, every
        attempt counted."""
        settings = self._settings
        stats = self.stats.of(purpose)
        last_error: LLMUnavailable | None = None
        for attempt in range(settings.max_retries + 1):
            if attempt:
                delay = min(
                    settings.backoff_max_s,
                    settings.backoff_base_s * 2 ** (attempt - 1) * (1 + random.random() / 2),
                )
                if last_error is not None and last_error.retry_after is not None:
                    delay = min(settings.backoff_max_s, max(delay, last_error.retry_after))
                await asyncio.sleep(delay)
            started = time.perf_counter()
            stats.calls += 1
            try:
                result = await call()
            except LLMUnavailable as exc:
                stats.failures += 1
                stats.seconds += time.perf_counter() - started
                last_error = exc
                if exc.retry_after == -1:  # not retryable
                    break
                continue
            except LLMBadOutput:
                stats.failures += 1
                stats.seconds += time.perf_counter() - started
                raise
            stats.seconds += time.perf_counter() - started
            return result
        assert last_error is not None
        raise LLMUnavailable(str(last_error), retry_after=last_error.retry_after) from last_error

    def _kwargs(
        self, purpose: Purpose, json_output: bool, max_tokens: int | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self._model(purpose),
            "extra_headers": {PURPOSE_HEADER: purpose},
        }
        if json_output and self._settings.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if purpose == "reply":
            kwargs["temperature"] = self._settings.temperature
        return kwargs

    def _translate(self, exc: Exception, model: str) -> LLMUnavailable:
        """The SDK's errors as ours, each saying what to check."""
        import openai

        if isinstance(exc, openai.RateLimitError):
            return LLMUnavailable(
                f"rate limited by the LLM ({model})", retry_after=_retry_after(exc)
            )
        if isinstance(exc, openai.APITimeoutError):
            return LLMUnavailable(f"the LLM timed out after {self._settings.timeout_s}s")
        if isinstance(exc, openai.APIConnectionError):
            where = self._settings.base_url or "api.openai.com"
            return LLMUnavailable(f"cannot reach the LLM at {where} (check OPENAI_BASE_URL)")
        if isinstance(exc, openai.AuthenticationError):
            return LLMUnavailable(
                "the LLM refused the API key (check OPENAI_API_KEY)", retry_after=-1
            )
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409)
            return LLMUnavailable(
                f"the LLM answered HTTP {exc.status_code} for model {model}",
                retry_after=None if retryable else -1,
            )
        return LLMUnavailable(f"LLM error: {type(exc).__name__}")

    async def _call_once(
        self,
        messages: Sequence[Mapping[str, Any]],
        purpose: Purpose,
        json_output: bool,
        max_tokens: int | None,
    ) -> ChatResult:
        import openai

        kwargs = self._kwargs(purpose, json_output, max_tokens)
        model = kwargs["model"]
        async with self._calls_at_once:
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                # The SDK's overloads want TypedDict messages; ours are plain mappings.
                create: Any = self._client.chat.completions.create
                response = await create(messages=_sendable(messages), **kwargs)
            except openai.OpenAIError as exc:
                raise self._translate(exc, model) from exc
        choices = getattr(response, "choices", None) or []
        text = ""
        if choices and choices[0].message is not None:
            text = (choices[0].message.content or "").strip()
        if not text:
            raise LLMBadOutput(f"the LLM ({model}) returned an empty answer")
        usage = getattr(response, "usage", None)
        return ChatResult(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=model,
        )

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose = "reply",
        max_tokens: int | None = None,
    ) -> AsyncGenerator[str, None]:
        """The answer piece by piece (no retries: a reply that fails is an apology). A
        caller that stops reading early closes the generator, which closes the response."""
        import openai

        kwargs = self._kwargs(purpose, False, max_tokens)
        if self._settings.stream_usage:
            # OpenAI's documented way to learn a stream's usage: one last chunk before
            # [DONE] with "choices": [] and "usage" (every other chunk has "usage": null).
            kwargs["stream_options"] = {"include_usage": True}
        stats = self.stats.of(purpose)
        stats.calls += 1
        started = time.perf_counter()
        pieces: list[str] = []
        usage: Any = None
        async with self._calls_at_once:
            try:
                # A streamed request is a request like any other for the fleet's rpm limit.
                if self._limiter is not None:
                    await self._limiter.acquire()
                create: Any = self._client.chat.completions.create
                response = await create(messages=_sendable(messages), stream=True, **kwargs)
                async with response:
                    async for chunk in response:
                        usage = getattr(chunk, "usage", None) or usage
                        choices = getattr(chunk, "choices", None) or []
                        delta = choices[0].delta.content if choices and choices[0].delta else None
                        if delta:
                            pieces.append(delta)
                            yield delta
            except openai.OpenAIError as exc:
                stats.failures += 1
                raise self._translate(exc, kwargs["model"]) from exc
            finally:
                stats.seconds += time.perf_counter() - started
                await self._stream_used(purpose, messages, pieces, usage)
        if not pieces:
            stats.failures += 1
            raise LLMBadOutput(f"the LLM ({kwargs['model']}) returned an empty answer")

    async def _stream_used(
        self, purpose: Purpose, messages: Sequence[ChatMessage], pieces: list[str], usage: Any
    ) -> None:
        """Count a stream's tokens, also when the reader stopped early (what was generated
        is billed): the API's usage chunk when it sent one; else (an endpoint that ignores
        stream_options, or a stream cut before its end) our own count of the prompt and of
        the answer so far, with the same cl100k ruler as the prompt budget."""
        if not pieces:
            return
        if usage is not None:
            prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(usage, "completion_tokens", 0) or 0)
        else:
            from memory_core.text.tokens import TokenCounter

            counter = TokenCounter()
            prompt = counter.count_messages(messages)
            completion = counter.count("".join(pieces))
        stats = self.stats.of(purpose)
        stats.prompt_tokens += prompt
        stats.completion_tokens += completion
        await self._used(purpose, prompt, completion)

    async def close(self) -> None:
        await self._client.close()


def build_llm(
    settings: LLMSettings,
    *,
    limiter: RateLimiter | None = None,
    on_usage: UsageHook | None = None,
) -> LLM:
    if settings.offline:
        return OfflineLLM()
    return OpenAICompatLLM(settings, limiter=limiter, on_usage=on_usage)
