"""The LangChain face of llmc_splitters: ``CodeTextSplitter`` (a ``TextSplitter``) and ``CodeParentRetriever``.

Importing this subpackage imports ``langchain_core`` and ``langchain_text_splitters`` (the opt-in); when they are
missing it raises :class:`~llmc_splitters.MissingDependencyError` with the line to install them:
``pip install 'llmc-splitters[langchain]'``. ``CodeParentRetriever`` also needs ``tantivy`` when it is
built (``[bm25]``), and ``chromadb`` when it holds vectors (``[chroma]``).
"""

from .retriever import CodeParentRetriever
from .splitter import CodeTextSplitter

__all__ = ["CodeParentRetriever", "CodeTextSplitter"]
