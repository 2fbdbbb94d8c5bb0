"""The fake OpenAI-compatible server lives in :mod:`bots.bench.fake_llm`, because the benchmarks
count requests and tokens with it too; the tests import it from here."""

from bots.bench.fake_llm import (
    PURPOSE_HEADER,
    FakeOpenAI,
    Fault,
    RecordedRequest,
    default_answer,
    embed_text,
)

__all__ = [
    "PURPOSE_HEADER",
    "FakeOpenAI",
    "Fault",
    "RecordedRequest",
    "default_answer",
    "embed_text",
]
