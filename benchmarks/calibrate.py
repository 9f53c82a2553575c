"""Fit the confidence of :func:`llmc_splitters.retrieval.search.hits.confidence` on the tune packages, and check it.

    python -m benchmarks.calibrate        # signals of every tune and held-out query, the fit, the bucket tables

For every query of the project's retrieval benchmark (:mod:`benchmarks.corpus`), each package is indexed by
:class:`~llmc_splitters.retrieval.CodeRetriever` (leaves of 256 tokens) lexical-only and hybrid (the cached MiniLM),
and the top hit's signals are recorded with whether the top hit is (a piece of) the gold function. A logistic model
is fitted on the tune packages, per retriever: ``sigma(b + w . x)`` with ``x = (lexical margin, BM25 strength)``
and, for hybrid search, ``(dense margin, cosine)`` too (L2-regularised gradient descent, numpy only). The script
prints the weights to put in ``search._LEXICAL`` / ``search._HYBRID`` and writes, for the weights in the library
and for the fresh fit, the share of top-1 gold hits per confidence bucket (< 0.3, 0.3-0.6, >= 0.6) on the tune and
the held-out packages to ``benchmarks/results/calibration.md``.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from .corpus import CACHE_DIR, FULL, build_corpus
from .retriever import BUCKETS, CHUNK_TOKENS, _overlaps_gold
from .systems import _embedding_adapter

RESULTS = Path(__file__).resolve().parent / "results"
FEATURES = {"bm25": ("lexical_margin", "strength"), "hybrid": ("lexical_margin", "strength", "dense_margin", "cosine")}


def collect(split: str, dense: object) -> list[dict]:
    """The top hit's signals and confidence, and whether it is the gold function, for every query of a split."""
    from llmc_splitters.retrieval import CodeRetriever

    corpus = build_corpus(replace(FULL, splits=(split,)), log=lambda _m: None)
    out = []
    for pkg in corpus.packages:
        if not pkg.queries:
            continue
        for ret in ("bm25", "hybrid"):
            r = CodeRetriever(embedding=_embedding_adapter(dense) if ret == "hybrid" else None, max_tokens=CHUNK_TOKENS)
            r.index_texts({f.path: f.text for f in pkg.files})
            for q in pkg.queries:
                found = r.search(q.text, 10)
                top = found.hits[0].span if found.hits else None
                gold = bool(top and top.path == q.path and _overlaps_gold(q, top.start_line, top.end_line))
                out.append({"retriever": ret, "language": pkg.spec.language, "gold": gold,
                            "signals": dict(found.signals), "confidence": found.confidence})
            r.index.close()
        if hasattr(dense, "save"):
            dense.save()
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 4000, lr: float = 0.5) -> np.ndarray:
    """Logistic regression weights, intercept first."""
    x1 = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(x1.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-x1 @ w))
        w -= lr * (x1.T @ (p - y) + l2 * np.r_[0, w[1:]]) / len(y)
    return w


def buckets(conf: list[float], gold: list[bool]) -> list[dict]:
    out = []
    for lo, hi in BUCKETS:
        sel = [g for c, g in zip(conf, gold, strict=True) if lo <= c < hi]
        out.append({"bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}", "queries": len(sel),
                    "top1_gold": sum(sel) / len(sel) if sel else None})
    return out


def _cell(b: dict) -> str:
    share = b["top1_gold"]
    return f"{b['queries']}, " + ("-" if share is None else f"{share:.2f}")


def main() -> None:
    from .retrieval import Dense

    dense = Dense(CACHE_DIR / "embeddings-minilm.pkl")
    data = {split: collect(split, dense) for split in ("tune", "heldout")}
    lines = ["# Confidence calibration", "", f"`python -m benchmarks.calibrate` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: the share of queries whose top hit is (a piece "
             "of) the gold function, per confidence bucket. Fitted on the tune packages only.", ""]
    fits = {}
    for ret, names in FEATURES.items():
        rows = [r for r in data["tune"] if r["retriever"] == ret and r["signals"]]
        x = np.array([[r["signals"].get(n, 0.0) for n in names] for r in rows])
        y = np.array([r["gold"] for r in rows], dtype=float)
        w = fit(x, y)
        fits[ret] = [round(float(v), 2) for v in w]
        lines += [f"## {ret}", "", f"fresh fit (intercept, {', '.join(names)}): {fits[ret]}", "",
                  "| split | weights | <0.3 (n, top-1) | 0.3-0.6 (n, top-1) | >=0.6 (n, top-1) |", "|---|---|---|---|---|"]
        for split in ("tune", "heldout"):
            sel = [r for r in data[split] if r["retriever"] == ret]
            gold = [r["gold"] for r in sel]
            fresh = [float(1 / (1 + np.exp(-(w[0] + sum(wi * r["signals"].get(n, 0.0) for wi, n in zip(w[1:], names,
                                                                                                    strict=True))))))
                     if r["signals"] else 0.0 for r in sel]
            for label, conf in (("library", [r["confidence"] for r in sel]), ("fresh fit", fresh)):
                cells = [_cell(b) for b in buckets(conf, gold)]
                lines.append(f"| {split} | {label} | " + " | ".join(cells) + " |")
        lines.append("")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "calibration.json").write_text(json.dumps({"fits": fits, "queries": data}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
