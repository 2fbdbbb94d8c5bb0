"""Fixtures of the integration tests.

They run a real Core on the private Redis with the fake OpenAI: ``make_core``, ``clean_redis``,
``redis_target`` (single server or cluster, see CLUSTER_MODULES), ``fake_llm`` and ``papaya``
come from tests/conftest.py, being shared with the other folders. A fixture only one module
needs (a dashboard ``site``, a ``lane``) stays in that module, next to the data its tests
check; a fixture two integration modules share belongs here.
"""
