"""Engine-free ingestion pipeline: sinks, the embed and write stages, the run summary, and a local process-pool run.

The stages are plain callables over columnar batches (dicts of equal-length columns), so the same objects run

* here, in :func:`run_local`: chunking in a ``ProcessPoolExecutor`` (or serially), embedding and writing in this
  process;
* on Ray Data, in :func:`llmc_splitters.ingest.ray.run_ray`: chunking as ``map_batches`` tasks, :class:`EmbedStage`
  and :class:`WriteStage` as actor pools, every write done by the workers.

A run is planned first (:class:`~llmc_splitters.ingest.manifest.ManifestState`), then

1. **chunk**: :func:`~llmc_splitters.ingest.read_chunk_batch` (span rows + one status row per file);
2. **embed**: :class:`EmbedStage` (the model is loaded once per stage instance; vectors of unchanged texts come from
   the store's embedding cache, keyed by ``content_hash``);
3. **write**: :class:`WriteStage` upserts in store-sized batches and returns one row of counts per batch;
4. **delete**: records of changed files that belong to an older version, and every record of deleted files;
5. **commit**: the planned manifest becomes the baseline.

A run killed at any point is redone by the next one: ids are deterministic (writes are upserts), old versions are
deleted only after the new rows are written, and the manifest is committed last (the paths a dead run touched are
re-processed, see :class:`~llmc_splitters.ingest.manifest.ManifestState`).

Sinks are small picklable descriptions (no client inside) that each worker turns into a connection:
:class:`ChromaSink` (a Chroma server through ``HttpClient``; parents and skeletons go to the same collection, never
searched), :class:`LangChainSink` (any LangChain ``VectorStore`` for leaves and summaries plus a ``BaseStore``
docstore for everything, built inside each worker by picklable factories).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigurationError, LlmcError
from .rows import (
    BATCH_COLUMNS,
    SEARCHED_ROLES,
    IngestSettings,
    display_path,
    file_version,
    read_chunk_batch,
    settings_fingerprint,
)
from .manifest import ManifestEntry, ManifestState, Plan
from ..retrieval.store import Record

__all__ = [
    "ChromaSink",
    "EmbedStage",
    "IngestSummary",
    "LangChainSink",
    "WriteStage",
    "apply_deletions",
    "embedding_name",
    "plan_items",
    "run_local",
]

logger = logging.getLogger("llmc_splitters.ingest")

_EMBED_META = ("embedded_view", "embedded_tokens", "embedding_limit", "embed_hash")
_MAX_LISTED = 100
_GET_RETRIES = 6
_TRANSIENT = ("hnsw segment reader", "Nothing found on disk")


def embedding_name(model: Any) -> str:
    """The name a model's vectors are filed under (as :class:`~llmc_splitters.retrieval.CodeIndex` names it)."""
    if model is None:
        return "none"
    name = getattr(model, "name", None) or getattr(model, "model_name", None)
    return str(name) if name else type(model).__name__


# ------------------------------------------------------------------------------------------------------- sinks


