"""The hierarchical index over any LangChain ``VectorStore`` plus a key-value docstore, not only Chroma.

:class:`VectorStoreAdapter` implements the storage interface :class:`~llmc_splitters.retrieval.CodeIndex` uses
(``open``, ``upsert``, ``delete``, ``ids``, ``records``, ``query``, ``count``) over two LangChain objects:

* a ``VectorStore`` (``InMemoryVectorStore``, ``Chroma``, ``Qdrant``, ``PGVector``, ...) holds the searched records
  (leaves and summaries) under the record's own id (a UUID string, which every common store accepts). The store
  embeds them with its own model: the document it receives is exactly what the index would embed (path, symbol,
  then the span's text);
* a docstore (``BaseStore[str, Document]``: ``InMemoryStore``, or ``create_kv_docstore(LocalFileStore(...))``,
  Redis, ...) holds every record, parents with their skeletons and the file records with their import bindings, plus
  a per-file index (one key per record, so concurrent writers never read-modify-write a shared key).

Keys are ``{namespace}/r/{id}`` (records), ``{namespace}/p/{sha1(path)}/{id}`` (per-file index) and
``{namespace}/meta``; they use only ``[a-z0-9/-]``, as file-backed stores require.

The same object is also an ingestion sink (``write``, ``delete_stale``, ``delete_paths``): see
:class:`llmc_splitters.ingest.pipeline.LangChainSink`.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.stores import InMemoryStore
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from llmc_splitters.retrieval import CodeRetriever
    >>> vs = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    >>> r = CodeRetriever(index=code_index(vs, InMemoryStore()), k=1, max_context_tokens=100)
    >>> _ = r.index_texts({"m.py": "import os\\n\\ndef home():\\n    return os.environ['HOME']\\n"})
    >>> r.search("home directory").hits[0].span.name
    'home'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..errors import ConfigurationError, missing_dependency
from .store import Record

__all__ = ["StoreEmbedding", "VectorStoreAdapter", "code_index", "matches_where"]

SEARCHED_ROLES = frozenset({"leaf", "summary"})
_PAGE = 500
_ADD_BATCH = 256
_SLIM_KEYS = ("role", "path", "kind", "symbol", "language", "start_line", "end_line", "repository")


def _document_cls() -> Any:
    try:
        from langchain_core.documents import Document
    except ImportError as exc:
        raise missing_dependency("langchain_core", "langchain") from exc
    return Document


def matches_where(meta: dict[str, Any], where: dict[str, Any] | None) -> bool:
    """Evaluate a Chroma-style ``where`` filter on flat metadata in Python.

    Supports ``{"key": value}``, ``{"key": {"$eq"|"$ne"|"$in"|"$nin"|"$gt"|"$gte"|"$lt"|"$lte": v}}``, ``$and`` and
    ``$or``. A key the metadata lacks matches only ``$ne`` and ``$nin``.

    Example:
        >>> matches_where({"role": "leaf", "path": "a.py"}, {"$and": [{"role": "leaf"}, {"path": {"$in": ["a.py"]}}]})
        True
    """
    if not where:
        return True
    for key, cond in where.items():
        if key == "$and":
            if not all(matches_where(meta, c) for c in cond):
                return False
            continue
        if key == "$or":
            if not any(matches_where(meta, c) for c in cond):
                return False
            continue
        has = key in meta
        v = meta.get(key)
        if not isinstance(cond, dict):
            cond = {"$eq": cond}
        for op, x in cond.items():
            ok = {
                "$eq": lambda: has and v == x,
                "$ne": lambda: not has or v != x,
                "$in": lambda: has and v in x,
                "$nin": lambda: not has or v not in x,
                "$gt": lambda: has and v > x,
                "$gte": lambda: has and v >= x,
                "$lt": lambda: has and v < x,
                "$lte": lambda: has and v <= x,
            }.get(op)
            if ok is None:
                msg = f"unsupported where operator {op!r}; use $eq, $ne, $in, $nin, $gt, $gte, $lt, $lte, $and, $or"
                raise ConfigurationError(msg)
            if not ok():
                return False
    return True


def _embed_text(document: str, meta: dict[str, Any]) -> str:
    """What the index embeds for a searched record: for a leaf its path, symbol and text; a summary as it is."""
    if meta.get("role") != "leaf":
        return document
    from ..chunking.span import Span
    from .index import _leaf_view

    raw = meta.get("span_json")
    if not raw:
        head = f"{meta.get('path') or ''} {meta.get('symbol') or ''}".strip()
        return f"{head}\n{document}" if head else document
    d = json.loads(raw)
    d["text"] = document
    return _leaf_view(Span.from_dict(d))


class StoreEmbedding:
    """The embedding a :class:`~llmc_splitters.retrieval.CodeIndex` over a :class:`VectorStoreAdapter` needs.

    Queries are embedded with the vector store's own model (``vectorstore.embeddings``). Document vectors are
    computed by the vector store itself when records are added, so ``embed_documents`` returns a one-number
    placeholder per text instead of running the model a second time.

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
        """Placeholders: the vector store embeds what it stores."""
        return [[1.0] for _ in texts]


