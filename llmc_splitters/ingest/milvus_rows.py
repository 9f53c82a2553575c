"""The span rows of a Ray run written into a Milvus server from the workers: :class:`MilvusTarget`.

A :class:`~llmc_splitters.retrieval.MilvusStore` holds the whole index, so in a run into a server
(:func:`~llmc_splitters.ingest.ray.run_ray`) the workers write what the driver's one writer would: each span row
of a batch, as the store's span store writes it (:func:`~llmc_splitters.retrieval.storage.milvus.spans.milvus_row`: text,
place, metadata, code terms and, for a dense collection, the vector the embed actors computed), and the vectors
computed now into the collection's vector cache. The rows go on to the driver without their texts and vectors; the
driver writes what must come after them (a replaced version's rows deleted, the file's marker), then the manifest.

The target is its address (``uri``, ``collection``, ``token``), which pickles: each worker process opens its own
``MilvusClient`` once and keeps it from task to task. It is also what the embed actors look cached vectors up in (by
their cache key, the hash of the embedded view), as they do in a Chroma sink.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .row_format import SEARCHED_ROLES, _value, row_span

__all__ = ["MilvusTarget", "write_rows"]

_STRIPPED = {"text": "", "terms": "", "embed_text": "", "vector": b""}
"""What the driver does not need of a row the workers wrote (it writes no row itself)."""


@dataclass(frozen=True)
class MilvusTarget:
    """A Milvus server's index collection, as the Ray workers reach it (see the module docstring).

    Args:
        uri: The server's address (``http://host:19530``).
        collection: The index's collection name.
        token: The server's credentials, if it asks for them.
    """

    uri: str
    collection: str
    token: str | None = None

    process_safe = True
    """Every worker may write it (a server)."""
    embeds_itself = False
    """Vectors come from the embed actors."""

    @classmethod
    def of(cls, store: Any) -> MilvusTarget:
        """The target of a :class:`~llmc_splitters.retrieval.MilvusStore` (a server's)."""
        return cls(store.uri, store.collection, store.token)

    def connect(self, embedding_name: str | None) -> _Connection:
        """This process's connection for vectors of ``embedding_name`` (``None`` or ``"none"``: lexical), opened
        once per process, and the collection checked again at each call (it may have been rebuilt since).

        Raises:
            MilvusStoreError: The server does not answer, there is no such collection (the driver creates it
                before the workers start), or it holds another model's vectors.
        """
        name = embedding_name or "none"
        conn = _OPEN.get((self, name))
        if conn is None:
            conn = _OPEN[(self, name)] = _Connection(self, name)
        else:
            conn.cols.check(name, None)
        return conn


class _Connection:
    """One worker process's client on a target, checked for one embedding."""

    def __init__(self, target: MilvusTarget, embedding_name: str) -> None:
        from ..retrieval.storage.milvus.client import Collections, MilvusStoreError, connect

        cols = Collections(connect(target.uri, target.token), target.collection, target.uri)
        if not cols.exists():
            msg = (f"no index in Milvus at {target.uri} (collection {target.collection!r}) for the Ray workers to "
                   "write: the driver creates it before the run starts")
            raise MilvusStoreError(msg)
        cols.check(embedding_name, None)
        cols.load()
        self.cols = cols

    def cached(self, hashes: Iterable[str], role: str) -> dict[str, list[float]]:  # noqa: ARG002 - one cache
        """The vectors the collection's cache holds for these cache keys (what an embed actor asks)."""
        from ..retrieval.storage.milvus.spans import MilvusSpans

        return MilvusSpans(self.cols).cached_vectors(hashes)

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Upsert the span rows (and cache the vectors computed now) of a batch's rows."""
        from ..retrieval.storage.milvus.spans import milvus_row
        from ..retrieval.storage.span_rows import SpanRow, unpack_vector

        cols = self.cols
        dense = bool(cols.dimension)
        out, fresh = [], {}
        for r in rows:
            role = str(r["role"])
            if role == "file":
                continue
            vector = unpack_vector(r["vector"]) if role in SEARCHED_ROLES and r.get("vector") else None
            eh = str(r["embed_hash"]) or None
            out.append(milvus_row(SpanRow(row_span(r), role, str(r["file"]), eh), vector, dense))
            if vector is not None and int(r.get("embedded", -1)) == 1:
                fresh[eh] = vector
        if dense and fresh:
            cols.upsert(cols.vectors, [{"hash": h, "v": v} for h, v in fresh.items()])
        if out:
            cols.upsert(cols.rows, out)


_OPEN: dict[tuple[MilvusTarget, str], _Connection] = {}


def write_rows(batch: Mapping[str, Any], target: MilvusTarget) -> dict[str, list[Any]]:
    """Write a batch's span rows into ``target`` from this worker, and pass the rows on to the driver without
    their texts and vectors (it needs their ids, files and places to write the markers)."""
    cols = list(batch)
    n = len(batch["id"])
    rows = [{c: _value(batch[c][i]) for c in cols} for i in range(n)]
    if rows:
        names = batch.get("embedding_name")
        target.connect(str(_value(names[0])) if names is not None else None).write(rows)
    for r in rows:
        for c, empty in _STRIPPED.items():
            if c in r:
                r[c] = empty
    return {c: [r[c] for r in rows] for c in cols}
