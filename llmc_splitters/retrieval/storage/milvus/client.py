"""The Milvus side of an index: the connection, the collections' schemas, and what a mismatch or a failure says.

An index named ``NAME`` is four collections (every Milvus collection needs a vector field: the small ones carry a
2-dimensional placeholder):

* ``NAME``: every span row (leaves, parents, summaries) with its text, place, metadata, the pre-computed code
  terms of a searched row (a ``BM25`` function turns them into the ``sparse`` field on the server) and, for a dense
  index, its ``dense`` vector;
* ``NAME_files``: one row per complete file (its marker and import bindings);
* ``NAME_meta``: settings (format, embedding) and the files that could not be indexed;
* ``NAME_vectors``: the vector cache, by the hash of the embedded view.

The schema records its format and the embedding model in the collection's properties; opening it with another
model or format raises :class:`MilvusStoreError` with the remedy, in one line.
"""

from __future__ import annotations

import base64
import json
import logging
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ....errors import missing_dependency
from ..span_store import StoreError

__all__ = ["FORMAT", "MAX_LIMIT", "MilvusStoreError", "connect", "literal", "pack_text", "pymilvus", "unpack_text"]

FORMAT = "llmc-milvus/1"
MAX_LIMIT = 16384  # Milvus's largest limit (offset + limit) of one query or search
_MAX = 65535  # Milvus's longest VARCHAR, in bytes
_PATH = 4096
_PACKED = "\x00z:"  # a text stored compressed (too long for a VARCHAR, or holding lone surrogates)
_PLACEHOLDER = [1.0, 0.0]


class MilvusStoreError(StoreError):
    """Milvus cannot be reached, or holds a collection of another model or schema (the message says what to do)."""


