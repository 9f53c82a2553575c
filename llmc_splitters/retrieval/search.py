"""Search: top-N from the lexical index and top-N from the vector store, fused, then one batched fetch by id.

Each ranked list is computed inside its engine with the filter applied (a path prefix or glob, a language, a kind:
see :mod:`.filters`); the candidates are then read from the span store by id in one query. A candidate the store
does not hold (a file being rewritten or removed, a dead run's leftovers) is dropped. Lists are fused by reciprocal
rank fusion (:mod:`.fuse`). See :func:`confidence` for what the confidence means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..chunking.span import Span
from ..errors import ConfigurationError
from .filters import SearchFilter
from .fuse import DEFAULT_RRF_K, reciprocal_rank_fusion
from .spanstore import SpanRow

if TYPE_CHECKING:
    from .index import CodeIndex

__all__ = ["Hit", "SearchResult", "confidence", "search"]

# Temperatures of the per-retriever softmax in the confidence.
_TAU_LEXICAL = 0.1
_TAU_DENSE = 0.05
_CONFIDENCE_TOP_N = 10


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
        confidence: In [0, 1]; see :func:`confidence`.
        summaries: In multi-stage mode, the ids of the summaries (files/classes) searched within.
        filter: The filter the search applied.
    """

    query: str
    hits: tuple[Hit, ...]
    confidence: float
    summaries: tuple[str, ...] = ()
    filter: SearchFilter = field(default_factory=SearchFilter)


def _resolve(index: CodeIndex, filt: SearchFilter) -> tuple[SearchFilter, list[str] | None]:
    """The filter as the engines apply it, and the files it names when they cannot match it as a directory or a
    file themselves (a glob; a prefix that is not a whole directory name). ``src`` that names exactly the files
    under ``src/`` is the directory ``src/``."""
    if filt.path is None or filt.directory is not None:
        return filt, None
    store = index.span_store
    if filt.is_glob:
        return filt, store.paths(glob=filt.path)
    if store.marker(filt.path) is not None:
        return filt, None  # one file: matched as a term
    under = store.count_paths(filt.path + "/")
    if under and store.count_paths(filt.path) == under:
        return replace(filt, path=filt.path + "/"), None
    return filt, store.paths(prefix=filt.path)


def _tie_order(ranked: list[tuple[str, float]], rows: Mapping[str, SpanRow]) -> list[tuple[str, float]]:
    """Drop candidates the span store does not hold; a run of equal scores goes in file order, whatever order the
    engine returned it in (rounded: engines compute in float32 or float64)."""
    kept = [(i, s) for i, s in ranked if i in rows]

    def key(item: tuple[str, float]) -> tuple[float, str, int, str]:
        sp = rows[item[0]].span
        return -round(item[1], 6), sp.path or "", sp.start_byte, item[0]

    return sorted(kept, key=key)


def search(
    index: CodeIndex,
    query: str,
    k: int = 10,
    *,
    filt: SearchFilter | None = None,
    multi_stage: bool = False,
    summaries: int = 3,
    candidates: int = 50,
    rrf_k: int = DEFAULT_RRF_K,
) -> SearchResult:
    """Find the leaves that best match ``query`` (see :meth:`~llmc_splitters.retrieval.CodeIndex.search`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        msg = f"k must be a positive integer, got {k!r}"
        raise ConfigurationError(msg)
    filt, files = _resolve(index, filt or SearchFilter())
    n = max(candidates, k)
    qvec = index.embed_query(query) if index.embedding is not None else None
    lists: dict[str, list[tuple[str, float]]] = {"lexical": index.lexical("leaf").search(query, n, filt, files)}
    if qvec is not None:
        lists["dense"] = index.vectors.query(qvec, n, role="leaf", filt=filt, files=files)
    chosen: list[str] = []
    if multi_stage:
        chosen, local = _multi_stage(index, query, qvec, n, filt, files, summaries, rrf_k)
        lists.update(local)
    rows = index.span_store.get([i for r in lists.values() for i, _ in r])
    lists = {name: _tie_order(r, rows) for name, r in lists.items()}
    names = [name for name, r in lists.items() if r]
    fused = reciprocal_rank_fusion([[i for i, _ in lists[name]] for name in names], k=rrf_k)
    positions = {name: {rid: pos for pos, (rid, _) in enumerate(lists[name], 1)} for name in names}
    hits = []
    for rank, (rid, score) in enumerate(fused[:k]):
        ranks = {name: positions[name][rid] for name in names if rid in positions[name]}
        hits.append(Hit(rows[rid].span, score, rank, ranks))
    conf = confidence(hits[0].span.id if hits else None, lists.get("lexical", []), lists.get("dense"))
    return SearchResult(query, tuple(hits), conf, tuple(chosen), filt)


def _multi_stage(index: CodeIndex, query: str, qvec: list[float] | None, n: int, filt: SearchFilter,
                 files: Sequence[str] | None, summaries: int, rrf_k: int
                 ) -> tuple[list[str], dict[str, list[tuple[str, float]]]]:
    """Rank file/class summaries, then rank again the leaves inside the best ones."""
    sum_lists = [index.lexical("summary").search(query, n, filt, files)]
    if qvec is not None:
        sum_lists.append(index.vectors.query(qvec, n, role="summary", filt=filt, files=files))
    held = index.span_store.get([i for r in sum_lists for i, _ in r])
    sum_lists = [[(i, s) for i, s in r if i in held] for r in sum_lists]
    fused = reciprocal_rank_fusion([[i for i, _ in r] for r in sum_lists if r], k=rrf_k)
    chosen = [i for i, _ in fused[:summaries]]
    allowed: set[str] = set()
    paths: set[str] = set()
    for sid in chosen:
        target = held[sid].span.metadata.get("target_id")
        if isinstance(target, str):
            allowed.update(index.span_store.leaves_under(target))
            paths.add(held[sid].file)
    local: dict[str, list[tuple[str, float]]] = {}
    if allowed:
        wide = max(n, len(allowed))
        local["local_lexical"] = [r for r in index.lexical("leaf").search(query, wide, filt, sorted(paths))
                                  if r[0] in allowed][:n]
        if qvec is not None:
            local["local_dense"] = [r for r in index.vectors.query(qvec, wide, role="leaf", filt=filt,
                                                                  files=sorted(paths)) if r[0] in allowed][:n]
    return chosen, local


def confidence(top: str | None, lexical: Sequence[tuple[str, float]],
               dense: Sequence[tuple[str, float]] | None) -> float:
    """How clearly the top hit beats the rest, in [0, 1].

    For each base retriever r (BM25, and dense if used) over its top ``N = 10`` leaves, scores are turned into a
    distribution ``p_r = softmax(x / tau_r)`` with ``x = bm25 / max(bm25)`` (``tau = 0.1``) or ``x = cosine``
    (``tau = 0.05``); the confidence is the mean over retrievers of ``p_r(top fused hit)`` (0 for a retriever that
    did not rank it).
    """
    if top is None:
        return 0.0
    parts: list[float] = []
    for ranked, tau, normalise in ((lexical, _TAU_LEXICAL, True), (dense, _TAU_DENSE, False)):
        if ranked is None:
            continue
        head = list(ranked[:_CONFIDENCE_TOP_N])
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

