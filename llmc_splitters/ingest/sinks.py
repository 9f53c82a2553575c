"""Where an ingestion's vectors go: a Chroma server (or, for one process, a Chroma directory), or any LangChain
``VectorStore``.

Spans, file markers, bindings and the lexical index live in the index directory (``index=DIR``), written by the one
writer of a run (:mod:`llmc_splitters.ingest.writer`); a sink receives the vectors of the searched rows and nothing
else, exactly as :class:`~llmc_splitters.retrieval.CodeIndex` lays them out, so ``CodeRetriever(path=DIR, host=...)``
(or ``code_index(vectorstore, path=DIR)``) searches the result directly.

A sink is a small picklable description with no client inside: each process that writes (a Ray worker, the driver
for deletions) builds its own connection from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

__all__ = ["ChromaSink", "ChromaVectors", "LangChainSink"]

logger = logging.getLogger("llmc_splitters.ingest")

_GET_RETRIES = 6
_TRANSIENT = ("hnsw segment reader", "Nothing found on disk")


class ForwardingVectors:
    """A vector store that forwards to the one it wraps (``self.store``): open, delete, query, count, and whatever
    else the store offers (``describe()``: where its vectors live, which the index records). Subclasses change
    what they must (how records are upserted)."""

    store: Any

    def __getattr__(self, name: str) -> Any:
        if name == "store":
            raise AttributeError(name)
        return getattr(self.store, name)

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Open the store for vectors of ``embedding_name`` (another model's are refused)."""
        self.store.open(embedding_name, reset=reset)

    def delete(self, *, ids: Sequence[str]) -> None:
        """Delete records by id."""
        self.store.delete(ids=ids)

    def query(self, vector: list[float], n: int, **kwargs: Any) -> list[tuple[str, float]]:
        """The store's nearest records (see :meth:`ChromaStore.query
        <llmc_splitters.retrieval.storage.chroma_vectors.ChromaStore.query>`)."""
        return self.store.query(vector, n, **kwargs)

    def count(self) -> int:
        """Number of records."""
        return int(self.store.count())


