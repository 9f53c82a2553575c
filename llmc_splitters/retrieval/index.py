"""The hierarchical span index: leaves, parents and summaries in Chroma, searched by BM25 fused with dense vectors.

Per file the index stores

* every **leaf** span of the chunker's tree (role ``leaf``; searched), with the names it references and the indices
  of the imports / module-level names it uses;
* every **parent** (role ``parent``): the file span (its document is the whole file, which makes exact line slices
  possible with no disk access) and each class/function the chunker had to split, with its skeleton and header;
* **summaries** (role ``summary``; searched in multi-stage mode): one per file (path, module docstring, top-level
  symbols with signatures, optionally a user summariser's text) and one per split class (its skeleton).

Re-indexing is incremental: a file whose content hash (and chunking settings) did not change is skipped; a changed
file's records are replaced, and vectors whose embedded text did not change are reused, so only new text is
embedded; files that disappeared from an indexed directory are removed.

Writes are crash-safe. Record ids are deterministic, so writing a file again upserts the same ids. A file's
records are written in this order: its completion marker (the file span's record, which carries the content hash
and settings) is withdrawn first, then the other records are upserted, records of the file that the new version no
longer has are deleted, and the marker is written last, with the number of records it completes. A file counts as
indexed only when its marker is there and the record count matches, so a run killed at any point (even between two
batches of one file) leaves files that are either complete or not indexed at all; on open, the records of an
incomplete file are hidden from search, and the next run re-indexes it (or removes it, if the file is gone)
without duplicates. A file that cannot be read, decoded or chunked is recorded in :attr:`IndexReport.failed` and
keeps whatever version was indexed before; the rest of the run goes on. Chunking can run in worker processes
(``workers=``) while every write stays in the calling process.

Search fuses ranked lists by reciprocal rank fusion (:mod:`.fuse`): BM25 over code-aware terms (:mod:`.lexical`)
and, when an embedding model is given, cosine similarity in Chroma. See :meth:`CodeIndex.search` for the
confidence formula.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import pickle
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LlmcError, UnsupportedInputError
from ..chunking.inputs import decode
from ..chunking.span import Span, SpanTree
from .embeddings import Embedding, bounded_view
from .expand import HitContext, Scope, Snippet
from .fuse import DEFAULT_RRF_K, reciprocal_rank_fusion
from .lexical import BM25Index
from .store import ChromaStore, Record, StoreError

__all__ = ["CodeIndex", "Hit", "SearchResult", "IndexReport", "FileSummaryInput", "DEFAULT_INCLUDE"]

_NS = uuid.UUID("1d6c7c1e-5f0a-4c55-8a59-4b1f3f0e9a21")

DEFAULT_INCLUDE = (
    "*.py", "*.pyi", "*.js", "*.mjs", "*.cjs", "*.jsx", "*.ts", "*.mts", "*.cts", "*.tsx", "*.sh", "*.bash",
)
"""File patterns :meth:`CodeIndex.index_directory` indexes by default."""

_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", "dist", "build"}
)

# Temperatures of the per-retriever softmax in the confidence (see CodeIndex.search).
_TAU_LEXICAL = 0.1
_TAU_DENSE = 0.05
_CONFIDENCE_TOP_N = 10

_CLASS_KINDS = frozenset({"class", "interface", "struct", "trait", "impl", "enum", "object", "module_block"})


@dataclass(frozen=True, slots=True)
class FileSummaryInput:
    """What a summariser hook receives for one file.

    Attributes:
        path: The file path as indexed.
        language: Its language.
        text: The whole file.
        docstring: The module docstring, if any.
        symbols: Top-level symbols as ``(kind, name, signature)``.
    """

    path: str
    language: str
    text: str
    docstring: str | None
    symbols: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result.

    Attributes:
        span: The leaf span.
        score: Its fused (RRF) score; comparable within one query only.
        rank: 0-based rank in the fused list.
        ranks: Its 1-based rank in each contributing list (``lexical``, ``dense``, ``local_lexical``,
            ``local_dense``), for the lists that ranked it.
    """

    span: Span
    score: float
    rank: int
    ranks: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits of one query and how confident the ranking is.

    Attributes:
        query: The query.
        hits: Best first.
        confidence: In [0, 1]; see :meth:`CodeIndex.search`.
        summaries: In multi-stage mode, the ids of the summaries (files/classes) searched within.
    """

    query: str
    hits: tuple[Hit, ...]
    confidence: float
    summaries: tuple[str, ...] = ()


@dataclass(slots=True)
class IndexReport:
    """What an indexing call changed.

    Attributes:
        added: Files indexed for the first time.
        updated: Files whose content changed and were re-indexed.
        unchanged: Files skipped (same content hash).
        removed: Files whose records were deleted.
        spans: Records written.
        embedded: Texts sent to the embedding model.
        reused: Vectors reused because their embedded text did not change.
        failed: ``path -> reason`` for files that could not be read, decoded (binary data) or chunked, or whose
            records could not be written. Such a file keeps the version indexed before, if any.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    spans: int = 0
    embedded: int = 0
    reused: int = 0
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Entry:
    """A record held in memory: its role, span (leaves/parents) and metadata."""

    id: str
    role: str
    path: str
    document: str
    meta: dict[str, Any]
    span: Span | None = None


@dataclass(slots=True)
class _FileState:
    """One complete file as indexing sees it: its marker's id, content hash and settings, and its record counts."""

    root_id: str
    file_hash: str | None
    settings: str | None
    n_records: int
    n_leaves: int


@dataclass(slots=True)
class _Prepared:
    """One file chunked and embedded, waiting to be written: its records, whether a complete version was
    indexed before (``update``), and whether the store may hold records of its path (``known``)."""

    path: str
    records: list[Record]
    update: bool
    known: bool


# Files (and records) written per group of store calls (see CodeIndex._flush).
_GROUP_FILES = 32
_GROUP_RECORDS = 4000


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _derived_id(kind: str, target: str) -> str:
    return str(uuid.uuid5(_NS, f"{kind}\x00{target}"))


def _line_bounds(data: bytes, start: int, end: int) -> tuple[int, int]:
    """Widen ``[start, end)`` to whole lines."""
    s = data.rfind(b"\n", 0, start) + 1
    e = data.find(b"\n", max(start, end - 1))
    return s, (len(data) if e < 0 else e + 1)


def _line_of(data: bytes, pos: int) -> int:
    return data.count(b"\n", 0, pos) + 1


def _end_line(data: bytes, start: int, end: int) -> int:
    """1-based line of the last byte of ``[start, end)`` (a final ``\\n`` belongs to the line it ends)."""
    return _line_of(data, max(start, end - 1))


