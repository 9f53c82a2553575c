"""The stages of a distributed ingestion after chunking: embed the searched rows, then write their vectors.

Both are callables over columnar batches (:data:`~llmc_splitters.ingest.rows.BATCH_COLUMNS`, dicts of equal-length
columns), built once per worker, so Ray runs them as actor pools or tasks and Spark inside ``mapInPandas``:

* :class:`EmbedStage` makes each searched row's embedded view (the same view the serial index makes,
  :func:`~llmc_splitters.retrieval.storage.file_rows.embedding_view`) and its vector: from the sink's embedding cache when
  that exact view was embedded before, else from the model, which loads once per stage;
* :class:`WriteStage` upserts the vectors into the sink from the worker, then passes the rows on (without the
  embedded text, which the writer does not need) for the one writer of the run, which puts them in the index.

Added columns: ``vector`` (float32 bytes; empty for rows without one), ``embedded`` (1: computed now, 0: from the
cache or a repeat in the batch, -1: not a searched row) and ``embedding_name``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import LlmcError
from .row_format import BATCH_COLUMNS, SEARCHED_ROLES, _value, view_row

__all__ = ["EMBED_COLUMNS", "EmbedStage", "WriteStage", "embedding_name"]

EMBED_COLUMNS = ("vector", "embedded", "embedding_name")
"""The columns :class:`EmbedStage` adds (and :class:`WriteStage` keeps)."""


def embedding_name(model: Any) -> str:
    """The name a model's vectors are filed under (as :class:`~llmc_splitters.retrieval.CodeIndex` names it)."""
    from ..retrieval.storage.index_dir import embedding_name as index_embedding_name

    return index_embedding_name(model)


def _rows(batch: Mapping[str, Any]) -> list[dict[str, Any]]:
    cols = list(batch)
    n = len(batch["id"])
    return [{c: _value(batch[c][i]) for c in cols} for i in range(n)]


