"""Vector stores for the index: Chroma (embedded ``PersistentClient``, a ``chroma run`` server, or in memory).

A vector store holds vectors and nothing else the index needs: each searched record (a leaf or a summary) under its
span id, with the few flat keys a search filters on (``file``, ``dirs``: the file's ancestor directories, ``language``,
``kind``, ``role``). Texts, spans, parents and bindings live in the span store
(:mod:`llmc_splitters.retrieval.storage.span_store`); Chroma's default embedding function (which downloads a model) is never
used: vectors are always passed in.

Leaves and summaries go to two collections (``NAME`` and ``NAME_summaries``), so that an unfiltered search needs no
``where`` (a metadata filter makes Chroma's search ~100 times slower: 72 ms against 0.8 ms on 40,000 vectors). The
collections' metadata records which embedding model filled them; opening them with another model raises a
:class:`~llmc_splitters.errors.ConfigurationError` instead of mixing vector spaces.

An embedded store opened to be read is searched without ``chromadb`` (:mod:`.chroma_files` reads its files: 1.4-3 s
and ~200 MB less for a ``query``); ``chromadb`` loads at the first write, filtered search, or layout that reader does
not know.

Any other store implements the same small protocol (:class:`VectorStore`); :mod:`.langchain_store` adapts any
LangChain ``VectorStore``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import ConfigurationError, LlmcError, missing_dependency
from .filters import SearchFilter, ancestor_dirs
from .span_store import StoreError

__all__ = ["ChromaStore", "Record", "StoreError", "VectorStore", "vector_metadata"]


@dataclass(slots=True)
class Record:
    """One searched record for a vector store.

    Attributes:
        id: The span (or summary) id.
        document: The text the vector was computed from (a store that embeds by itself embeds this).
        metadata: Flat filter keys (see :func:`vector_metadata`).
        embedding: Its vector (``None`` for a store that embeds by itself).
    """

    id: str
    document: str
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: list[float] | None = None


def vector_metadata(file: str, role: str, language: str, kind: str) -> dict[str, Any]:
    """The keys a vector search filters on."""
    meta: dict[str, Any] = {"file": file, "role": role, "language": language, "kind": kind}
    dirs = ancestor_dirs(file)
    if dirs:
        meta["dirs"] = dirs
    return meta


class VectorStore(Protocol):
    """What the index needs from a vector store."""

    embeds_itself: bool

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Open for vectors of ``embedding_name``; refuse another model's vectors."""

    def upsert(self, records: Sequence[Record]) -> None:
        """Insert or replace records by id."""

    def delete(self, *, ids: Sequence[str]) -> None:
        """Delete records by id (an id the store does not hold is ignored)."""

    def query(self, vector: list[float], n: int, *, role: str = "leaf", filt: SearchFilter | None = None,
              files: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest records of ``role`` passing ``filt`` (or in ``files``), as ``(id, similarity)``."""

    def count(self) -> int:
        """Number of records."""


def _check_model(name: str, stored: str | None, embedding_name: str) -> None:
    if stored is not None and stored != embedding_name:
        msg = (
            f"collection {name!r} holds vectors from {stored!r}, not {embedding_name!r}; "
            "use another collection name, the same embedding, or reset=True to rebuild it"
        )
        raise ConfigurationError(msg)


def _chromadb() -> Any:
    try:
        import chromadb
    except ImportError as exc:
        raise missing_dependency("chromadb", "chroma") from exc
    return chromadb


def chroma_where(filt: SearchFilter | None, files: Sequence[str] | None) -> dict[str, Any] | None:
    """A Chroma ``where`` for a filter and an optional resolved file list (``None``: no filter, the fast path)."""
    clauses: list[dict[str, Any]] = []
    if files is not None:
        clauses.append({"file": {"$in": list(files)}})
    elif filt is not None and filt.path is not None:
        d = filt.directory
        clauses.append({"dirs": {"$contains": d}} if d else {"file": filt.path})
    if filt is not None and filt.language is not None:
        clauses.append({"language": filt.language})
    if filt is not None and filt.kind is not None:
        clauses.append({"kind": filt.kind})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class ChromaStore:
    """The vectors of an index in a Chroma collection.

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
        StoreError: The server cannot be reached or the directory cannot be opened.

    Example:
        >>> store = ChromaStore(path="/tmp/llmc-index/chroma")     # doctest: +SKIP
        >>> store = ChromaStore(host="localhost", port=8000)       # doctest: +SKIP
    """

    embeds_itself = False

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
        self.ssl = ssl
        self.headers = headers
        self.collection_name = collection
        self._client = client
        self._cols: dict[str, Any] = {}
        self._files: dict[str, Any] = {}  # role -> ChromaFiles, while no client is loaded
        self._files_stamp: tuple[int, int] | None = None
        self._files_lock = threading.Lock()
        self._lazy = False  # opened from the files: the collections open at first need
        self.embedding_name: str | None = None

    def __repr__(self) -> str:
        return f"ChromaStore({self.where!r}, collection={self.collection_name!r})"

    @property
    def where(self) -> str:
        """``the path``, ``host:port`` or ``memory``."""
        return self.path or (f"{self.host}:{self.port or 8000}" if self.host else "memory")

    @property
    def client(self) -> Any:
        """The Chroma client (connected at first use)."""
        if self._client is None:
            chromadb = _chromadb()
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            try:
                if self.path is not None:
                    self._client = chromadb.PersistentClient(path=self.path, settings=settings)
                elif self.host is not None:
                    self._client = chromadb.HttpClient(host=self.host, port=self.port or 8000, ssl=self.ssl,
                                                       headers=self.headers, settings=settings)
                else:
                    self._client = chromadb.EphemeralClient(settings=settings)
            except Exception as exc:  # noqa: BLE001 - chromadb raises many types for an unreachable server
                msg = (f"could not open Chroma at {self.where}: {type(exc).__name__}: {exc}. Check the path, or that "
                       "the server runs (chroma run)")
                raise StoreError(msg) from exc
        return self._client

    # ------------------------------------------------------------------------------------------------ collection

    def _names(self) -> dict[str, str]:
        return {"leaf": self.collection_name, "summary": f"{self.collection_name}_summaries"}

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Open (or create) the collections for vectors from ``embedding_name``.

        Args:
            embedding_name: Identifies the vector space.
            reset: Delete the collections first (to switch models, or rebuild from scratch).

        An embedded store that exists is opened without ``chromadb`` (its files are read; see :mod:`.chroma_files`)
        until something needs the client.

        Raises:
            ConfigurationError: The collections hold vectors of another model.
            StoreError: Chroma cannot be reached.
        """
        if self.path is not None and self._client is None and not reset and self._open_files(embedding_name):
            self.embedding_name, self._lazy = embedding_name, True
            return
        self._open_collections(embedding_name, reset=reset)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(os.path.join(str(self.path), "chroma.sqlite3"))
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _open_files(self, embedding_name: str) -> bool:
        """Read both collections from the embedded store's files; ``False`` when that reader cannot."""
        from .chroma_files import ChromaFiles

        stamp = self._stamp()
        found = {role: ChromaFiles.open(str(self.path), name) for role, name in self._names().items()}
        if stamp is None or any(r is None for r in found.values()):
            return False
        for role, r in found.items():
            _check_model(self._names()[role], r.metadata.get("llmc_embedding"), embedding_name)
        self._close_files()
        self._files, self._files_stamp = found, stamp
        return True

    def _close_files(self) -> None:
        # Dropped, not closed: a search of another thread may still hold a reader (its files close with it).
        self._files, self._files_stamp = {}, None

    def _reader(self, role: str) -> Any:
        """The file reader of ``role`` (re-read when the store changed on disk), or ``None`` once the client is
        loaded."""
        if not self._files:
            return None
        if self._stamp() != self._files_stamp:
            with self._files_lock:
                if self._files and self._stamp() != self._files_stamp and not self._open_files(
                        self.embedding_name or ""):
                    self._close_files()
        return self._files.get(role)

    def _open_collections(self, embedding_name: str, *, reset: bool) -> None:
        cols = {}
        for role, name in self._names().items():
            if reset:
                try:
                    self.client.delete_collection(name)
                except StoreError:
                    raise
                except Exception:  # noqa: BLE001, S110 - absent collection: nothing to reset
                    pass
            try:
                col = self.client.get_or_create_collection(
                    name, embedding_function=None, metadata={"hnsw:space": "cosine", "llmc_embedding": embedding_name})
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001
                msg = f"could not open collection {name!r} in {self!r}: {type(exc).__name__}: {exc}"
                raise StoreError(msg) from exc
            _check_model(name, (col.metadata or {}).get("llmc_embedding"), embedding_name)
            cols[role] = col
        self._cols = cols
        self.embedding_name = embedding_name

    def describe(self) -> dict[str, Any]:
        """Where these vectors live, for the index to record (a ``query`` then needs no ``--host``)."""
        out: dict[str, Any] = {"kind": "chroma", "collection": self.collection_name}
        if self.host is not None:
            out.update(host=self.host, port=self.port or 8000, ssl=self.ssl)
        elif self.path is not None:
            out["path"] = self.path
        return out

    def collection_of(self, role: str = "leaf") -> Any:
        """The Chroma collection of a role's vectors (after :meth:`open`; loads ``chromadb`` when the store was
        opened from its files)."""
        if not self._cols and self._lazy:
            self._lazy = False
            self._close_files()
            self._open_collections(self.embedding_name, reset=False)
        if not self._cols:
            msg = "the store is not open; call open(embedding_name) first (CodeIndex does this for you)"
            raise StoreError(msg)
        return self._cols[role]

    @property
    def collection(self) -> Any:
        """The Chroma collection of the leaves' vectors (after :meth:`open`)."""
        return self.collection_of("leaf")

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except LlmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - chromadb raises many types (validation, IO, HTTP)
            msg = f"could not {what} {self!r}: {type(exc).__name__}: {exc}"
            raise StoreError(msg) from exc

    def _batch_size(self) -> int:
        try:
            return max(1, int(self.client.get_max_batch_size()))
        except Exception:  # noqa: BLE001 - older clients / servers
            return 1000

    # ------------------------------------------------------------------------------------------------ read/write

    def upsert(self, records: Sequence[Record]) -> None:
        """Insert or replace records (each must carry its vector); large lists go in several batches.

        Raises:
            StoreError: Chroma rejected the write or could not be reached.
        """
        n = self._batch_size()
        for role in ("leaf", "summary"):
            mine = [r for r in records if r.metadata.get("role", "leaf") == role]
            for i in range(0, len(mine), n):
                batch = mine[i : i + n]
                self._call(f"write {len(batch)} vectors to", self.collection_of(role).upsert,
                           ids=[r.id for r in batch], metadatas=[r.metadata for r in batch],
                           embeddings=[r.embedding for r in batch])

    def delete(self, *, ids: Sequence[str]) -> None:
        """Delete records by id (an id the collection does not hold is ignored).

        Raises:
            StoreError: Chroma rejected the delete or could not be reached.
        """
        n = self._batch_size()
        ids = list(ids)
        for role in ("leaf", "summary"):
            for i in range(0, len(ids), n):
                self._call("delete vectors from", self.collection_of(role).delete, ids=ids[i : i + n])

    def query(self, vector: list[float], n: int, *, role: str = "leaf", filt: SearchFilter | None = None,
              files: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest records as ``(id, cosine similarity)``, best first; the filter is Chroma's ``where``."""
        if n <= 0 or (files is not None and not files):
            return []
        where = chroma_where(filt, files)
        reader = self._reader(role) if where is None else None
        if reader is not None:
            return [(i, 1.0 - d) for i, d in reader.query(vector, n)]
        col = self.collection_of(role)
        total = int(self._call("count", col.count))
        if total == 0:
            return []
        got = self._call("search", col.query, query_embeddings=[vector], n_results=min(n, total),
                         where=where, include=["distances"])
        ids = got["ids"][0] if got["ids"] else []
        dists = got["distances"][0] if got.get("distances") else [1.0] * len(ids)
        return [(i, 1.0 - float(d)) for i, d in zip(ids, dists)]

    def count(self) -> int:
        """Number of records (leaves and summaries)."""
        readers = [self._reader(r) for r in ("leaf", "summary")]
        if all(r is not None for r in readers):
            return sum(r.count() for r in readers)
        return sum(int(self._call("count", self.collection_of(r).count)) for r in ("leaf", "summary"))
