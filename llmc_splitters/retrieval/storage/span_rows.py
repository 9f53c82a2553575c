"""The span store's format: its tables, the row types it reads and writes, how a row becomes SQLite values.

Tables (format :data:`FORMAT`)::

    meta(key, value)            format, embedding identity, last update
    files(path, ...)            one row per complete file: content hash, settings, stat, counts, import bindings
    spans(rid, id, ...)         leaves (text stored), parents (text rebuilt from the leaves), summaries (text stored);
                                a rowid table: its rows are far bigger than a WITHOUT ROWID table stores well
    vectors(hash, vector)       embedded views by content hash (float32): re-runs and edits re-embed nothing twice
    pending(path, what)         files whose lexical index / vectors still have to follow this store (outbox)
    stale(id)                   vector ids of replaced or removed rows, still to delete from the vector store
    failed(path, reason, at)    files the last runs could not index, with the reason

A span row's text is stored as UTF-8, or, when it holds lone surrogates, as its ``surrogatepass`` bytes, so nothing
read with ``surrogateescape`` is lost; a vector as float32 bytes (:func:`pack_vector`).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...chunking.span import Span

FORMAT = "llmc-index/2"
DB_FILE = "llmc.sqlite3"
LEXICAL = 1
VECTORS = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, hash TEXT NOT NULL, settings TEXT NOT NULL, language TEXT NOT NULL,
    size INTEGER, mtime_ns INTEGER, n_spans INTEGER NOT NULL, n_leaves INTEGER NOT NULL,
    bindings TEXT NOT NULL, indexed_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spans(
    rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, file TEXT NOT NULL, path TEXT NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL,
    name TEXT, tail TEXT, language TEXT NOT NULL,
    start_byte INTEGER NOT NULL, end_byte INTEGER NOT NULL, start_char INTEGER NOT NULL, end_char INTEGER NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, parent_id TEXT, token_count INTEGER NOT NULL,
    text TEXT, metadata TEXT NOT NULL, embed_hash TEXT);
CREATE INDEX IF NOT EXISTS spans_by_file ON spans(file);
CREATE INDEX IF NOT EXISTS spans_by_path ON spans(path, role, start_byte);
CREATE INDEX IF NOT EXISTS spans_by_name ON spans(name) WHERE name IS NOT NULL;
CREATE INDEX IF NOT EXISTS spans_by_tail ON spans(tail) WHERE tail IS NOT NULL;
CREATE INDEX IF NOT EXISTS spans_by_parent ON spans(parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS vectors(hash TEXT PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending(path TEXT PRIMARY KEY, what INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stale(id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS failed(path TEXT PRIMARY KEY, reason TEXT NOT NULL, at REAL NOT NULL) WITHOUT ROWID;
"""

_SPAN_COLUMNS = ("id, file, path, role, kind, name, language, start_byte, end_byte, start_char, end_char, "
                 "start_line, end_line, parent_id, token_count, text, metadata, embed_hash")


@dataclass(slots=True)
class SpanRow:
    """One span as stored: the span (for parents, ``text`` is empty: rebuilt from the leaves on read), its role,
    the file it belongs to, and the hash of its embedded view (``None`` when it is not embedded)."""

    span: Span
    role: str
    file: str
    embed_hash: str | None = None


@dataclass(frozen=True, slots=True)
class FileMarker:
    """A complete file as the store records it."""

    path: str
    hash: str
    settings: str
    language: str
    size: int | None
    mtime_ns: int | None
    n_spans: int
    n_leaves: int
    indexed_at: float


@dataclass(slots=True)
class FileWrite:
    """Everything one file's transaction writes: its marker, its rows, and the import bindings of each of its
    documents (the file, or each cell of a notebook) by document path."""

    marker: FileMarker
    rows: list[SpanRow]
    bindings: dict[str, list[dict[str, Any]]]


def _db_text(text: str) -> str | bytes:
    """A text as SQLite stores it: UTF-8, or, for a text with lone surrogates (read with ``surrogateescape``),
    its bytes with the surrogates kept (``surrogatepass``), so that nothing is lost."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _span_from(row: Sequence[Any], text: str | None = None) -> tuple[Span, str, str, str | None]:
    (sid, file, path, role, kind, name, language, sb, eb, sc, ec, sl, el, parent, tokens, stored, meta,
     embed_hash) = row
    if isinstance(stored, bytes):
        stored = stored.decode("utf-8", "surrogatepass")
    if isinstance(meta, bytes):
        meta = meta.decode("utf-8", "surrogatepass")
    span = Span(sid, path, language, kind, name, stored if text is None else text, sb, eb, sc, ec, sl, el, parent,
                tokens, json.loads(meta))
    return span, role, file, embed_hash


def pack_vector(vector: Sequence[float]) -> bytes:
    """A vector as float32 bytes."""
    return array("f", vector).tobytes()


def unpack_vector(blob: bytes) -> list[float]:
    """Inverse of :func:`pack_vector`."""
    out = array("f")
    out.frombytes(blob)
    return out.tolist()


def _with_text(span: Span, text: str) -> Span:
    return Span(span.id, span.path, span.language, span.kind, span.name, text, span.start_byte, span.end_byte,
                span.start_char, span.end_char, span.start_line, span.end_line, span.parent_id, span.token_count,
                span.metadata)


def _row_tuple(r: SpanRow) -> tuple[Any, ...]:
    s = r.span
    name = s.name
    tail = name.rsplit(".", 1)[-1] if name and r.role != "summary" else None
    text = _db_text(s.text) if r.role != "parent" else None
    return (s.id, r.file, s.path, r.role, s.kind, name, s.language, s.start_byte, s.end_byte, s.start_char,
            s.end_char, s.start_line, s.end_line, s.parent_id, s.token_count, text,
            _db_text(json.dumps(s.metadata, ensure_ascii=False, default=str)), r.embed_hash, tail)