class CodeIndex:
    """A hierarchical, incrementally updated index of source files, stored in Chroma.

    Args:
        store: Where records live (default: an in-memory Chroma collection).
        embedding: An :class:`~llmc_splitters.retrieval.embeddings.Embedding`; ``None`` gives a lexical-only
            (BM25) index that needs no model.
        chunker: Anything with ``chunk_tree(text, language=, path=) -> SpanTree`` (default
            :class:`~llmc_splitters.ASTChunker` with ``max_tokens`` and ``tokenizer``).
        max_tokens: Leaf size for the default chunker.
        tokenizer: Token counter spec for the default chunker (see :func:`~llmc_splitters.chunking.tokens.resolve_tokenizer`).
        summarizer: Optional ``summarizer(FileSummaryInput) -> str``; its text is added to each file summary.
        reset: Empty the collection first.

    Raises:
        ConfigurationError: The collection holds vectors of another embedding model.
        MissingDependencyError: ``chromadb`` or ``bm25s`` is missing.

    Example:
        >>> idx = CodeIndex(ChromaStore(path="/tmp/idx"))             # doctest: +SKIP
        >>> idx.index_directory("src/")                               # doctest: +SKIP
        >>> idx.search("retry backoff", k=3).hits[0].span.name        # doctest: +SKIP
        'Client.send'
    """

    def __init__(
        self,
        store: ChromaStore | None = None,
        *,
        embedding: Embedding | None = None,
        chunker: Any = None,
        max_tokens: int = 512,
        tokenizer: Any = None,
        summarizer: Callable[[FileSummaryInput], str] | None = None,
        reset: bool = False,
    ) -> None:
        if embedding is not None and not (hasattr(embedding, "embed_documents") and hasattr(embedding, "embed_query")):
            msg = (
                f"embedding must have embed_documents(list[str]) and embed_query(str); got {type(embedding).__name__}. "
                "Pass embedding=None for a lexical-only index."
            )
            raise ConfigurationError(msg)
        if chunker is None:
            from ..chunking.chunker import ASTChunker

            chunker = ASTChunker(max_tokens=max_tokens, tokenizer=tokenizer, analyze=True)
        self.chunker = chunker
        self.embedding = embedding
        self.summarizer = summarizer
        self.store = store if store is not None else ChromaStore()
        self.embedding_name = self._embedding_name(embedding)
        self.store.open(self.embedding_name, reset=reset)
        self._lock = threading.RLock()
        # What indexing needs, per complete file: its marker (hash, settings, record counts). Small, always held
        # once read; read at first use (see _files), together with the search view when a search comes first.
        self._marker_files: dict[str, _FileState] = {}
        self._markers_loaded = False
        # The search view: every record's text, metadata and span. Loaded at the first lookup or search (see
        # _entries), never by indexing, which keeps it current only once it is loaded.
        self._view_entries: dict[str, _Entry] = {}
        self._view_by_path: dict[str, list[str]] = {}
        self._view_loaded = False
        # Files with records in the store but no valid completion marker (a write was interrupted): hidden from
        # search, re-indexed (or pruned) by the next indexing call.
        self._marker_incomplete: set[str] = set()
        self._dim: int | None = None
        self._lex_cache: dict[str, tuple[list[str], BM25Index]] = {}

    # ------------------------------------------------------------------------------------------------- settings

    @staticmethod
    def _embedding_name(embedding: Any) -> str:
        if embedding is None:
            return "none"
        name = getattr(embedding, "name", None) or getattr(embedding, "model_name", None)
        return str(name) if name else type(embedding).__name__

    @property
    def settings_fingerprint(self) -> str:
        """Identifies the chunking settings and the library version; a file indexed under others is re-indexed
        (so an upgrade of the chunker re-chunks everything once)."""
        from .. import __version__

        c = self.chunker
        tok = getattr(getattr(c, "tokenizer", None), "name", None)
        return f"{type(c).__name__}:{getattr(c, 'max_tokens', '?')}:{tok}:{__version__}"

    def __repr__(self) -> str:
        return f"CodeIndex({self.store!r}, embedding={self.embedding_name!r}, files={len(self._files)})"

    # --------------------------------------------------------------------------------------------------- memory

    def _load(self, *, with_view: bool) -> None:
        """Read the records back from Chroma in one pass (a page at a time) and find the complete files; with
        ``with_view``, their texts and spans too (the search view), else metadata only.

        A file whose completion marker is missing, or which has another number of records than its marker says,
        was being written when a run stopped: it is left out of :attr:`paths` (not searchable) and kept in
        ``_incomplete`` for the next indexing call to redo or prune. Indexing never needs the search view, so an
        index opened to be updated reads metadata only; one opened to be searched reads every record once.
        """
        with self._lock:
            self._marker_files.clear()
            self._marker_incomplete.clear()
            self._drop_view()
            counts: dict[str, list[int]] = {}  # path -> [records, leaves]
            markers: dict[str, tuple[str, dict[str, Any]]] = {}
            for rec in self.store.records(documents=with_view):
                meta = rec.metadata
                path = str(meta.get("path"))
                c = counts.setdefault(path, [0, 0])
                c[0] += 1
                c[1] += meta.get("role") == "leaf"
                if meta.get("is_root"):
                    markers[path] = (rec.id, {k: meta.get(k) for k in ("file_hash", "settings", "n_records")})
                if with_view:
                    self._remember(rec)
            for path, (n, leaves) in counts.items():
                got = markers.get(path)
                expected = got[1].get("n_records") if got is not None else None
                if got is None or (isinstance(expected, int) and expected != n):
                    self._marker_incomplete.add(path)
                    for rid in self._view_by_path.pop(path, []):
                        self._view_entries.pop(rid, None)
                    continue
                self._marker_files[path] = _FileState(got[0], got[1].get("file_hash"), got[1].get("settings"), n,
                                                      leaves)
            self._markers_loaded = True
            self._view_loaded = with_view

    @property
    def _files(self) -> dict[str, _FileState]:
        """Path -> marker of every complete file (read at first use)."""
        if not self._markers_loaded:
            self._load(with_view=False)
        return self._marker_files

    @property
    def _incomplete(self) -> set[str]:
        """Paths with records but no valid completion marker (read at first use)."""
        if not self._markers_loaded:
            self._load(with_view=False)
        return self._marker_incomplete

    def _drop_view(self) -> None:
        self._view_entries.clear()
        self._view_by_path.clear()
        self._view_loaded = False
        self._lex_cache.clear()

    def _ensure_view(self) -> None:
        """Load the search view (every record of every complete file: text, metadata, span), once."""
        if self._view_loaded:
            return
        with self._lock:
            if self._view_loaded:
                return
            if not self._markers_loaded:
                self._load(with_view=True)  # one read of the store gives both
                return
            self._view_entries.clear()
            self._view_by_path.clear()
            for rec in self.store.records():
                if str(rec.metadata.get("path")) in self._marker_files:
                    self._remember(rec)
            self._lex_cache.clear()
            self._view_loaded = True

    @property
    def _entries(self) -> dict[str, _Entry]:
        """Record id -> entry, over every complete file (the search view, loaded on first use)."""
        self._ensure_view()
        return self._view_entries

    @property
    def _by_path(self) -> dict[str, list[str]]:
        """Path -> record ids of that file (the search view, loaded on first use)."""
        self._ensure_view()
        return self._view_by_path

    def _remember(self, rec: Record) -> None:
        meta = rec.metadata
        span = None
        if "span_json" in meta:
            d = json.loads(meta["span_json"])
            d["text"] = rec.document
            span = Span.from_dict(d)
        e = _Entry(rec.id, str(meta.get("role")), str(meta.get("path")), rec.document, meta, span)
        self._view_entries[rec.id] = e
        self._view_by_path.setdefault(e.path, []).append(rec.id)

    def _forget_path(self, path: str) -> None:
        self._files.pop(path, None)
        for rid in self._view_by_path.pop(path, []):
            self._view_entries.pop(rid, None)

    @property
    def paths(self) -> list[str]:
        """Indexed file paths, sorted."""
        return sorted(self._files)

    def leaf_count(self, path: str | None = None) -> int:
        """Number of stored leaf spans (of one file), without loading them."""
        if path is not None:
            st = self._files.get(path)
            return st.n_leaves if st is not None else 0
        return sum(st.n_leaves for st in self._files.values())

    def spans(self, path: str | None = None, role: str = "leaf") -> list[Span]:
        """Stored spans (``role``: ``leaf`` or ``parent``), optionally of one file, in file order."""
        ids = self._by_path.get(path, []) if path is not None else list(self._entries)
        out = [self._entries[i].span for i in ids if self._entries[i].role == role and self._entries[i].span]
        return sorted(out, key=lambda s: (s.path or "", s.start_byte, -s.end_byte))  # type: ignore[union-attr]

    def get_span(self, span_id: str) -> Span | None:
        """The leaf or parent span with this id."""
        e = self._entries.get(span_id)
        return e.span if e is not None else None

    def _root(self, path: str) -> _Entry | None:
        """The marker record of a complete file (its document is the whole file), from the search view."""
        st = self._files.get(path)
        return self._entries.get(st.root_id) if st is not None else None

    def file_summary(self, path: str) -> str | None:
        """The stored summary text of a file."""
        e = self._entries.get(_derived_id("file", path))
        return e.document if e is not None else None

    # ------------------------------------------------------------------------------------------------- indexing

    def index_texts(self, files: Mapping[str, str], *, prune: bool = False, workers: int = 1) -> IndexReport:
        """Index in-memory files ``{path: text}``; unchanged files are skipped.

        Args:
            files: Path -> full text. The path is stored as given and is what results report.
            prune: Also remove every indexed file that is not in ``files``.
            workers: Chunk in this many worker processes (see :meth:`index_files`).

        Returns:
            An :class:`IndexReport`.

        Raises:
            ConfigurationError: ``workers`` is not a positive integer, or the chunker cannot be sent to workers.
        """
        report = IndexReport()
        with self._lock:
            self._index_stream(((str(path), text) for path, text in files.items()), report, workers)
            if prune:
                for gone in sorted((set(self._files) | self._incomplete) - {str(p) for p in files}):
                    self.remove(gone)
                    report.removed.append(gone)
        return report

    def index_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        root: str | os.PathLike[str] | None = None,
        workers: int = 1,
    ) -> IndexReport:
        """Index files from disk; unchanged files are skipped.

        Bytes are decoded by the chunker's policy (``errors=``, see :mod:`llmc_splitters.chunking.inputs`): UTF-8 (a BOM
        removed), else cp1252/Latin-1 so that nothing is lost. Binary files (NUL bytes, mostly control bytes) and,
        with ``errors="strict"``, undecodable ones are skipped and listed in :attr:`IndexReport.failed` with the
        reason, as are unreadable files and files the chunker fails on; the run goes on. Files are read, chunked and
        written one at a time (memory follows the largest file, not the tree), each write crash-safe (see the module
        docstring).

        Args:
            paths: Files to (re-)index. A path that no longer exists has its records removed.
            root: Store paths relative to this directory (POSIX separators); default: as given.
            workers: With ``workers > 1``, files are chunked in that many worker processes (a ``spawn`` process
                pool: a script calling this must guard its entry point with ``if __name__ == "__main__":``); the
                chunker is pickled and sent to them. Reading, embedding and every write to the store stay in this
                process, and the result is the same as with ``workers=1``. A worker that dies (a crash in native
                code) fails only the file it was chunking.

        Returns:
            An :class:`IndexReport`.

        Raises:
            ConfigurationError: ``workers`` is not a positive integer, or the chunker cannot be pickled.
        """
        report = IndexReport()
        errors = getattr(self.chunker, "errors", "fallback")
        errors = errors if errors in ("fallback", "strict") else "fallback"

        def texts() -> Iterator[tuple[str, str]]:
            for p in paths:
                key = Path(p).relative_to(root).as_posix() if root is not None else str(p)
                try:
                    data = Path(p).read_bytes()
                except FileNotFoundError:
                    if key in self._files or key in self._incomplete:
                        self.remove(key)
                        report.removed.append(key)
                    continue
                except OSError as exc:
                    report.failed[key] = f"could not read {key}: {type(exc).__name__}: {exc}"
                    continue
                try:
                    text = decode(data, errors).text
                except LlmcError as exc:  # binary, or not UTF-8 under errors="strict": skipped, with the reason
                    report.failed[key] = f"skipped {key}: {exc}"
                    continue
                yield key, text

        with self._lock:
            self._index_stream(texts(), report, workers)
        return report

    def index_directory(
        self,
        root: str | os.PathLike[str],
        *,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
        prune: bool = True,
        workers: int = 1,
    ) -> IndexReport:
        """Index every matching file under ``root``, storing paths relative to it.

        Args:
            root: The directory.
            include: Glob patterns on file names (``*.py``) or relative paths (``src/**/*.py``).
            exclude: Glob patterns to skip. VCS, virtualenv, ``node_modules`` and cache directories are always
                skipped.
            prune: Remove indexed files that are no longer present (the index mirrors the directory).
            workers: Chunk in this many worker processes (see :meth:`index_files`).

        Returns:
            An :class:`IndexReport`; files that could not be read, decoded or chunked are in ``failed`` with the
            reason, and everything else is indexed.

        Raises:
            ConfigurationError: ``root`` is not a directory, or ``workers`` is invalid.
        """
        base = Path(root)
        if not base.is_dir():
            msg = f"root must be a directory, got {str(root)!r}"
            raise ConfigurationError(msg)
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".") or d == ".github")
            for fn in sorted(filenames):
                p = Path(dirpath) / fn
                rel = p.relative_to(base)
                if not any(rel.match(g) or Path(fn).match(g) for g in include):
                    continue
                if any(rel.match(g) for g in exclude):
                    continue
                found.append(p)
        report = self.index_files(found, root=base, workers=workers)
        if prune:
            present = {p.relative_to(base).as_posix() for p in found}
            with self._lock:
                for gone in sorted((set(self._files) | self._incomplete) - present):
                    self.remove(gone)
                    report.removed.append(gone)
        return report

    def remove(self, path: str) -> None:
        """Delete every record of one file."""
        with self._lock:
            self._forget_path(path)
            self._lex_cache.clear()
            self._incomplete.add(path)  # until the delete went through
            self.store.delete(path=path)
            self._incomplete.discard(path)

    def _index_stream(self, items: Iterable[tuple[str, str]], report: IndexReport, workers: int) -> None:
        """Index ``(path, text)`` pairs, chunking in ``workers`` processes; failures go to the report.

        Files are prepared (chunked, embedded) one at a time and written in groups of up to ``_GROUP_FILES`` files
        (each store call has a fixed cost that dwarfs a small file's records); see :meth:`_flush`.
        """
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            msg = f"workers must be a positive integer (1: chunk in this process), got {workers!r}"
            raise ConfigurationError(msg)
        source: Iterable[tuple[str, str, SpanTree | str | None]]
        if workers == 1:
            source = ((path, text, None) for path, text in items)
        else:
            try:
                payload = pickle.dumps(self.chunker)
            except Exception as exc:  # noqa: BLE001 - pickling raises PicklingError, TypeError, AttributeError...
                msg = (
                    f"workers={workers} needs a chunker that can be pickled to send it to worker processes, but "
                    f"{type(self.chunker).__name__} cannot ({type(exc).__name__}: {exc}). Use workers=1, or a "
                    "tokenizer defined at module level (not a lambda or a closure)."
                )
                raise ConfigurationError(msg) from exc

            def todo() -> Iterator[tuple[str, str]]:
                for path, text in items:
                    if self._is_unchanged(path, _sha(text)):
                        report.unchanged.append(path)
                    else:
                        yield path, text

            source = _chunk_in_processes(payload, todo(), workers)
        group: list[_Prepared] = []
        for path, text, outcome in source:
            if isinstance(outcome, str):
                report.failed[path] = outcome
                continue
            if any(g.path == path for g in group):
                self._flush(group, report)
            try:
                prepared = self._prepare(path, text, report, outcome)
            except LlmcError as exc:
                report.failed[path] = str(exc)
                continue
            if prepared is not None:
                group.append(prepared)
                if len(group) >= _GROUP_FILES or sum(len(g.records) for g in group) >= _GROUP_RECORDS:
                    self._flush(group, report)
        self._flush(group, report)

    def _is_unchanged(self, path: str, file_hash: str) -> bool:
        st = self._files.get(path)
        return st is not None and st.file_hash == file_hash and st.settings == self.settings_fingerprint

    def _prepare(self, path: str, text: str, report: IndexReport, tree: SpanTree | None = None) -> _Prepared | None:
        """Chunk (unless ``tree`` is given) and embed one file; ``None`` when it is unchanged."""
        file_hash = _sha(text)
        old_root = self._files.get(path)
        fp = self.settings_fingerprint
        if tree is None and self._is_unchanged(path, file_hash):
            report.unchanged.append(path)
            return None
        if tree is None:
            tree = _chunk(self.chunker, path, text)
        records, to_embed = self._records(path, text, tree, file_hash, fp)
        known = old_root is not None or path in self._incomplete  # the store may hold records of this path
        # Reuse vectors whose embedded text did not change (same file before the edit, or a write cut short).
        reused: dict[str, list[float]] = {}
        if self.embedding is not None and known:
            for rec in self.store.records(where={"path": path}, embeddings=True):
                h = rec.metadata.get("embed_hash")
                if h and rec.embedding is not None:
                    reused[h] = rec.embedding
        pending = [(rec, view) for rec, view in to_embed if rec.metadata.get("embed_hash") not in reused]
        for rec, _ in to_embed:
            h = rec.metadata.get("embed_hash")
            if h in reused:
                rec.embedding = reused[h]
                report.reused += 1
        if pending:
            vecs = self.embedding.embed_documents([v for _, v in pending])  # type: ignore[union-attr]
            if len(vecs) != len(pending):
                msg = f"the embedding model returned {len(vecs)} vectors for {len(pending)} texts"
                raise LlmcError(msg)
            for (rec, _), v in zip(pending, vecs):
                rec.embedding = [float(x) for x in v]
            report.embedded += len(pending)
        dim = self._vector_dim(records)
        for rec in records:
            if rec.embedding is None:
                rec.embedding = [1.0] + [0.0] * (dim - 1)
            if rec.metadata.get("is_root"):
                rec.metadata["n_records"] = len(records)
        return _Prepared(path, records, old_root is not None, known)

    def _flush(self, group: list[_Prepared], report: IndexReport) -> None:
        """Replace the stored records of each file of ``group`` so that a crash at any point is recoverable.

        Each file's marker (its root record: content hash, settings, record count) is withdrawn first and written
        last, after the other records are upserted (the same ids as any earlier, interrupted write of the same
        content) and the file's records missing from its new version are deleted. Until its marker is back, a file
        is incomplete: hidden from search in a fresh process, and redone by the next run. If the store fails, every
        file of the group is reported failed and stays incomplete. ``group`` is emptied.
        """
        if not group:
            return
        for g in group:
            self._forget_path(g.path)
            self._incomplete.add(g.path)
        self._lex_cache.clear()
        markers = [r for g in group for r in g.records if r.metadata.get("is_root")]
        body = [r for g in group for r in g.records if not r.metadata.get("is_root")]
        try:
            stale: list[str] = []
            old_markers: list[str] = []
            for g in group:
                if not g.known:
                    continue  # nothing of this path was loaded or written: the store holds none of its records
                stored = set(self.store.ids(where={"path": g.path}))
                roots = self.store.ids(where={"$and": [{"path": g.path}, {"is_root": True}]}) if stored else []
                old_markers.extend(roots)
                stale.extend(sorted(stored - {r.id for r in g.records} - set(roots)))
            if old_markers:
                self.store.delete(ids=old_markers)
            self.store.upsert(body)
            if stale:
                self.store.delete(ids=stale)
            self.store.upsert(markers)
        except Exception as exc:  # noqa: BLE001 - a failed write must not abort the run; the files stay incomplete
            why = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
            for g in group:
                report.failed[g.path] = f"could not write the records of {g.path}: {why}"
            group.clear()
            return
        for g in group:
            root = next(r for r in g.records if r.metadata.get("is_root"))
            self._files[g.path] = _FileState(
                root.id, root.metadata.get("file_hash"), root.metadata.get("settings"), len(g.records),
                sum(r.metadata.get("role") == "leaf" for r in g.records),
            )
            if self._view_loaded:
                for rec in g.records:
                    self._remember(rec)
            self._incomplete.discard(g.path)
            report.spans += len(g.records)
            (report.updated if g.update else report.added).append(g.path)
        group.clear()

    def _vector_dim(self, records: list[Record]) -> int:
        if self._dim is None:
            for rec in records:
                if rec.embedding is not None:
                    self._dim = len(rec.embedding)
                    break
            else:
                if self.embedding is None:
                    self._dim = 1
                else:
                    self._dim = len(self.embedding.embed_query("dimension probe"))
        return self._dim

    # ---------------------------------------------------------------------------------------------- record build

    def _records(
        self, path: str, text: str, tree: SpanTree, file_hash: str, fingerprint: str
    ) -> tuple[list[Record], list[tuple[Record, str]]]:
        data = text.encode("utf-8", "surrogatepass")
        info = _analyze(tree, data)
        root = tree.root
        leaf_ids = {s.id for s in tree.leaves}
        bindings = info.bindings  # imports + module names, each widened to whole lines, with text and lines
        records: list[Record] = []
        to_embed: list[tuple[Record, str]] = []

        def base_meta(span: Span, role: str) -> dict[str, Any]:
            meta = {k: v for k, v in span.to_metadata().items() if isinstance(v, (str, int, float, bool))}
            meta.update(role=role, path=path, file_hash=file_hash)
            meta.pop("source", None)
            return meta

        for span in tree.spans:
            is_leaf = span.id in leaf_ids
            if span.id == root.id and not is_leaf or span.id != root.id and not is_leaf:
                extra = info.per_span.get(span.id, {})
                sp = _with_meta(span, extra)
                meta = base_meta(sp, "parent")
                if span.id == root.id:
                    meta.update(is_root=True, settings=fingerprint, bindings_json=json.dumps(bindings))
                meta["span_json"] = _span_json(sp)
                records.append(Record(span.id, span.text, meta))
        for span in tree.leaves:
            extra = info.per_span.get(span.id, {})
            sp = _with_meta(span, extra)
            meta = base_meta(sp, "leaf")
            if span.id == root.id:
                meta.update(is_root=True, settings=fingerprint, bindings_json=json.dumps(bindings))
            view_src = _leaf_view(sp)
            view = self._view(view_src, meta)
            meta["span_json"] = _span_json(sp)
            rec = Record(span.id, span.text, meta)
            records.append(rec)
            if self.embedding is not None:
                to_embed.append((rec, view))
        # File summary.
        summary = _file_summary(path, tree, info)
        if self.summarizer is not None:
            extra_text = self.summarizer(
                FileSummaryInput(path, root.language, text, info.docstring, tuple(info.top_symbols))
            )
            if extra_text:
                summary = f"{summary}\nSummary: {extra_text.strip()}\n"
        sid = _derived_id("file", path)
        smeta = {"role": "summary", "kind": "file", "path": path, "file_hash": file_hash, "target_id": root.id,
                 "language": root.language}
        srec = Record(sid, summary, smeta)
        self._view(summary, smeta)
        records.append(srec)
        if self.embedding is not None:
            to_embed.append((srec, self._view(summary, smeta)))
        # Class summaries: one per split class (a class that fits is a leaf and is searched as such).
        for span in tree.spans:
            if span.id in leaf_ids or span.kind not in _CLASS_KINDS:
                continue
            sk = info.per_span.get(span.id, {}).get("skeleton")
            if not sk:
                continue
            doc = f"{path}: {span.name or span.kind}\n{sk}"
            cmeta = {"role": "summary", "kind": "class", "path": path, "file_hash": file_hash, "target_id": span.id,
                     "symbol": span.name or "", "language": span.language, "start_line": span.start_line,
                     "end_line": span.end_line}
            crec = Record(_derived_id("class", span.id), doc, cmeta)
            records.append(crec)
            if self.embedding is not None:
                to_embed.append((crec, self._view(doc, cmeta)))
        return records, to_embed

    def _view(self, text: str, meta: dict[str, Any]) -> str:
        """The bounded text to embed; records in ``meta`` whether it is truncated and its hash (for reuse)."""
        if self.embedding is None:
            return text
        v = bounded_view(text, self.embedding)
        meta["embedded_view"] = "truncated" if v.truncated else "full"
        if v.tokens is not None:
            meta["embedded_tokens"] = v.tokens
        if v.limit is not None:
            meta["embedding_limit"] = v.limit
        meta["embed_hash"] = _sha(f"{self.embedding_name}\x00{v.text}")
        return v.text

    # --------------------------------------------------------------------------------------------------- lookup

    def get_symbol(self, name: str, path: str | None = None) -> list[Snippet]:
        """Exact slices for a qualified symbol (``Client.send``), with no search.

        A span (leaf or split parent) named ``name`` is returned whole. A method inside a class that fit in one leaf
        is cut from that leaf by the line range the chunker recorded in ``metadata["symbols"]``. If nothing has that
        exact name, spans whose name ends with ``.name`` are tried.

        Args:
            name: The qualified name.
            path: Restrict to one file.

        Returns:
            Snippets in (path, file) order; empty if unknown.
        """
        cands = [e for e in self._entries.values() if e.span is not None and (path is None or e.path == path)]

        def whole(matches: list[_Entry]) -> list[Snippet]:
            # A split definition is a parent plus part-leaves carrying its name: the parent is the whole thing.
            parents = {e.span.name: e for e in matches if e.role == "parent" and not e.meta.get("is_root")}  # type: ignore[union-attr]
            keep = [e for e in matches if e.role == "parent" or e.span.name not in parents]  # type: ignore[union-attr]
            return [self._snippet(e.span) for e in keep if not e.meta.get("is_root") or e.role == "leaf"]  # type: ignore[arg-type]

        out = whole([e for e in cands if e.span.name == name])  # type: ignore[union-attr]
        if not out:
            for e in cands:
                if e.role != "leaf":
                    continue
                for sym in e.span.metadata.get("symbols") or ():  # type: ignore[union-attr]
                    if sym.get("name") == name and "start_line" in sym and "end_line" in sym:
                        out.append(self.get_lines(e.path, int(sym["start_line"]), int(sym["end_line"])))
        if not out:
            out = whole([e for e in cands if e.span.name and e.span.name.endswith("." + name)])  # type: ignore[union-attr]
        return sorted(set(out), key=lambda s: (s.path or "", s.start_byte, -s.end_byte))

    def get_lines(self, path: str, start_line: int, end_line: int | None = None) -> Snippet:
        """The exact text of lines ``start_line..end_line`` (1-based, inclusive) of an indexed file.

        Raises:
            ConfigurationError: The file is not indexed or the range is outside it.
        """
        root = self._root(path)
        if root is None:
            msg = f"{path!r} is not indexed; indexed files: {', '.join(self.paths[:5])}{'...' if len(self.paths) > 5 else ''}"
            raise ConfigurationError(msg)
        end_line = start_line if end_line is None else end_line
        data = root.document.encode("utf-8", "surrogatepass")
        n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        if not (1 <= start_line <= end_line <= max(n_lines, 1)):
            msg = f"lines {start_line}-{end_line} are outside {path!r} (1-{n_lines})"
            raise ConfigurationError(msg)
        starts = [0]
        for i, b in enumerate(data):
            if b == 10:
                starts.append(i + 1)
        s = starts[start_line - 1]
        e = starts[end_line] if end_line < len(starts) else len(data)
        return Snippet(path, s, e, start_line, end_line, data[s:e].decode("utf-8", "surrogatepass"))

    def at_line(self, path: str, line: int) -> Span | None:
        """The leaf covering ``line`` of ``path``."""
        for s in self.spans(path):
            if s.start_line <= line <= s.end_line:
                return s
        return None

    @staticmethod
    def _snippet(span: Span) -> Snippet:
        return Snippet(span.path, span.start_byte, span.end_byte, span.start_line, span.end_line, span.text, span.id)

    def ancestors(self, span: Span) -> list[Span]:
        """Stored parents of ``span``, innermost first, ending with the file span."""
        out: list[Span] = []
        cur = span
        seen = {span.id}
        while cur.parent_id and cur.parent_id not in seen:
            seen.add(cur.parent_id)
            e = self._entries.get(cur.parent_id)
            if e is None or e.span is None:
                break
            out.append(e.span)
            cur = e.span
        return out

    def hit_context(self, span: Span, score: float = 0.0) -> HitContext:
        """Everything :func:`~llmc_splitters.retrieval.expand.expand` may add around ``span``."""
        scopes: list[Scope] = []
        for anc in self.ancestors(span):
            if anc.parent_id is None:  # the file itself
                continue
            header = None
            he = anc.metadata.get("header_end_byte")
            if isinstance(he, int) and anc.start_byte < he <= anc.end_byte:
                head = anc.text.encode("utf-8", "surrogatepass")[: he - anc.start_byte].decode("utf-8", "surrogatepass")
                header = Snippet(anc.path, anc.start_byte, he, anc.start_line,
                                 anc.start_line + head.rstrip("\n").count("\n"), head, anc.id)
            scopes.append(Scope(self._snippet(anc), anc.kind, header, anc.metadata.get("skeleton")))
        imports: list[Snippet] = []
        root = self._root(span.path or "") if span.path is not None else None
        used = list(span.metadata.get("uses") or [])
        hit = self._snippet(span)
        if span.kind == "comment":
            # A doc comment the chunker had to leave on its own documents the definition right after it: a hit on
            # the comment is a hit on both.
            nxt = self._next_leaf(span)
            if nxt is not None and nxt.kind not in ("comment", "imports", "block"):
                hit = Snippet(span.path, span.start_byte, nxt.end_byte, span.start_line, nxt.end_line,
                              span.text + nxt.text, span.id)
                used.extend(nxt.metadata.get("uses") or [])
        if root is not None and used:
            bindings = json.loads(root.meta.get("bindings_json") or "[]")
            for i in sorted(set(used)):
                if 0 <= i < len(bindings):
                    b = bindings[i]
                    imports.append(Snippet(span.path, b["start"], b["end"], b["start_line"], b["end_line"], b["text"]))
        return HitContext(hit, score, tuple(scopes), tuple(imports))

    def _next_leaf(self, span: Span) -> Span | None:
        """The leaf that starts where ``span`` ends, in the same file."""
        for rid in self._by_path.get(span.path or "", ()):
            e = self._entries[rid]
            if e.role == "leaf" and e.span is not None and e.span.start_byte == span.end_byte:
                return e.span
        return None

    # --------------------------------------------------------------------------------------------------- search

    def _lexical(self, role: str) -> tuple[list[str], BM25Index]:
        with self._lock:
            got = self._lex_cache.get(role)
            if got is None:
                ids = sorted((e.id for e in self._entries.values() if e.role == role),
                             key=lambda i: (self._entries[i].path, self._entries[i].meta.get("start_byte", 0), i))
                docs = [_lexical_doc(self._entries[i]) for i in ids]
                got = (ids, BM25Index(docs))
                self._lex_cache[role] = got
            return got

    def _lex_search(self, role: str, query: str, n: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
        ids, bm = self._lexical(role)
        pos = None if allowed is None else [i for i, rid in enumerate(ids) if rid in allowed]
        return [(ids[i], s) for i, s in bm.search(query, n, allowed=pos)]

    def _dense_search(self, role: str, qvec: list[float] | None, n: int, paths: Sequence[str] | None = None,
                      allowed: set[str] | None = None) -> list[tuple[str, float]]:
        if qvec is None:
            return []
        where: dict[str, Any] = {"role": role}
        if paths is not None:
            where = {"$and": [{"role": role}, {"path": {"$in": list(paths)}}]}
        got = self.store.query(qvec, n if allowed is None else max(n, len(allowed)), where=where)
        out = [(i, s) for i, s in got if i in self._entries and (allowed is None or i in allowed)]
        # A run of equal scores (e.g. many records at similarity 0) in file order, whatever order the store returned
        # it in, so that the ranking does not depend on the store (rounded: stores compute in float32 or float64).
        # The store's order is kept otherwise (a score may be a distance).
        def file_order(rid: str) -> tuple[str, int, str]:
            e = self._entries[rid]
            return e.path, e.meta.get("start_byte", 0), rid

        tied: list[tuple[str, float]] = []
        for k, (rid, score) in enumerate(out):
            if k + 1 < len(out) and round(out[k + 1][1], 6) == round(score, 6):
                continue
            j = k
            while j > 0 and round(out[j - 1][1], 6) == round(score, 6):
                j -= 1
            tied.extend(sorted(out[j : k + 1], key=lambda r: file_order(r[0])))
        return tied[:n]

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        multi_stage: bool = False,
        summaries: int = 3,
        candidates: int = 50,
        rrf_k: int = DEFAULT_RRF_K,
    ) -> SearchResult:
        """Find the leaves that best match ``query``.

        Ranking: BM25 over code-aware terms, plus (with an embedding model) cosine similarity of the query vector,
        each giving a ranked list of up to ``candidates`` leaves; the lists are fused by reciprocal rank fusion,
        ``score(d) = sum_lists 1 / (rrf_k + rank(d))``. In multi-stage mode the file and class summaries are ranked
        the same way first; leaves inside the ``summaries`` best ones are ranked again (lexical and dense, restricted
        to them), and these local lists are fused with the global ones, so a leaf in a relevant file/class rises.

        Confidence, in [0, 1], says how clearly the top hit beats the rest. For each base retriever r (BM25, and
        dense if used) over its top ``N = 10`` leaves, scores are turned into a distribution
        ``p_r = softmax(x / tau_r)`` with ``x = bm25 / max(bm25)`` (``tau = 0.1``) or ``x = cosine``
        (``tau = 0.05``); the confidence is the mean over retrievers of ``p_r(top fused hit)`` (0 for a retriever
        that did not rank it). So it is near 1 when every retriever puts the same leaf first by a wide margin, about
        0.5 when one retriever is sure and the other disagrees, and low when the first scores are close together
        or nothing matched. A planner can send queries below ~0.6 to a larger model.

        Args:
            query: Free text, identifiers or code.
            k: Hits to return.
            multi_stage: Zoom from summaries into leaves (see above).
            summaries: How many summaries to zoom into.
            candidates: Depth of each ranked list before fusion.
            rrf_k: The RRF constant.

        Returns:
            A :class:`SearchResult`.

        Raises:
            ConfigurationError: ``k`` is not positive.
        """
        if k <= 0:
            msg = f"k must be > 0, got {k}"
            raise ConfigurationError(msg)
        n = max(candidates, k)
        qvec = [float(x) for x in self.embedding.embed_query(query)] if self.embedding is not None else None
        lists: dict[str, list[tuple[str, float]]] = {"lexical": self._lex_search("leaf", query, n)}
        if qvec is not None:
            lists["dense"] = self._dense_search("leaf", qvec, n)
        chosen: list[str] = []
        if multi_stage:
            sum_lists = [r for r in (self._lex_search("summary", query, n), self._dense_search("summary", qvec, n)) if r]
            fused_s = reciprocal_rank_fusion([[i for i, _ in r] for r in sum_lists], k=rrf_k)
            chosen = [i for i, _ in fused_s[:summaries]]
            allowed = self._leaves_under(chosen)
            if allowed:
                lists["local_lexical"] = self._lex_search("leaf", query, n, allowed)
                if qvec is not None:
                    paths = sorted({self._entries[i].path for i in allowed})
                    lists["local_dense"] = self._dense_search("leaf", qvec, n, paths, allowed)
        names = [name for name, r in lists.items() if r]
        fused = reciprocal_rank_fusion([[i for i, _ in lists[name]] for name in names], k=rrf_k)
        hits = []
        for rank, (rid, score) in enumerate(fused[:k]):
            e = self._entries[rid]
            ranks = {name: 1 + [i for i, _ in lists[name]].index(rid) for name in names
                     if any(i == rid for i, _ in lists[name])}
            hits.append(Hit(e.span, score, rank, ranks))  # type: ignore[arg-type]
        conf = _confidence(hits[0].span.id if hits else None, lists.get("lexical", []), lists.get("dense"))
        return SearchResult(query, tuple(hits), conf, tuple(chosen))

    def _leaves_under(self, summary_ids: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for sid in summary_ids:
            s = self._entries.get(sid)
            if s is None:
                continue
            target = s.meta.get("target_id")
            if s.meta.get("kind") == "file":
                out.update(i for i in self._by_path.get(s.path, ()) if self._entries[i].role == "leaf")
                continue
            for i in self._by_path.get(s.path, ()):
                e = self._entries[i]
                if e.role == "leaf" and e.span is not None and any(a.id == target for a in self.ancestors(e.span)):
                    out.add(i)
        return out


# ------------------------------------------------------------------------------------------------------ helpers


def _chunk(chunker: Any, path: str, text: str) -> SpanTree:
    """``chunker.chunk_tree(text, path=path)``; any failure becomes an :class:`UnsupportedInputError` naming the file."""
    try:
        return chunker.chunk_tree(text, path=path)
    except Exception as exc:  # noqa: BLE001 - one file the chunker fails on (even by a bug) must not stop a run
        msg = f"could not chunk {path}: {exc}" if isinstance(exc, (LlmcError, ValueError)) else \
            f"could not chunk {path}: {type(exc).__name__}: {exc}"
        raise UnsupportedInputError(msg) from exc


def _chunk_rows(chunker: Any, path: str, text: str) -> tuple[str, Any]:
    """Chunk one file into picklable rows: ``("ok", {"spans": [...], "leaves": [...]})`` or ``("error", reason)``.

    ``spans`` holds every span of the tree as :meth:`Span.to_dict` (pre-order, root first) and ``leaves`` the leaf
    ids in file order; :func:`_tree_from_rows` rebuilds the :class:`SpanTree`. A top-level function of plain data,
    so a ``spawn`` worker process can run it.
    """
    try:
        tree = _chunk(chunker, path, text)
    except LlmcError as exc:
        return "error", str(exc)
    return "ok", {"spans": [s.to_dict() for s in tree.spans], "leaves": [s.id for s in tree.leaves]}


def _tree_from_rows(rows: Mapping[str, Any]) -> SpanTree:
    """The :class:`SpanTree` of :func:`_chunk_rows` output."""
    spans = [Span.from_dict(d) for d in rows["spans"]]
    by_id = {s.id: s for s in spans}
    return SpanTree.build(spans, [by_id[i] for i in rows["leaves"]])


_worker_chunker: Any = None


def _worker_init(payload: bytes, parent_pid: int) -> None:
    """Set up a chunking worker: unpickle the chunker once; exit when the parent process is gone."""
    global _worker_chunker  # noqa: PLW0603 - one chunker per worker process
    _worker_chunker = pickle.loads(payload)  # noqa: S301 - pickled by the parent process a moment ago

    def watch() -> None:
        # A parent killed with SIGKILL cannot shut the pool down; without this, idle workers would wait forever.
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="llmc-parent-watch", daemon=True).start()


