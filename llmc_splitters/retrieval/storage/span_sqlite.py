"""The span store's SQLite file: creating it, recognising an old or foreign format, connections, transactions.

:class:`SpanStore <llmc_splitters.retrieval.storage.span_store.SpanStore>` reads and writes through
:class:`SQLiteIndexFile`:

* the file ``DIR/llmc.sqlite3`` is created by the first write (a temporary store's at once), atomically: an
  empty index is written aside, then linked in place, so a search of a mistyped path leaves nothing behind and a
  reader never sees a file without its tables;
* an index of another format, or one written by llmc-splitters 0.1 (everything in ``DIR/chroma.sqlite3``), is
  refused with :class:`StoreError` and the command that rebuilds it (nothing is migrated);
* each thread has its own connection (WAL mode: readers never block the writer, nor it them);
  :meth:`~SQLiteIndexFile.snapshot` gives a thread's reads one committed state, ``_transaction`` gives a write
  ``BEGIN IMMEDIATE`` under one lock per store;
* SQLite's errors become :class:`StoreError` with what to do about them (locked, corrupt, ...).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ...errors import LlmcError
from .span_rows import _SCHEMA, DB_FILE, FORMAT

__all__ = ["IndexNotFoundError", "SQLiteIndexFile", "StoreError"]

# What an index directory holds (the span store, the lexical index, embedded Chroma, the CLI's two records).
_INDEX_ENTRIES = frozenset({DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", "lexical", "chroma", "llmc-index.json",
                            "last-index.json"})
_GITIGNORE = "# Written by llmc-splitters: an index is local data, never committed.\n*\n"


class StoreError(LlmcError):
    """A store failed or cannot be used (corrupt or locked file, unreachable server, another format)."""


class IndexNotFoundError(StoreError):
    """An index was opened to be read, but there is none at that location."""


class SQLiteIndexFile:
    """The SQLite file under a span store (see the module docstring); its arguments are
    :class:`~llmc_splitters.retrieval.storage.span_store.SpanStore`'s."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = True,
                 timeout: float | None = None) -> None:
        self.timeout = float(os.environ.get("LLMC_LOCK_TIMEOUT", "30")) if timeout is None else float(timeout)
        self._tmp = None
        if path is None:
            import tempfile
            import weakref

            self._tmp = tempfile.TemporaryDirectory(prefix="llmc-index-")
            self._finalizer = weakref.finalize(self, self._tmp.cleanup)
            path = self._tmp.name
        self.dir = Path(path)
        self.file = self.dir / DB_FILE
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._closed = False
        self._on_create: dict[str, str] = {}
        if not self.file.is_file():
            if not create:
                hint = "" if self.dir.exists() else " (the directory does not exist)"
                msg = f"no index at {self.dir}{hint}; build one first (llmc-splitters index PATH --db {self.dir})"
                raise IndexNotFoundError(msg)
            self._check_not_old_format()
            if self._tmp is None:
                return  # created by the first write: a search of a mistyped path must not leave an empty index
        self._open()

    @property
    def exists(self) -> bool:
        """Whether the index file exists (a store opened to be created is made by its first write)."""
        return self.file.is_file()

    def _open(self) -> None:
        """Create the directory and the tables when missing, and check the format."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.file.is_file():
            self._create()
        conn = self._conn()
        try:
            with conn:
                conn.executescript(_SCHEMA)
                got = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if got is None:
                    conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
                    conn.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", list(self._on_create.items()))
                elif got[0] != FORMAT:
                    msg = (f"{self.file} holds an index of format {got[0]!r}, not {FORMAT!r}: rebuild it with "
                           "`llmc-splitters index PATH --reset` (or CodeIndex(..., reset=True))")
                    raise StoreError(msg)
        except sqlite3.DatabaseError as exc:
            raise self._error("open", exc) from exc

    def _create(self) -> None:
        """Write an empty index to a file of its own, then link it in place: a reader in another thread or process
        sees no index or one with its tables, never a file still without them. When two writers create the same
        index at once, the first link wins and the other's file is dropped."""
        tmp = self.dir / f".{DB_FILE}.{os.getpid()}.{threading.get_ident()}.new"
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
                conn.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", list(self._on_create.items()))
                conn.execute("COMMIT")
            finally:
                conn.close()  # a clean close folds the WAL into the file: the file alone is the index
            try:
                os.link(tmp, self.file)
            except FileExistsError:
                pass  # created meanwhile by another writer: use theirs
            except OSError:  # a file system without hard links
                if not self.file.exists():
                    os.replace(tmp, self.file)
            if self._tmp is None:
                _ignore_in_git(self.dir)
        except sqlite3.DatabaseError as exc:
            raise self._error("create", exc) from exc
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
                leftover.unlink(missing_ok=True)

    def require(self) -> None:
        """Raise :class:`IndexNotFoundError` unless the index exists (for a query: nothing is created)."""
        if not self.exists:
            msg = (f"no index at {self.dir}: nothing was indexed there (index files first, or check the path; "
                   f"llmc-splitters index PATH --db {self.dir})")
            raise IndexNotFoundError(msg)

    def _check_not_old_format(self) -> None:
        if (self.dir / "chroma.sqlite3").is_file():
            msg = (f"{self.dir} holds an index written by llmc-splitters 0.1 (everything in Chroma); this version keeps "
                   "spans in llmc.sqlite3 and vectors in Chroma. Rebuild it: `llmc-splitters index PATH --db "
                   f"{self.dir} --reset` (or CodeIndex(path, reset=True))")
            raise StoreError(msg)

    def __repr__(self) -> str:
        return f"SpanStore({str(self.dir) if self._tmp is None else 'temporary'!r})"

    @property
    def temporary(self) -> bool:
        """Whether this store lives in a private temporary directory."""
        return self._tmp is not None

    # ------------------------------------------------------------------------------------------ connections

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (WAL mode: readers never block the writer, nor it them)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            try:
                conn = sqlite3.connect(self.file, timeout=self.timeout, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError as exc:
                raise self._error("open", exc) from exc
            # isolation_level=None: autocommit, transactions are explicit (BEGIN IMMEDIATE in _transaction).
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of this thread inside the block sees one committed state of the index.

        A query reads several times (its hits, then their parents, their file's bindings, the leaves of a range):
        outside a snapshot each read sees the latest commit, so a file rewritten between two reads can pair a hit
        of its old version with the import bindings of its new one. Inside, the reads share one read transaction
        (WAL mode: writers in other threads and processes go on, and their commits become visible after the
        block). Blocks nest; this thread must not write inside one.
        """
        depth = getattr(self._local, "snapshot", 0)
        if depth or not self.exists:  # nested, or nothing to read yet
            yield
            return
        conn = self._conn()
        try:
            conn.execute("BEGIN DEFERRED")  # the snapshot is taken by the first read
        except sqlite3.DatabaseError as exc:
            raise self._error("read", exc) from exc
        self._local.snapshot = 1
        try:
            yield
        finally:
            self._local.snapshot = 0
            with contextlib.suppress(sqlite3.DatabaseError):
                conn.execute("COMMIT")

    def _error(self, what: str, exc: BaseException) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            why = "it is locked by another process that writes to it (try again when that run ends)"
        elif "not a database" in text or "malformed" in text or "file is encrypted" in text:
            why = f"it is not a readable llmc index ({text}); rebuild it with `llmc-splitters index PATH --reset`"
        else:
            why = f"{type(exc).__name__}: {text}"
        return StoreError(f"could not {what} {self.file}: {why}")

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        if getattr(self._local, "conn", None) is None and not self.exists:
            return []  # not created yet: holds nothing
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._error("read", exc) from exc

    def close(self) -> None:
        """Close this thread's connection (other threads' connections close when they are collected)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        if self._tmp is not None:
            self._closed = True
            self._finalizer()

    # --------------------------------------------------------------------------------------------- transactions

    class _Tx:
        def __init__(self, store: SQLiteIndexFile) -> None:
            self.store = store

        def __enter__(self) -> sqlite3.Connection:
            if getattr(self.store._local, "snapshot", 0):
                msg = f"{self.store!r}: a write inside a read snapshot (SpanStore.snapshot) of the same thread"
                raise StoreError(msg)
            self.store._write_lock.acquire()
            if not self.store.exists:
                try:
                    self.store._open()
                except BaseException:
                    self.store._write_lock.release()
                    raise
            conn = self.store._conn()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                self.store._write_lock.release()
                raise self.store._error("write to", exc) from exc
            return conn

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
            conn = self.store._conn()
            try:
                if exc_type is None:
                    try:
                        conn.execute("COMMIT")
                    except sqlite3.DatabaseError as err:
                        conn.execute("ROLLBACK")
                        raise self.store._error("write to", err) from err
                else:
                    conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.DatabaseError):
                        raise self.store._error("write to", exc) from exc
            finally:
                self.store._write_lock.release()
            return False

    def _transaction(self) -> SQLiteIndexFile._Tx:
        return SQLiteIndexFile._Tx(self)


def _ignore_in_git(directory: Path) -> None:
    """Write ``directory/.gitignore`` ignoring everything in it (itself included), so that an index inside a
    repository (``.llmc/``) never shows up as untracked. Only in a directory that holds nothing but the index: a
    directory of the user's given as ``--db`` keeps its own rules."""
    ignore = directory / ".gitignore"
    try:
        if ignore.exists() or any(p.name not in _INDEX_ENTRIES and not p.name.startswith(f".{DB_FILE}.")
                                  for p in directory.iterdir()):
            return
        ignore.write_text(_GITIGNORE, encoding="utf-8")
    except OSError:
        pass  # a read-only or odd file system: the index works without it
