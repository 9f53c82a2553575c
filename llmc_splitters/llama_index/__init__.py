"""The LlamaIndex face of llmc_splitters: ``CodeNodeParser`` (a ``NodeParser``), ``CodeParentRetriever`` and
``LocalEmbedding`` (the package's local model as a ``BaseEmbedding``).

Importing this subpackage imports ``llama_index.core`` (the opt-in); when it is missing it raises
:class:`~llmc_splitters.MissingDependencyError` with the line to install it:
``pip install 'llmc-splitters[llama-index]'``. ``CodeParentRetriever`` also needs ``tantivy`` when it is
built (``[bm25]``), and ``chromadb`` when it holds vectors (``[chroma]``). ``LocalEmbedding`` is imported on first use of the name, and its model loads
on its first embed call (``[embeddings]``).
"""

from importlib import import_module

from .node_parser import CodeNodeParser
from .retriever import CodeParentRetriever

__all__ = ["CodeNodeParser", "CodeParentRetriever", "LocalEmbedding"]

_LAZY = {"LocalEmbedding": "embedding"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