def _worker_chunk(path: str, text: str) -> tuple[str, Any]:
    return _chunk_rows(_worker_chunker, path, text)


def _chunk_in_processes(
    payload: bytes, items: Iterator[tuple[str, str]], workers: int
) -> Iterator[tuple[str, str, SpanTree | str]]:
    """Chunk ``(path, text)`` items in a ``spawn`` process pool; yield ``(path, text, tree or failure reason)``.

    Results come back in input order, with at most ``2 * workers`` files in flight. If a worker dies (the pool
    breaks), the files that were in flight are chunked again one at a time in a fresh pool, so only the file that
    kills its worker is reported as failed.
    """
    ctx = multiprocessing.get_context("spawn")

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(payload, os.getpid()))

    pool = new_pool()
    inflight: deque[tuple[str, str, Future[tuple[str, Any]], bool]] = deque()  # (path, text, future, alone)
    suspects: deque[tuple[str, str]] = deque()
    try:
        while True:
            if suspects:
                # Files that were in flight when a worker died go one at a time, to find the one that kills it.
                if not inflight:
                    path, text = suspects.popleft()
                    inflight.append((path, text, pool.submit(_worker_chunk, path, text), True))
            else:
                while len(inflight) < 2 * workers:
                    nxt = next(items, None)
                    if nxt is None:
                        break
                    inflight.append((nxt[0], nxt[1], pool.submit(_worker_chunk, nxt[0], nxt[1]), False))
            if not inflight:
                return
            path, text, fut, alone = inflight.popleft()
            try:
                status, value = fut.result()
            except BrokenProcessPool as exc:
                pool.shutdown(wait=True, cancel_futures=True)
                pool = new_pool()
                if alone:
                    yield path, text, f"could not chunk {path}: the chunking process died ({exc})"
                else:
                    suspects.append((path, text))
                    suspects.extend((p, t) for p, t, _, _ in inflight)
                    inflight.clear()
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be unpickled: that file fails
                yield path, text, f"could not chunk {path}: {type(exc).__name__}: {exc}"
                continue
            yield path, text, (_tree_from_rows(value) if status == "ok" else value)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)




