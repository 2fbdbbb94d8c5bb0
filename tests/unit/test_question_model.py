"""The query embedder's pass (tokens' first layers kept) gives the model's own vectors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from memory_core.recall import question_model
from memory_core.recall.embedding import encode_sync, loaded_model
from memory_core.recall.question_model import QuestionModel

TEXTS = [
    "When does Carol arrive?",
    "Carol arrives on March 4 at the north gate",
    "キャロルは3月4日に北門に着きます。いつ着きますか？",
    "",
    "ok ok ok ok ok ok ok ok",
    "🎉 release v2.3.1 shipped — thanks @bob! https://example.com/notes#42",
    " ".join(f"word{i} alpha beta" for i in range(150)),  # past the model's 384-token batch
]


@pytest.fixture(scope="module")
def model() -> QuestionModel:
    loaded = question_model.load(loaded_model())
    assert loaded is not None, "the installed model is the one the pass was written for"
    return loaded


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 2e-5
    cosines = np.einsum("ij,ij->i", got, want)
    assert cosines.min() > 0.99999


def test_the_same_vectors_as_the_model(model: QuestionModel) -> None:
    want = encode_sync(TEXTS)
    _close(model.encode(TEXTS), want)
    _close(model.encode(TEXTS), want)  # again, every token kept this time
    assert np.allclose(np.linalg.norm(model.encode(TEXTS), axis=1), 1.0, atol=1e-5)


def test_tokens_pushed_out_and_learned_again() -> None:
    small = QuestionModel(loaded_model()._model, capacity=12)
    texts = TEXTS[:3] + TEXTS[:3][::-1] + ["x y z " * 5]
    _close(small.encode(texts), encode_sync(texts))
    assert len(small.rows) == 12  # full, never more
    # A text with more distinct tokens than the tables hold takes the model's own pass.
    _close(small.encode(TEXTS[-1:]), encode_sync(TEXTS[-1:]))


def test_a_different_model_is_not_taken() -> None:
    assert question_model.load(SimpleNamespace()) is None  # no backend at all
    backend = loaded_model()._model
    narrow = SimpleNamespace(
        _model=SimpleNamespace(
            proj_W=np.zeros((512, 512)), w1=backend.w1, w2=backend.w2, table=backend.table
        )
    )
    assert question_model.load(narrow) is None
