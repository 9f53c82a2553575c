"""Framework-free retrieval core: a hierarchical span index (spans in SQLite, BM25 postings on disk, vectors in a
vector store), hybrid search, budgeted parent context.

Only light modules are imported here; ``tantivy``, ``chromadb``, ``pymilvus`` and ``sentence_transformers`` load on
first use.

Example:
    >>> from llmc_splitters.retrieval import CodeRetriever
    >>> r = CodeRetriever(k=2, max_context_tokens=200)              # lexical only, temporary index
    >>> _ = r.index_texts({"m.py": "import os\\n\\ndef home():\\n    return os.environ['HOME']\\n"})
    >>> print(r.retrieve("home directory").context)
    # m.py:1-1
    import os
    # m.py:3-4
    def home():
        return os.environ['HOME']
    <BLANKLINE>
"""

from __future__ import annotations

from .embeddings import BoundedView, Embedding, HashingEmbedding, MiniLMEmbedding, bounded_view
from .context.expand import Expansion, HitContext, Piece, Scope, Snippet, expand
from .storage.filters import SearchFilter
from .search.fusion import reciprocal_rank_fusion
from .index import CodeIndex, FileSummaryInput, Hit, IndexInterrupted, IndexReport, SearchResult
from .indexing.progress import IndexProgress
from .terms import code_terms, split_identifier
from .storage.milvus import MilvusStore, MilvusStoreError
from .search.question import Question, analyze_question
from .search.ranking import FileRank, Ranking
from .retriever import CodeRetriever, Result
from .storage.span_store import IndexNotFoundError, SpanStore, StoreError
from .storage.chroma_vectors import ChromaStore, Record

__all__ = [
    "BoundedView",
    "ChromaStore",
    "CodeIndex",
    "CodeRetriever",
    "Embedding",
    "Expansion",
    "FileRank",
    "FileSummaryInput",
    "HashingEmbedding",
    "Hit",
    "HitContext",
    "IndexInterrupted",
    "IndexNotFoundError",
    "IndexProgress",
    "IndexReport",
    "MilvusStore",
    "MilvusStoreError",
    "MiniLMEmbedding",
    "Piece",
    "Question",
    "Ranking",
    "Record",
    "Result",
    "Scope",
    "SearchFilter",
    "SearchResult",
    "Snippet",
    "SpanStore",
    "StoreError",
    "analyze_question",
    "bounded_view",
    "code_terms",
    "expand",
    "reciprocal_rank_fusion",
    "split_identifier",
]