def _confidence(top: str | None, lexical: list[tuple[str, float]], dense: list[tuple[str, float]] | None) -> float:
    """Mean over retrievers of the softmax probability of the top fused hit (see :meth:`CodeIndex.search`)."""
    if top is None:
        return 0.0
    parts: list[float] = []
    for ranked, tau, normalise in ((lexical, _TAU_LEXICAL, True), (dense, _TAU_DENSE, False)):
        if ranked is None:
            continue
        head = ranked[:_CONFIDENCE_TOP_N]
        if not head:
            parts.append(0.0)
            continue
        scores = [s for _, s in head]
        if normalise:
            m = max(scores)
            scores = [s / m if m > 0 else 0.0 for s in scores]
        z = [x / tau for x in scores]
        mz = max(z)
        ex = [math.exp(x - mz) for x in z]
        total = sum(ex)
        p = {rid: v / total for (rid, _), v in zip(head, ex)}
        parts.append(p.get(top, 0.0))
    return max(0.0, min(1.0, sum(parts) / len(parts))) if parts else 0.0


def _lexical_doc(e: _Entry) -> str:
    """What BM25 sees: path, symbol, breadcrumb/signature, then the text."""
    s = e.span
    if s is None:
        return f"{e.path}\n{e.document}"
    crumb = s.metadata.get("breadcrumb") or ""
    return f"{e.path} {s.name or ''} {crumb if isinstance(crumb, str) else ' '.join(map(str, crumb))}\n{s.text}"


