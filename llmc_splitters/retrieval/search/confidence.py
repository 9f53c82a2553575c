"""How sure a search is of its top hit: the signals it measures and the confidence they give.

The confidence is the probability that the first hit is in a file that answers the question: a logistic model of
signals the search has already computed (no extra search), one per mode (lexical, hybrid). It was fitted on the
public dev sets: Semble's code-search benchmark (26 dev repositories, 519 questions) and the SWE-bench Lite dev
subset (54 sympy and django bug reports; hybrid: only the 2 whose indexes of the default model were built). The
hybrid weights are fitted for the default model (``code-static``). The label is whether the first hit is in a gold
file. The coefficients (:data:`WEIGHTS`) are reproduced by::

    python -m benchmarks.calibrate            # search every dev question, fit, report (benchmarks/results/calibration-dev.md)
    python -m benchmarks.calibrate --reuse    # refit from the signals collected last, without searching
    python -m benchmarks.calibrate --check    # WEIGHTS are the fit of benchmarks/results/calibration-dev.json

What the number is worth, held out by repository (each repository scored by weights fitted on the others): at or
above 0.6 stand 80% of the code-search questions in lexical search and 79% in hybrid search, and the first hit is in
a right file for 83% and 84% of them (46% and 45% under 0.6). Of the 54 bug reports (lexical) 63% reach 0.6, and 79%
of those are right (35% under it). AUC (right against wrong first hits): 0.77 lexical and 0.80 hybrid on code
search, 0.71 lexical on the bug reports. With ``minilm`` (not fitted on) the hybrid weights hold: AUC 0.79 on code
search and 0.86 on the reports, 85% and 82% right at or above 0.6. It is calibrated (about as many are right as it
says), and it is about the file, not the span. What it does not say: ``docs/retrieval.md#confidence``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ...chunking.span import Span
from ..storage.parts import IndexParts
from .ranking import FileRank
from .rules import file_of

__all__ = ["FEATURES", "WEIGHTS", "confidence", "features", "measure"]

FILE_TAU = 0.2
"""Temperature of the softmax over the first files' scores (each divided by the best) in ``file_margin``."""
FILE_TOP_N = 10
"""How many of the ranked files the ``file_margin`` softmax runs over."""
FEATURES: Mapping[str, tuple[str, ...]] = {
    "lexical": ("file_margin", "strength"),
    "hybrid": ("file_margin", "cosine", "lexical_agreement", "dense_agreement"),
}
"""The signals each mode's model reads, in the order of its weights."""
WEIGHTS: Mapping[str, tuple[float, ...]] = {
    "lexical": (-1.324, 3.824, 0.795),
    "hybrid": (-2.625, 3.82, 0.548, 0.715, 1.061),
}
"""Each mode's logistic weights, intercept first (``python -m benchmarks.calibrate``, the final fit)."""


def _share(scores: Sequence[float], index: int, tau: float) -> float:
    """Item ``index``'s probability in a softmax over ``scores`` each divided by the best, at temperature ``tau``."""
    best = max(scores)
    if best <= 0:
        return 1.0 / len(scores)
    ex = [math.exp((s / best - 1.0) / tau) for s in scores]
    return ex[index] / sum(ex)


def _file_rank(file: str, ranked: Sequence[tuple[str, float]], spans: Mapping[str, Span]) -> int:
    """The 1-based rank of ``file`` among the files of an engine's list, by their best span (0: not in it)."""
    seen: dict[str, None] = {}
    for rid, _ in ranked:
        f = file_of(spans[rid].path)
        if f not in seen:
            seen[f] = None
            if f == file:
                return len(seen)
    return 0


def measure(parts: IndexParts, query: str, top: Span | None, lexical: Sequence[tuple[str, float]],
            dense: Sequence[tuple[str, float]] | None, spans: Mapping[str, Span], files: Sequence[FileRank]
            ) -> dict[str, float]:
    """The signals :func:`confidence` combines, for the top hit (empty when there is none, or when no candidate
    matched the question's words: dense neighbours alone, see ``dense_fallback``).

    ``lexical`` and ``dense`` are the engines' own lists (id and score, best first), ``spans`` their spans by id,
    ``files`` the ranked files (best first). Signals (see :func:`confidence`): ``file_margin``, and ``strength``
    (lexical search) or ``cosine``, ``lexical_agreement`` and ``dense_agreement`` (with a dense list).
    """
    if top is None or not lexical or not files:
        return {}
    from ..terms import code_terms

    file = file_of(top.path)
    head = list(files[:FILE_TOP_N])
    at = next((i for i, f in enumerate(head) if file_of(f.path) == file), None)
    out = {"file_margin": _share([f.score for f in head], at, FILE_TAU) if at is not None else 0.0}
    if dense is not None:
        out["cosine"] = next((s for rid, s in dense if rid == top.id), 0.0)
        for name, ranked in (("lexical_agreement", lexical), ("dense_agreement", dense)):
            r = _file_rank(file, ranked, spans)
            out[name] = 1.0 / r if r else 0.0
        return out
    terms = set(code_terms(query))
    out["strength"] = 0.0
    if terms:
        n_docs, df = parts.lexical("leaf").stats(terms)
        idf = sum(math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms)
        best = next((sc for rid, sc in lexical if rid == top.id), 0.0)
        out["strength"] = min(best / (idf * 2.2), 1.0) if idf > 0 else 0.0
    return out


def features(signals: Mapping[str, float]) -> tuple[str, list[float]]:
    """The model a set of signals goes to (``lexical`` or ``hybrid``: a dense list was searched) and its inputs,
    in the order of :data:`FEATURES`."""
    mode = "hybrid" if "cosine" in signals else "lexical"
    return mode, [float(signals.get(name, 0.0)) for name in FEATURES[mode]]


def confidence(signals: Mapping[str, float]) -> float:
    """The probability that the top hit is in a file that answers the query, in [0, 1] (0 when nothing matched).

    A logistic model ``sigma(w0 + w . x)`` of the top hit's signals (:attr:`SearchResult.signals`), per mode:

    * ``file_margin``: the top hit's file's share of a softmax over the first 10 ranked files' scores, each divided
      by the best (temperature 0.2): 1 when its file stands alone, about 1/n when n files score alike;
    * ``strength``: the top hit's BM25 score over the most any document could score for the query (every term
      matched and saturated: ``sum idf * (k1 + 1)``), capped at 1;
    * hybrid only: ``cosine``, the top hit's cosine similarity to the query, and ``lexical_agreement`` and
      ``dense_agreement``: 1 / the rank of the top hit's file among the files of each engine's own list (1 when that
      engine alone puts the same file first; 0 when the file is not among its candidates).

    Every weight is positive: the confidence rises with each signal. The weights are in :data:`WEIGHTS`.
    """
    if not signals:
        return 0.0
    mode, x = features(signals)
    w = WEIGHTS[mode]
    z = w[0] + sum(wi * xi for wi, xi in zip(w[1:], x, strict=True))
    return 1.0 / (1.0 + math.exp(-z))
