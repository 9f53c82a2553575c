"""Chroma storage for the span index: embedded (``PersistentClient``), server (``HttpClient``) or in memory.

Everything the index needs lives in one Chroma collection, so nothing else has to be persisted:

* ``documents`` hold each record's text (a leaf's source, a parent's source, a summary);
* ``metadatas`` hold flat, filterable keys (``role``, ``path``, ``kind``, ``symbol``, lines, ``file_hash``...) and a
  JSON copy of the span (``span_json``: every :class:`~llmc_splitters.chunking.span.Span` field but ``text``, with its
  metadata: parent link, skeleton, imports used...);
* ``embeddings`` are always passed in explicitly. Chroma's default embedding function (which downloads a model) is
  never used; records that are not searched densely (parents), and every record in lexical-only mode, get a
  constant placeholder vector.

The collection's metadata records which embedding model filled it; opening it with another model raises a
:class:`~llmc_splitters.errors.ConfigurationError` instead of mixing vector spaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError, LlmcError, missing_dependency

__all__ = ["Record", "ChromaStore", "StoreError"]

_GET_PAGE = 2000


class StoreError(LlmcError):
    """The vector store failed (unreachable server, corrupt collection, ...)."""


@dataclass(slots=True)
class Record:
    """One stored item.

    Attributes:
        id: Unique id (a span id, or a summary id derived from one).
        document: Its text.
        metadata: Flat metadata (str/int/float/bool values).
        embedding: Its vector (``None`` when read back without embeddings).
    """

    id: str
    document: str
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: list[float] | None = None


def _chromadb() -> Any:
    try:
        import chromadb
    except ImportError as exc:
        raise missing_dependency("chromadb", "chroma") from exc
    return chromadb


class ChromaStore:
    """A Chroma collection holding spans, parent links, skeletons and summaries.

    Give at most one of ``path`` (embedded, persisted on disk), ``host`` (a ``chroma run`` server) or ``client``
    (any Chroma client you built); with none, an in-memory ``EphemeralClient`` is used.

    Args:
        path: Directory of an embedded ``PersistentClient``.
        host: Host of a Chroma server (``HttpClient``).
        port: Its port (default 8000).
        client: A ready Chroma client.
        collection: Collection name (3-512 characters of ``[a-zA-Z0-9._-]``).
        ssl: Use HTTPS for the server.
        headers: Extra HTTP headers for the server (authentication).

    Raises:
        ConfigurationError: More than one of ``path``/``host``/``client`` is given.
        MissingDependencyError: ``chromadb`` is not installed (``pip install 'llmc-splitters[chroma]'``).

    Example:
        >>> store = ChromaStore(path="/tmp/llmc-index")            # doctest: +SKIP
        >>> store = ChromaStore(host="localhost", port=8000)       # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        client: Any = None,
        collection: str = "llmc_spans",
        ssl: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        given = [x for x in (path, host, client) if x is not None]
        if len(given) > 1:
            msg = "give at most one of path= (embedded Chroma), host= (Chroma server) or client=; got several"
            raise ConfigurationError(msg)
        self.path = str(path) if path is not None else None
        self.host = host
        self.port = port
        self.collection_name = collection
        if client is None:
            chromadb = _chromadb()
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            try:
                if self.path is not None:
                    client = chromadb.PersistentClient(path=self.path, settings=settings)
                elif host is not None:
                    client = chromadb.HttpClient(
                        host=host, port=port or 8000, ssl=ssl, headers=headers, settings=settings
                    )
                else:
                    client = chromadb.EphemeralClient(settings=settings)
            except Exception as exc:  # noqa: BLE001 - chromadb raises many types for an unreachable server
                where = self.path or f"{host}:{port or 8000}" if (self.path or host) else "memory"
                msg = f"could not open Chroma at {where}: {type(exc).__name__}: {exc}. Check the path or that the server runs."
                raise StoreError(msg) from exc
        self.client = client
        self._col: Any = None
        self.embedding_name: str | None = None

    def __repr__(self) -> str:
        where = self.path or (f"{self.host}:{self.port or 8000}" if self.host else "memory")
        return f"ChromaStore({where!r}, collection={self.collection_name!r})"

    # ------------------------------------------------------------------------------------------------ collection

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Open (or create) the collection for vectors from ``embedding_name``.

        Args:
            embedding_name: Identifies the vector space (``"none"`` for lexical-only).
            reset: Delete the collection first (to switch models, or rebuild from scratch).

        Raises:
            ConfigurationError: The collection holds vectors of another model.
        """
        if reset:
            try:
                self.client.delete_collection(self.collection_name)
            except Exception:  # noqa: BLE001, S110 - absent collection: nothing to reset
                pass
        try:
            col = self.client.get_or_create_collection(
                self.collection_name,
                embedding_function=None,
                metadata={"hnsw:space": "cosine", "llmc_embedding": embedding_name},
            )
        except Exception as exc:  # noqa: BLE001
            msg = f"could not open collection {self.collection_name!r} in {self!r}: {type(exc).__name__}: {exc}"
            raise StoreError(msg) from exc
        stored = (col.metadata or {}).get("llmc_embedding")
        if stored is not None and stored != embedding_name:
            msg = (
                f"collection {self.collection_name!r} holds vectors from {stored!r}, not {embedding_name!r}; "
                "use another collection name, the same embedding, or reset=True to rebuild it"
            )
            raise ConfigurationError(msg)
        self._col = col
        self.embedding_name = embedding_name

    @property
    def collection(self) -> Any:
        """The underlying Chroma collection (after :meth:`open`)."""
        if self._col is None:
            msg = "the store is not open; call open(embedding_name) first (CodeIndex does this for you)"
            raise StoreError(msg)
        return self._col

    # ------------------------------------------------------------------------------------------------ read/write

    def _batch_size(self) -> int:
        try:
            return max(1, int(self.client.get_max_batch_size()))
        except Exception:  # noqa: BLE001 - older clients / servers
            return 1000

    def upsert(self, records: Sequence[Record]) -> None:
        """Insert or replace records (each must carry its embedding).

        Upserting the same records again changes nothing (ids are deterministic), so a write that was interrupted
        can simply be repeated. Large lists are sent in several batches, which are *not* atomic together: callers
        that need all-or-nothing per file write a completion marker last (see ``CodeIndex``).

        Raises:
            StoreError: Chroma rejected the write or could not be reached.
        """
        n = self._batch_size()
        for i in range(0, len(records), n):
            batch = records[i : i + n]
            try:
                self.collection.upsert(
                    ids=[r.id for r in batch],
                    documents=[r.document for r in batch],
                    metadatas=[r.metadata for r in batch],
                    embeddings=[r.embedding for r in batch],
                )
            except LlmcError:
                raise
            except Exception as exc:  # noqa: BLE001 - chromadb raises many types (validation, IO, HTTP)
                msg = f"could not write {len(batch)} records to {self!r}: {type(exc).__name__}: {exc}"
                raise StoreError(msg) from exc

    def delete(self, *, ids: Sequence[str] | None = None, path: str | None = None) -> None:
        """Delete records by id, or every record of one file.

        Raises:
            StoreError: Chroma rejected the delete or could not be reached.
        """
        try:
            if ids:
                n = self._batch_size()
                for i in range(0, len(ids), n):
                    self.collection.delete(ids=list(ids[i : i + n]))
            if path is not None:
                self.collection.delete(where={"path": path})
        except LlmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - chromadb raises many types (validation, IO, HTTP)
            what = f"records of {path!r}" if path is not None else f"{len(ids or ())} records"
            msg = f"could not delete {what} from {self!r}: {type(exc).__name__}: {exc}"
            raise StoreError(msg) from exc

    def ids(self, *, where: dict[str, Any] | None = None) -> list[str]:
        """The ids of all records (matching ``where``), without their documents, metadata or vectors."""
        out: list[str] = []
        offset = 0
        while True:
            got = self.collection.get(where=where, include=[], limit=_GET_PAGE, offset=offset)
            ids = list(got["ids"])
            out.extend(ids)
            if len(ids) < _GET_PAGE:
                return out
            offset += len(ids)

    def records(
        self, *, where: dict[str, Any] | None = None, embeddings: bool = False, documents: bool = True
    ) -> Iterator[Record]:
        """All records (matching ``where``), paged (one page of ``_GET_PAGE`` records in memory at a time).

        ``documents=False`` leaves the texts in the store (each record's ``document`` is then ``""``).
        """
        include = (["documents"] if documents else []) + ["metadatas"] + (["embeddings"] if embeddings else [])
        offset = 0
        while True:
            got = self.collection.get(where=where, include=include, limit=_GET_PAGE, offset=offset)
            ids = got["ids"]
            if not ids:
                return
            embs = got.get("embeddings") if embeddings else None
            for j, rid in enumerate(ids):
                emb = None
                if embs is not None and len(embs) > j and embs[j] is not None:
                    emb = [float(x) for x in embs[j]]
                doc = (got["documents"][j] or "") if documents else ""
                yield Record(rid, doc, dict(got["metadatas"][j] or {}), emb)
            if len(ids) < _GET_PAGE:
                return
            offset += len(ids)

    def query(self, vector: list[float], n: int, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest records as ``(id, cosine similarity)``, best first."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        got = self.collection.query(
            query_embeddings=[vector], n_results=min(n, total), where=where, include=["distances"]
        )
        ids = got["ids"][0] if got["ids"] else []
        dists = got["distances"][0] if got.get("distances") else [1.0] * len(ids)
        return [(i, 1.0 - float(d)) for i, d in zip(ids, dists)]

    def count(self) -> int:
        """Number of records."""
        return int(self.collection.count())