def _leaf_view(s: Span) -> str:
    """What the embedding model sees for a leaf: a short header (path, symbol) and the text."""
    head = f"{s.path or ''} {s.name or ''}".strip()
    return f"{head}\n{s.text}" if head else s.text


def _with_meta(span: Span, extra: dict[str, Any]) -> Span:
    if not extra:
        return span
    md = dict(span.metadata)
    for k, v in extra.items():
        md.setdefault(k, v)  # what the chunker already stored wins
    d = span.to_dict()
    d["metadata"] = md
    return Span.from_dict(d)


def _span_json(span: Span) -> str:
    d = span.to_dict()
    d.pop("text")
    return json.dumps(d, default=str)


@dataclass(slots=True)
class _FileInfo:
    bindings: list[dict[str, Any]] = field(default_factory=list)
    per_span: dict[str, dict[str, Any]] = field(default_factory=dict)
    docstring: str | None = None
    top_symbols: list[tuple[str, str, str]] = field(default_factory=list)


def _file_summary(path: str, tree: SpanTree, info: _FileInfo) -> str:
    lines = [f"File: {path} ({tree.root.language})"]
    if info.docstring:
        lines.append(f"Docstring: {info.docstring.strip()[:1000]}")
    if info.top_symbols:
        lines.append("Symbols:")
        lines.extend(f"  {kind} {name}: {sig}" for kind, name, sig in info.top_symbols)
    names = sorted({n for b in info.bindings if b["kind"] == "import" for n in b["names"]})
    if names:
        lines.append("Imports: " + ", ".join(names))
    return "\n".join(lines) + "\n"


