"""The local model's weights shared between processes (memory_core.recall.shared_weights):
read-only views of one file per array, equal to what the process loaded; written once,
written again when they differ, and not used where the directory is not the user's own."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from memory_core.recall import shared_weights


def model() -> SimpleNamespace:
    rng = np.random.default_rng(7)
    return SimpleNamespace(
        table=rng.integers(0, 255, size=(600, 512), dtype=np.uint8),  # 300 KB
        proj=rng.standard_normal((256, 128), dtype=np.float32),  # 128 KB
        small=np.arange(10, dtype=np.float32),  # stays the process's own
        branches=[rng.standard_normal((256, 64 * (n + 1)), dtype=np.float32) for n in range(3)],
        eps=1e-6,
    )


def test_big_arrays_become_read_only_views_of_files_equal_to_them(tmp_path: Path) -> None:
    loaded = model()
    before = {name: value.copy() for name, value in vars(loaded).items() if hasattr(value, "copy")}
    shared = shared_weights.share(loaded, name="m-1", directory=tmp_path / "w")
    assert shared == loaded.table.nbytes + loaded.proj.nbytes + sum(
        b.nbytes for b in loaded.branches
    )
    for name in ("table", "proj"):
        value = getattr(loaded, name)
        assert type(value) is np.ndarray and not value.flags.writeable
        assert np.array_equal(value, before[name]) and value.dtype == before[name].dtype
        assert (tmp_path / "w" / "m-1" / f"{name}.npy").is_file()
    assert all(not b.flags.writeable for b in loaded.branches)
    assert (tmp_path / "w" / "m-1" / "branches.2.npy").is_file()
    assert loaded.small.flags.writeable  # small: its own
    assert not (tmp_path / "w" / "m-1" / "small.npy").exists()
    with pytest.raises(ValueError, match="read-only"):
        loaded.proj[0, 0] = 1.0  # nobody writes into weights another process reads


def test_a_second_process_maps_the_files_the_first_wrote(tmp_path: Path) -> None:
    shared_weights.share(model(), name="m-1", directory=tmp_path)
    table = tmp_path / "m-1" / "table.npy"
    written = table.stat()
    again = model()
    assert shared_weights.share(again, name="m-1", directory=tmp_path) > 0
    assert table.stat().st_ino == written.st_ino  # not written again
    assert table.stat().st_mtime_ns == written.st_mtime_ns


def test_a_file_that_differs_from_the_loaded_weights_is_written_again(tmp_path: Path) -> None:
    shared_weights.share(model(), name="m-1", directory=tmp_path)
    proj = tmp_path / "m-1" / "proj.npy"
    wrong = np.load(proj)
    wrong[3, 3] += 1.0
    np.save(proj, wrong)
    (tmp_path / "m-1" / "table.npy").write_bytes(b"not an array")
    loaded = model()
    expected = model()
    shared_weights.share(loaded, name="m-1", directory=tmp_path)
    assert np.array_equal(loaded.proj, expected.proj)
    assert np.array_equal(np.load(proj), expected.proj)
    assert np.array_equal(loaded.table, expected.table)


def test_another_version_s_files_are_removed(tmp_path: Path) -> None:
    shared_weights.share(model(), name="m-1", directory=tmp_path)
    shared_weights.share(model(), name="m-2", directory=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-2"]


def test_a_directory_others_can_write_is_not_used(tmp_path: Path) -> None:
    place = tmp_path / "w"
    place.mkdir()
    place.chmod(0o777)
    loaded = model()
    assert shared_weights.share(loaded, name="m-1", directory=place) == 0
    assert loaded.proj.flags.writeable  # its own copy, untouched
    assert not (place / "m-1").exists()


def test_a_directory_of_another_user_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "w").mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: 54321)  # the directory is now not "ours"
    loaded = model()
    assert shared_weights.share(loaded, name="m-1", directory=tmp_path / "w") == 0
    assert loaded.table.flags.writeable


def test_the_default_directory_is_the_user_s_own_in_the_temporary_directory() -> None:
    where = shared_weights.weights_dir()
    assert where.parent == Path(tempfile.gettempdir()) / f"memorybot-{os.getuid()}"


def test_where_there_are_no_user_ids_the_weights_stay_the_process_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "getuid")
    loaded = model()
    assert shared_weights.share(loaded, name="m-1", directory=tmp_path) == 0
    assert loaded.proj.flags.writeable and not (tmp_path / "m-1").exists()
