"""The span store: every span, file marker, import binding and cached vector of an index, in one SQLite file.

A query reads only what it returns: spans by id, a file's leaves by byte range, a symbol by name, and a file's
import bindings are indexed lookups, so nothing is loaded up front and memory does not grow with the index.

Its tables, row types and their encoding are in :mod:`.span_schema`; the SQLite file itself (creation, the
format check, connections, snapshots, transactions) in :mod:`.span_sqlite`. This module holds the reads and the
writes.

A file is *complete* when its ``files`` row is there. Each file's rows are replaced in one transaction together
with its ``files`` row and a ``pending`` row, so a reader (another thread or process: WAL mode) sees either the
old version or the new one, never a half-written file, and a run killed at any point leaves every file complete.
The lexical index and the vector store follow after the commit; until they have, their hits of ids that are no
longer here are ignored, and the ``pending`` rows let the next writer replay what they missed.

Leaves tile their document exactly, so the text of any byte range (a parent, a line range) is rebuilt from the
leaves that overlap it: the file text is never stored twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...chunking.span import Span
from .span_rows import (  # noqa: F401 - DB_FILE, LEXICAL: re-exported for callers
    _SPAN_COLUMNS,
    DB_FILE,
    FORMAT,
    LEXICAL,
    VECTORS,
    FileMarker,
    FileWrite,
    SpanRow,
    _db_text,
    _row_tuple,
    _span_from,
    _with_text,
    pack_vector,
    unpack_vector,
)
from .span_sqlite import IndexNotFoundError, SQLiteIndexFile, StoreError

__all__ = ["FORMAT", "FileMarker", "SpanRow", "SpanStore", "StoreError", "IndexNotFoundError"]


class SpanStore(SQLiteIndexFile):
    """The SQLite store of an index (see the module docstring).

    Its public interface, what the rest of the library calls on a span store (the first line comes from
    :class:`~llmc_splitters.retrieval.storage.span_sqlite.SQLiteIndexFile`, the rest is defined here)::

        the file      dir, file, timeout, exists, temporary, require(), snapshot(), close()
        settings      get_meta(), set_meta(), set_meta_on_create()
        writes        write_files(), remove_files(), touch(), set_failed(), clear_failed()
        outbox        pending(), mark_pending(), done(), stale_ids(), drop_stale()
        vector cache  cached_vectors(), cache_vectors(), prune_vectors()
        files         markers(), marker(), paths(), count_paths(), counts(), stats(), failed(), file_of(),
                      documents(), bindings()
        spans         get(), spans(), all_spans(), searched(), by_name(), with_symbol(), leaves_under(),
                      leaves_in(), leaves_in_lines(), leaf_at(), leaf_starting_at(), last_line(), text()

    Every write is one transaction; reads inside :meth:`snapshot` see one committed state.

    Args:
        path: The index directory (its ``llmc.sqlite3`` holds everything here), or ``None`` for a private store in
            a temporary directory removed when the store is closed or collected.
        create: Create the index when it does not exist. ``False`` raises :class:`IndexNotFoundError` instead, so
            that a mistyped path is reported instead of silently starting an empty index.
        timeout: Seconds a write waits for another process's write to end before it fails with
            :class:`StoreError` (default ``$LLMC_LOCK_TIMEOUT``, else 30).

    Raises:
        IndexNotFoundError: ``create=False`` and there is no index at ``path``.
        StoreError: The file is not an llmc index of this format, is corrupt, or is locked past the timeout.

    Example:
        >>> store = SpanStore(None)
        >>> store.paths()
        []
    """

    # ------------------------------------------------------------------------------------------------- meta

    def set_meta_on_create(self, key: str, value: str) -> None:
        """A setting the index records when its file is created (or now, when it exists and records another).

        Recording what is already recorded writes nothing, so a reader (inside :meth:`snapshot`) may call it.
        """
        if self.exists:
            if self.get_meta(key) != value:
                self.set_meta(key, value)
        else:
            self._on_create[key] = value

    def get_meta(self, key: str) -> str | None:
        """A stored setting (``embedding``, ``updated_at``, ...)."""
        got = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return got[0][0] if got else self._on_create.get(key)

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------------------------------------ writes

    def write_files(self, writes: Sequence[FileWrite], *, pending: int) -> None:
        """Replace the rows of each file of ``writes`` and mark it ``pending`` (bits :data:`LEXICAL`,
        :data:`VECTORS`) for the engines that follow this store, all in one transaction."""
        if not writes:
            return
        now = time.time()
        with self._transaction() as conn:
            for w in writes:
                m = w.marker
                if pending & VECTORS:
                    new = {r.span.id for r in w.rows}
                    conn.executemany("INSERT OR IGNORE INTO stale VALUES (?)", [
                        (r[0],) for r in conn.execute("SELECT id FROM spans WHERE file = ? AND role != 'parent'",
                                                      (m.path,)) if r[0] not in new])
                conn.execute("DELETE FROM spans WHERE file = ?", (m.path,))
                conn.executemany(
                    f"INSERT OR REPLACE INTO spans ({_SPAN_COLUMNS}, tail) VALUES "
                    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (_row_tuple(r) for r in w.rows),
                )
                conn.execute(
                    "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (m.path, m.hash, m.settings, m.language, m.size, m.mtime_ns, m.n_spans, m.n_leaves,
                     _db_text(json.dumps(w.bindings, ensure_ascii=False)), m.indexed_at),
                )
                conn.execute("DELETE FROM failed WHERE path = ?", (m.path,))
                if pending:
                    conn.execute("INSERT INTO pending VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET what = what | ?",
                                 (m.path, pending, pending))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", (repr(now),))

    def remove_files(self, paths: Iterable[str], *, pending: int) -> None:
        """Delete every row of these files in one transaction (their vector ids become ``stale``)."""
        paths = list(paths)
        if not paths:
            return
        with self._transaction() as conn:
            for p in paths:
                if pending & VECTORS:
                    conn.execute("INSERT OR IGNORE INTO stale SELECT id FROM spans WHERE file = ? AND role != 'parent'",
                                 (p,))
                conn.execute("DELETE FROM spans WHERE file = ?", (p,))
                conn.execute("DELETE FROM files WHERE path = ?", (p,))
                if pending:
                    conn.execute("INSERT INTO pending VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET what = what | ?",
                                 (p, pending, pending))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", (repr(time.time()),))

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """Record a new stat for a file whose content did not change (a ``touch``: nothing is re-indexed)."""
        with self._transaction() as conn:
            conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def set_failed(self, failures: Mapping[str, str]) -> None:
        """Record files that could not be indexed (cleared when one is indexed or removed)."""
        if not failures:
            return
        now = time.time()
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO failed VALUES (?, ?, ?)",
                             [(p, r, now) for p, r in failures.items()])

    def clear_failed(self, paths: Iterable[str]) -> None:
        """Forget failures of files that are gone."""
        with self._transaction() as conn:
            conn.executemany("DELETE FROM failed WHERE path = ?", [(p,) for p in paths])

    def failed(self) -> dict[str, str]:
        """``path -> reason`` of the files that could not be indexed."""
        return dict(self._read("SELECT path, reason FROM failed ORDER BY path"))

    # ---------------------------------------------------------------------------------------------- outbox

    def pending(self, what: int) -> list[str]:
        """Files whose ``what`` engine (:data:`LEXICAL` or :data:`VECTORS`) has not caught up yet."""
        return [r[0] for r in self._read("SELECT path FROM pending WHERE what & ? ORDER BY path", (what,))]

    def mark_pending(self, paths: Iterable[str], what: int) -> None:
        """The ``what`` engine must catch up with these files again (it lost them: a lexical index rebuilt in a new
        layout)."""
        paths = list(paths)
        if not paths:
            return
        with self._transaction() as conn:
            conn.executemany("INSERT INTO pending VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET what = what | ?",
                             [(p, what, what) for p in paths])

    def done(self, paths: Iterable[str], what: int) -> None:
        """The ``what`` engine has caught up with these files."""
        paths = list(paths)
        if not paths:
            return
        with self._transaction() as conn:
            conn.executemany("UPDATE pending SET what = what & ~? WHERE path = ?", [(what, p) for p in paths])
            conn.execute("DELETE FROM pending WHERE what = 0")

    def stale_ids(self) -> list[str]:
        """Vector ids of rows that were replaced or removed and may still be in the vector store."""
        return [r[0] for r in self._read("SELECT id FROM stale")]

    def drop_stale(self, ids: Iterable[str]) -> None:
        """The vector store no longer holds these ids."""
        with self._transaction() as conn:
            conn.executemany("DELETE FROM stale WHERE id = ?", [(i,) for i in ids])

    # ----------------------------------------------------------------------------------------------- vectors

    def cached_vectors(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        """Vectors of embedded views already computed, by content hash."""
        want = sorted(set(hashes))
        out: dict[str, list[float]] = {}
        for i in range(0, len(want), 500):
            part = want[i : i + 500]
            q = ",".join("?" * len(part))
            out.update((h, unpack_vector(v)) for h, v in self._read(f"SELECT hash, vector FROM vectors WHERE hash IN ({q})", part))
        return out

    def cache_vectors(self, vectors: Mapping[str, Sequence[float]]) -> None:
        """Keep computed vectors (their own transaction: an interrupted run keeps what it paid for)."""
        if not vectors:
            return
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                             [(h, pack_vector(v)) for h, v in vectors.items()])

    def prune_vectors(self) -> int:
        """Drop cached vectors that no stored span uses; returns how many."""
        with self._transaction() as conn:
            cur = conn.execute("DELETE FROM vectors WHERE hash NOT IN "
                               "(SELECT embed_hash FROM spans WHERE embed_hash IS NOT NULL)")
            return cur.rowcount

    # ------------------------------------------------------------------------------------------------- reads

    def markers(self) -> dict[str, FileMarker]:
        """Every complete file's marker (small: no text)."""
        rows = self._read("SELECT path, hash, settings, language, size, mtime_ns, n_spans, n_leaves, indexed_at "
                          "FROM files")
        return {r[0]: FileMarker(*r) for r in rows}

    def marker(self, path: str) -> FileMarker | None:
        """One complete file's marker."""
        rows = self._read("SELECT path, hash, settings, language, size, mtime_ns, n_spans, n_leaves, indexed_at "
                          "FROM files WHERE path = ?", (path,))
        return FileMarker(*rows[0]) if rows else None

    def paths(self, *, prefix: str | None = None, glob: str | None = None) -> list[str]:
        """Complete files, sorted; optionally those under a path prefix or matching a glob."""
        if glob is not None:
            return [r[0] for r in self._read("SELECT path FROM files WHERE path GLOB ? ORDER BY path", (glob,))]
        if prefix:
            hi = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            return [r[0] for r in self._read("SELECT path FROM files WHERE path >= ? AND path < ? ORDER BY path",
                                             (prefix, hi))]
        return [r[0] for r in self._read("SELECT path FROM files ORDER BY path")]

    def count_paths(self, prefix: str) -> int:
        """How many complete files have a path starting with ``prefix``."""
        hi = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return int(self._read("SELECT count(*) FROM files WHERE path >= ? AND path < ?", (prefix, hi))[0][0])

    def counts(self) -> dict[str, int]:
        """``files``, ``leaves``, ``spans`` and cached ``vectors``, counted by SQLite (all 0 before the first write
        creates the index)."""
        got = self._read("SELECT count(*), coalesce(sum(n_leaves), 0), coalesce(sum(n_spans), 0) FROM files")
        if not got:
            return {"files": 0, "leaves": 0, "spans": 0, "vectors": 0}
        (files, leaves, spans), = got
        (vectors,), = self._read("SELECT count(*) FROM vectors")
        return {"files": files, "leaves": leaves, "spans": spans, "vectors": vectors}

    def stats(self) -> dict[str, dict[str, int]]:
        """Leaf counts and tokens by language and kind, files by language (for ``stats``)."""
        out: dict[str, dict[str, int]] = {"files_by_language": {}, "leaves_by_language": {}, "leaves_by_kind": {},
                                          "roles": {}}
        for lang, n in self._read("SELECT language, count(*) FROM files GROUP BY language ORDER BY 2 DESC"):
            out["files_by_language"][lang] = n
        out["leaves_by_language"] = self.leaf_counts("language")
        out["leaves_by_kind"] = self.leaf_counts("kind")
        for role, n in self._read("SELECT role, count(*) FROM spans GROUP BY 1 ORDER BY 2 DESC"):
            out["roles"][role] = n
        (tokens, largest), = self._read("SELECT coalesce(sum(token_count), 0), coalesce(max(token_count), 0) "
                                        "FROM spans WHERE role = 'leaf'")
        out["tokens"] = {"leaf_tokens": tokens, "max_leaf_tokens": largest}
        return out

    def leaf_counts(self, column: str) -> dict[str, int]:
        """How many leaves each ``language`` or ``kind`` has, most first."""
        if column not in ("language", "kind"):
            msg = f"leaf_counts counts by 'language' or 'kind', not {column!r}"
            raise ValueError(msg)
        rows = self._read(f"SELECT {column}, count(*) FROM spans WHERE role = 'leaf' GROUP BY 1 ORDER BY 2 DESC, 1")
        return {value: n for value, n in rows}

    def first_file(self, *, prefix: str | None = None, glob: str | None = None, language: str | None = None,
                   kind: str | None = None) -> str | None:
        """A file with a leaf under the path ``prefix`` (or whose path matches ``glob``), of ``language`` and of
        ``kind`` (each optional), or ``None`` when no leaf passes: why a filtered search found nothing."""
        sql, args = "SELECT file FROM spans WHERE role = 'leaf'", []
        if glob is not None:
            sql += " AND file GLOB ?"
            args.append(glob)
        elif prefix:
            sql += " AND file >= ? AND file < ?"
            args += [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)]
        for column, value in (("language", language), ("kind", kind)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        got = self._read(sql + " LIMIT 1", args)
        return got[0][0] if got else None

    def bindings(self, path: str) -> list[dict[str, Any]]:
        """The import and module-level name bindings of a document (a file, or a notebook's cell): what its leaves'
        ``uses`` indices point at."""
        file = self.file_of(path)
        got = self._read("SELECT bindings FROM files WHERE path = ?", (file,)) if file is not None else []
        if not got:
            return []
        raw = got[0][0]
        return json.loads(raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else raw).get(path, [])

    def file_of(self, path: str) -> str | None:
        """The file a document belongs to (itself, or the notebook of a cell), if it is indexed."""
        got = self._read("SELECT file FROM spans WHERE path = ? LIMIT 1", (path,))
        return got[0][0] if got else None

    def documents(self, file: str) -> list[str]:
        """The documents of an indexed file: itself, or its notebook cells (``nb.ipynb#cell3``), in order."""
        rows = self._read("SELECT DISTINCT path FROM spans WHERE file = ? AND role = 'leaf'", (file,))
        return sorted((r[0] for r in rows), key=lambda p: (len(p), p))

    def get(self, ids: Sequence[str], *, parent_text: bool = True) -> dict[str, SpanRow]:
        """Spans by id, for the ids that are stored. A parent's text is rebuilt from its leaves (``parent_text=False``:
        left empty, for a caller that needs only its offsets and metadata)."""
        out: dict[str, SpanRow] = {}
        want = list(dict.fromkeys(ids))
        for i in range(0, len(want), 500):
            part = want[i : i + 500]
            q = ",".join("?" * len(part))
            for row in self._read(f"SELECT {_SPAN_COLUMNS} FROM spans WHERE id IN ({q})", part):
                span, role, file, eh = _span_from(row)
                if role == "parent":
                    span = _with_text(span, self.text(span.path or "", span.start_byte, span.end_byte)
                                      if parent_text else "")
                out[span.id] = SpanRow(span, role, file, eh)
        return out

    def spans(self, path: str, role: str = "leaf") -> list[Span]:
        """A document's spans of one role, in file order (parents with their text)."""
        rows = self._read(f"SELECT {_SPAN_COLUMNS} FROM spans WHERE path = ? AND role = ? "
                          "ORDER BY start_byte, end_byte DESC", (path, role))
        spans = [_span_from(r)[0] for r in rows]
        if role == "parent":
            spans = [_with_text(s, self.text(path, s.start_byte, s.end_byte)) for s in spans]
        return spans

    def all_spans(self, role: str = "leaf") -> Iterator[Span]:
        """Every span of one role, file by file (for export and tests; a query never needs this)."""
        for path in [r[0] for r in self._read("SELECT DISTINCT path FROM spans WHERE role = ? ORDER BY path", (role,))]:
            yield from self.spans(path, role)

    def leaves_in(self, path: str, start_byte: int, end_byte: int) -> list[Span]:
        """The leaves of a document that overlap ``[start_byte, end_byte)``, in order."""
        rows = self._read(
            f"SELECT {_SPAN_COLUMNS} FROM spans WHERE path = ? AND role = 'leaf' AND start_byte < ? AND end_byte > ? "
            "ORDER BY start_byte", (path, max(end_byte, start_byte + 1), start_byte))
        return [_span_from(r)[0] for r in rows]

    def leaves_in_lines(self, path: str, start_line: int, end_line: int) -> list[Span]:
        """The leaves of a document that overlap lines ``start_line..end_line``, in order."""
        rows = self._read(
            f"SELECT {_SPAN_COLUMNS} FROM spans WHERE path = ? AND role = 'leaf' AND start_line <= ? AND end_line >= ? "
            "ORDER BY start_byte", (path, end_line, start_line))
        return [_span_from(r)[0] for r in rows]

    def text(self, path: str, start_byte: int, end_byte: int) -> str:
        """The exact text of ``[start_byte, end_byte)`` of a document, rebuilt from its leaves."""
        leaves = self.leaves_in(path, start_byte, end_byte)
        if not leaves:
            return ""
        data = "".join(s.text for s in leaves).encode("utf-8", "surrogatepass")
        base = leaves[0].start_byte
        return data[start_byte - base : end_byte - base].decode("utf-8", "surrogatepass")

    def leaf_at(self, path: str, line: int) -> Span | None:
        """The leaf that covers a 1-based line."""
        rows = self._read(f"SELECT {_SPAN_COLUMNS} FROM spans WHERE path = ? AND role = 'leaf' AND start_line <= ? "
                          "AND end_line >= ? ORDER BY start_byte LIMIT 1", (path, line, line))
        return _span_from(rows[0])[0] if rows else None

    def leaf_starting_at(self, path: str, start_byte: int) -> Span | None:
        """The leaf that starts at a byte offset (the one right after another leaf)."""
        rows = self._read(f"SELECT {_SPAN_COLUMNS} FROM spans WHERE path = ? AND role = 'leaf' AND start_byte = ? "
                          "LIMIT 1", (path, start_byte))
        return _span_from(rows[0])[0] if rows else None

    def last_line(self, path: str) -> tuple[int, int] | None:
        """``(last line, end byte)`` of a document, from its last leaf."""
        rows = self._read("SELECT end_line, end_byte FROM spans WHERE path = ? AND role = 'leaf' "
                          "ORDER BY start_byte DESC LIMIT 1", (path,))
        return (rows[0][0], rows[0][1]) if rows else None

    def by_name(self, name: str, path: str | None = None, *, tail: bool = False) -> list[SpanRow]:
        """Spans (leaves and parents) whose qualified name is ``name`` (``tail``: whose last part is ``name``)."""
        col = "tail" if tail else "name"
        sql = f"SELECT {_SPAN_COLUMNS} FROM spans WHERE {col} = ? AND role != 'summary'"
        args: list[Any] = [name]
        if path is not None:
            sql += " AND path = ?"
            args.append(path)
        out = []
        for row in self._read(sql, args):
            span, role, file, eh = _span_from(row)
            if role == "parent":
                span = _with_text(span, self.text(span.path or "", span.start_byte, span.end_byte))
            out.append(SpanRow(span, role, file, eh))
        return out

    def with_symbol(self, name: str, path: str | None = None, *, suffix: bool = False) -> list[Span]:
        """Leaves whose recorded ``symbols`` (definitions inside a leaf) include ``name`` (``suffix``: may include a
        name ending with ``.name``; the caller checks each symbol)."""
        quoted = json.dumps(name, ensure_ascii=False)  # as the metadata column is written
        like = f'%"name": "%.{quoted[1:]}%' if suffix else f'%"name": {quoted}%'
        sql = f"SELECT {_SPAN_COLUMNS} FROM spans WHERE role = 'leaf' AND metadata LIKE ?"
        args: list[Any] = [like]
        if path is not None:
            sql += " AND path = ?"
            args.append(path)
        return [_span_from(r)[0] for r in self._read(sql, args)]

    def leaves_under(self, span_id: str) -> list[str]:
        """Ids of the leaves inside a span (a file's root, or a split class)."""
        got = self._read("SELECT path, start_byte, end_byte FROM spans WHERE id = ?", (span_id,))
        if not got:
            return []
        path, sb, eb = got[0]
        return [r[0] for r in self._read("SELECT id FROM spans WHERE path = ? AND role = 'leaf' AND start_byte >= ? "
                                         "AND end_byte <= ?", (path, sb, eb))]

    def searched(self, path: str) -> list[SpanRow]:
        """A file's searched rows (leaves and summaries), with their texts: what the lexical index and the vector
        store hold of it."""
        rows = self._read(f"SELECT {_SPAN_COLUMNS} FROM spans WHERE file = ? AND role != 'parent' ORDER BY path, "
                          "start_byte", (path,))
        return [SpanRow(*_span_from(r)) for r in rows]
