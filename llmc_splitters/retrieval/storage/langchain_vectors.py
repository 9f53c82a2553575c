"""The vectors of an index in any LangChain ``VectorStore``, not only Chroma.

:class:`VectorStoreAdapter` implements the vector-store protocol of :class:`~llmc_splitters.retrieval.CodeIndex`
(:class:`~llmc_splitters.retrieval.storage.chroma_vectors.VectorStore`: ``open``, ``upsert``, ``delete``, ``query``, ``count``) over a
LangChain ``VectorStore`` (``InMemoryVectorStore``, ``Chroma``, ``Qdrant``, ``PGVector``, ...). The store embeds what
it is given with its own model: each searched record (a leaf, a summary) is added under its span id with the text
the index would embed (path, symbol, then the span's text) and the few keys a search filters on. Spans, parents,
skeletons and import bindings live in the index's span store (``path=``), never in the vector store.

LangChain has no common filter syntax, so a filtered search fetches ``fetch_factor`` times more neighbours and
filters them here (widening until enough pass); Chroma (:class:`~llmc_splitters.retrieval.storage.chroma_vectors.ChromaStore`)
filters inside its search.

:func:`~llmc_splitters.retrieval.vectorstore.code_index` builds an index over one.

Example:
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from llmc_splitters.retrieval import HashingEmbedding
    >>> store = VectorStoreAdapter(InMemoryVectorStore(HashingEmbedding(32)))
    >>> store.open("hashing:32")
    >>> store.upsert([Record("1", "def home(): return HOME", {"role": "leaf", "file": "m.py"})])
    >>> [i for i, _ in store.query(store.embedding.embed_query("home"), 1)]
    ['1']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ConfigurationError, missing_dependency
from .filters import SearchFilter
from .chroma_vectors import Record

__all__ = ["StoreEmbedding", "VectorStoreAdapter"]

_ADD_BATCH = 256


def _document_cls() -> Any:
    try:
        from langchain_core.documents import Document
    except ImportError as exc:
        raise missing_dependency("langchain_core", "langchain") from exc
    return Document


class StoreEmbedding:
    """The embedding a :class:`~llmc_splitters.retrieval.CodeIndex` over a :class:`VectorStoreAdapter` needs.

    Queries are embedded with the vector store's own model (``vectorstore.embeddings``); the index never calls
    ``embed_documents`` for such a store (the store embeds what it is given), but it works: it is the model's.

    Args:
        vectorstore: A LangChain ``VectorStore`` with ``embeddings``.
    """

    def __init__(self, vectorstore: Any) -> None:
        emb = getattr(vectorstore, "embeddings", None)
        if emb is None:
            msg = f"{type(vectorstore).__name__} exposes no `embeddings`; pass embedding=None for lexical search only"
            raise ConfigurationError(msg)
        self._emb = emb
        model = getattr(emb, "model", None) or getattr(emb, "model_name", None) or getattr(emb, "name", None)
        self.name = f"langchain:{type(emb).__name__}" + (f":{model}" if isinstance(model, str) else "")

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, from the vector store's model."""
        return [float(x) for x in self._emb.embed_query(text)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The texts' vectors, from the vector store's model."""
        return [[float(x) for x in v] for v in self._emb.embed_documents(list(texts))]


class VectorStoreAdapter:
    """The vectors of a :class:`~llmc_splitters.retrieval.CodeIndex` in a LangChain ``VectorStore``.

    Args:
        vectorstore: Any LangChain ``VectorStore`` that upserts by id (``add_documents(docs, ids=...)`` replaces an
            existing id, as the LangChain indexing API requires) and can search by vector.
        namespace: A tag written on every record and required by every search and count, so that several indexes
            can share one vector store.
        fetch_factor: How many more neighbours than asked to fetch before filtering (see the module docstring).

    Raises:
        ConfigurationError: ``namespace`` has characters other than ``[a-zA-Z0-9_-]``.

    Dense search calls, in this order of preference, ``similarity_search_by_vector_with_relevance_scores``,
    ``similarity_search_with_score_by_vector`` or ``similarity_search_by_vector`` (ranks only). The store's order is
    the ranking; scores that grow down the list are distances (langchain-chroma, FAISS) and are turned into
    ``1 - distance`` (a cosine similarity for a cosine space; for other spaces only the ranking is meaningful).
    """

    embeds_itself = True

    def __init__(self, vectorstore: Any, *, namespace: str = "llmc", fetch_factor: int = 4) -> None:
        if not namespace or not all(c.isalnum() and c.isascii() or c in "_-" for c in namespace):
            msg = f"namespace must be a non-empty string of [a-zA-Z0-9_-], got {namespace!r}"
            raise ConfigurationError(msg)
        self.vectorstore = vectorstore
        self.namespace = namespace
        self.fetch_factor = max(1, int(fetch_factor))
        self.embedding_name: str | None = None

    def __repr__(self) -> str:
        return f"VectorStoreAdapter({type(self.vectorstore).__name__}, namespace={self.namespace!r})"

    @property
    def embedding(self) -> StoreEmbedding:
        """The :class:`StoreEmbedding` to give ``CodeIndex(embedding=...)``."""
        return StoreEmbedding(self.vectorstore)

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Note the vector space (the index's span store records and checks it); ``reset`` is the index's job."""
        del reset
        self.embedding_name = embedding_name

    def upsert(self, records: Sequence[Record]) -> None:
        """Add (or replace) records by id; the vector store embeds their text."""
        doc_cls = _document_cls()
        for i in range(0, len(records), _ADD_BATCH):
            part = records[i : i + _ADD_BATCH]
            docs = [doc_cls(page_content=r.document, metadata={**_flat(r.metadata), "llmc_id": r.id,
                                                               "llmc_namespace": self.namespace}, id=r.id)
                    for r in part]
            self.vectorstore.add_documents(docs, ids=[r.id for r in part])

    def delete(self, *, ids: Sequence[str]) -> None:
        """Delete records by id."""
        ids = list(ids)
        for i in range(0, len(ids), _ADD_BATCH):
            self.vectorstore.delete(ids=ids[i : i + _ADD_BATCH])

    def _search(self, vector: list[float], k: int) -> list[tuple[Any, float]]:
        """Neighbours best first with a score that grows with similarity, whatever the store's convention."""
        vs = self.vectorstore
        if hasattr(vs, "similarity_search_by_vector_with_relevance_scores"):
            got = list(vs.similarity_search_by_vector_with_relevance_scores(vector, k=k))
        elif hasattr(vs, "similarity_search_with_score_by_vector"):
            got = list(vs.similarity_search_with_score_by_vector(vector, k=k))
        else:
            docs = vs.similarity_search_by_vector(vector, k=k)
            return [(d, 1.0 / (1 + i)) for i, d in enumerate(docs)]
        # Stores return their neighbours best first, but some score by distance (langchain-chroma's "relevance
        # scores" are distances, FAISS's are L2): scores that grow down the list are distances, turned around.
        if len(got) > 1 and got[0][1] < got[-1][1]:
            return [(d, 1.0 - float(sc)) for d, sc in got]
        return [(d, float(sc)) for d, sc in got]

    def query(self, vector: list[float], n: int, *, role: str = "leaf", filt: SearchFilter | None = None,
              files: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest records of ``role`` passing the filter, as ``(id, score)``, best first."""
        if n <= 0 or (files is not None and not files):
            return []
        wanted = set(files) if files is not None else None
        k = n * self.fetch_factor
        while True:
            got = self._search(vector, k)
            out = []
            for doc, score in got:
                meta = dict(doc.metadata or {})
                if meta.get("llmc_namespace") != self.namespace or meta.get("role") != role:
                    continue
                file = meta.get("file")
                if wanted is not None and file not in wanted:
                    continue
                if filt is not None and not filt.matches(file, meta.get("language"), meta.get("kind")):
                    continue
                rid = getattr(doc, "id", None) or meta.get("llmc_id")
                if rid:
                    out.append((str(rid), float(score)))
            if len(out) >= n or len(got) < k:
                return out[:n]
            k *= 4

    def count(self) -> int:
        """Records of this namespace (by a search over every record: for stores that cannot count)."""
        store = getattr(self.vectorstore, "store", None)
        if isinstance(store, dict):  # InMemoryVectorStore
            return sum(1 for v in store.values() if v.get("metadata", {}).get("llmc_namespace") == self.namespace)
        get = getattr(self.vectorstore, "get", None)
        if callable(get):
            try:
                return len(get(where={"llmc_namespace": self.namespace}, include=[])["ids"])
            except Exception:  # noqa: BLE001 - not a Chroma-like get: count unknown
                return -1
        return -1


def _flat(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata every vector store accepts: scalars only (the ancestor directories are not needed here)."""
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}

