"""Search on Milvus: BM25 over the rows' code terms, the dense vectors, and both fused in one ``hybrid_search``.

Each is one server call with the filter (path, language, kind, role) as the call's expression, evaluated inside
Milvus. BM25 is computed by the server from the ``terms`` field (a ``BM25`` function, ``k1 = 1.2``, ``b = 0.75``):
those are the terms the tantivy index holds (:func:`~llmc_splitters.retrieval.storage.lexical_tantivy.row_lexical_text`), so
camelCase and snake_case are split the same way, and a query is turned into terms by
:func:`~llmc_splitters.retrieval.terms.code_terms` as it is for tantivy. Milvus Lite returns a BM25 hit's score
negated (``-1.14`` for a better hit than ``-0.86``, best first); a server returns it positive: the score reported
is its magnitude, so larger is better on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from ..filters import SearchFilter
from ...terms import code_terms
from .client import MAX_LIMIT, Collections, in_list, literal, pymilvus

__all__ = ["MilvusLexical", "MilvusVectors", "filter_expr", "hybrid_search"]

_MAX_CACHED_TERMS = 50_000  # term frequencies kept between writes (then counted afresh)


def filter_expr(role: str, filt: SearchFilter | None, files: Sequence[str] | None) -> str:
    """The Milvus expression of a search's role, filter and resolved files."""
    clauses = [f"role == {literal(role)}"]
    if files is not None:
        clauses.append(in_list("file", files))
    elif filt is not None and filt.path is not None:
        d = filt.directory
        clauses.append(f"array_contains(dirs, {literal(d)})" if d else f"file == {literal(filt.path)}")
    if filt is not None and filt.language is not None:
        clauses.append(f"language == {literal(filt.language)}")
    if filt is not None and filt.kind is not None:
        clauses.append(f"kind == {literal(filt.kind)}")
    return " and ".join(clauses)


def _query_words(query: str, terms: Sequence[str] | None = None, weights: Mapping[str, float] | None = None
                 ) -> list[str]:
    """The BM25 query text's terms: Milvus computes BM25 from query text, so a weighted term is repeated
    ``round(weight)`` times (at least once) where tantivy multiplies its contribution."""
    if weights is not None:
        return [t for t, w in weights.items() if w > 0 for _ in range(max(1, round(w)))]
    return list(terms) if terms is not None else code_terms(query)


def _shares(lexical_weight: float) -> tuple[int, int]:
    """How many times the BM25 and the dense request go into one ``hybrid_search``: Milvus's RRF ranker sums
    ``1 / (k + rank)`` over the requests and takes no weight per request, so a list asked ``a`` times weighs ``a``.
    ``a / (a + b)`` is the weight as a fraction of denominator at most 20 (0.8: 4 and 1; 0.7: 7 and 3)."""
    share = Fraction(min(max(lexical_weight, 0.0), 1.0)).limit_denominator(20)
    return share.numerator, share.denominator - share.numerator


def _hits(got: Any) -> list[tuple[str, float]]:
    return [(h["id"], abs(float(h["distance"]))) for h in (got[0] if got else [])]


class MilvusLexical:
    """BM25 over one role's rows (``leaf`` or ``summary``): the interface of
    :class:`~llmc_splitters.retrieval.storage.lexical_tantivy.LexicalIndex`. The terms are written with the rows by the span
    store, so ``replace`` and ``commit`` have nothing left to do."""

    def __init__(self, cols: Collections, role: str) -> None:
        self.cols = cols
        self.role = role
        self._rows: tuple[int, int] | None = None  # (writes when counted, rows)
        self._df: tuple[int, dict[str, int]] = (-1, {})  # (writes when counted, {term: rows holding it})

    def __repr__(self) -> str:
        return f"MilvusLexical({self.cols.name!r}, {self.role!r})"

    def replace(self, files: Sequence[str], docs: Iterable[Any], *, commit: bool = True) -> None:
        """Nothing to do: each row was written with its terms (the server computed its BM25 vector)."""

    def commit(self) -> None:
        """Nothing to do: Milvus writes are visible when they return."""

    def clear(self) -> None:
        """Nothing to do: the rows (and their terms) go with their files."""

    def close(self) -> None:
        """Nothing to release."""

    def search(self, query: str, n: int, filt: SearchFilter | None = None, files: Sequence[str] | None = None,
               *, terms: Sequence[str] | None = None, weights: Mapping[str, float] | None = None
               ) -> list[tuple[str, float]]:
        """The ``n`` best rows for ``query`` as ``(id, bm25 score)``, best first (see the module docstring).

        ``weights`` (term -> weight, from question analysis): Milvus computes BM25 from query text, so a term is
        repeated ``round(weight)`` times (at least once) where tantivy multiplies its contribution."""
        words = _query_words(query, terms, weights)
        if not words or n <= 0 or (files is not None and not files):
            return []
        self.cols.flush()
        got = self.cols.call("search", self.cols.client.search, self.cols.rows, data=[" ".join(words)],
                             anns_field="sparse", limit=min(n, MAX_LIMIT), filter=filter_expr(self.role, filt, files),
                             search_params={"metric_type": "BM25"}, output_fields=[])
        out = _hits(got)
        out.sort(key=lambda r: (-round(r[1], 6), r[0]))
        return out

    def stats(self, terms: Iterable[str]) -> tuple[int, dict[str, int]]:
        """``(rows, {term: rows holding it})`` of this role.

        The document frequencies come from one BM25 search with a query per term: a row scores above 0 for a term
        exactly when it holds it, so each query's hit count is the term's frequency while it is under the limit
        (every row of the role, at most Milvus's largest). A term that reaches the limit is counted by
        ``TEXT_MATCH``, one count each. One count per term took about 0.6 s each on Milvus Lite at 250 files (most
        of a lexical query); the batched search about 0.15 s for a question's terms. The counts are kept until this
        client writes, as the rows' count is: a question's terms are searched once."""
        words = list(dict.fromkeys(terms))
        role = f"role == {literal(self.role)}"
        if self._rows is None or self._rows[0] != self.cols.writes:  # counted again after this client wrote
            self._rows = (self.cols.writes, self.count())
        n_rows = self._rows[1]
        if self._df[0] != self.cols.writes or len(self._df[1]) > _MAX_CACHED_TERMS:
            self._df = (self.cols.writes, {})
        known = self._df[1]
        todo = [t for t in words if t not in known]
        if todo and n_rows:
            self.cols.flush()
            limit = min(n_rows, MAX_LIMIT)
            got = self.cols.call("search", self.cols.client.search, self.cols.rows, data=todo, anns_field="sparse",
                                 limit=limit, filter=role, search_params={"metric_type": "BM25"}, output_fields=[])
            for t, hits in zip(todo, got):
                known[t] = len(hits)
            for t in todo if limit < n_rows else ():
                if known.get(t, 0) >= limit:
                    known[t] = self.cols.count(self.cols.rows, f"{role} and TEXT_MATCH(terms, {literal(t)})")
        return n_rows, {t: known.get(t, 0) for t in words}

    def ids(self) -> set[str]:
        return {r["id"] for r in self.cols.iterate(self.cols.rows, f"role == {literal(self.role)}", ["id"])}

    def count(self) -> int:
        """The rows of this role. The leaves are the sum of the complete files' leaf counts, read from their markers
        without a filter: Milvus Lite counts by a filter with a scan (26,000 leaves of 1,000 files: 1.9 s against
        0.05 s)."""
        if self.role == "leaf":
            return sum(int(r["n_leaves"]) for r in self.cols.query(self.cols.files, "", ["n_leaves"]))
        return self.cols.count(self.cols.rows, f"role == {literal(self.role)}")


