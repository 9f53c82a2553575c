"""Search: top-N from the lexical index and top-N from the vector store, fused, then one batched fetch by id.

Each ranked list is computed inside its engine with the filter applied (a path prefix or glob, a language, a kind:
see :mod:`.filters`); the candidates are then read from the span store by id in one query. A candidate the store
does not hold (a file being rewritten or removed, a dead run's leftovers) is dropped. Lists are fused by reciprocal
rank fusion (:mod:`.fuse`). What the confidence means: :mod:`.confidence`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...chunking.span import Span
from ...errors import ConfigurationError, IndexWarning, caller_stacklevel
from ..storage.filters import SearchFilter
from .confidence import confidence, measure
from .fusion import reciprocal_rank_fusion
from ..storage.parts import HasParts, IndexParts, parts_of
from .question import Question, analyze_question, weigh
from .ranking import FileRank, Ranking, rank
from .rules import message_shares
from ..storage.span_store import SpanRow, SpanStore

__all__ = ["Hit", "SearchResult", "confidence", "rank_texts", "search"]

_NAMED_FILES = 3
"""At most this many files a question names are searched, and a bare file name held by more files names none."""
_NAMED_SPANS = 20
"""How many spans of the named files join the candidates."""
_MESSAGE_SPANS = 30
"""How many spans best matching the messages a question quotes (by their word pairs) are weighed by the message
rule."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result.

    Attributes:
        span: The leaf span.
        score: Its ranking score (see :mod:`.ranking`); comparable within one query only.
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
        confidence: In [0, 1]: the probability that the first hit is in a file that answers the query (0 with
            no hits). On the public dev sets, held out: about 80% of code-search questions reach 0.6, and 83-84% of
            those have their first hit in a right file (46% under 0.6); of pasted bug reports 63% reach it, 79-82%
            of those right. See :mod:`~llmc_splitters.retrieval.search.confidence` and ``docs/retrieval.md#confidence``.
        summaries: In multi-stage mode, the ids of the summaries (files/classes) searched within.
        filter: The filter the search applied.
        signals: What the confidence is computed from (see
            :func:`~llmc_splitters.retrieval.search.confidence.confidence`): ``file_margin`` (how far the top hit's
            file stands out among the ranked files), and ``strength`` (lexical search: its BM25 score against the
            most the query could score) or ``cosine``, ``lexical_agreement`` and ``dense_agreement`` (hybrid: its
            similarity to the query, and whether each engine alone ranks its file first). Empty with no hits.
        files: The best distinct files, best first (:class:`~llmc_splitters.retrieval.search.ranking.FileRank`: path,
            score, the best span's lines and symbol), beyond the hits: up to 20 by default.
        shape: The question's shape (``symbol``, ``words`` or ``report``; see :mod:`.question`).
        words_in_index: Whether some term of the question occurs in the index (its lexical index). ``False``: no
            word of the question is in any indexed span, so there is nothing to match; a hybrid search then
            returns no hits (rather than the dense neighbours of words the code never uses) unless it was asked
            for them with ``dense_fallback=True``, and its hits are then matches by meaning alone.
    """

    query: str
    hits: tuple[Hit, ...]
    confidence: float
    summaries: tuple[str, ...] = ()
    filter: SearchFilter = field(default_factory=SearchFilter)
    signals: Mapping[str, float] = field(default_factory=dict)
    files: tuple[FileRank, ...] = ()
    shape: str = "words"
    words_in_index: bool = True


def _resolve(parts: IndexParts, filt: SearchFilter) -> tuple[SearchFilter, list[str] | None]:
    """The filter as the engines apply it, and the files it names when they cannot match it as a directory or a
    file themselves (a glob; a prefix that is not a whole directory name). ``src`` that names exactly the files
    under ``src/`` is the directory ``src/``."""
    if filt.path is None or filt.directory is not None:
        return filt, None
    store = parts.spans
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
    index: IndexParts | HasParts,
    query: str,
    k: int = 10,
    *,
    filt: SearchFilter | None = None,
    multi_stage: bool = False,
    summaries: int = 3,
    candidates: int = 100,
    rrf_k: int | None = None,
    ranking: Ranking | None = None,
    files: int = 20,
    dense_fallback: bool = False,
) -> SearchResult:
    """Find the leaves that best match ``query`` (see :meth:`~llmc_splitters.retrieval.CodeIndex.search`).

    ``index`` is the index's :class:`~llmc_splitters.retrieval.storage.parts.IndexParts` (or what holds them: the index).
    The question is read by :func:`~llmc_splitters.retrieval.search.question.analyze_question`, each engine returns up to
    ``candidates`` leaves, and :func:`~llmc_splitters.retrieval.search.ranking.rank` orders them under ``ranking`` (the
    default :class:`~llmc_splitters.retrieval.search.ranking.Ranking` when ``None``); ``rrf_k`` overrides its fusion
    constant. The result lists the ``files`` best files beside the ``k`` hits. When no term of the question occurs
    in the lexical index (:attr:`SearchResult.words_in_index`), the dense search runs only with ``dense_fallback``.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        msg = f"k must be a positive integer, got {k!r}"
        raise ConfigurationError(msg)
    ranking = ranking if ranking is not None else Ranking()
    if rrf_k is not None:
        ranking = replace(ranking, rrf_k=rrf_k)
    parts = parts_of(index)
    dense = parts.dense
    filt, paths = _resolve(parts, filt or SearchFilter())
    n = max(candidates, k)
    lex = parts.lexical("leaf")
    question = analyze_question(query) if ranking.question else _plain(query)
    weights = None
    if ranking.question:
        n_docs, df = lex.stats(question.terms) if question.shape == "report" else (0, {})
        weights = weigh(question, n_docs, df)
    in_index = _words_in_index(lex, weights, query)
    qvec = dense.embed_query(query) if dense is not None and (in_index or dense_fallback) else None
    lists: dict[str, list[tuple[str, float]]]
    if parts.hybrid is not None and qvec is not None and not multi_stage:
        # The engine fuses BM25 and the vectors itself (Milvus's hybrid_search): one list, ranked by the same rules.
        lists = {"hybrid": parts.hybrid(query, qvec, n, filt, paths, ranking.rrf_k, weights=weights,
                                        lexical_weight=ranking.fusion_weight(question.shape))}
    else:
        lists = {"lexical": lex.search(query, n, filt, paths, weights=weights)}
    if dense is not None and qvec is not None and "hybrid" not in lists:
        lists["dense"] = dense.vectors().query(qvec, n, role="leaf", filt=filt, files=paths)
    chosen: list[str] = []
    if multi_stage:
        chosen, local = _multi_stage(parts, query, qvec, n, filt, paths, summaries, ranking.rrf_k)
        lists.update(local)
    named = _named_files(parts.spans, question.named) if ranking.path else []
    if named and "lexical" in lists:
        # A file the question names joins the candidates by its best spans, scored by the same BM25.
        extra = lex.search(query, _NAMED_SPANS, filt, named, weights=weights)
        merged = dict(lists["lexical"])
        merged.update((i, s) for i, s in extra if i not in merged)
        lists["lexical"] = sorted(merged.items(), key=lambda item: -item[1])
    pasted = ranking.message and question.messages and question.message_share >= ranking.message_question
    made = _message_spans(lex, question, filt, paths) if pasted else []
    rows = parts.spans.get([*(i for r in lists.values() for i, _ in r), *made])
    lists = {name: _tie_order(r, rows) for name, r in lists.items()}
    spans = {rid: rows[rid].span for r in lists.values() for rid, _ in r}
    spans.update((rid, rows[rid].span) for rid in made if rid in rows)
    shares = _message_shares(lex, question, {rid: spans[rid].text for rid in made if rid in spans}, ranking)
    ranked, ranked_files = rank({name: [i for i, _ in r] for name, r in lists.items()},
                                {name: dict(r) for name, r in lists.items()}, spans, question, ranking,
                                frozenset(named), shares)
    hits = tuple(Hit(spans[r.id], r.score, pos, r.ranks) for pos, r in enumerate(ranked[:k]))
    # An engine-fused list has no per-list scores: no confidence (0).
    signals = {} if "hybrid" in lists else measure(parts, query, hits[0].span if hits else None,
                                                   lists.get("lexical", []), lists.get("dense"), spans, ranked_files)
    return SearchResult(query, hits, confidence(signals), tuple(chosen), filt, signals,
                        tuple(ranked_files[:files]), question.shape, in_index)


def _words_in_index(lex: Any, weights: Mapping[str, float] | None, query: str) -> bool:
    """Whether a term the lexical search looks for (``weights``' terms, else the query's) is in some document."""
    from ..terms import code_terms

    terms = set(weights) if weights else set(code_terms(query))
    return bool(terms) and any(lex.stats(terms)[1].values())


def _message_spans(lex: Any, question: Question, filt: SearchFilter, paths: Sequence[str] | None) -> list[str]:
    """The spans whose string templates best match the word pairs of the messages the question quotes (none when
    the lexical engine holds no phrases: another engine, or an index of an older layout, which is said)."""
    if not getattr(lex, "has_phrases", False):
        if getattr(lex, "outdated", False):
            msg = (f"the lexical index {lex.directory} predates message matching: the message this question quotes "
                   "is searched by its words only; a write run (llmc-splitters index PATH, index_directory) rebuilds "
                   "it from the index, without chunking or embedding again")
            warnings.warn(msg, IndexWarning, stacklevel=caller_stacklevel())
        return []
    pairs = list(dict.fromkeys(p for m in question.messages for p in m))
    return [rid for rid, _ in lex.search_phrases(pairs, _MESSAGE_SPANS, filt, paths)]


def _message_shares(lex: Any, question: Question, texts: Mapping[str, str], ranking: Ranking) -> dict[str, float]:
    """How much of a quoted message each span of ``texts`` makes (:func:`.rules.message_shares`)."""
    if not texts:
        return {}
    n_docs, df = lex.stats({p for m in question.messages for p in m}, field="phrases")
    return message_shares(question.messages, texts, n_docs, df, lex.holding, max_spans=ranking.message_spans,
                          evidence=ranking.message_evidence)


def _named_files(store: SpanStore, named: Sequence[str]) -> list[str]:
    """The indexed files a question names: a path is matched by its longest indexed suffix
    (``home/me/app/httpx/_client.py``: ``httpx/_client.py``), a bare file name by the files of that name when at
    most :data:`_NAMED_FILES` have it (``numberformat.py``, not ``__init__.py``)."""
    out: list[str] = []
    for path in named[:_NAMED_FILES]:
        parts = path.split("/")
        found = next(("/".join(parts[i:]) for i in range(len(parts)) if store.marker("/".join(parts[i:]))), None)
        if found is not None:
            out.append(found)
            continue
        pattern = "*/" + "".join(f"[{c}]" if c in "*?[]" else c for c in parts[-1])
        same_name = store.paths(glob=pattern)
        if 0 < len(same_name) <= _NAMED_FILES:
            out.extend(same_name)
    return list(dict.fromkeys(out))


def _plain(query: str) -> Question:
    """A question as read when question analysis is off: its shape and length only (adaptive fusion and the
    diversity still read them), no terms, names or paths."""
    read = analyze_question(query)
    return Question(query, read.shape, {}, words=read.words)


def _multi_stage(parts: IndexParts, query: str, qvec: list[float] | None, n: int, filt: SearchFilter,
                 files: Sequence[str] | None, summaries: int, rrf_k: int
                 ) -> tuple[list[str], dict[str, list[tuple[str, float]]]]:
    """Rank file/class summaries, then rank again the leaves inside the best ones."""
    dense = parts.dense
    sum_lists = [parts.lexical("summary").search(query, n, filt, files)]
    if dense is not None and qvec is not None:
        sum_lists.append(dense.vectors().query(qvec, n, role="summary", filt=filt, files=files))
    held = parts.spans.get([i for r in sum_lists for i, _ in r])
    sum_lists = [[(i, s) for i, s in r if i in held] for r in sum_lists]
    fused = reciprocal_rank_fusion([[i for i, _ in r] for r in sum_lists if r], k=rrf_k)
    chosen = [i for i, _ in fused[:summaries]]
    allowed: set[str] = set()
    paths: set[str] = set()
    for sid in chosen:
        target = held[sid].span.metadata.get("target_id")
        if isinstance(target, str):
            allowed.update(parts.spans.leaves_under(target))
            paths.add(held[sid].file)
    local: dict[str, list[tuple[str, float]]] = {}
    if allowed:
        wide = max(n, len(allowed))
        local["local_lexical"] = [r for r in parts.lexical("leaf").search(query, wide, filt, sorted(paths))
                                  if r[0] in allowed][:n]
        if dense is not None and qvec is not None:
            local["local_dense"] = [r for r in dense.vectors().query(qvec, wide, role="leaf", filt=filt,
                                                                    files=sorted(paths)) if r[0] in allowed][:n]
    return chosen, local


def rank_texts(index: IndexParts | HasParts, query: str, texts: Sequence[str], qvec: list[float] | None = None
               ) -> list[int]:
    """Indices of ``texts`` (parts of one hit) best match first, by the index's own scorers restricted to them:
    BM25 with the lexical index's document frequencies, fused by RRF with cosine similarity when the index is dense.

    ``index`` is the index's :class:`~llmc_splitters.retrieval.storage.parts.IndexParts` (or what holds them: the index).
    """
    from ..terms import code_terms

    parts = parts_of(index)
    terms = code_terms(query)
    lex = parts.lexical("leaf")
    n_docs, df = lex.stats(set(terms))
    docs = [code_terms(t) for t in texts]
    avgdl = (sum(len(d) for d in docs) / len(docs)) if docs else 1.0
    k1, b = 1.2, 0.75
    scores = []
    for d in docs:
        tf: dict[str, int] = {}
        for t in d:
            tf[t] = tf.get(t, 0) + 1
        score = 0.0
        for t in terms:
            f = tf.get(t, 0)
            if f:
                idf = math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / max(avgdl, 1e-9)))
        scores.append(score)
    lists = [sorted(range(len(texts)), key=lambda i: (-scores[i], i))]
    dense = parts.dense
    if dense is not None:
        qv = qvec if qvec is not None else dense.embed_query(query)
        vecs = dense.embedding.embed_documents([dense.view(t, {})[0] for t in texts])
        cos = [_cosine(qv, [float(x) for x in v]) for v in vecs]
        lists.append(sorted(range(len(texts)), key=lambda i: (-cos[i], i)))
    return [i for i, _ in reciprocal_rank_fusion(lists)]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b)) / (na * nb) if na and nb else 0.0
