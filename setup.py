"""memorybot's extras, the one part of its metadata that pyproject.toml cannot hold.

The benchmarks (bench/) and what the tests and the benchmarks both start (testkit/) are
distributions of their own in this repository, so that neither ships with the bot. An extra
can pull in a folder of the repository only by an absolute file URL (a requirement has no
relative paths), so the extras are written here, where the checkout's path is known:

* ``bench``: the benchmarks (``memorybot bench``, ``memorybot eval``) and the testkit they use;
* ``dev``: the tests' tools, and the bench extra (``.ci/run`` runs the benchmarks too).

pip installs the two as copies, also under ``pip install -e '.[dev]'``: the suite imports them
from the checkout (pytest's ``pythonpath``); after changing bench/ or testkit/, run
``pip install -e ./bench -e ./testkit`` for ``memorybot bench`` to run the changed code.
"""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def local(name: str, folder: str) -> str:
    """A requirement on the distribution in ``folder`` of this repository."""
    return f"{name} @ {(HERE / folder).as_uri()}"


setup(
    extras_require={
        "bench": [local("memorybot-bench", "bench"), local("memorybot-testkit", "testkit")],
        "dev": [
            "memorybot[bench]",
            "pytest>=8",
            "pytest-asyncio>=0.24",
            "pytest-timeout>=2.3",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.11",
            "playwright>=1.45",
        ],
    }
)