class MilvusVectors:
    """The dense vectors of the rows: the interface of :class:`~llmc_splitters.retrieval.storage.chroma_vectors.VectorStore`. The
    span store writes each row with its vector (from the vector cache), so ``upsert`` and ``delete`` have nothing
    left to do."""

    embeds_itself = False
    written_with_rows = True
    """The index need not gather the vectors of the rows it writes for :meth:`upsert` (which ignores them)."""

    def __init__(self, cols: Collections) -> None:
        self.cols = cols

    def __repr__(self) -> str:
        return f"MilvusVectors({self.cols.uri!r}, collection={self.cols.name!r})"

    def open(self, embedding_name: str, *, reset: bool = False) -> None:
        """Nothing to do: the store checked the model when it opened the collection."""

    def describe(self) -> dict[str, Any]:
        return {"kind": "milvus", "uri": self.cols.uri, "collection": self.cols.name}

    def upsert(self, records: Sequence[Any]) -> None:
        """Nothing to do: each row was written with its vector."""

    def delete(self, *, ids: Sequence[str]) -> None:
        """Nothing to do: a file's rows (and vectors) are deleted with it."""

    def query(self, vector: list[float], n: int, *, role: str = "leaf", filt: SearchFilter | None = None,
              files: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``n`` nearest rows of ``role`` as ``(id, cosine similarity)``, best first."""
        if n <= 0 or (files is not None and not files):
            return []
        self.cols.flush()
        got = self.cols.call("search", self.cols.client.search, self.cols.rows, data=[vector], anns_field="dense",
                             limit=min(n, MAX_LIMIT), filter=filter_expr(role, filt, files),
                             search_params={"metric_type": "COSINE"}, output_fields=[])
        return [(i, float(s)) for i, s in ((h["id"], h["distance"]) for h in (got[0] if got else []))]

    def count(self) -> int:
        return self.cols.count(self.cols.rows, 'role != "parent"')


def hybrid_search(cols: Collections, query: str, vector: list[float], n: int, filt: SearchFilter | None,
                  files: Sequence[str] | None, rrf_k: int, *, weights: Mapping[str, float] | None = None,
                  lexical_weight: float = 0.5) -> list[tuple[str, float]]:
    """BM25 (over the question's weighted terms, as :meth:`MilvusLexical.search`) and the dense vectors fused by
    weighted RRF on the server, in one ``hybrid_search``, as ``(id, rrf score)``: the lexical list weighs
    ``lexical_weight`` and the dense one the rest, as the local fusion does. The weights are integer shares of
    each request (see :func:`_shares`): the scores are the local fusion's times a constant, so the order is its."""
    if n <= 0 or (files is not None and not files):
        return []
    mod = pymilvus()
    cols.flush()
    expr = filter_expr("leaf", filt, files)
    limit = min(n, MAX_LIMIT)
    words = _query_words(query, weights=weights)
    lexical, dense = _shares(lexical_weight) if words else (0, 1)
    reqs = [mod.AnnSearchRequest(data=[" ".join(words)], anns_field="sparse", param={"metric_type": "BM25"},
                                 limit=limit, expr=expr)] * lexical
    reqs += [mod.AnnSearchRequest(data=[vector], anns_field="dense", param={"metric_type": "COSINE"}, limit=limit,
                                  expr=expr)] * dense
    got = cols.call("search", cols.client.hybrid_search, cols.rows, reqs, mod.RRFRanker(rrf_k), limit=limit,
                    output_fields=[])
    return _hits(got)
