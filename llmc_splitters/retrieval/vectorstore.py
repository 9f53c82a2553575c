"""An index whose vectors live in any LangChain ``VectorStore``, not only Chroma: :func:`code_index`.

The adapter itself (:class:`~llmc_splitters.retrieval.storage.langchain_vectors.VectorStoreAdapter`, with
:class:`~llmc_splitters.retrieval.storage.langchain_vectors.StoreEmbedding`) is one of the stores the index composes and
lives below it, in :mod:`.langchain_store`; both names import from here too.

Example:
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from llmc_splitters.retrieval import CodeRetriever, HashingEmbedding
    >>> r = CodeRetriever(index=code_index(InMemoryVectorStore(HashingEmbedding(32))), k=1, max_context_tokens=100)
    >>> _ = r.index_texts({"m.py": "import os\\n\\ndef home():\\n    return os.environ['HOME']\\n"})
    >>> r.search("home directory").hits[0].span.name
    'home'
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from ..errors import ConfigurationError
from .storage.langchain_vectors import StoreEmbedding, VectorStoreAdapter

__all__ = ["StoreEmbedding", "VectorStoreAdapter", "code_index"]


def code_index(vectorstore: Any, docstore: Any = None, *, path: str | os.PathLike[str] | None = None,
               namespace: str = "llmc", **kwargs: Any) -> Any:
    """A :class:`~llmc_splitters.retrieval.CodeIndex` whose vectors live in a LangChain vector store.

    Dense search uses the vector store's own model (see :class:`StoreEmbedding`); a store without ``embeddings``
    gives a lexical-only index. Spans and the lexical index live in ``path`` (a temporary directory without it).
    ``kwargs`` go to ``CodeIndex`` (``chunker``, ``max_tokens``, ``tokenizer``, ...).

    Args:
        vectorstore: The LangChain ``VectorStore``.
        docstore: Not used since 0.2 (spans live in the index's span store at ``path``); a warning says so.
        path: The index directory.
        namespace: See :class:`VectorStoreAdapter`.

    Raises:
        ConfigurationError: ``embedding`` is passed (the vector store's model is used).
    """
    from .index import CodeIndex

    if "embedding" in kwargs:
        msg = "code_index() uses the vector store's own model; do not pass embedding="
        raise ConfigurationError(msg)
    if docstore is not None:
        warnings.warn("code_index(vectorstore, docstore): the docstore is not used since llmc-splitters 0.2; spans "
                      "live in the index directory (path=)", DeprecationWarning, stacklevel=2)
    if getattr(vectorstore, "embeddings", None) is None:
        return CodeIndex(path, **kwargs)
    adapter = VectorStoreAdapter(vectorstore, namespace=namespace)
    return CodeIndex(path, vectors=adapter, embedding=adapter.embedding, **kwargs)
