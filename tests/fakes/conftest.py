"""Fixtures of the fakes' own tests (tests/fakes/test_*.py).

The fakes themselves start through the shared ``fake`` fixture of tests/conftest.py, set by
each module's ``pytestmark = pytest.mark.fake(...)``; what one module alone needs (a Bolt app,
a client with a token) stays in that module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest


@pytest.fixture
async def raw_http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client, for requests no platform client would make."""
    async with aiohttp.ClientSession() as session:
        yield session
