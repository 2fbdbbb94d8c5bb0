"""Fixtures of the fault tests (crashes, outages, lost shards, chaos in the LLM).

They share everything with the other folders: ``make_core`` and the private Redis, and for the
platform outages the fakes, ``fake`` (set by ``pytestmark = pytest.mark.fake(...)``) and the
Discord ``world``, all in tests/conftest.py. A fixture two fault modules share belongs here.
"""
