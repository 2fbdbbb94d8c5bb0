"""Fixtures of the hostile tests: cores to throw garbage at, as each family of tests needs one (the
shared ones, such as make_core and the fakes, are in tests/conftest.py).
"""

from __future__ import annotations

import pytest

from memory_core.bootstrap import Core
from tests.helpers import CoreFactory


@pytest.fixture
async def core(make_core: CoreFactory) -> Core:
    return await make_core()


@pytest.fixture
async def offline_core(make_core: CoreFactory) -> Core:
    return await make_core(offline=True)


@pytest.fixture
async def meaning_core(make_core: CoreFactory) -> Core:
    # Recall by meaning, as installed: the local sentence encoder embeds each question.
    return await make_core(memory={"recall_embedder": "local"})