class VectorStoreAdapter:
    """A :class:`~llmc_splitters.retrieval.CodeIndex` store over a LangChain ``VectorStore`` and a docstore.

    Args:
        vectorstore: Any LangChain ``VectorStore`` that upserts by id (``add_documents(docs, ids=...)`` replaces an
            existing id, as the LangChain indexing API requires) and can search by vector.
        docstore: A LangChain ``BaseStore[str, Document]`` (``InMemoryStore``; wrap a byte store with
            ``langchain_classic.storage.create_kv_docstore``).
        namespace: Key prefix in the docstore (several indexes can share one store).
        fetch_factor: How many more hits than asked to fetch from the vector store before filtering (filters run
            on our side: LangChain has no common filter syntax).

    Raises:
        ConfigurationError: ``namespace`` has characters other than ``[a-z0-9_-]``.

    Dense search calls, in this order of preference, ``similarity_search_by_vector_with_relevance_scores``
    (Chroma: cosine similarity), ``similarity_search_with_score_by_vector`` (``InMemoryVectorStore``: cosine
    similarity; FAISS: a distance, so confidence is not meaningful there, only the ranking), or
    ``similarity_search_by_vector`` (ranks only).
    """

    def __init__(self, vectorstore: Any, docstore: Any, *, namespace: str = "llmc", fetch_factor: int = 4) -> None:
        if not namespace or not all(c.isalnum() and c.isascii() or c in "_-" for c in namespace):
            msg = f"namespace must be a non-empty string of [a-zA-Z0-9_-], got {namespace!r}"
            raise ConfigurationError(msg)
        self.vectorstore = vectorstore
        self.docstore = docstore
        self.namespace = namespace
        self.fetch_factor = max(1, int(fetch_factor))
        self.embedding_name: str | None = None

    def __repr__(self) -> str:
        return (
            f"VectorStoreAdapter({type(self.vectorstore).__name__}, {type(self.docstore).__name__}, "
            f"namespace={self.namespace!r})"
        )

    # ------------------------------------------------------------------------------------------------------ keys

    def _rkey(self, rid: str) -> str:
        return f"{self.namespace}/r/{rid}"

    def _pprefix(self, path: str) -> str:
        h = hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest()[:24]  # noqa: S324 - a key, not security
        return f"{self.namespace}/p/{h}/"

    @property
    def embedding(self) -> StoreEmbedding:
        """The :class:`StoreEmbedding` to give ``CodeIndex(embedding=...)``."""
        return StoreEmbedding(self.vectorstore)

    # ------------------------------------------------------------------------------------------ CodeIndex store

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Record which vector space the docstore belongs to (and empty it with ``reset=True``).

        Raises:
            ConfigurationError: The docstore was filled for another embedding model.
        """
        doc_cls = _document_cls()
        if reset:
            self.delete(ids=list(self.ids()))
            self.docstore.mdelete([f"{self.namespace}/meta"])
        key = f"{self.namespace}/meta"
        got = self.docstore.mget([key])[0]
        stored = got.metadata.get("embedding") if got is not None else None
        if stored is not None and stored != embedding_name:
            msg = (
                f"the docstore namespace {self.namespace!r} holds records for {stored!r}, not {embedding_name!r}; "
                "use another namespace, the same model, or reset=True"
            )
            raise ConfigurationError(msg)
        if stored is None:
            self.docstore.mset([(key, doc_cls(page_content="", metadata={"embedding": embedding_name}))])
        self.embedding_name = embedding_name

    def upsert(self, records: Sequence[Record]) -> None:
        """Store records: all in the docstore (with the per-file index), the searched ones in the vector store."""
        if not records:
            return
        doc_cls = _document_cls()
        pairs: list[tuple[str, Any]] = []
        for r in records:
            meta = dict(r.metadata)
            pairs.append((self._rkey(r.id), doc_cls(page_content=r.document, metadata=meta, id=r.id)))
            path = meta.get("path")
            if isinstance(path, str):
                pairs.append((self._pprefix(path) + r.id, doc_cls(page_content=r.id, metadata={"path": path})))
        self.docstore.mset(pairs)
        searched = [r for r in records if r.metadata.get("role") in SEARCHED_ROLES]
        for i in range(0, len(searched), _ADD_BATCH):
            part = searched[i : i + _ADD_BATCH]
            docs = []
            for r in part:
                slim = {k: r.metadata[k] for k in _SLIM_KEYS if k in r.metadata}
                slim["llmc_id"] = r.id
                docs.append(doc_cls(page_content=_embed_text(r.document, r.metadata), metadata=slim, id=r.id))
            self.vectorstore.add_documents(docs, ids=[r.id for r in part])

    def _path_ids(self, path: str) -> list[str]:
        prefix = self._pprefix(path)
        return [k[len(prefix):] for k in self.docstore.yield_keys(prefix=prefix)]

    def _get(self, ids: Sequence[str]) -> Iterator[Record]:
        for i in range(0, len(ids), _PAGE):
            part = list(ids[i : i + _PAGE])
            for rid, doc in zip(part, self.docstore.mget([self._rkey(x) for x in part])):
                if doc is not None:
                    yield Record(rid, doc.page_content, dict(doc.metadata))

    def ids(self, *, where: dict[str, Any] | None = None) -> list[str]:
        """Ids of the records matching ``where``."""
        if not where:
            prefix = f"{self.namespace}/r/"
            return [k[len(prefix):] for k in self.docstore.yield_keys(prefix=prefix)]
        return [r.id for r in self.records(where=where)]

    def records(
        self, *, where: dict[str, Any] | None = None, embeddings: bool = False, documents: bool = True
    ) -> Iterator[Record]:
        """Records matching ``where`` (vectors are not kept here: ``embedding`` is always ``None``). Documents come
        with the metadata from the docstore, so ``documents=False`` saves nothing here; it is accepted for
        :meth:`ChromaStore.records` compatibility."""
        del embeddings, documents  # the vector store owns the vectors
        path = where.get("path") if where and len(where) == 1 else None
        if isinstance(path, str):
            ids = self._path_ids(path)
        elif where and "$and" in where and len(where) == 1 and any(
            isinstance(c.get("path"), str) for c in where["$and"]
        ):
            ids = self._path_ids(next(c["path"] for c in where["$and"] if isinstance(c.get("path"), str)))
        else:
            prefix = f"{self.namespace}/r/"
            ids = [k[len(prefix):] for k in self.docstore.yield_keys(prefix=prefix)]
        for rec in self._get(ids):
            if matches_where(rec.metadata, where):
                yield rec

    def delete(self, *, ids: Sequence[str] | None = None, path: str | None = None) -> None:
        """Delete records by id, or every record of one file, from both stores."""
        todo = list(ids or ())
        if path is not None:
            todo.extend(self._path_ids(path))
        if not todo:
            return
        recs = list(self._get(sorted(set(todo))))
        keys = [self._rkey(x) for x in set(todo)]
        for r in recs:
            p = r.metadata.get("path")
            if isinstance(p, str):
                keys.append(self._pprefix(p) + r.id)
        if path is not None:
            keys.extend(self._pprefix(path) + x for x in todo)
        vs_ids = [r.id for r in recs if r.metadata.get("role") in SEARCHED_ROLES]
        if vs_ids:
            for i in range(0, len(vs_ids), _ADD_BATCH):
                self.vectorstore.delete(ids=vs_ids[i : i + _ADD_BATCH])
        self.docstore.mdelete(sorted(set(keys)))

    def _search(self, vector: list[float], k: int) -> list[tuple[Any, float]]:
        vs = self.vectorstore
        if hasattr(vs, "similarity_search_by_vector_with_relevance_scores"):
            return list(vs.similarity_search_by_vector_with_relevance_scores(vector, k=k))
        if hasattr(vs, "similarity_search_with_score_by_vector"):
            return list(vs.similarity_search_with_score_by_vector(vector, k=k))
        docs = vs.similarity_search_by_vector(vector, k=k)
        return [(d, 1.0 / (1 + i)) for i, d in enumerate(docs)]

    def query(self, vector: list[float], n: int, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest searched records matching ``where``, as ``(id, score)``, best first."""
        if n <= 0:
            return []
        k = n * self.fetch_factor
        while True:
            got = self._search(vector, k)
            out = []
            for doc, score in got:
                meta = dict(doc.metadata or {})
                rid = getattr(doc, "id", None) or meta.get("llmc_id")
                if rid and matches_where(meta, where):
                    out.append((str(rid), float(score)))
            if len(out) >= n or len(got) < k:
                return out[:n]
            k *= 4

    def count(self) -> int:
        """Number of records."""
        return sum(1 for _ in self.docstore.yield_keys(prefix=f"{self.namespace}/r/"))

    # ----------------------------------------------------------------------------------------- ingestion sink

    def cached(self, content_hashes: Iterable[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        """No embedding cache here: the vector store embeds what it stores (wrap its model in LangChain's
        ``CacheBackedEmbeddings`` to cache)."""
        del content_hashes
        return {}

    def write(self, records: Sequence[Record]) -> int:
        """Upsert records; returns how many."""
        self.upsert(records)
        return len(records)

    def delete_stale(self, items: Iterable[tuple[str, str]]) -> int:
        """For each ``(path, file_version)``, delete the file's records of any other version; returns how many."""
        n = 0
        for path, version in items:
            stale = [r.id for r in self._get(self._path_ids(path)) if r.metadata.get("file_version") != version]
            if stale:
                self.delete(ids=stale)
                n += len(stale)
        return n

    def delete_paths(self, paths: Iterable[str]) -> int:
        """Delete every record of these files; returns how many."""
        n = 0
        for p in paths:
            ids = self._path_ids(p)
            if ids:
                self.delete(ids=ids, path=p)
                n += len(ids)
        return n


def code_index(vectorstore: Any, docstore: Any, *, namespace: str = "llmc", **kwargs: Any) -> Any:
    """A :class:`~llmc_splitters.retrieval.CodeIndex` over a LangChain vector store and docstore.

    Dense search uses the vector store's own model (see :class:`StoreEmbedding`); a store without ``embeddings``
    gives a lexical-only index. ``kwargs`` go to ``CodeIndex`` (``chunker``, ``max_tokens``, ``tokenizer``, ...).

    Raises:
        ConfigurationError: ``embedding`` is passed (the vector store's model is used).
    """
    from .index import CodeIndex

    if "embedding" in kwargs:
        msg = "code_index() uses the vector store's own model; do not pass embedding="
        raise ConfigurationError(msg)
    adapter = VectorStoreAdapter(vectorstore, docstore, namespace=namespace)
    embedding = adapter.embedding if getattr(vectorstore, "embeddings", None) is not None else None
    return CodeIndex(adapter, embedding=embedding, **kwargs)  # type: ignore[arg-type]
