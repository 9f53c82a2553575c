"""The whole index (spans, BM25, vectors) on Milvus: :class:`MilvusStore`.

Install with ``pip install 'llmc-splitters[milvus]'`` (``pymilvus`` and ``milvus-lite``); nothing here imports
``pymilvus`` until a store is opened.
"""

from __future__ import annotations

from .client import MilvusStoreError
from .store import MilvusStore

__all__ = ["MilvusStore", "MilvusStoreError"]