def _columns(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> dict[str, list[Any]]:
    return {c: [r[c] for r in rows] for c in columns}


class EmbedStage:
    """Embed the searched rows of a batch; a callable class, so Ray runs it as an actor pool.

    The model is built once per instance by ``embedding_factory`` (inside the worker). A row whose embedded view the
    sink already holds a vector for (the same text embedded by an earlier run, under any path) reuses it.

    Args:
        embedding_factory: A picklable no-argument callable returning an
            :class:`~llmc_splitters.retrieval.Embedding` (``MiniLMEmbedding``, a ``functools.partial``...).
        sink: Where to look vectors up by their cache key (a :class:`~llmc_splitters.ingest.pipeline.ChromaSink`;
            ``None``: no cache).
        batch_size: Texts per model call.

    Attributes:
        name: The model's name (what its vectors are filed under).
        dim: The vectors' size, once a batch was embedded.

    Example:
        >>> from llmc_splitters.ingest import chunk_batch
        >>> from llmc_splitters.retrieval import HashingEmbedding
        >>> out = EmbedStage(lambda: HashingEmbedding(8))(chunk_batch({"path": ["a.py"], "data": [b"x = 1\\n"]}))
        >>> list(zip(out["role"], out["embedded"]))
        [('parent', -1), ('leaf', 1), ('summary', 1), ('file', -1)]
    """

    def __init__(self, embedding_factory: Callable[[], Any], sink: Any = None, batch_size: int = 64) -> None:
        from ..retrieval.storage.file_rows import embedding_view

        self.model = embedding_factory()
        self.name = embedding_name(self.model)
        self.view = embedding_view(self.model, self.name)
        self.sink = sink
        self.batch_size = max(1, int(batch_size))
        self.dim: int | None = None
        self._conn: Any = None

    def _cached(self, searched: list[dict[str, Any]]) -> dict[str, list[float]]:
        """Vectors the sink already holds for these rows' views, asked of each role's collection."""
        if self.sink is None or self.sink.embeds_itself or not searched:
            return {}
        if self._conn is None:
            self._conn = self.sink.connect(self.name)
        out: dict[str, list[float]] = {}
        for role in SEARCHED_ROLES:
            hashes = {r["embed_hash"] for r in searched if r["role"] == role}
            if hashes:
                out.update(self._conn.cached(hashes, role))
        return out

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        from ..retrieval.storage.span_rows import pack_vector

        rows = _rows(batch)
        searched = [r for r in rows if r["role"] in SEARCHED_ROLES]
        for r in searched:
            view_row(r, self.view)
        hits = self._cached(searched)
        todo: dict[str, str] = {}
        for r in searched:
            if r["embed_hash"] not in hits:
                todo.setdefault(r["embed_hash"], r["embed_text"])
        keys = list(todo)
        fresh: dict[str, list[float]] = {}
        for s in range(0, len(keys), self.batch_size):
            part = keys[s : s + self.batch_size]
            vecs = self.model.embed_documents([todo[h] for h in part])
            if len(vecs) != len(part):
                msg = f"the embedding model returned {len(vecs)} vectors for {len(part)} texts"
                raise LlmcError(msg)
            fresh.update((h, [float(x) for x in v]) for h, v in zip(part, vecs))
        for r in rows:
            r["vector"], r["embedded"], r["embedding_name"] = b"", -1, self.name
        counted: set[str] = set()
        for r in searched:
            h = r["embed_hash"]
            if h in hits:
                vec, r["embedded"] = hits[h], 0
            else:
                # A text repeated in one batch is embedded once; its other rows count as cached.
                vec, r["embedded"] = fresh[h], 0 if h in counted else 1
                counted.add(h)
            r["vector"] = pack_vector(vec)
            self.dim = len(vec)
        return _columns(rows, (*BATCH_COLUMNS, *EMBED_COLUMNS))


class WriteStage:
    """Write the vectors of a batch to the sink from the worker, and pass the rows on to the index's writer.

    For a sink whose vector store embeds by itself (:class:`~llmc_splitters.ingest.pipeline.LangChainSink`), no
    :class:`EmbedStage` ran: this stage makes the embedded views (with the store's model, as the serial index does)
    and hands the store their texts.

    Args:
        sink: A :class:`~llmc_splitters.ingest.pipeline.ChromaSink` or
            :class:`~llmc_splitters.ingest.pipeline.LangChainSink`.
    """

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._conn: Any = None
        self._name: str | None = None
        self._view: Any = None

    def _connect(self, name: str | None) -> Any:
        if self._conn is None or (name is not None and name != self._name):
            self._conn = self.sink.connect(name)
            self._name = name or self._conn.embedding_name
            if self.sink.embeds_itself:
                from ..retrieval.storage.file_rows import embedding_view

                self._view = embedding_view(self._conn.embedding, self._name)
        return self._conn

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        from ..retrieval.storage.span_rows import unpack_vector
        from ..retrieval.storage.chroma_vectors import Record, vector_metadata

        rows = _rows(batch)
        if not rows:
            return _columns(rows, (*BATCH_COLUMNS, *EMBED_COLUMNS))
        if self.sink.embeds_itself:
            conn = self._connect(None)
            for r in rows:
                searched = r["role"] in SEARCHED_ROLES
                if searched:
                    view_row(r, self._view)
                r["vector"], r["embedded"], r["embedding_name"] = b"", 1 if searched else -1, self._name
        else:
            conn = self._connect(str(rows[0]["embedding_name"]))
        records = [Record(r["id"], r["embed_text"], vector_metadata(r["file"], r["role"], r["language"], r["kind"]),
                          unpack_vector(r["vector"]) if r["vector"] else None)
                   for r in rows if r["role"] in SEARCHED_ROLES]
        conn.upsert(records)
        for r in rows:
            r["embed_text"] = ""  # the vector is written: the index's writer needs only the row and its hash
        return _columns(rows, (*BATCH_COLUMNS, *EMBED_COLUMNS))