class _QuietIterator(logging.Filter):
    """Drops what pymilvus and Milvus Lite's in-process server log at each ``query_iterator`` (Lite has no
    timestamp service, so the iterator falls back to a client-side timestamp: what a strongly consistent read
    needs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return "mvccTs" not in text and "Method not implemented" not in text


def pymilvus() -> Any:
    """The ``pymilvus`` module, imported on first use."""
    try:
        import pymilvus as mod
    except ImportError as exc:
        raise missing_dependency("pymilvus", "milvus") from exc
    for name in ("pymilvus.client.iterator.query_iterator", "grpc._server"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _QuietIterator) for f in log.filters):
            log.addFilter(_QuietIterator())
    return mod


def is_lite(uri: str) -> bool:
    """Whether ``uri`` names a Milvus Lite file (``./idx.db``) rather than a server (``http://host:19530``)."""
    return "://" not in uri


def connect(uri: str, token: str | None) -> Any:
    """A ``MilvusClient`` for ``uri``.

    Raises:
        MilvusStoreError: The server does not answer, or the Lite file cannot be opened.
    """
    mod = pymilvus()
    if is_lite(uri):
        try:
            import milvus_lite  # noqa: F401 - only to tell a missing package from a bad file
        except ImportError as exc:
            raise missing_dependency("milvus_lite", "milvus") from exc
    kwargs: dict[str, Any] = {"uri": uri}
    if token:
        kwargs["token"] = token
    if not is_lite(uri):
        kwargs["timeout"] = 10
    try:
        return mod.MilvusClient(**kwargs)
    except Exception as exc:  # noqa: BLE001 - pymilvus raises MilvusException, grpc errors, OSError, ...
        if not is_lite(uri):
            what = "check the address and that the server runs (a Milvus standalone or cluster on port 19530)"
        elif not Path(uri).resolve().parent.is_dir():
            what = f"the directory {Path(uri).parent} does not exist"
        else:  # Lite logs why; the one reason left is another process holding the file
            what = ("another process probably holds this Milvus Lite file (Lite serves one process at a time): wait "
                    "for it, stop it, or use a Milvus server (http://host:19530) for several")
        raise MilvusStoreError(f"could not open Milvus at {uri}: {_short(exc)}; {what}") from exc


def release(uri: str) -> None:
    """Let another process open a Milvus Lite file this one opened (its in-process server stops)."""
    if is_lite(uri):
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(uri)


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {' '.join(str(text).split())[:300]}"


def literal(value: str) -> str:
    """A string as a Milvus filter expression literal."""
    return json.dumps(value, ensure_ascii=False)


def pack_text(text: str | None) -> str:
    """A text as a VARCHAR holds it: itself, or compressed when it is too long or holds lone surrogates."""
    if text is None:
        return ""
    try:
        data = text.encode("utf-8")
        if len(data) <= _MAX and not text.startswith(_PACKED):
            return text
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    packed = _PACKED + base64.b64encode(zlib.compress(data, 6)).decode("ascii")
    if len(packed) > _MAX:
        msg = f"a text of {len(data):,} bytes does not fit a Milvus VARCHAR even compressed ({len(packed):,} > {_MAX:,})"
        raise MilvusStoreError(msg)
    return packed


def unpack_text(value: str) -> str:
    """Inverse of :func:`pack_text`."""
    if not value.startswith(_PACKED):
        return value
    return zlib.decompress(base64.b64decode(value[len(_PACKED):])).decode("utf-8", "surrogatepass")


def fit_terms(terms: str) -> str:
    """The code terms a VARCHAR holds: the first 64 KB of them, cut at a space (BM25 sees a giant row's head)."""
    data = terms.encode("utf-8")
    if len(data) <= _MAX:
        return terms
    return data[:_MAX].decode("utf-8", "ignore").rsplit(" ", 1)[0]


class Collections:
    """The four collections of one index on one client (see the module docstring).

    Args:
        client: A ``MilvusClient``.
        name: The index's collection name.
        uri: Where it lives (for messages).
    """

    def __init__(self, client: Any, name: str, uri: str) -> None:
        self.client = client
        self.name = name
        self.uri = uri
        self.rows = name
        self.files = f"{name}_files"
        self.meta = f"{name}_meta"
        self.vectors = f"{name}_vectors"
        self.dimension: int | None = None
        self.dirty: set[str] = set()  # collections written since their last flush
        self.writes = 0  # writes through this client: what a cached count is valid for

    def all(self) -> list[str]:
        return [self.rows, self.files, self.meta, self.vectors]

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, its failure as a :class:`MilvusStoreError` saying what failed."""
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - pymilvus raises many types (MilvusException, grpc, ...)
            msg = f"could not {what} in Milvus at {self.uri} (collection {self.name!r}): {_short(exc)}"
            raise MilvusStoreError(msg) from exc

    # ------------------------------------------------------------------------------------------------ schema

    def exists(self) -> bool:
        return bool(self.call("list collections", self.client.has_collection, self.rows))

    def drop(self) -> None:
        for c in self.all():
            if self.call("list collections", self.client.has_collection, c):
                self.call("drop a collection", self.client.drop_collection, c)

    def create(self, embedding_name: str, dimension: int | None) -> None:
        """Create the collections for vectors of ``embedding_name`` (``dimension``: ``None`` for lexical only)."""
        mod = pymilvus()
        dt = mod.DataType
        props = {"llmc.format": FORMAT, "llmc.embedding": embedding_name, "llmc.dimension": str(dimension or 0)}
        if not self.call("list collections", self.client.has_collection, self.rows):
            s = self.client.create_schema(auto_id=False)
            s.add_field("id", dt.VARCHAR, max_length=128, is_primary=True)
            for f in ("file", "path"):
                s.add_field(f, dt.VARCHAR, max_length=_PATH)
            s.add_field("dirs", dt.ARRAY, element_type=dt.VARCHAR, max_capacity=256, max_length=_PATH)
            for f in ("role", "kind", "language"):
                s.add_field(f, dt.VARCHAR, max_length=64)
            for f in ("name", "tail", "parent_id", "embed_hash"):
                s.add_field(f, dt.VARCHAR, max_length=_PATH, nullable=True)
            for f in ("start_byte", "end_byte", "start_char", "end_char", "start_line", "end_line", "token_count"):
                s.add_field(f, dt.INT64)
            s.add_field("text", dt.VARCHAR, max_length=_MAX)
            s.add_field("metadata", dt.VARCHAR, max_length=_MAX)
            s.add_field("terms", dt.VARCHAR, max_length=_MAX, enable_analyzer=True, enable_match=True,
                        analyzer_params={"tokenizer": "standard"})
            s.add_field("sparse", dt.SPARSE_FLOAT_VECTOR)
            s.add_function(mod.Function(name="bm25", function_type=mod.FunctionType.BM25,
                                        input_field_names=["terms"], output_field_names=["sparse"]))
            ip = self.client.prepare_index_params()
            ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                         params={"bm25_k1": 1.2, "bm25_b": 0.75})
            if dimension:
                s.add_field("dense", dt.FLOAT_VECTOR, dim=dimension, nullable=True)
                ip.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
            self.call("create a collection", self.client.create_collection, self.rows, schema=s, index_params=ip,
                      properties=props, consistency_level="Strong")
        small = {
            self.files: [("path", dt.VARCHAR, {"max_length": _PATH, "is_primary": True}),
                         ("hash", dt.VARCHAR, {"max_length": 128}), ("settings", dt.VARCHAR, {"max_length": _PATH}),
                         ("language", dt.VARCHAR, {"max_length": 64}), ("size", dt.INT64, {"nullable": True}),
                         ("mtime_ns", dt.INT64, {"nullable": True}), ("n_spans", dt.INT64, {}),
                         ("n_leaves", dt.INT64, {}), ("bindings", dt.VARCHAR, {"max_length": _MAX}),
                         ("indexed_at", dt.DOUBLE, {})],
            self.meta: [("key", dt.VARCHAR, {"max_length": _PATH + 16, "is_primary": True}),
                        ("value", dt.VARCHAR, {"max_length": _MAX})],
            self.vectors: [("hash", dt.VARCHAR, {"max_length": 128, "is_primary": True})],
        }
        for name, fields in small.items():
            if self.call("list collections", self.client.has_collection, name):
                continue
            s = self.client.create_schema(auto_id=False)
            for f, t, kw in fields:
                s.add_field(f, t, **kw)
            vdim = dimension if name == self.vectors and dimension else 2
            s.add_field("v", dt.FLOAT_VECTOR, dim=vdim)
            ip = self.client.prepare_index_params()
            ip.add_index("v", index_type="FLAT" if name != self.vectors else "AUTOINDEX", metric_type="L2")
            self.call("create a collection", self.client.create_collection, name, schema=s, index_params=ip,
                      properties=props, consistency_level="Strong")
        self.dimension = dimension

    def check(self, embedding_name: str, dimension: int | None) -> None:
        """Refuse a collection of another format or model, in one line with the remedy."""
        info = self.call("describe a collection", self.client.describe_collection, self.rows)
        props = info.get("properties") or {}
        fmt, stored = props.get("llmc.format"), props.get("llmc.embedding")
        fix = (f"use another --collection, or rebuild it (llmc-splitters index PATH --milvus {self.uri} --collection "
               f"{self.name} --reset)")
        if fmt != FORMAT:
            what = "is not an llmc index" if fmt is None else f"holds an llmc index of format {fmt!r}, not {FORMAT!r}"
            raise MilvusStoreError(f"Milvus collection {self.name!r} at {self.uri} {what}: {fix}")
        have = int(props.get("llmc.dimension") or 0)
        if dimension and not have:
            msg = (f"Milvus collection {self.name!r} at {self.uri} was built lexical-only (no vector field) and cannot "
                   f"take vectors from {embedding_name!r}: search it with embedding=None, or {fix}")
            raise MilvusStoreError(msg)
        if stored is not None and stored != embedding_name and embedding_name != "none":
            msg = (f"Milvus collection {self.name!r} at {self.uri} holds vectors from {stored!r}, not "
                   f"{embedding_name!r}: pass that embedding, or {fix}")
            raise MilvusStoreError(msg)
        if dimension and have and have != dimension:
            msg = (f"Milvus collection {self.name!r} at {self.uri} holds {have}-dimensional vectors, not {dimension}: "
                   f"{fix}")
            raise MilvusStoreError(msg)
        self.dimension = have or None

    def load(self) -> None:
        """Load the collections for reads (a reopened Milvus Lite file, or a server, holds them released)."""
        for c in self.all():
            self.call("load a collection", self.client.load_collection, c)

    # ------------------------------------------------------------------------------------------------ reads

    def query(self, collection: str, expr: str, fields: Sequence[str], limit: int | None = None) -> list[dict]:
        """Rows passing ``expr`` (at most ``limit``; every one without a limit: one query when they are fewer than
        Milvus's query window, else read in pages by an iterator, whose set-up alone is a call to the server)."""
        got = list(self.call("read", self.client.query, collection, filter=expr, output_fields=list(fields),
                             limit=MAX_LIMIT if limit is None else limit))
        if limit is not None or len(got) < MAX_LIMIT:
            return got
        return list(self.iterate(collection, expr, fields))

    def iterate(self, collection: str, expr: str, fields: Sequence[str]) -> Iterator[dict]:
        it = self.call("read", self.client.query_iterator, collection, filter=expr, output_fields=list(fields),
                       batch_size=1000)
        try:
            while True:
                page = self.call("read", it.next)
                if not page:
                    return
                yield from page
        finally:
            it.close()

    def count(self, collection: str, expr: str = "") -> int:
        got = self.call("count", self.client.query, collection, filter=expr, output_fields=["count(*)"])
        return int(got[0]["count(*)"]) if got else 0

    def delete(self, collection: str, expr: str) -> None:
        self.call("delete", self.client.delete, collection, filter=expr)
        self.dirty.add(collection)
        self.writes += 1

    def upsert(self, collection: str, rows: list[dict]) -> None:
        for i in range(0, len(rows), 500):
            self.call("write", self.client.upsert, collection, rows[i : i + 500])
        self.dirty.add(collection)
        self.writes += 1

    def flush(self) -> None:
        """Seal what was written since the last flush. Milvus searches a growing segment (and its deletes) by brute
        force: on Milvus Lite, a search of 7,700 rows took 4.2 s before the flush and 0.64 s after (0.11 s once
        compacted), so the first search after writes flushes."""
        for c in sorted(self.dirty):
            self.call("flush", self.client.flush, c)
        self.dirty.clear()

    @staticmethod
    def placeholder() -> list[float]:
        return list(_PLACEHOLDER)


def in_list(field: str, values: Sequence[str]) -> str:
    """``field in [...]`` as a filter expression."""
    return f"{field} in [{', '.join(literal(v) for v in values)}]"


def key_is(field: str, value: str) -> str:
    """The expression of one primary key: ``field in [value]``. Milvus Lite serves ``in`` on a primary key from its
    index and scans for ``==`` (a row by id of 30,000 rows: 1.7 ms against 30 ms)."""
    return in_list(field, [value])
