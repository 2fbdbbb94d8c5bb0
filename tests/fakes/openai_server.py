"""The fake OpenAI-compatible server the tests talk to. It is written once, in the testkit
(testkit/memorybot_testkit/openai_server.py), because the benchmarks count requests and
tokens with it too; the tests import it from here."""

from memorybot_testkit.openai_server import (
    PURPOSE_HEADER,
    FakeOpenAI,
    Fault,
    RecordedRequest,
    content_error,
    default_answer,
    embed_text,
    fake_usage,
    stream_options_error,
)

__all__ = [
    "PURPOSE_HEADER",
    "FakeOpenAI",
    "Fault",
    "RecordedRequest",
    "content_error",
    "default_answer",
    "embed_text",
    "fake_usage",
    "stream_options_error",
]
