"""The persistent lexical index: BM25 over code-aware terms, on disk, read by postings (tantivy).

Terms are computed once, at index time, by :func:`~llmc_splitters.retrieval.terms.code_terms` and stored
pre-split (the index's tokenizer only splits on whitespace), so a query costs the postings of its own terms, not
the size of the index. Ranking is BM25 (``k1 = 1.2``, ``b = 0.75``, Lucene's IDF ``ln(1 + (N - n + 0.5) / (n +
0.5))``: the formula ``bm25s`` used before), evaluated with block-max WAND, so the top hits are found without
scoring every matching document.

Why tantivy and not SQLite FTS5 (measured on 500,000 leaf-sized documents of standard-library code, top 50):
FTS5's ``bm25()`` ranks every matching row, 14-240 ms for ordinary questions, where tantivy answers in 0.01-2.6 ms,
and its index is 24 MB against FTS5's 178 MB. See ``benchmarks/results/query-path.md``.

Beside the terms, each document holds its **message phrases** (field ``phrases``): the word pairs of the literal runs
of its string templates (:mod:`~llmc_splitters.retrieval.phrases`), matched against the messages a question quotes
by :meth:`LexicalIndex.search_phrases`. A field of their own keeps the terms' BM25 statistics (document lengths) as
they were: a question without a message is ranked exactly as before. An index written before the field existed
(:attr:`LexicalIndex.outdated`) is still searched by its terms; the next write run rebuilds it from the span store
(:meth:`LexicalIndex.recreate`, then the replay of every file), without chunking or embedding anything again.

Each file's documents are replaced by one commit together with the other files of its group. The span store is the
source of truth: a hit whose id the store does not hold (a file being rewritten, removed, or written by a run that
died before this index caught up) is ignored by the search, and the store's ``pending`` rows replay what this index
missed. Filters (a path prefix or glob, a language, a kind) are part of the query, not applied afterwards.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import missing_dependency
from .filters import SearchFilter, ancestor_dirs
from ..phrases import PROSE_LANGUAGES, phrase_text
from ..terms import code_terms

__all__ = ["LexDoc", "LexicalIndex", "lexical_text", "row_doc", "row_lexical_text", "row_phrase_text"]

_HEAP = 32_000_000


def _tantivy() -> Any:
    try:
        import tantivy
    except ImportError as exc:
        raise missing_dependency("tantivy", "bm25") from exc
    return tantivy


def lexical_text(path: str | None, name: str | None, breadcrumb: Any, text: str) -> str:
    """What the lexical index sees of a span: its path, symbol and breadcrumb, then its text, as terms."""
    crumb = breadcrumb if isinstance(breadcrumb, str) else " ".join(map(str, breadcrumb or ()))
    return " ".join(code_terms(f"{path or ''} {name or ''} {crumb}\n{text}"))


def row_lexical_text(span: Any, role: str) -> str:
    """What the lexical index sees of a searched row of ``role``: a leaf with its symbol and breadcrumb, a summary
    with its text alone (as :func:`~llmc_splitters.retrieval.storage.file_rows.build_file` lays them out; another engine of
    BM25, such as Milvus, indexes the same terms)."""
    leaf = role == "leaf"
    return lexical_text(span.path, span.name if leaf else None, span.metadata.get("breadcrumb") if leaf else "",
                        span.text)


def row_phrase_text(span: Any, role: str) -> str:
    """The message phrases of a searched row of ``role``: a leaf's in code (a document in prose describes messages,
    it does not make them), none for a summary."""
    return phrase_text(span.text) if role == "leaf" and span.language not in PROSE_LANGUAGES else ""


@dataclass(frozen=True, slots=True)
class LexDoc:
    """One searched record as the lexical index holds it: its terms and its message phrases (space-separated)."""

    id: str
    file: str
    language: str
    kind: str
    terms: str
    phrases: str = ""


def row_doc(span: Any, role: str, file: str, terms: str | None = None) -> LexDoc:
    """The lexical document of a searched row of ``role`` in ``file`` (``terms``: its terms when they were computed
    already, as the distributed ingestion ships them)."""
    return LexDoc(span.id, file, span.language, span.kind, row_lexical_text(span, role) if terms is None else terms,
                  row_phrase_text(span, role))


class LexicalIndex:
    """BM25 postings of one role (``leaves`` or ``summaries``) on disk, or in memory with ``directory=None``.

    Args:
        directory: Where the index lives (created when missing), or ``None`` for a private in-memory index.

    Raises:
        MissingDependencyError: ``tantivy`` is not installed (``pip install 'llmc-splitters[bm25]'``).

    Example:
        >>> lex = LexicalIndex(None)
        >>> lex.replace(["m.py"], [LexDoc("1", "m.py", "python", "function", lexical_text("m.py", "send", "", "def send(): ..."))])
        >>> [i for i, _ in lex.search("send", 5)]
        ['1']
    """

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        tantivy = _tantivy()
        self._t = tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("file", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("dirs", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("language", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("kind", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("terms", tokenizer_name="whitespace", index_option="freq")
        sb.add_text_field("phrases", tokenizer_name="whitespace", index_option="freq")
        self._current = sb.build()
        self.schema = self._current
        self.outdated = False
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                self.index = tantivy.Index(self.schema, path=str(self.directory), reuse=True)
            except ValueError as exc:
                if "schema does not match" not in str(exc):
                    raise
                # Written before the phrases field: searched by its terms until a write run rebuilds it.
                self.index = tantivy.Index.open(str(self.directory))
                self.schema = self.index.schema
                self.outdated = True
        else:
            self.index = tantivy.Index(self.schema)
        self._writer: Any = None
        self._dirty = False
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"LexicalIndex({str(self.directory) if self.directory else 'memory'!r})"

    # ------------------------------------------------------------------------------------------------ writes

    def recreate(self) -> None:
        """Replace an :attr:`outdated` index by an empty one of the current layout (the caller replays every file
        into it; see :meth:`~llmc_splitters.retrieval.indexing.indexer.Indexer.catch_up`)."""
        import shutil

        with self._lock:
            if not self.outdated or self.directory is None:
                return
            self._writer = None
            shutil.rmtree(self.directory)
            self.directory.mkdir(parents=True)
            self.index = self._t.Index(self._current, path=str(self.directory), reuse=True)
            self.schema = self._current
            self.outdated = False

    def _get_writer(self) -> Any:
        if self.outdated:
            from .span_store import StoreError

            msg = (f"the lexical index {self.directory} was written before message phrases were indexed; a write "
                   "run rebuilds it first (llmc-splitters index PATH, or index_directory)")
            raise StoreError(msg)
        if self._writer is None:
            try:
                self._writer = self.index.writer(heap_size=_HEAP, num_threads=1)
            except ValueError as exc:
                from .span_store import StoreError

                msg = (f"could not open the lexical index {self.directory} for writing: {exc}. Another process is "
                       "probably indexing into it; wait for it to finish")
                raise StoreError(msg) from exc
        return self._writer

    def replace(self, files: Sequence[str], docs: Iterable[LexDoc], *, commit: bool = True) -> None:
        """Make the index hold exactly ``docs`` for each of ``files`` (none for a file that is gone), visible at the
        next commit (now, unless ``commit=False``: a writer batches several groups into one commit, which costs a
        disk sync)."""
        t = self._t
        with self._lock:
            w = self._get_writer()
            for f in files:
                w.delete_documents_by_term("file", f)
            for d in docs:
                doc = t.Document()
                doc.add_text("id", d.id)
                doc.add_text("file", d.file)
                for a in ancestor_dirs(d.file):
                    doc.add_text("dirs", a)
                doc.add_text("language", d.language)
                doc.add_text("kind", d.kind)
                doc.add_text("terms", d.terms)
                doc.add_text("phrases", d.phrases)
                w.add_document(doc)
            self._dirty = True
        if commit:
            self.commit()

    def commit(self) -> None:
        """Make every replacement so far visible (and durable)."""
        with self._lock:
            if not self._dirty or self._writer is None:
                return
            self._writer.commit()
            self._dirty = False
        self.index.reload()

    def clear(self) -> None:
        """Delete every document."""
        with self._lock:
            w = self._get_writer()
            w.delete_all_documents()
            w.commit()
        self.index.reload()

    def close(self) -> None:
        """Commit what is pending and release the writer (and its lock on the directory)."""
        with self._lock:
            self.commit()
            self._writer = None

    # ------------------------------------------------------------------------------------------------- reads

    def _filter_query(self, filt: SearchFilter, files: Sequence[str] | None) -> list[Any]:
        t = self._t
        q = t.Query
        clauses: list[Any] = []
        if files is not None:
            clauses.append(q.term_set_query(self.schema, "file", list(files)))
        elif filt.path is not None:
            d = filt.directory
            clauses.append(q.term_query(self.schema, "dirs", d) if d else q.term_query(self.schema, "file", filt.path))
        if filt.language is not None:
            clauses.append(q.term_query(self.schema, "language", filt.language))
        if filt.kind is not None:
            clauses.append(q.term_query(self.schema, "kind", filt.kind))
        return [(t.Occur.Must, q.const_score_query(c, 0.0)) for c in clauses]

    def search(self, query: str, n: int, filt: SearchFilter | None = None, files: Sequence[str] | None = None,
               *, terms: Sequence[str] | None = None, weights: Mapping[str, float] | None = None
               ) -> list[tuple[str, float]]:
        """The ``n`` best documents for ``query``, as ``(id, bm25 score)``, best first (positive scores only).

        Args:
            query: Free text, identifiers or code (turned into terms by ``code_terms``).
            n: How many at most.
            filt: Path prefix / language / kind filter.
            files: Restrict to these files (a resolved glob or prefix, or multi-stage retrieval's files).
            terms: Use these terms instead of ``code_terms(query)``.
            weights: Use these terms, each with its weight (a multiplier of its BM25 contribution), instead.
        """
        t = self._t
        q = t.Query
        if weights is not None:
            clauses_text = [(t.Occur.Should, q.boost_query(q.term_query(self.schema, "terms", w), float(b)))
                            for w, b in weights.items() if b > 0]
        else:
            words = list(terms) if terms is not None else code_terms(query)
            clauses_text = [(t.Occur.Should, q.term_query(self.schema, "terms", w)) for w in words]
        if not clauses_text or n <= 0 or (files is not None and not files):
            return []
        text = q.boolean_query(clauses_text)
        clauses = self._filter_query(filt or SearchFilter(), files)
        query_obj = q.boolean_query([(t.Occur.Must, text), *clauses]) if clauses else text
        self.index.reload()
        searcher = self.index.searcher()
        hits = searcher.search(query_obj, n, count=False).hits
        out = [(searcher.doc(addr)["id"][0], float(score)) for score, addr in hits if score > 0.0]
        # Equal scores in id order, so that the ranking does not depend on segment layout.
        out.sort(key=lambda r: (-round(r[1], 6), r[0]))
        return out

    def stats(self, terms: Iterable[str], field: str = "terms") -> tuple[int, dict[str, int]]:
        """``(documents, {term: documents holding it})``: what BM25 weighs a term by (``field="phrases"``: a
        message phrase)."""
        self.index.reload()
        searcher = self.index.searcher()
        if field == "phrases" and self.outdated:
            return int(searcher.num_docs), dict.fromkeys(terms, 0)
        return int(searcher.num_docs), {t: int(searcher.doc_freq(field, t)) for t in terms}

    @property
    def has_phrases(self) -> bool:
        """Whether the index holds message phrases (an :attr:`outdated` one does not yet)."""
        return not self.outdated

    def search_phrases(self, phrases: Sequence[str], n: int, filt: SearchFilter | None = None,
                       files: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``n`` documents best matching message ``phrases`` (word pairs, see
        :func:`~llmc_splitters.retrieval.phrases.message_phrases`), as ``(id, bm25 score)``, best first."""
        if not phrases or n <= 0 or self.outdated or (files is not None and not files):
            return []
        t = self._t
        q = t.Query
        text = q.boolean_query([(t.Occur.Should, q.term_query(self.schema, "phrases", p))
                                for p in dict.fromkeys(phrases)])
        clauses = self._filter_query(filt or SearchFilter(), files)
        query_obj = q.boolean_query([(t.Occur.Must, text), *clauses]) if clauses else text
        self.index.reload()
        searcher = self.index.searcher()
        hits = searcher.search(query_obj, n, count=False).hits
        out = [(searcher.doc(addr)["id"][0], float(score)) for score, addr in hits if score > 0.0]
        out.sort(key=lambda r: (-round(r[1], 6), r[0]))
        return out

    def holding(self, phrases: Iterable[str]) -> int:
        """How many documents hold every one of ``phrases``."""
        wanted = list(dict.fromkeys(phrases))
        if not wanted or self.outdated:
            return 0
        t = self._t
        q = t.Query
        query_obj = q.boolean_query([(t.Occur.Must, q.term_query(self.schema, "phrases", p)) for p in wanted])
        self.index.reload()
        return int(self.index.searcher().search(query_obj, 1, count=True).count)

    def ids(self) -> set[str]:
        """Every document id (a full read: for consistency checks and tests, never on the query path)."""
        self.index.reload()
        searcher = self.index.searcher()
        n = int(searcher.num_docs)
        if n == 0:
            return set()
        hits = searcher.search(self._t.Query.all_query(), n, count=False).hits
        return {searcher.doc(addr)["id"][0] for _, addr in hits}

    def count(self) -> int:
        """Documents in the index (deleted ones excluded)."""
        self.index.reload()
        return int(self.index.searcher().num_docs)