class _ChromaConnection:
    """A worker's connection to the Chroma collection (see :class:`ChromaSink`)."""

    def __init__(self, store: Any, page: int) -> None:
        self.store = store
        self.page = page

    @property
    def _col(self) -> Any:
        return self.store.collection

    def _get(self, **kwargs: Any) -> Any:
        """``collection.get``, retried on the server's transient "hnsw segment reader" error.

        NOTE: a Chroma server can answer a filtered ``get`` on a collection being written by other processes with
        ``InternalError: Error creating hnsw segment reader: Nothing found on disk`` (chroma-core/chroma#4212);
        the same call succeeds a moment later.
        """
        for attempt in range(_GET_RETRIES):
            try:
                return self._col.get(**kwargs)
            except Exception as exc:  # noqa: BLE001 - chromadb.errors.InternalError, matched by message
                if attempt == _GET_RETRIES - 1 or not any(t in str(exc) for t in _TRANSIENT):
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def cached(self, content_hashes: Iterable[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        hashes = sorted(set(content_hashes))
        out: dict[str, tuple[list[float], dict[str, Any]]] = {}
        if not hashes or self.count() == 0:
            return out
        for i in range(0, len(hashes), self.page):
            try:
                got = self._get(
                    where={"content_hash": {"$in": hashes[i : i + self.page]}}, include=["embeddings", "metadatas"]
                )
            except Exception as exc:  # noqa: BLE001 - the cache is an optimisation: a miss only costs embedding
                logger.warning("embedding cache lookup failed, embedding instead: %s: %s", type(exc).__name__, exc)
                return out
            embs = got.get("embeddings")
            for j, meta in enumerate(got.get("metadatas") or []):
                h = (meta or {}).get("content_hash")
                if h and h not in out and embs is not None and embs[j] is not None:
                    out[h] = ([float(x) for x in embs[j]], {k: meta[k] for k in _EMBED_META if k in meta})
        return out

    def write(self, records: Sequence[Record]) -> int:
        self.store.upsert(records)
        return len(records)

    def _ids_meta(self, paths: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = 0
        while True:
            got = self._get(where={"path": {"$in": list(paths)}}, include=["metadatas"], limit=2000, offset=offset)
            ids = got["ids"]
            for rid, meta in zip(ids, got.get("metadatas") or [{}] * len(ids)):
                yield rid, dict(meta or {})
            if len(ids) < 2000:
                return
            offset += len(ids)

    def delete_stale(self, items: Iterable[tuple[str, str]]) -> int:
        want = dict(items)
        paths = sorted(want)
        n = 0
        for i in range(0, len(paths), self.page):
            part = paths[i : i + self.page]
            stale = [rid for rid, m in self._ids_meta(part) if m.get("file_version") != want.get(m.get("path", ""))]
            if stale:
                self.store.delete(ids=stale)
                n += len(stale)
        return n

    def delete_paths(self, paths: Iterable[str]) -> int:
        ps = sorted(set(paths))
        n = 0
        for i in range(0, len(ps), self.page):
            ids = [rid for rid, _ in self._ids_meta(ps[i : i + self.page])]
            if ids:
                self.store.delete(ids=ids)
                n += len(ids)
        return n

    def count(self) -> int:
        return self.store.count()

    @property
    def embedding_name(self) -> str | None:
        return self.store.embedding_name


@dataclass(frozen=True)
class ChromaSink:
    """Write to a Chroma collection: a server (``HttpClient``), or an embedded directory for :func:`run_local` only.

    Leaves and summaries are searched; parents (with their skeletons) and the file records (with their import
    bindings) live in the same collection with a placeholder vector and are looked up by id, exactly as
    :class:`~llmc_splitters.retrieval.CodeIndex` lays them out, so ``CodeRetriever(host=..., port=...,
    collection=...)`` searches the result directly.

    Attributes:
        host: Chroma server host (``chroma run``).
        port: Its port.
        path: An embedded ``PersistentClient`` directory instead of a server. Not safe across processes: only
            :func:`run_local`, which writes from one process, accepts it.
        collection: Collection name.
        ssl: HTTPS.
        headers: HTTP headers (authentication).
        page: Ids / hashes per metadata query.
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

    def connect(self, embedding: str | None) -> _ChromaConnection:
        """Open the collection for vectors of ``embedding`` (``None``: open it as it is, for deletions)."""
        from ..retrieval.store import ChromaStore

        if self.host is not None:
            store = ChromaStore(host=self.host, port=self.port, collection=self.collection, ssl=self.ssl,
                                headers=dict(self.headers) or None)
        else:
            store = ChromaStore(self.path, collection=self.collection)
        if embedding is None:
            try:
                col = store.client.get_collection(self.collection)
            except Exception:  # noqa: BLE001 - no collection yet: nothing to delete; create an empty one
                store.open("none")
            else:
                store._col = col  # noqa: SLF001 - open as-is: the embedding name is not known here
                store.embedding_name = (col.metadata or {}).get("llmc_embedding")
        else:
            store.open(embedding)
        return _ChromaConnection(store, self.page)


@dataclass(frozen=True)
class LangChainSink:
    """Write to any LangChain ``VectorStore`` plus a ``BaseStore`` docstore, built in each worker by factories.

    The vector store embeds what it stores with its own model (so no :class:`EmbedStage` runs; the write stage is
    an actor pool, so the model loads once per actor). The layout is :class:`~llmc_splitters.retrieval.vectorstore.
    VectorStoreAdapter`'s, so :func:`~llmc_splitters.retrieval.vectorstore.code_index` over the same two stores
    searches the result.

    Attributes:
        vectorstore_factory: A picklable no-argument callable returning the ``VectorStore`` (a module-level
            function or a ``functools.partial``; it runs inside each worker).
        docstore_factory: The same for the docstore (``BaseStore[str, Document]``).
        namespace: Key prefix in the docstore.
    """

    vectorstore_factory: Callable[[], Any]
    docstore_factory: Callable[[], Any]
    namespace: str = "llmc"

    embeds_itself = True
    process_safe = True

    def connect(self, embedding: str | None) -> Any:
        """Build the stores and wrap them (``embedding`` is checked against the docstore's record of it)."""
        from ..retrieval.vectorstore import VectorStoreAdapter

        adapter = VectorStoreAdapter(self.vectorstore_factory(), self.docstore_factory(), namespace=self.namespace)
        adapter.open(embedding or adapter.embedding.name)
        return adapter


# ------------------------------------------------------------------------------------------------------ stages


def _json_rows(batch: Mapping[str, Any]) -> int:
    return len(batch["id"])


class EmbedStage:
    """Embed the searched rows of a batch; a callable class, so Ray runs it as an actor pool.

    The model is built once per instance by ``embedding_factory`` (inside the worker). Rows whose
    ``content_hash`` the sink already holds a vector for (the same text embedded by an earlier run) reuse it.

    Adds columns ``vector`` (one per row; parents and status rows get the index's placeholder), ``embedded`` (1:
    computed now, 0: from the cache, -1: not a searched row) and ``embedding_name``, and the embedding details
    (``embedded_view``, ``embedded_tokens``, ``embed_hash``) to each searched row's metadata.

    Args:
        embedding_factory: A picklable no-argument callable returning an
            :class:`~llmc_splitters.retrieval.Embedding` (``MiniLMEmbedding``, a ``functools.partial``...).
        sink: Where to look vectors up by ``content_hash`` (``None``: no cache).
        batch_size: Texts per model call.
    """

    def __init__(self, embedding_factory: Callable[[], Any], sink: Any = None, batch_size: int = 64) -> None:
        self.model = embedding_factory()
        self.name = embedding_name(self.model)
        self.sink = sink
        self.batch_size = max(1, int(batch_size))
        self._conn: Any = None
        self._dim: int | None = None

    def _cache(self, hashes: list[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        if self.sink is None or not hashes:
            return {}
        if self._conn is None:
            self._conn = self.sink.connect(self.name)
        return self._conn.cached(hashes)

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        import numpy as np

        from ..retrieval.embeddings import bounded_view
        from ..retrieval.index import _sha

        n = _json_rows(batch)
        out: dict[str, Any] = {c: list(batch[c]) for c in BATCH_COLUMNS}
        roles = [str(r) for r in out["role"]]
        metas = [json.loads(m) if roles[i] in SEARCHED_ROLES else None for i, m in enumerate(out["metadata"])]
        searched = [i for i in range(n) if roles[i] in SEARCHED_ROLES]
        hits = self._cache(sorted({str(out["content_hash"][i]) for i in searched}))
        vectors: list[list[float] | None] = [None] * n
        embedded = [-1] * n
        todo: dict[str, list[int]] = {}
        views: dict[str, str] = {}
        for i in searched:
            h = str(out["content_hash"][i])
            meta = metas[i]
            assert meta is not None
            if h in hits:
                vec, extra = hits[h]
                vectors[i] = vec
                meta.update(extra)
                embedded[i] = 0
                continue
            v = bounded_view(str(out["embed_text"][i]), self.model)
            meta["embedded_view"] = "truncated" if v.truncated else "full"
            if v.tokens is not None:
                meta["embedded_tokens"] = v.tokens
            if v.limit is not None:
                meta["embedding_limit"] = v.limit
            meta["embed_hash"] = _sha(f"{self.name}\x00{v.text}")
            views[h] = v.text
            todo.setdefault(h, []).append(i)
        keys = list(todo)
        for s in range(0, len(keys), self.batch_size):
            part = keys[s : s + self.batch_size]
            vecs = self.model.embed_documents([views[h] for h in part])
            if len(vecs) != len(part):
                msg = f"the embedding model returned {len(vecs)} vectors for {len(part)} texts"
                raise LlmcError(msg)
            for h, vec in zip(part, vecs):
                first = True
                for i in todo[h]:
                    vectors[i] = [float(x) for x in vec]
                    # A text repeated in one batch is embedded once; its other rows count as cached.
                    embedded[i] = 1 if first else 0
                    first = False
        dim = self._dimension(vectors)
        placeholder = [1.0] + [0.0] * (dim - 1)
        for i in range(n):
            if metas[i] is not None:
                out["metadata"][i] = json.dumps(metas[i], ensure_ascii=False)
        out["vector"] = np.asarray([v if v is not None else placeholder for v in vectors], dtype=np.float32)
        out["embedded"] = np.asarray(embedded, dtype=np.int8)
        out["embedding_name"] = [self.name] * n
        return out

    def _dimension(self, vectors: list[list[float] | None]) -> int:
        if self._dim is None:
            for v in vectors:
                if v is not None:
                    self._dim = len(v)
                    break
            else:
                self._dim = len(self.model.embed_query("dimension probe"))
        return self._dim


class WriteStage:
    """Write a batch to the sink from the worker; return one row of counts (nothing else reaches the driver).

    Args:
        sink: A :class:`ChromaSink` or :class:`LangChainSink`.
        embedding: The vector space's name when no :class:`EmbedStage` ran (``"none"`` for lexical only; for a
            :class:`LangChainSink` the vector store's own model).
    """

    def __init__(self, sink: Any, embedding: str | None = None) -> None:
        self.sink = sink
        self.embedding = embedding
        self._conn: Any = None
        self._name: str | None = None

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        n = _json_rows(batch)
        roles = [str(r) for r in batch["role"]]
        name: str | None
        if "embedding_name" in batch and n:
            name = str(batch["embedding_name"][0])
        elif self.sink.embeds_itself:
            name = self.embedding  # None: the vector store's own model names itself
        else:
            name = self.embedding or "none"
        counts = _Counts()
        records: list[Record] = []
        vecs = batch["vector"] if "vector" in batch else None
        emb = list(batch["embedded"]) if "embedded" in batch else [-1] * n
        for i in range(n):
            role = roles[i]
            if role == "file":
                counts.file(str(batch["status"][i]), str(batch["repository"][i]), str(batch["path"][i]),
                            str(batch["reason"][i]))
                continue
            vec: list[float] | None
            if vecs is not None:
                vec = [float(x) for x in vecs[i]]
            elif self.sink.embeds_itself:
                vec = None
            else:
                vec = [1.0]  # lexical only: the index's one-number placeholder
            records.append(Record(str(batch["id"][i]), str(batch["text"][i]), json.loads(str(batch["metadata"][i])),
                                  vec))
            if int(emb[i]) == 1:
                counts.embedded += 1
            elif int(emb[i]) == 0:
                counts.cached += 1
        if records:
            if self._conn is None or self._name != name:
                self._conn = self.sink.connect(name)
                self._name = name
            counts.written += self._conn.write(records)
            if self.sink.embeds_itself:
                counts.embedded += sum(1 for r in records if r.metadata.get("role") in SEARCHED_ROLES)
        actual = getattr(self._conn, "embedding_name", None) if self._conn is not None else None
        return counts.row(actual or name or "")


@dataclass(slots=True)
class _Counts:
    chunked: int = 0
    skipped: int = 0
    failed: int = 0
    written: int = 0
    embedded: int = 0
    cached: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    skipped_list: list[list[str]] = field(default_factory=list)
    failed_list: list[list[str]] = field(default_factory=list)

    def file(self, status: str, repo: str, path: str, reason: str) -> None:
        if status == "chunked":
            self.chunked += 1
            return
        kind = reason.split(":", 1)[0].split(" (", 1)[0]
        self.reasons[f"{status}: {kind}"] = self.reasons.get(f"{status}: {kind}", 0) + 1
        if status == "skipped":
            self.skipped += 1
            if len(self.skipped_list) < _MAX_LISTED:
                self.skipped_list.append([repo, path, reason])
        else:
            self.failed += 1
            # Every failure is listed: the driver keeps these files out of the committed manifest (retried).
            self.failed_list.append([repo, path, reason])

    def row(self, name: str) -> dict[str, list[Any]]:
        return {
            "files_chunked": [self.chunked], "files_skipped": [self.skipped], "files_failed": [self.failed],
            "spans_written": [self.written], "spans_embedded": [self.embedded], "spans_cached": [self.cached],
            "reasons": [json.dumps(self.reasons)], "skipped": [json.dumps(self.skipped_list)],
            "failed": [json.dumps(self.failed_list)], "embedding_name": [name],
        }


# ----------------------------------------------------------------------------------------------------- summary


@dataclass(slots=True)
class IngestSummary:
    """What a run did, stage by stage.

    Attributes:
        engine: ``local`` or ``ray``.
        files_total: Files in the manifest.
        files_planned: Files planned for chunking (added + changed).
        files_added: New files.
        files_changed: Changed files (or re-chunked: settings changed, interrupted run).
        files_deleted: Files removed since the last run.
        files_unchanged: Files not read at all.
        files_chunked: Files chunked.
        files_skipped: Files skipped for good (binary, undecodable); ``reasons`` says why.
        files_failed: Files that failed (unreadable, changed since planned, chunker error): retried next run.
        reasons: ``"skipped: binary" -> count``, ``"failed: could not read ..." -> count``...
        skipped: Up to 100 skipped files as ``[repository, path, reason]``.
        failed: Every failed file as ``[repository, path, reason]``.
        spans_written: Records upserted (leaves, parents, summaries).
        spans_embedded: Texts embedded in this run.
        spans_cached: Texts whose vector came from the embedding cache.
        spans_deleted: Records deleted (older versions of changed files, deleted files).
        embedding: The vector space written.
        seconds: Wall time per stage (``plan`` is filled by the caller) and ``total``.
    """

    engine: str = "local"
    files_total: int = 0
    files_planned: int = 0
    files_added: int = 0
    files_changed: int = 0
    files_deleted: int = 0
    files_unchanged: int = 0
    files_chunked: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    skipped: list[list[str]] = field(default_factory=list)
    failed: list[list[str]] = field(default_factory=list)
    spans_written: int = 0
    spans_embedded: int = 0
    spans_cached: int = 0
    spans_deleted: int = 0
    embedding: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_plan(cls, plan: Plan, engine: str) -> IngestSummary:
        return cls(engine=engine, files_total=plan.total, files_planned=len(plan.added) + len(plan.changed),
                   files_added=len(plan.added), files_changed=len(plan.changed), files_deleted=len(plan.deleted),
                   files_unchanged=plan.unchanged)

    def add(self, row: Mapping[str, Any]) -> None:
        """Fold in one count row of :class:`WriteStage` (scalars, or its one-row columns)."""
        row = {k: (v[0] if isinstance(v, list) else v) for k, v in row.items()}
        self.files_chunked += int(row["files_chunked"])
        self.files_skipped += int(row["files_skipped"])
        self.files_failed += int(row["files_failed"])
        self.spans_written += int(row["spans_written"])
        self.spans_embedded += int(row["spans_embedded"])
        self.spans_cached += int(row["spans_cached"])
        for k, v in json.loads(str(row["reasons"])).items():
            self.reasons[k] = self.reasons.get(k, 0) + int(v)
        room = _MAX_LISTED - len(self.skipped)
        if room > 0:
            self.skipped.extend(json.loads(str(row["skipped"]))[:room])
        self.failed.extend(json.loads(str(row["failed"])))
        name = str(row.get("embedding_name") or "")
        if name and name != "none" or not self.embedding:
            self.embedding = name or self.embedding

    @property
    def files_done(self) -> int:
        """Files through the write stage (chunked, skipped or failed)."""
        return self.files_chunked + self.files_skipped + self.files_failed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return asdict(self)

    def __str__(self) -> str:
        lines = [
            f"[{self.engine}] plan: {self.files_total} files; {self.files_planned} to chunk "
            f"({self.files_added} added, {self.files_changed} changed), {self.files_deleted} deleted, "
            f"{self.files_unchanged} unchanged",
            f"  chunk: {self.files_chunked} chunked, {self.files_skipped} skipped, {self.files_failed} failed",
            f"  embed: {self.spans_embedded} embedded, {self.spans_cached} from cache ({self.embedding or 'none'})",
            f"  write: {self.spans_written} records written, {self.spans_deleted} deleted",
        ]
        for k, v in sorted(self.reasons.items()):
            lines.append(f"  {k}: {v}")
        if self.seconds:
            lines.append("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()))
        return "\n".join(lines)


ProgressFn = Callable[[str, IngestSummary], None]


def log_progress(stage: str, summary: IngestSummary) -> None:
    """The default progress report: one log line per stage event (logger ``llmc_splitters.ingest``)."""
    if stage == "write":
        logger.info(
            "write: %d/%d files (%d chunked, %d skipped, %d failed), %d embedded, %d cached, %d records",
            summary.files_done, summary.files_planned, summary.files_chunked, summary.files_skipped,
            summary.files_failed, summary.spans_embedded, summary.spans_cached, summary.spans_written,
        )
    else:
        logger.info("%s:\n%s", stage, summary)


# ----------------------------------------------------------------------------------------------- orchestration


def plan_items(plan: Plan, roots: Mapping[str, str] | str) -> list[dict[str, Any]]:
    """The files to chunk as rows for :func:`~llmc_splitters.ingest.read_chunk_batch`.

    Args:
        plan: The plan.
        roots: The local checkout of each repository (``{repository: dir}``), or one directory for all.
    """
    out = []
    for e in plan.to_chunk:
        root = roots if isinstance(roots, str) else roots.get(e.repository)
        if root is None:
            msg = f"no local checkout given for repository {e.repository!r}; pass roots={{{e.repository!r}: dir}}"
            raise ConfigurationError(msg)
        out.append({"root": str(root), "repository": e.repository, "path": e.path, "blob_sha": e.blob_sha,
                    "size": e.size})
    return out


def deletion_items(plan: Plan, failed: Iterable[Sequence[str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """``(path, current file_version)`` of the chunked files (older versions go) and the paths of deleted files.

    A file that failed keeps the version stored before (it is retried next run), so it is not in the first list.
    """
    bad = {(str(r), str(p)) for r, p, *_ in failed}
    stale = [
        (display_path(e.repository, e.path), file_version(e.repository, e.path, e.blob_sha, plan.fingerprint))
        for e in plan.to_chunk
        if e.key not in bad
    ]
    gone = [display_path(e.repository, e.path) for e in plan.deleted]
    return stale, gone


def apply_deletions(sink: Any, embedding: str | None, stale: Sequence[tuple[str, str]], gone: Sequence[str]) -> int:
    """Delete older versions of re-chunked files and every record of deleted files; returns how many records."""
    if not stale and not gone:
        return 0
    conn = sink.connect(embedding)
    n = conn.delete_stale(stale) if stale else 0
    n += conn.delete_paths(gone) if gone else 0
    return n


def _batches(items: Sequence[Mapping[str, Any]], size: int) -> Iterator[dict[str, list[Any]]]:
    for i in range(0, len(items), size):
        part = items[i : i + size]
        yield {k: [it[k] for it in part] for k in ("root", "repository", "path", "blob_sha")}


def finish(
    plan: Plan,
    state: ManifestState | None,
    sink: Any,
    summary: IngestSummary,
    progress: ProgressFn | None,
    run_deletions: Callable[[list[tuple[str, str]], list[str]], int] | None = None,
) -> IngestSummary:
    """Delete what is stale, commit the manifest, and report (shared by the local and Ray runs)."""
    t = time.perf_counter()
    stale, gone = deletion_items(plan, summary.failed)
    embedding = summary.embedding or None
    if run_deletions is not None:
        summary.spans_deleted = run_deletions(stale, gone)
    else:
        summary.spans_deleted = apply_deletions(sink, embedding, stale, gone)
    summary.seconds["delete"] = time.perf_counter() - t
    if progress:
        progress("delete", summary)
    if state is not None:
        state.commit(plan, failed=[(str(r), str(p)) for r, p, *_ in summary.failed])
    if progress:
        progress("done", summary)
    return summary


def run_local(
    plan: Plan,
    sink: Any,
    *,
    roots: Mapping[str, str] | str,
    settings: IngestSettings | None = None,
    embedding_factory: Callable[[], Any] | None = None,
    state: ManifestState | None = None,
    workers: int = 2,
    files_per_batch: int = 16,
    source: str = "git",
    embed_batch_size: int = 64,
    progress: ProgressFn | None = log_progress,
) -> IngestSummary:
    """Carry out a plan on this machine: chunk in a process pool, embed and write here.

    Args:
        plan: From :meth:`~llmc_splitters.ingest.manifest.ManifestState.plan` (its fingerprint must match ``settings``).
        sink: A :class:`ChromaSink` (server or embedded directory) or :class:`LangChainSink`.
        roots: Local checkout per repository (or one directory).
        settings: Chunking settings.
        embedding_factory: Builds the embedding model (``None``: lexical-only records, or the vector store's own
            model for a :class:`LangChainSink`).
        state: Commit the manifest here when the run succeeded.
        workers: Chunking processes (``0``: chunk in this process).
        files_per_batch: Files per chunking task.
        source: ``"git"`` (read blobs by SHA) or ``"worktree"`` (read files, check their SHA).
        embed_batch_size: Texts per model call.
        progress: Called as ``progress(stage, summary)`` after planning, after each write batch, after deletions
            and at the end (default: log lines).

    Returns:
        The :class:`IngestSummary`.

    Raises:
        ConfigurationError: The plan was made for other settings, or an ``embedding_factory`` is given for a sink
            whose vector store embeds by itself.
    """
    settings = settings or IngestSettings()
    _check_plan(plan, settings)
    _check_sink(sink, embedding_factory)
    summary = IngestSummary.for_plan(plan, "local")
    if progress:
        progress("plan", summary)
    t0 = time.perf_counter()
    items = plan_items(plan, roots)
    embed = EmbedStage(embedding_factory, sink, embed_batch_size) if embedding_factory is not None else None
    writer = WriteStage(sink)

    def handle(batch: dict[str, list[Any]]) -> None:
        if not batch["id"]:
            return
        b: Mapping[str, Any] = embed(batch) if embed is not None else batch
        summary.add(writer(b))
        if progress:
            progress("write", summary)

    if workers == 0:
        for part in _batches(items, files_per_batch):
            handle(read_chunk_batch(part, settings, source=source))
    else:
        # spawn, not fork: the parent may hold threads (Chroma's client, torch) that a fork would copy mid-lock.
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            pending: list[Future[dict[str, list[Any]]]] = []
            for part in _batches(items, files_per_batch):
                pending.append(pool.submit(read_chunk_batch, part, settings, source=source))
                # Keep a bounded number of batches in flight: memory follows the batch size, not the tree.
                while len(pending) > 2 * workers:
                    handle(pending.pop(0).result())
            for f in pending:
                handle(f.result())
    summary.seconds["chunk+embed+write"] = time.perf_counter() - t0
    finish(plan, state, sink, summary, progress)
    summary.seconds["total"] = time.perf_counter() - t0
    return summary


def _check_sink(sink: Any, embedding_factory: Callable[[], Any] | None) -> None:
    if embedding_factory is not None and getattr(sink, "embeds_itself", False):
        msg = (
            f"{type(sink).__name__}'s vector store embeds what it stores with its own model; drop "
            "embedding_factory (give the model to the vector store your factory builds)"
        )
        raise ConfigurationError(msg)


def _check_plan(plan: Plan, settings: IngestSettings) -> None:
    fp = settings_fingerprint(settings)
    if plan.fingerprint and plan.fingerprint != fp:
        msg = (
            f"the plan was made for settings {plan.fingerprint}, but these settings are {fp}; "
            "plan again with fingerprint=settings_fingerprint(settings)"
        )
        raise ConfigurationError(msg)
    if not plan.fingerprint:
        plan.fingerprint = fp


def entries_from_items(items: Iterable[Mapping[str, Any]]) -> list[ManifestEntry]:
    """Manifest entries back from :func:`plan_items` rows (for tests and tools)."""
    return [ManifestEntry(str(i["repository"]), str(i["path"]), str(i["blob_sha"]), int(i.get("size", -1)))
            for i in items]