_CLASS_NODE_TYPES = frozenset(
    {"class_definition", "class_declaration", "abstract_class_declaration", "class", "interface_declaration",
     "struct_item", "impl_item", "trait_item", "class_specifier", "struct_specifier"}
)
_DEF_NODE_TYPES = frozenset(
    {"function_definition", "function_declaration", "method_definition", "generator_function_declaration",
     "function_item", "method_declaration", "constructor_declaration"}
) | _CLASS_NODE_TYPES


def _analyze(tree: SpanTree, data: bytes) -> _FileInfo:
    """Imports, used names, skeletons and headers for one file's spans.

    NOTE(chunker): this re-parses the file. When the chunker stores the analysis in span metadata (root:
    ``imports``/``module_names``; leaves: ``identifiers``/``references``; class spans: ``skeleton``,
    ``header_end_byte``), that data is used instead and only what is missing is computed here.
    """
    from ..chunking import analysis

    info = _FileInfo()
    root_span = tree.root
    if root_span.metadata.get("degraded") == "wide_error":
        return info  # queries over a wide ERROR node are quadratic: no expansion data for this file
    language = root_span.language
    grammar = None
    try:
        from ..chunking.languages import get_spec

        grammar = get_spec(language).grammar
    except Exception:  # noqa: BLE001 - unknown language: no analysis, plain retrieval still works
        grammar = None
    md = root_span.metadata
    leaf_ids = {s.id for s in tree.leaves}
    complete = "imports" in md and "module_names" in md and all(
        "identifiers" in s.metadata for s in tree.leaves if s.language == language
    ) and all(
        "header_end_byte" in s.metadata
        for s in tree.spans
        if s.id not in leaf_ids and s.kind in (*_CLASS_KINDS, "function", "method") and s.language == language
    )
    node_root = None
    if grammar and not complete:
        # Only for a chunker that did not record the analysis (ASTChunker(analyze=True) does).
        try:
            from ..chunking._grammar import get_parser

            node_root = get_parser(grammar).parse(data).root_node
        except Exception:  # noqa: BLE001 - a grammar that fails to load only costs the expansion
            node_root = None
    if node_root is None and not complete:
        return info
    imports = [analysis.ImportInfo.from_dict(d) for d in md["imports"]] if "imports" in md else \
        analysis.file_imports(node_root, data, grammar)
    names = [analysis.ImportInfo.from_dict(d) for d in md["module_names"]] if "module_names" in md else \
        analysis.module_names(node_root, data, grammar)
    name_to_binding: dict[str, int] = {}
    for imp in [*imports, *names]:
        s, e = _line_bounds(data, imp.start_byte, imp.end_byte)
        idx = len(info.bindings)
        info.bindings.append({
            "start": s, "end": e, "start_line": _line_of(data, s), "end_line": _end_line(data, s, e),
            "text": data[s:e].decode("utf-8", "replace"), "names": list(imp.names), "kind": imp.kind,
        })
        for n in imp.names:
            name_to_binding.setdefault(n, idx)
    # Definition nodes, to find each class span's skeleton and header.
    defs: list[Any] = []
    stack = [node_root] if node_root is not None else []
    while stack:
        n = stack.pop()
        if n.type in _DEF_NODE_TYPES:
            defs.append(n)
        stack.extend(n.named_children)

    def def_node(span: Span) -> Any:
        best = None
        for n in defs:
            if span.start_byte <= n.start_byte and n.end_byte <= span.end_byte:
                if best is None or (n.end_byte - n.start_byte) > (best.end_byte - best.start_byte):
                    best = n
        if best is not None and best.parent is not None and best.parent.type in ("decorated_definition", "export_statement") \
                and span.start_byte <= best.parent.start_byte:
            best = best.parent
        return best

    for span in tree.spans:
        if span.id == root_span.id and span.id not in leaf_ids:
            continue
        extra: dict[str, Any] = {}
        is_leaf = span.id in leaf_ids
        if is_leaf:
            md_span = span.metadata
            ids = set(md_span["identifiers"]) if "identifiers" in md_span else analysis.identifiers(
                node_root, data, span.start_byte, span.end_byte, language=grammar) if node_root is not None else set()
            refs = md_span["references"] if "references" in md_span else sorted(
                analysis.references(node_root, data, span.start_byte, span.end_byte, language=grammar)
            ) if node_root is not None else []
            extra["identifiers"] = sorted(ids)
            extra["references"] = sorted(refs)
            uses = sorted({name_to_binding[n] for n in ids if n in name_to_binding})
            # A binding the span itself contains is not "used from outside" (the imports leaf, a constant's leaf).
            extra["uses"] = [i for i in uses if not (span.start_byte <= info.bindings[i]["start"] < span.end_byte)]
        missing = "header_end_byte" not in span.metadata or (
            span.kind in _CLASS_KINDS and "skeleton" not in span.metadata
        )
        if not is_leaf and missing and span.kind in (*_CLASS_KINDS, "function", "method"):
            node = def_node(span)
            if node is not None:
                if "header_end_byte" not in span.metadata:
                    extra["header_end_byte"] = analysis.header_end(node, data)
                if span.kind in _CLASS_KINDS and "skeleton" not in span.metadata:
                    extra["skeleton"] = analysis.skeleton(node, data, grammar)
        if extra:
            info.per_span[span.id] = extra
    # Module docstring and top-level symbols for the file summary.
    if "module_docstring" in md:
        info.docstring = md["module_docstring"] or None
    else:
        doc = analysis._py_docstring(node_root) if grammar == "python" and node_root is not None else None
        if doc is not None:
            raw = doc.text.decode("utf-8", "replace")
            info.docstring = raw.strip("\"'rRbBuU \n")
    for span in tree.spans:
        if span.parent_id == root_span.id and span.name and span.kind not in ("imports", "block", "comment"):
            if any(sym[1] == span.name for sym in info.top_symbols):
                continue
            sig = span.metadata.get("signature") or span.text.split("\n", 1)[0]
            info.top_symbols.append((span.kind, span.name, str(sig).strip()))
    return info
