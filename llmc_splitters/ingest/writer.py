"""The one writer of an ingestion run: the driver process puts the rows into the index directory.

However many processes chunk and embed, one process writes the span store (``DIR/llmc.sqlite3``) and the lexical
index (``DIR/lexical``): the one that drives the run. It streams the rows back, never gathering a run: rows of a
file are held until the file is complete (its status row and every span row it counts, in any order, from any
number of batches), complete files are grouped (up to 32 files or 4,000 rows), and each group is written by the
serial index's own write path (:meth:`Indexer.flush <llmc_splitters.retrieval.indexing.indexer.Indexer.flush>`): one
span-store transaction with the group's ``pending`` outbox rows, the lexical index, the vector store, the vector
ids the group made stale, then ``done``. The memory held is a group plus the files in flight.

Vectors:

* in :func:`~llmc_splitters.ingest.pipeline.run_local` the writer embeds too, with the span store's vector cache,
  exactly as ``CodeIndex`` does, and upserts into the sink;
* in :func:`~llmc_splitters.ingest.ray.run_ray` the workers upserted each row's vector before the row reached
  the writer (:class:`WrittenByWorkers`): the writer keeps the vectors in the span store's cache (a later serial
  run, or a replay of the outbox, never embeds them again) and deletes the stale ids, but writes no vector itself;
* in a Ray run into a Milvus server the workers wrote the span rows themselves, vectors and cache included
  (:mod:`~llmc_splitters.ingest.milvus_rows`): the writer writes what follows them, a replaced version's rows
  deleted and each file's marker (see ``MilvusSpans.rows_from_workers``).

A run killed at any point leaves every file complete in the span store (old or new version), the outbox says what
the lexical index and the vector store still have to catch up with (replayed at the start of the next run), and
the manifest's pending list makes the next plan redo the files of the dead run (same ids: a no-op for those the
dead run finished).
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, LlmcError
from .row_format import SEARCHED_ROLES, _value, prepared_file, view_row
from .sinks import ForwardingVectors

if TYPE_CHECKING:
    from ..retrieval.index import CodeIndex
    from ..retrieval.storage.file_rows import PreparedFile
    from .summary import IngestSummary, ProgressFn

__all__ = ["IndexWriter", "WorkerModel", "WrittenByWorkers", "recorded_embedding"]

_GROUP_FILES = 32
_GROUP_ROWS = 4000


class WorkerModel:
    """Stands for the embedding model on the driver of a Ray run: the model runs in the embed actors, and the driver
    only files their vectors under its name.

    Args:
        name: The model's name (what the embed actors report).
        dimension: Its vectors' size, when known (what a Milvus collection is created for).
        max_input_tokens: Its input limit, when known.
    """

    def __init__(self, name: str, dimension: int | None = None, max_input_tokens: int | None = None) -> None:
        self.name = name
        self.dimension = dimension
        self.max_input_tokens = max_input_tokens

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Never called for rows the workers embedded; a row without its vector is an error, not a silent embed."""
        msg = (f"{len(texts)} texts reached the index without their vector, and the model ({self.name}) runs in the "
               "Ray embed actors, not here; run the ingestion again (the files stay pending until it succeeds)")
        raise LlmcError(msg)

    def embed_query(self, text: str) -> list[float]:
        """Not available on the driver (see :meth:`embed_documents`)."""
        return self.embed_documents([text])[0]


