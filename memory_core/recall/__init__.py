"""Recall: an index per scope of everything said (BM25 over stemmed terms, vectors from an
embedder, fused by rank), kept in the store and searched when a reply is written."""

from __future__ import annotations

from memory_core.recall.documents import Doc, Hit
from memory_core.recall.embedding import LocalEmbedder
from memory_core.recall.index import RecallIndex
from memory_core.recall.vectors import Embedder

__all__ = ["Doc", "Embedder", "Hit", "LocalEmbedder", "RecallIndex"]
