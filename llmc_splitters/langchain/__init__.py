"""The LangChain face of llmc_splitters: ``CodeTextSplitter`` (a ``TextSplitter``) and ``CodeParentRetriever``.

Importing this subpackage imports ``langchain_core`` and ``langchain_text_splitters`` (the opt-in); when they are
missing it raises :class:`~llmc_splitters.MissingDependencyError` with the line to install them:
``pip install 'llmc-splitters[langchain]'``. ``CodeParentRetriever`` also needs ``chromadb`` and ``bm25s`` when it
is built (``[chroma]``, ``[bm25]``).
"""

from .retriever import CodeParentRetriever
from .splitter import CodeTextSplitter

__all__ = ["CodeParentRetriever", "CodeTextSplitter"]
