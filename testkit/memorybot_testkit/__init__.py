"""What the tests and the benchmarks both start and talk to, written once: Redis servers and
Redis Clusters of their own on loopback (:mod:`memorybot_testkit.redis_servers`) and a fake
OpenAI-compatible model that records every request (:mod:`memorybot_testkit.openai_server`).

A distribution of its own (testkit/pyproject.toml), installed by memorybot's ``bench`` and
``dev`` extras: neither the bot nor the benchmarks own it, and it never ships with the bot."""