class ChromaVectors(ForwardingVectors):
    """A Chroma collection as the vector store of an index, with an embedding cache that any worker can read.

    Every record it writes carries ``embed_hash`` (the cache key of its embedded view: the hash of the model's name
    and the exact text embedded) in its metadata, so a worker that does not see the index's span store (a Ray embed
    actor on another machine) finds the vectors of texts embedded before by asking the collection
    (:meth:`cached`). Reads and writes are the :class:`~llmc_splitters.retrieval.storage.chroma_vectors.ChromaStore`'s.

    Args:
        store: The (not yet opened) :class:`~llmc_splitters.retrieval.storage.chroma_vectors.ChromaStore`.
        page: Hashes per cache lookup.
    """

    embeds_itself = False

    def __init__(self, store: Any, page: int = 200) -> None:
        self.store = store
        self.page = max(1, int(page))
        self.embedding_name: str | None = None

    def __repr__(self) -> str:
        return f"ChromaVectors({self.store!r})"

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Open the collection for vectors of ``embedding_name`` (another model's collection is refused)."""
        super().open(embedding_name, reset=reset)
        self.embedding_name = embedding_name

    def upsert(self, records: Sequence[Any]) -> None:
        """Insert or replace records, each tagged with the cache key of the text it was embedded from."""
        from ..retrieval.storage.file_rows import sha

        for r in records:
            # NOTE: the index's records carry the embedded view as their document, so its cache key is recomputed
            # here; a record that already carries one keeps it.
            r.metadata.setdefault("embed_hash", sha(f"{self.embedding_name}\x00{r.document}"))
        self.store.upsert(records)

    def _get(self, role: str, **kwargs: Any) -> Any:
        """``get`` on the collection of a role's vectors, retried on the server's transient "hnsw segment reader"
        error.

        NOTE: a Chroma server can answer a filtered ``get`` on a collection being written by other processes with
        ``InternalError: Error creating hnsw segment reader: Nothing found on disk`` (chroma-core/chroma#4212);
        the same call succeeds a moment later.
        """
        for attempt in range(_GET_RETRIES):
            try:
                return self.store.collection_of(role).get(**kwargs)
            except Exception as exc:  # noqa: BLE001 - chromadb.errors.InternalError, matched by message
                if attempt == _GET_RETRIES - 1 or not any(t in str(exc) for t in _TRANSIENT):
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def cached(self, hashes: Iterable[str], role: str) -> dict[str, list[float]]:
        """Vectors the collection of ``role`` (``leaf`` or ``summary``) holds for these cache keys
        (``embed_hash -> vector``).

        The cache only saves work: when a lookup fails, a warning is logged and the texts are embedded instead.
        """
        want = sorted(set(hashes))
        out: dict[str, list[float]] = {}
        if not want:
            return out
        for i in range(0, len(want), self.page):
            try:
                got = self._get(role, where={"embed_hash": {"$in": want[i : i + self.page]}},
                                include=["embeddings", "metadatas"])
            except Exception as exc:  # noqa: BLE001 - a miss only costs embedding
                logger.warning("embedding cache lookup failed, embedding instead: %s: %s", type(exc).__name__, exc)
                return out
            embs = got.get("embeddings")
            for j, meta in enumerate(got.get("metadatas") or []):
                h = (meta or {}).get("embed_hash")
                if h and h not in out and embs is not None and embs[j] is not None:
                    out[h] = [float(x) for x in embs[j]]
        return out


@dataclass(frozen=True)
class ChromaSink:
    """Vectors into a Chroma collection: a server (``HttpClient``), or an embedded directory for
    :func:`~llmc_splitters.ingest.pipeline.run_local` only.

    Read the result back with ``CodeRetriever(path=INDEX_DIR, host=..., port=..., collection=..., embedding=...)``
    (or ``CodeIndex(INDEX_DIR, vectors=ChromaStore(...), embedding=...)``).

    Attributes:
        host: Chroma server host (``chroma run``).
        port: Its port.
        path: An embedded ``PersistentClient`` directory instead of a server. Not safe across processes: only
            :func:`~llmc_splitters.ingest.pipeline.run_local`, which writes from one process, accepts it.
        collection: Collection name.
        ssl: HTTPS.
        headers: HTTP headers (authentication).
        page: Hashes per embedding-cache lookup.

    Example:
        >>> ChromaSink(host="localhost", port=8000, collection="myrepo").process_safe
        True
    """

    host: str | None = None
    port: int = 8000
    path: str | None = None
    collection: str = "llmc_spans"
    ssl: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    page: int = 200

    embeds_itself = False

    def __post_init__(self) -> None:
        if (self.host is None) == (self.path is None):
            msg = "give exactly one of host= (a Chroma server) or path= (embedded, single process only)"
            raise ConfigurationError(msg)

    @property
    def process_safe(self) -> bool:
        """Whether several processes may write at once (a server: yes; an embedded directory: no)."""
        return self.host is not None

    def vectors(self) -> ChromaVectors:
        """A new, unopened connection (:class:`ChromaVectors`)."""
        from ..retrieval.storage.chroma_vectors import ChromaStore

        if self.host is not None:
            store = ChromaStore(host=self.host, port=self.port, collection=self.collection, ssl=self.ssl,
                                headers=dict(self.headers) or None)
        else:
            store = ChromaStore(self.path, collection=self.collection)
        return ChromaVectors(store, self.page)

    def connect(self, embedding: str) -> ChromaVectors:
        """A connection opened for vectors of ``embedding``.

        Raises:
            ConfigurationError: The collection holds vectors of another model.
            StoreError: Chroma cannot be reached.
        """
        conn = self.vectors()
        conn.open(embedding)
        return conn


@dataclass(frozen=True)
class LangChainSink:
    """Vectors into any LangChain ``VectorStore``, built in each process by a picklable factory.

    The vector store embeds what it stores with its own model (so no embed stage runs; in a Ray run the writers are
    an actor pool, so the model loads once per actor). The records are those of
    :class:`~llmc_splitters.retrieval.vectorstore.VectorStoreAdapter`, so ``code_index(make_vectorstore(),
    path=INDEX_DIR)`` searches the result.

    Attributes:
        vectorstore_factory: A picklable no-argument callable returning the ``VectorStore`` (a module-level
            function or a ``functools.partial``; it runs inside each worker, and once in the driver for deletions).
        docstore_factory: Not used since 0.2 (parents, skeletons and bindings live in the index directory); giving
            one raises a :class:`~llmc_splitters.errors.ConfigurationError` that says so.
        namespace: The tag that keeps this index's records apart in a shared vector store.

    Raises:
        ConfigurationError: ``docstore_factory`` is given.
    """

    vectorstore_factory: Callable[[], Any]
    docstore_factory: Callable[[], Any] | None = None
    namespace: str = "llmc"

    embeds_itself = True
    process_safe = True

    def __post_init__(self) -> None:
        if self.docstore_factory is not None:
            msg = ("LangChainSink(vectorstore_factory, docstore_factory): since llmc-splitters 0.2 the spans, parents "
                   "and bindings live in the index directory (run_local/run_ray(..., index=DIR)), not in a docstore; "
                   "drop docstore_factory")
            raise ConfigurationError(msg)

    def vectors(self) -> Any:
        """A new :class:`~llmc_splitters.retrieval.storage.langchain_vectors.VectorStoreAdapter` over a freshly built store."""
        from ..retrieval.storage.langchain_vectors import VectorStoreAdapter

        return VectorStoreAdapter(self.vectorstore_factory(), namespace=self.namespace)

    def connect(self, embedding: str | None = None) -> Any:
        """The adapter, opened for its store's own model (``embedding`` is that model's name, if known)."""
        adapter = self.vectors()
        adapter.open(embedding or adapter.embedding.name)
        return adapter
