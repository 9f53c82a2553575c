"""The hierarchical span index: spans in SQLite, BM25 postings on disk, vectors in a vector store.

One engine per job:

* the **span store** (:mod:`.storage.span_store`, ``DIR/llmc.sqlite3``) holds every leaf, parent and summary of
  each file, its import bindings, its completion marker and the vectors already computed, read by id, by name and by
  byte or line range;
* the **lexical index** (:mod:`.storage.lexical_tantivy`, ``DIR/lexical/``) holds BM25 postings of code-aware terms;
* the **vector store** (:mod:`.storage.chroma_vectors`: Chroma at ``DIR/chroma`` or a ``chroma run`` server; any
  LangChain ``VectorStore`` through :mod:`.storage.langchain_vectors`) holds the vectors of the searched rows, only
  with an embedding model: a lexical-only index never creates or imports Chroma.

A query reads what it returns: the top ids of each search, then those rows and their expansion material by id
(:mod:`.search`, :mod:`.context`). Indexing (:mod:`.indexing`) is incremental, stat-first, crash-safe and keeps
finished work when interrupted. Both get the engines as :attr:`CodeIndex.parts` (:class:`.storage.parts.IndexParts`).

Example:
    >>> idx = CodeIndex()                                           # a private, temporary index
    >>> _ = idx.index_texts({"m.py": "import os\\n\\ndef home():\\n    return os.environ['HOME']\\n"})
    >>> idx.search("home directory", k=1).hits[0].span.name
    'home'
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..chunking.span import Span
from ..errors import (ConfigurationError, FilterWarning, IndexWarning, caller_stacklevel, check_workers,
                      checked_arguments)
from .context.lookup import ancestors as _ancestors
from .context.lookup import get_lines as _get_lines
from .context.lookup import get_symbol as _get_symbol
from .context.lookup import hit_context as _hit_context
from .context.lookup import zoom_for as _zoom_for
from .embeddings import Embedding
from .context.expand import HitContext, Snippet
from .storage.filters import SearchFilter, unmatched
from .search.ranking import Ranking
from .indexing.indexer import IndexInterrupted, Indexer, IndexReport, Item
from .indexing.progress import ProgressCallback
from .storage.index_dir import delete_index, embedding_hint, embedding_name, recorded
from .storage.lexical_tantivy import LexicalIndex
from .storage.parts import Chunking, Dense, IndexParts, settings_fingerprint
from .storage.file_rows import FileSummaryInput, derived_id, embedding_view
from .search.hits import Hit, SearchResult, rank_texts, search
from .indexing.selection import DEFAULT_INCLUDE, select_files
from .storage.span_store import LEXICAL, VECTORS, SpanStore, StoreError

__all__ = ["CodeIndex", "DEFAULT_INCLUDE", "FileSummaryInput", "Hit", "IndexInterrupted", "IndexReport",
           "SearchResult"]

class CodeIndex:
    """A hierarchical, incrementally updated index of source files (see the module docstring).

    Args:
        path: The index directory (created when missing, unless ``create=False``), or ``None`` for a private
            index in a temporary directory.
        vectors: Where vectors go when ``embedding`` is given: a :class:`~llmc_splitters.retrieval.storage.chroma_vectors.ChromaStore`
            (a server with ``host=``, a client), a
            :class:`~llmc_splitters.retrieval.storage.langchain_vectors.VectorStoreAdapter`, or ``None`` for embedded Chroma
            in ``path/chroma`` (in memory without a ``path``).
        embedding: An :class:`~llmc_splitters.retrieval.embeddings.Embedding`; ``None`` gives a lexical-only
            (BM25) index that needs no model and no vector store.
        chunker: Anything with ``chunk_tree(text, language=, path=) -> SpanTree`` (default
            :class:`~llmc_splitters.ASTChunker` with ``max_tokens`` and ``tokenizer``, analysis on).
        max_tokens: Leaf size for the default chunker.
        tokenizer: Token counter spec for the default chunker (see
            :func:`~llmc_splitters.chunking.tokens.resolve_tokenizer`).
        summarizer: Optional ``summarizer(FileSummaryInput) -> str``; its text is added to each file summary.
        reset: Delete the index at ``path`` first (to change the model, or rebuild).
        create: Create the index when there is none at ``path``; ``False`` raises
            :class:`~llmc_splitters.retrieval.storage.span_store.IndexNotFoundError` instead (open to query: a mistyped
            path is an error, not a new empty index).
        embed_workers: Batches embedded at once (threads), when indexing with a model; ``"auto"`` (the default):
            one per core for the package's local models, else one
            (:func:`~llmc_splitters.retrieval.embeddings.batching.auto_workers`).
        ranking: The ranking rules searches use (:class:`~llmc_splitters.retrieval.search.ranking.Ranking`; default: every
            rule fitted on, ``Ranking.plain()`` for none).
        store: The whole index somewhere else than ``path``: a
            :class:`~llmc_splitters.retrieval.storage.milvus.MilvusStore` holds the spans, the BM25 postings and the vectors
            in Milvus (then give neither ``path`` nor ``vectors``).

    Attributes:
        parts: The engines the write path and the search are handed
            (:class:`~llmc_splitters.retrieval.storage.parts.IndexParts`).

    Raises:
        ConfigurationError: An invalid setting, or the index holds vectors of another embedding model.
        IndexNotFoundError: ``create=False`` and there is no index at ``path``.
        StoreError: The index cannot be opened (corrupt, locked, written by 0.1: the message says what to do).
        MissingDependencyError: ``tantivy`` (or ``chromadb``, for dense search) is missing.
    """

    @checked_arguments
    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        vectors: Any = None,
        embedding: Embedding | None = None,
        chunker: Any = None,
        max_tokens: int = 512,
        tokenizer: Any = None,
        summarizer: Callable[[FileSummaryInput], str] | None = None,
        reset: bool = False,
        create: bool = True,
        embed_workers: int | str = "auto",
        ranking: Ranking | None = None,
        store: Any = None,
    ) -> None:
        if store is not None and (path is not None or vectors is not None):
            msg = (f"store={store!r} holds the whole index (spans, BM25 and vectors): do not pass path= or vectors= "
                   "too")
            raise ConfigurationError(msg)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            msg = (f"path must be the index directory (str or PathLike), got {type(path).__name__}. Since 0.2 the "
                   "spans live in DIR/llmc.sqlite3 and vectors in a vector store: CodeIndex(path=DIR) for embedded "
                   "Chroma in DIR/chroma, or CodeIndex(path=DIR, vectors=ChromaStore(host=...)) for a server")
            raise ConfigurationError(msg)
        if embedding is not None and not (hasattr(embedding, "embed_documents") and hasattr(embedding, "embed_query")):
            msg = (
                f"embedding must have embed_documents(list[str]) and embed_query(str); got {type(embedding).__name__}. "
                "Pass embedding=None for a lexical-only index."
            )
            raise ConfigurationError(msg)
        if vectors is not None and embedding is None:
            msg = "vectors= is where an embedding model's vectors go; pass embedding= too (or neither, for BM25 only)"
            raise ConfigurationError(msg)
        if chunker is None:
            from ..chunking.chunker import ASTChunker

            chunker = ASTChunker(max_tokens=max_tokens, tokenizer=tokenizer, analyze=True)
        self.chunker = chunker
        self.embedding = embedding
        self.summarizer = summarizer
        self.embedding_name = embedding_name(embedding)
        if reset and path is not None:
            delete_index(Path(path))
        self.store = store
        if store is not None:
            from .embeddings import identity_of

            store.open(self.embedding_name, identity_of(embedding, probe=True).dimension if embedding else None,
                       create=create, reset=reset)
            self.span_store: Any = store.spans
            vectors = store.vectors if embedding is not None else None
        else:
            self.span_store = SpanStore(path, create=create)
        self.path = None if self.span_store.temporary or store is not None else self.span_store.dir
        self.lexical_view_of: str | None = None
        self._check_embedding()
        self._vectors = vectors
        self._reset_vectors = reset
        self._lexical: dict[str, LexicalIndex] = {}
        self._lock = threading.RLock()
        check_workers("embed_workers", embed_workers)
        self.embed_workers = embed_workers
        if ranking is not None and not isinstance(ranking, Ranking):
            msg = f"ranking must be a Ranking, got {type(ranking).__name__}"
            raise ConfigurationError(msg)
        self.ranking = ranking or Ranking()
        self._embedder: Any = None
        self._viewer: Any = None
        view = embedding_view(embedding, self.embedding_name) if getattr(embedding, "light", False) else self._view
        dense = None if embedding is None else Dense(embedding, view, vectors=lambda: self.vectors,
                                                     embedder=lambda: self.embedder,
                                                     embeds_itself=bool(getattr(vectors, "embeds_itself", False)))
        self.parts = IndexParts(self.span_store, self.lexical, Chunking(chunker, summarizer), dense,
                                hybrid=store.hybrid if store is not None and dense is not None else None)
        self._indexer = Indexer(self.parts)
        if reset and vectors is not None:
            self.vectors  # noqa: B018 - open (and empty) the given vector store now

    # ------------------------------------------------------------------------------------------- engines

    def _check_embedding(self) -> None:
        stored = self.span_store.get_meta("embedding")
        if stored is None:
            self.span_store.set_meta_on_create("embedding", self.embedding_name)
            if self.embedding is not None:
                from .embeddings import identity_of

                ident = identity_of(self.embedding)
                self.span_store.set_meta_on_create("embedding_identity", json.dumps(
                    {"name": ident.name, "dimension": ident.dimension, "max_input_tokens": ident.max_input_tokens}))
        elif stored != self.embedding_name and self.embedding is None and stored != "none":
            # What embedding=None asks for: BM25 over the index's spans. Its vectors are left alone, and writes are
            # refused (they would leave new spans without vectors).
            self.lexical_view_of = stored
            msg = (f"the index at {self.span_store.dir} holds vectors from {stored!r}; with embedding=None it is "
                   f"searched lexically (BM25 only) and cannot be written to. For hybrid search pass "
                   f"{embedding_hint(stored)}")
            warnings.warn(msg, IndexWarning, stacklevel=caller_stacklevel())
        elif stored != self.embedding_name:
            msg = (f"the index at {self.span_store.dir} holds vectors from {stored!r}, not {self.embedding_name!r}: "
                   f"pass {embedding_hint(stored)}, or embedding=None to search it lexically (BM25 only), or "
                   f"reset=True to rebuild it with {self.embedding_name!r}")
            raise ConfigurationError(msg)

    def _check_writable(self) -> None:
        if self.lexical_view_of is not None:
            msg = (f"the index at {self.span_store.dir} holds vectors from {self.lexical_view_of!r} and was opened "
                   f"with embedding=None (lexical search only): writing to it would leave new spans without vectors; "
                   f"pass {embedding_hint(self.lexical_view_of)} to index into it")
            raise ConfigurationError(msg)

    @staticmethod
    def recorded(path: str | os.PathLike[str]) -> dict[str, Any]:
        """What an existing index at ``path`` records: ``embedding`` (``"none"``: lexical), ``vectors`` (where they
        live), ``settings`` (of a file), without opening anything else.

        Raises:
            IndexNotFoundError: There is no index at ``path``.
            StoreError: It cannot be read (corrupt, locked, written by 0.1).
        """
        return recorded(path)

    @property
    def dense(self) -> bool:
        """Whether searched rows get vectors (an embedding model is given)."""
        return self.embedding is not None

    @property
    def vectors(self) -> Any:
        """The vector store (opened at first use; only when the index is dense)."""
        if not self.dense:
            msg = "this index is lexical-only (embedding=None): it has no vector store"
            raise ConfigurationError(msg)
        if getattr(self, "_vectors_open", False):  # open: no lock (the index's writer thread reads it)
            return self._vectors
        with self._lock:
            if not getattr(self, "_vectors_open", False):
                if self._vectors is None:
                    from .storage.chroma_vectors import ChromaStore

                    if self.path is not None:
                        self._vectors = ChromaStore(str(self.path / "chroma"))
                    else:
                        import uuid

                        # In-memory Chroma clients share one process-wide store: a fresh collection keeps them apart.
                        self._vectors = ChromaStore(collection=f"llmc_{uuid.uuid4().hex}")
                self._vectors.open(self.embedding_name, reset=self._reset_vectors)
                self._vectors_open = True
                describe = getattr(self._vectors, "describe", None)
                if callable(describe) and self.path is not None:
                    where = describe()
                    if where.get("path") == str(self.path / "chroma"):
                        where["path"] = "chroma"  # inside the index directory: the index can move
                    self.span_store.set_meta_on_create("vectors", json.dumps(where))
        return self._vectors

    def lexical(self, role: str) -> LexicalIndex:
        """The lexical index of ``leaf`` or ``summary`` rows (opened at first use)."""
        if self.store is not None:
            return self.store.lexical(role)  # type: ignore[no-any-return]
        got = self._lexical.get(role)
        if got is None:
            with self._lock:
                got = self._lexical.get(role)
                if got is None:
                    where = None if self.path is None else self.path / "lexical" / ("leaves" if role == "leaf" else
                                                                                     "summaries")
                    got = LexicalIndex(where)
                    self._lexical[role] = got
        return got

    @property
    def settings_fingerprint(self) -> str:
        """Identifies the chunking settings and the library version; a file indexed under others is re-indexed
        (so an upgrade of the chunker re-chunks everything once)."""
        return settings_fingerprint(self.chunker)

    def _view(self, text: str, meta: dict[str, Any]) -> tuple[str, str]:
        """The bounded text to embed and its hash, made at first use (:func:`.storage.file_rows.embedding_view`)."""
        if self._viewer is None:
            self._viewer = embedding_view(self.embedding, self.embedding_name)
        return self._viewer(text, meta)

    @property
    def embedder(self) -> Any:
        """The :class:`~llmc_splitters.retrieval.embeddings.BatchEmbedder` that embeds what the index writes (made
        at first use, kept for the life of the index)."""
        if self._embedder is None:
            from .embeddings import BatchEmbedder

            self._embedder = BatchEmbedder(self.embedding, workers=self.embed_workers)
        return self._embedder

    def embed_query(self, query: str) -> list[float]:
        """The query's vector."""
        return [float(x) for x in self.embedding.embed_query(query)]  # type: ignore[union-attr]

    def snapshot(self) -> Any:
        """A context manager: every read of this thread inside it sees one committed state of the index (a query's
        hits and their context come from the same version of a file being rewritten meanwhile)."""
        return self.span_store.snapshot()

    def release_writers(self) -> None:
        """Commit and release the lexical index's writers (and their lock on the directory), so that another
        process can index into the same index; the next write takes them again."""
        for lex in self._lexical.values():
            lex.close()

    def close(self) -> None:
        """Release the lexical writers, the embedding workers and this thread's database connection."""
        for lex in self._lexical.values():
            lex.close()
        if self._embedder is not None:
            self._embedder.close()
            self._embedder = None
        self.span_store.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else repr(self.store) if self.store else "temporary"
        return f"CodeIndex({where!r}, embedding={self.embedding_name!r}, files={self.span_store.counts()['files']})"

    # ---------------------------------------------------------------------------------------- what it holds

    @property
    def paths(self) -> list[str]:
        """Indexed file paths, sorted."""
        return self.span_store.paths()

    def leaf_count(self, path: str | None = None) -> int:
        """Number of stored leaf spans (of one file), counted by the store."""
        if path is not None:
            m = self.span_store.marker(path)
            return m.n_leaves if m is not None else 0
        return self.span_store.counts()["leaves"]

    def spans(self, path: str | None = None, role: str = "leaf") -> list[Span]:
        """Stored spans (``role``: ``leaf`` or ``parent``), of one file or of all (an export: a query never
        needs it), in file order."""
        if path is not None:
            return self.span_store.spans(path, role)
        return list(self.span_store.all_spans(role))

    def get_span(self, span_id: str) -> Span | None:
        """The leaf, parent or summary span with this id."""
        got = self.span_store.get([span_id]).get(span_id)
        return got.span if got is not None else None

    def file_summary(self, path: str) -> str | None:
        """The stored summary text of a file."""
        return (s := self.get_span(derived_id("file", path))) and s.text

    def status(self) -> dict[str, Any]:
        """What the index holds and how fresh it is: files, leaves, last update, pending and failed files,
        embedding and chunking settings."""
        counts = self.span_store.counts()
        updated = self.span_store.get_meta("updated_at")
        return {
            "path": str(self.path) if self.path is not None else None,
            "files": counts["files"],
            "leaves": counts["leaves"],
            "spans": counts["spans"],
            "cached_vectors": counts["vectors"],
            "updated_at": float(updated) if updated else None,
            "pending": sorted(set(self.span_store.pending(LEXICAL | VECTORS))),
            "failed": self.span_store.failed(),
            "embedding": self.embedding_name,
            "settings": self.settings_fingerprint,
        }

    # -------------------------------------------------------------------------------------------- indexing

    def index_texts(self, files: Mapping[str, str], *, prune: bool = False, workers: int | str = 1,
                    progress: ProgressCallback | None = None) -> IndexReport:
        """Index in-memory files ``{path: text}``; unchanged files are skipped.

        Args:
            files: Path -> full text. The path is stored as given and is what results report.
            prune: Also remove every indexed file that is not in ``files`` (the index mirrors them).
            workers: Chunk in this many worker processes (see :meth:`index_files`).
            progress: Called at every step (see :meth:`index_files`).

        Returns:
            An :class:`IndexReport`.

        Raises:
            ConfigurationError: ``workers`` is not a positive integer, or the chunker cannot be sent to workers.
            IndexInterrupted: SIGINT/SIGTERM stopped the run (every file finished by then was written).
        """
        self._check_writable()
        report = IndexReport()
        with self._lock:
            self._indexer.run((Item(str(p), text) for p, text in files.items()), report, workers, progress)
            if prune:
                report.removed.extend(self._indexer.remove(sorted(set(self.paths) - {str(p) for p in files})))
        return report

    def index_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        root: str | os.PathLike[str] | None = None,
        workers: int | str = 1,
        progress: ProgressCallback | None = None,
    ) -> IndexReport:
        """Index files from disk; unchanged files are not read (their size and modification time match).

        Bytes are decoded by the chunker's policy (``errors=``, see :mod:`llmc_splitters.chunking.inputs`): UTF-8 (a
        BOM removed), else cp1252/Latin-1 so that nothing is lost. Binary files (NUL bytes, mostly control bytes) and,
        with ``errors="strict"``, undecodable ones are skipped and listed in :attr:`IndexReport.failed` with the
        reason, as are unreadable files and files the chunker fails on; the run goes on. A file that no longer
        exists has its records removed.

        Args:
            paths: Files to (re-)index.
            root: Store paths relative to this directory (POSIX separators); default: as given.
            workers: With ``workers > 1``, files are chunked in that many worker processes (a ``spawn`` process
                pool: a script calling this must guard its entry point with ``if __name__ == "__main__":``); the
                chunker is pickled and sent to them. Reading, embedding and every write stay in this process, and
                the result is the same as with ``workers=1``. A worker that dies fails only its file.
                ``"auto"`` (what the ``index`` command does): one worker per core, at most 4, when the index has
                no model and at least 64 files need chunking; else this process.
            progress: Called with an :class:`~llmc_splitters.retrieval.indexing.progress.IndexProgress` (files
                chunked, texts embedded, files written) at every change, from the run's threads; keep it quick.

        Returns:
            An :class:`IndexReport`.

        Raises:
            ConfigurationError: ``workers`` is invalid, or the chunker cannot be pickled.
            IndexInterrupted: SIGINT/SIGTERM stopped the run (every file finished by then was written).
        """
        def items() -> Iterable[Item]:
            for p in paths:
                key = Path(p).relative_to(root).as_posix() if root is not None else str(p)
                yield Item(key, source=Path(p))

        self._check_writable()
        report = IndexReport()
        with self._lock:
            self._indexer.run(items(), report, workers, progress)
        return report

    def index_directory(
        self,
        root: str | os.PathLike[str],
        *,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
        prune: bool = True,
        workers: int | str = 1,
        progress: ProgressCallback | None = None,
    ) -> IndexReport:
        """Index every matching file under ``root``, storing paths relative to it.

        Args:
            root: The directory.
            include: Glob patterns on file names (``*.py``) or relative paths (``src/**/*.py``).
            exclude: Glob patterns to skip. VCS, virtualenv, ``node_modules`` and cache directories are always
                skipped.
            prune: Remove indexed files that are no longer present (the index mirrors the directory).
            workers: Chunk in this many worker processes (see :meth:`index_files`).
            progress: Called at every step (see :meth:`index_files`).

        Returns:
            An :class:`IndexReport`.

        Raises:
            ConfigurationError: ``root`` is not a directory, or ``workers`` is invalid.
            IndexInterrupted: SIGINT/SIGTERM stopped the run (every file finished by then was written).
        """
        base = Path(root)
        if not base.is_dir():
            msg = f"root must be a directory, got {str(root)!r}"
            raise ConfigurationError(msg)
        found = select_files(base, include, exclude)
        report = self.index_files(found, root=base, workers=workers, progress=progress)
        if prune:
            present = {p.relative_to(base).as_posix() for p in found}
            with self._lock:
                report.removed.extend(self._indexer.remove(sorted(set(self.paths) - present)))
        return report

    def remove(self, path: str) -> None:
        """Delete every record of one file."""
        self._check_writable()
        with self._lock:
            self._indexer.remove([path])

    def remove_many(self, paths: Iterable[str]) -> list[str]:
        """Delete several files in one transaction; returns those that were indexed."""
        self._check_writable()
        with self._lock:
            return self._indexer.remove(paths)

    # --------------------------------------------------------------------------------------------- lookups

    def get_symbol(self, name: str, path: str | None = None) -> list[Snippet]:
        """Exact slices for a qualified symbol (``Client.send``), with no search (see
        :func:`~llmc_splitters.retrieval.context.lookup.get_symbol`)."""
        return _get_symbol(self.span_store, name, path)

    def get_lines(self, path: str, start_line: int, end_line: int | None = None) -> Snippet:
        """The exact text of lines ``start_line..end_line`` (1-based, inclusive) of an indexed file.

        Raises:
            ConfigurationError: The file is not indexed or the range is outside it.
        """
        return _get_lines(self.span_store, path, start_line, end_line)

    def at_line(self, path: str, line: int) -> Span | None:
        """The leaf covering ``line`` of ``path``."""
        return self.span_store.leaf_at(path, line)

    def ancestors(self, span: Span) -> list[Span]:
        """Stored parents of ``span``, innermost first, ending with the file span."""
        return _ancestors(self.span_store, span)

    def hit_context(self, span: Span, score: float = 0.0, query: str | None = None) -> HitContext:
        """Everything :func:`~llmc_splitters.retrieval.context.expand.expand` may add around ``span``; with the ``query``,
        also its zoom (its parts ranked for the query: see :func:`~llmc_splitters.retrieval.context.lookup.zoom_for`)."""
        zoom = None
        if query is not None:
            zoom = _zoom_for(self.span_store, self.chunker, span, lambda texts: rank_texts(self.parts, query, texts))
        return _hit_context(self.span_store, span, score, zoom)

    # ---------------------------------------------------------------------------------------------- search

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        path: str | None = None,
        language: str | None = None,
        kind: str | None = None,
        filters: SearchFilter | Mapping[str, Any] | None = None,
        multi_stage: bool = False,
        summaries: int = 3,
        candidates: int = 100,
        rrf_k: int | None = None,
        ranking: Ranking | None = None,
        dense_fallback: bool = False,
    ) -> SearchResult:
        """Find the leaves that best match ``query``.

        Ranking: BM25 over the question's weighted code-aware terms (:mod:`~llmc_splitters.retrieval.search.question`),
        plus (with an embedding model) cosine similarity of the query vector, each giving a ranked list of up to
        ``candidates`` leaves with the filters applied inside the search; the lists are fused and the ranking's
        rules applied (:mod:`~llmc_splitters.retrieval.search.ranking`: definitions up, tests/examples/docs down unless
        asked for, fragments down). The result's ``files`` ranks the distinct files. In multi-stage
        mode the file and class summaries are ranked the same way first; leaves inside the ``summaries`` best ones
        are ranked again (lexical and dense, restricted to them), and these local lists are fused with the global
        ones, so a leaf in a relevant file/class rises. See :func:`~llmc_splitters.retrieval.search.hits.confidence`.

        Args:
            query: Free text, identifiers or code.
            k: Hits to return.
            path: Only files under this path prefix (``src/``) or matching this glob (``src/**/*.py``).
            language: Only spans of this language.
            kind: Only spans of this kind (``function``, ``method``, ``class``...).
            filters: The same as a :class:`SearchFilter` or a dict (``path``/``language``/``kind``).
            multi_stage: Zoom from summaries into leaves (see above).
            summaries: How many summaries to zoom into.
            candidates: Depth of each ranked list before fusion.
            rrf_k: The RRF constant (default: the ranking's).
            ranking: The rules (default: this index's ``ranking``, see :class:`CodeIndex`).
            dense_fallback: When no word of the query occurs in the index (``words_in_index`` is ``False``), return
                the dense search's nearest leaves anyway, matches by meaning alone (default: no hits).

        Returns:
            A :class:`SearchResult`. When it holds no hit because the filters match nothing in the index, a
            :class:`~llmc_splitters.errors.FilterWarning` says so (see :meth:`unmatched_filter`);
            :attr:`SearchResult.words_in_index` says whether any word of the query occurs in the index.

        Raises:
            ConfigurationError: ``k`` is not positive, or a filter is invalid.
        """
        filt = SearchFilter.given(filters, path, language, kind)
        self.span_store.require()
        found = search(self.parts, query, k, filt=filt, multi_stage=multi_stage, summaries=summaries,
                       candidates=candidates, rrf_k=rrf_k, ranking=ranking or self.ranking,
                       dense_fallback=dense_fallback)
        if not found.hits and not filt.empty:
            note = unmatched(filt, self.span_store)
            if note is not None:
                warnings.warn(note, FilterWarning, stacklevel=caller_stacklevel())
        return found

    def unmatched_filter(self, *, path: str | None = None, language: str | None = None, kind: str | None = None,
                         filters: SearchFilter | Mapping[str, Any] | None = None) -> str | None:
        """Why no indexed span passes these filters, in one sentence (what stored paths, languages or kinds look
        like), or ``None`` when some span does (see :func:`~llmc_splitters.retrieval.storage.filters.unmatched`).

        Raises:
            ConfigurationError: A filter is invalid.
        """
        return unmatched(SearchFilter.given(filters, path, language, kind), self.span_store)
