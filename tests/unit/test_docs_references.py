"""The README and docs/ point readers at the tests that prove each promise: every test file
and test they name exists (a rename or a move must not leave a promise pointing nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

CITED = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?")


def missing_citations(root: Path, docs: list[Path]) -> list[str]:
    """``doc: tests/x.py[::name]`` for each cited file or test that does not exist."""
    missing = []
    for doc in docs:
        for match in CITED.finditer(doc.read_text(encoding="utf-8")):
            path, name = root / match.group(1), match.group(2)
            defined = path.is_file() and (
                not name or re.search(rf"def {name}\b", path.read_text(encoding="utf-8"))
            )
            if not defined:
                missing.append(f"{doc.name}: {match.group(0)}")
    return missing


def test_a_citation_of_a_file_or_test_that_is_not_there_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_real.py").write_text("def test_here():\n    pass\n")
    doc = tmp_path / "README.md"
    doc.write_text(
        "`tests/test_real.py::test_here`, `tests/test_real.py`, "
        "`tests/test_real.py::test_gone`, `tests/test_moved.py`"
    )
    assert missing_citations(tmp_path, [doc]) == [
        "README.md: tests/test_real.py::test_gone",
        "README.md: tests/test_moved.py",
    ]


def test_the_readme_and_docs_cite_tests_that_exist() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert missing_citations(ROOT, docs) == []
