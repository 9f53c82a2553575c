"""The parts an index is made of, as its write path and its search are handed them.

:class:`~llmc_splitters.retrieval.CodeIndex` composes one index from separate engines and hands them, as one
:class:`IndexParts`, to the write path (:class:`~llmc_splitters.retrieval.indexing.indexer.Indexer`) and to the search
(:func:`~llmc_splitters.retrieval.search.hits.search`). Those modules take what they use from it and never import the
index, which stands above them. Another engine behind the same interface (a vector store, a ranking stage) plugs
in here:

* ``spans``: the :class:`~llmc_splitters.retrieval.storage.span_store.SpanStore`, the source of truth: every row by id, by
  name and by range, the files' markers, the outbox of what the other engines still miss, the vector cache;
* ``lexical(role)``: the :class:`~llmc_splitters.retrieval.storage.lexical_tantivy.LexicalIndex` of the ``leaf`` or the
  ``summary`` rows;
* ``chunking``: how a file becomes spans, and what identifies that (:class:`Chunking`);
* ``dense``: the embedding model, the text it embeds of a row, the vector store and the batch embedder
  (:class:`Dense`); ``None`` for a lexical-only index;
* ``hybrid``: an engine's own fused search (Milvus's ``hybrid_search``), or ``None``.

Example:
    >>> from llmc_splitters.retrieval import CodeIndex
    >>> parts = CodeIndex().parts
    >>> parts.dense is None, [i for i, _ in parts.lexical("leaf").search("home", 5)]
    (True, [])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol


if TYPE_CHECKING:
    from ..embeddings import BatchEmbedder, Embedding
    from .lexical_tantivy import LexicalIndex
    from .file_rows import FileSummaryInput, View
    from .span_store import SpanStore
    from .chroma_vectors import VectorStore

__all__ = ["Chunking", "Dense", "HasParts", "IndexParts", "parts_of", "settings_fingerprint"]


def settings_fingerprint(chunker: Any) -> str:
    """What identifies a chunker's settings and the library version (see
    :attr:`CodeIndex.settings_fingerprint <llmc_splitters.retrieval.CodeIndex.settings_fingerprint>`)."""
    from ... import __version__

    tok = getattr(getattr(chunker, "tokenizer", None), "name", None)
    return f"{type(chunker).__name__}:{getattr(chunker, 'max_tokens', '?')}:{tok}:{__version__}"


@dataclass(frozen=True, slots=True)
class Chunking:
    """How the write path turns a file into spans.

    Attributes:
        chunker: Anything with ``chunk_tree(text, language=, path=) -> SpanTree``; its ``errors`` (decoding policy),
            ``tokenizer`` and ``max_tokens`` are read when it has them.
        summarizer: Optional ``summarizer(FileSummaryInput) -> str``, whose text is added to each file summary.
    """

    chunker: Any
    summarizer: Callable[[FileSummaryInput], str] | None = None

    @property
    def fingerprint(self) -> str:
        """What a file's marker records of the settings it was chunked under (:func:`settings_fingerprint`)."""
        return settings_fingerprint(self.chunker)


@dataclass(frozen=True, slots=True)
class Dense:
    """What a dense index has beside the lexical one.

    Attributes:
        embedding: The model: ``embed_query`` for a query, ``embed_documents`` for texts outside the vector cache.
        view: ``view(text, metadata) -> (text to embed, embed hash)``: the bounded text of a row the model embeds
            (see :func:`~llmc_splitters.retrieval.storage.file_rows.embedding_view`).
        vectors: Returns the vector store (a :class:`~llmc_splitters.retrieval.storage.chroma_vectors.VectorStore`), opened at the
            first call.
        embedder: Returns the :class:`~llmc_splitters.retrieval.embeddings.BatchEmbedder` that embeds what is
            written, made at the first call.
        embeds_itself: The vector store embeds what it stores (a LangChain ``VectorStore`` with its own
            embedding): known without opening it, so the first files are embedded while the store opens.
    """

    embedding: Embedding
    view: View
    vectors: Callable[[], VectorStore]
    embedder: Callable[[], BatchEmbedder]
    embeds_itself: bool = False

    def embed_query(self, query: str) -> list[float]:
        """The query's vector."""
        return [float(x) for x in self.embedding.embed_query(query)]


@dataclass(frozen=True, slots=True)
class IndexParts:
    """The parts of one index (see the module docstring).

    Attributes:
        spans: The span store.
        lexical: Returns the lexical index of ``"leaf"`` or ``"summary"`` rows, opened at the first call.
        chunking: The chunker and the summariser.
        dense: The model and the vector store; ``None`` for a lexical-only index.
        hybrid: ``hybrid(query, vector, n, filt, files, rrf_k, *, weights, lexical_weight) -> [(id, score)]``: an
            engine that fuses the BM25 and the dense lists itself, in one call (Milvus's ``hybrid_search``), by
            RRF with the lexical list weighted ``lexical_weight`` and the dense one ``1 - lexical_weight``;
            ``weights`` are the question's term weights (or ``None``); ``None``: the lists are fused here.
    """

    spans: SpanStore
    lexical: Callable[[str], LexicalIndex]
    chunking: Chunking
    dense: Dense | None = None
    hybrid: Callable[..., list[tuple[str, float]]] | None = None


class HasParts(Protocol):
    """What holds the parts of an index (a :class:`~llmc_splitters.retrieval.CodeIndex`)."""

    @property
    def parts(self) -> IndexParts:
        """Its parts."""


def parts_of(owner: IndexParts | HasParts) -> IndexParts:
    """``owner`` itself when it is an :class:`IndexParts`, else the parts it holds."""
    return owner if isinstance(owner, IndexParts) else owner.parts