class WrittenByWorkers(ForwardingVectors):
    """The driver's handle on a vector store that the Ray workers write.

    The rows of a group reach the writer after their vectors were upserted by the workers, so the upserts of a
    group's flush skip exactly those ids (:attr:`written`); every other upsert (a replay of the outbox left by a
    dead run, whose vectors come from the span store's cache) and every delete (stale ids) goes to the store.

    Args:
        store: The vector store (a :class:`~llmc_splitters.ingest.sinks.ChromaVectors` or a
            :class:`~llmc_splitters.retrieval.vectorstore.VectorStoreAdapter`).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.embeds_itself = bool(getattr(store, "embeds_itself", False))
        self.written: set[str] = set()

    def __repr__(self) -> str:
        return f"WrittenByWorkers({self.store!r})"

    def upsert(self, records: Sequence[Any]) -> None:
        """Upsert the records the workers did not write."""
        rest = [r for r in records if r.id not in self.written]
        if rest:
            self.store.upsert(rest)


def recorded_embedding(directory: str | os.PathLike[str]) -> str | None:
    """The embedding name the index at ``directory`` records (``"none"``: lexical), or ``None`` when there is no
    index there yet.

    Raises:
        StoreError: The index cannot be read (corrupt, locked, of another format).
    """
    from ..retrieval.storage.span_store import IndexNotFoundError, SpanStore

    if getattr(directory, "holds_index", False):  # a MilvusStore
        try:
            return str(directory.recorded()["embedding"])  # type: ignore[attr-defined]
        except IndexNotFoundError:
            return None
    try:
        store = SpanStore(directory, create=False)
    except IndexNotFoundError:
        return None
    try:
        return store.get_meta("embedding")
    finally:
        store.close()


@dataclass(slots=True)
class _InFlight:
    """A file whose rows are arriving: its status row (once seen) and its span rows by position."""

    status: dict[str, Any] | None = None
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)

    def complete(self) -> bool:
        if self.status is None:
            return False
        marker = self.status["metadata"]
        n = int(marker.get("n_spans", 0)) if isinstance(marker, Mapping) else None
        return n is not None and len(self.rows) >= n


class IndexWriter:
    """Write the rows of a run into an index directory (see the module docstring).

    Args:
        open_index: Opens the :class:`~llmc_splitters.retrieval.CodeIndex` to write, for an embedding name
            (``"none"``: lexical only).
        embedding: The run's embedding name when known now; ``None`` when only the embed actors know it (the
            index then opens when the first batch names it, or at once if the directory already records one).
        recorded: The embedding name the index directory records (``None``: a new index).
        summary: Counted into as files are written.
        progress: Called as ``progress("write", summary)`` after each group.
        view_here: Searched rows arrive without their embedded view; make it here with the index's model.
    """

    def __init__(
        self,
        open_index: Callable[[str], CodeIndex],
        *,
        embedding: str | None,
        recorded: str | None,
        summary: IngestSummary,
        progress: ProgressFn | None = None,
        view_here: bool = False,
    ) -> None:
        self._open = open_index
        self.summary = summary
        self.progress = progress
        self.view_here = view_here
        self.index: CodeIndex | None = None
        self._indexer: Any = None
        self._view: Any = None
        self._inflight: dict[str, _InFlight] = {}
        self._group: list[PreparedFile] = []
        self._group_rows = 0
        self._keys: dict[str, tuple[str, str]] = {}
        self._others: dict[str, tuple[str, str, str, str]] = {}
        self._vectors: dict[str, array[float]] = {}
        self._embedded = 0
        self._cached = 0
        name = embedding if embedding is not None else recorded
        if name is not None:
            self._open_for(name)

    # ------------------------------------------------------------------------------------------------ opening

    def _open_for(self, name: str) -> CodeIndex:
        if self.index is None:
            from ..retrieval.indexing.indexer import Indexer
            from ..retrieval.storage.file_rows import embedding_view

            self.index = self._open(name)
            self._indexer = Indexer(self.index)
            if self.view_here and self.index.embedding is not None:
                self._view = embedding_view(self.index.embedding, self.index.embedding_name)
            self.summary.embedding = self.index.embedding_name
            # Replay what a dead run left in the outbox before anything new is written.
            self._indexer.catch_up()
        elif name != self.index.embedding_name:
            msg = (f"the index at {self.index.path} holds vectors from {self.index.embedding_name!r}, but the embed "
                   f"actors run {name!r}; use the same model, another index directory, or reset this one")
            raise ConfigurationError(msg)
        return self.index

    # ------------------------------------------------------------------------------------------------ the stream

    def feed(self, batch: Mapping[str, Any]) -> None:
        """Take one batch of rows (columns); write every group of files it completes."""
        names = batch.get("embedding_name")
        n = len(batch["id"])
        if n and names is not None:
            self._open_for(str(_value(names[0])))
        cols = list(batch)
        for i in range(n):
            row = {c: _value(batch[c][i]) for c in cols}
            file = str(row["file"])
            slot = self._inflight.setdefault(file, _InFlight())
            if row["role"] == "file":
                meta = row["metadata"]
                row["metadata"] = meta if isinstance(meta, Mapping) else json.loads(meta)
                slot.status = row
            else:
                slot.rows[int(row["seq"])] = row
            if slot.complete():
                del self._inflight[file]
                self._take(slot)
            if len(self._group) >= _GROUP_FILES or self._group_rows >= _GROUP_ROWS:
                self._flush()

    def _take(self, slot: _InFlight) -> None:
        """One complete file: into the group, or counted as skipped / failed."""
        st = slot.status
        assert st is not None
        file, repo, path = str(st["file"]), str(st["repository"]), str(st["path"])
        if st["status"] != "chunked":
            self._others[file] = (repo, path, str(st["status"]), str(st["reason"]))
            return
        rows = list(slot.rows.values())
        searched = [r for r in rows if r["role"] in SEARCHED_ROLES]
        if self._view is not None:
            for r in searched:
                if not r["embed_hash"]:
                    view_row(r, self._view)
        try:
            prepared = prepared_file(st, rows)
        except LlmcError as exc:
            self._others[file] = (repo, path, "failed", str(exc))
            return
        for r in searched:
            if r.get("vector"):  # computed or found by the embed actors: the index's cache keeps it too
                self._vectors[str(r["embed_hash"])] = array("f", bytes(r["vector"]))
            flag = int(r.get("embedded", -1))
            self._embedded += flag == 1
            self._cached += flag == 0
        self._keys[file] = (repo, path)
        self._group.append(prepared)
        self._group_rows += len(prepared.write.rows)

    def _flush(self) -> None:
        """Write the group, and settle the skipped and failed files seen since the last group."""
        if not self._group and not self._others:
            return
        from ..retrieval.indexing.indexer import IndexReport

        index = self.index
        if index is None:  # every batch that carries files names its vector space, which opens the index
            msg = "rows reached the index writer before their embedding was known"
            raise LlmcError(msg)
        store = index.span_store
        group, self._group, self._group_rows = self._group, [], 0
        if self._vectors:
            store.cache_vectors(self._vectors)
            self._vectors = {}
        vectors = index.vectors if index.dense else None
        if isinstance(vectors, WrittenByWorkers):
            vectors.written = {g.write.rows[i].span.id for g in group for i, _, _ in g.views}
        report = IndexReport()
        views = sum(len(g.views) for g in group)
        self._indexer.flush(group, report)
        if isinstance(vectors, WrittenByWorkers) or getattr(store, "rows_from_workers", False):
            if isinstance(vectors, WrittenByWorkers):
                vectors.written = set()
            self.summary.spans_embedded += self._embedded
            self.summary.spans_cached += self._cached
        elif vectors is not None and vectors.embeds_itself:
            self.summary.spans_embedded += views  # the store embedded every view it was given
        else:
            self.summary.spans_embedded += report.embedded
            self.summary.spans_cached += report.reused
        self._embedded = self._cached = 0
        self.summary.spans_written += report.spans
        for file in (*report.added, *report.updated):
            self.summary.count_file("chunked", *self._keys[file])
        for file, reason in report.failed.items():
            self.summary.count_file("failed", *self._keys[file], reason)
        self._keys = {}
        others, self._others = self._others, {}
        # A file skipped for good (binary, undecodable) loses the version indexed before, as if it were deleted; a
        # file that failed keeps it, and is retried.
        gone = {f: m.n_spans for f, (_, _, status, _) in others.items()
                if status == "skipped" and (m := store.marker(f)) is not None}
        if gone:
            self._indexer.remove(list(gone))
            self.summary.spans_deleted += sum(gone.values())
        store.set_failed({**{f: f"{status}: {reason}" for f, (_, _, status, reason) in others.items()},
                          **report.failed})
        for repo, path, status, reason in others.values():
            self.summary.count_file(status, repo, path, reason)
        if self.progress:
            self.progress("write", self.summary)

    # ------------------------------------------------------------------------------------------------ the end

    def finish(self) -> None:
        """Write what is left of the stream."""
        for file, slot in list(self._inflight.items()):
            # Rows the stream never completed (it should not happen): the file keeps its previous version.
            st = slot.status or {}
            self._others[file] = (str(st.get("repository", "")), str(st.get("path", file)), "failed",
                                  f"only {len(slot.rows)} of its rows arrived")
        self._inflight = {}
        self._flush()
        if self._indexer is not None:
            # The index batches its lexical commits (one per second of writing); the run's last groups are made
            # searchable now, not by the next writer's replay.
            self._indexer.commit_lexical()

    def remove(self, deleted: Sequence[str]) -> None:
        """Remove files from the index and their vectors from the vector store (``deleted``: stored paths)."""
        if not deleted or self.index is None:  # no index yet: nothing of them to remove
            return
        store = self.index.span_store
        self.summary.spans_deleted += sum(m.n_spans for p in deleted if (m := store.marker(p)) is not None)
        self._indexer.remove(deleted)

    def close(self) -> None:
        """Release the index (its lexical writer's lock, this thread's database connection)."""
        if self.index is not None:
            self.index.close()
