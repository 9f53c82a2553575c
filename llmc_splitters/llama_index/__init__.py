"""The LlamaIndex face of llmc_splitters: ``CodeNodeParser`` (a ``NodeParser``) and ``CodeParentRetriever``.

Importing this subpackage imports ``llama_index.core`` (the opt-in); when it is missing it raises
:class:`~llmc_splitters.MissingDependencyError` with the line to install it:
``pip install 'llmc-splitters[llama-index]'``. ``CodeParentRetriever`` also needs ``chromadb`` and ``bm25s`` when it
is built (``[chroma]``, ``[bm25]``).
"""

from .node_parser import CodeNodeParser
from .retriever import CodeParentRetriever

__all__ = ["CodeNodeParser", "CodeParentRetriever"]
