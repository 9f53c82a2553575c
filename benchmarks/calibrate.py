"""Fit the confidence of :mod:`llmc_splitters.retrieval.search.confidence` on the public dev sets, and check it.

    python -m benchmarks.calibrate                  # search every dev question (both benchmarks, both modes), fit
    python -m benchmarks.calibrate --reuse          # refit from the signals collected last (no search)
    python -m benchmarks.calibrate --check          # the library's coefficients against a fresh fit of the results
    python -m benchmarks.calibrate --tuneset lexical,hybrid   # the shipped confidence on the ranking tune set (not fitted on)

What is collected (:data:`PARTS`): for every question of Semble's code-search benchmark (its 26 dev repositories,
:mod:`benchmarks.codesearch`) and of the SWE-bench Lite dev subset (30 sympy and 30 django instances,
:mod:`benchmarks.swebench`), lexical, hybrid with the default model (``code-static``) and hybrid with MiniLM, the
signals of the top hit of ``search(q, k=10)`` (:attr:`~llmc_splitters.retrieval.SearchResult.signals`) and whether
that hit is in a gold file (code search: a file of the question's relevant or secondary targets; SWE-bench: a non-test
file the gold patch edits). The code-search runs build or re-use their cached indexes (``$LLMC_BENCH_CACHE``); the
SWE-bench runs only read the instances whose indexes are cached (``--swebench-cache MODEL=DIR``: another cache for
one model's), since a sympy hybrid index takes tens of minutes to build.

What is fitted, per mode (hybrid: on the default model's rows only; MiniLM's are scored by those weights, a check
that they hold for another model): a logistic model over the features the library reads from the signals
(:func:`~llmc_splitters.retrieval.search.confidence.features`), L2-regularised (``L2``, not on the intercept),
by Newton's method (numpy only, deterministic). Two fits are reported:

* **held out by repository**: each repository's questions are scored by a model fitted on the other repositories'
  (26 code-search and 2 SWE-bench repositories, one fold each); AUC, precision and coverage at the
  threshold, and the share right per confidence bucket, per benchmark and mode, are computed on these scores;
* **final**: the coefficients fitted on all the dev data, which the library ships (``WEIGHTS`` in the module).

The per-question signals and labels (no question text) go to ``benchmarks/results/calibration-dev.json``, the
report to ``calibration-dev.md``; ``--check`` (and ``tests/test_confidence.py``) refit from that file and compare
with the library's coefficients.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmc_splitters.retrieval.embeddings import DEFAULT_BACKEND
from llmc_splitters.retrieval.search import confidence as C

RESULTS = Path(__file__).resolve().parent / "results"
DATA = RESULTS / "calibration-dev.json"
CACHE = Path(os.environ.get("LLMC_CALIBRATE_CACHE") or Path(os.environ.get("LLMC_BENCH_CACHE", Path.home() / ".cache" / "llmc-bench")) / "calibrate")
"""Where the collected signals are kept (``$LLMC_CALIBRATE_CACHE``, else ``calibrate`` in the benchmark cache)."""
MODES = ("lexical", "hybrid")
BENCHMARKS = ("codesearch", "swebench")
L2 = 1.0
THRESHOLD = 0.6
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
BUCKETS = ((0.0, 0.3), (0.3, 0.6), (0.6, 0.8), (0.8, 1.01))


# ---------------------------------------------------------------------------------------------------- collect

HYBRID_MODEL = DEFAULT_BACKEND
"""The model the hybrid weights are fitted for (the library's default)."""
OTHER_MODELS = ("minilm",)
"""Hybrid models checked with the shipped weights, never fitted on."""
PARTS = ("codesearch:lexical", f"codesearch:hybrid:{HYBRID_MODEL}", "codesearch:hybrid:minilm",
         "swebench:lexical", f"swebench:hybrid:{HYBRID_MODEL}", "swebench:hybrid:minilm")
"""What ``collect`` searches: benchmark, mode and (hybrid) model."""


def collect_codesearch(mode: str, embedding: str | None, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every code-search dev question in ``mode``: repository, category, label, signals, the library's confidence.
    The indexes are the cache's (built when missing)."""
    from benchmarks import codesearch

    cfg = codesearch.Config(log=log, embedding=embedding or "minilm")
    res = codesearch.run(mode=mode, cfg=cfg)
    return [{"benchmark": "codesearch", "mode": mode, "embedding": embedding, "repo": row["repo"],
             "category": row["category"], "gold": bool(got["top_in_gold"]), "confidence": got["confidence"],
             "signals": got["signals"]} for row, got in zip(res["rows"], res["returned"], strict=True)]


def collect_swebench(mode: str, embedding: str | None, log: Callable[[str], None],
                     cache: Path | None = None) -> list[dict[str, Any]]:
    """The SWE-bench dev-subset instances (30 + 30) in ``mode`` whose indexes are in the cache (``cache``: another
    ``$LLMC_BENCH_CACHE``): none is built here (a sympy hybrid index takes tens of minutes). Skipped ones are left
    out."""
    from benchmarks import swebench, swebench_sources

    spec = embedding or swebench.MINILM
    saved = swebench_sources.CACHE
    if cache is not None:
        swebench_sources.CACHE = cache / "swebench"
    try:
        chosen = [i for i in swebench.dev_instances() if _cached(i, mode, spec)]
        log(f"swebench {mode} {embedding or ''}: {len(chosen)} of {len(swebench.dev_instances())} instances cached")
        res = swebench.run(mode, instances=chosen, embedding=spec, log=log)
    finally:
        swebench_sources.CACHE = saved
    return [{"benchmark": "swebench", "mode": mode, "embedding": embedding, "repo": d["repo"], "category": "report",
             "gold": d["scores"]["hits_hit@1"] > 0, "confidence": d["confidence"], "signals": d["signals"]}
            for d in res["details"]]


def _cached(inst: Any, mode: str, spec: str) -> bool:
    """Whether an instance is skipped, or its index and its tree's are complete (then nothing is built)."""
    from benchmarks import swebench, swebench_sources as S

    src = S.resolve(inst, swebench.parse_patch(inst.patch))
    if isinstance(src, str):
        return True
    kind = swebench.index_kind(mode, spec)
    base = S.CACHE / "index" / f"{src.tree_key}-{kind}"
    return S.is_built(src, kind) and S._done(base).exists()


def collect_part(part: str, log: Callable[[str], None], swebench_caches: dict[str, Path]) -> list[dict[str, Any]]:
    """One of :data:`PARTS`."""
    bench, mode, *model = part.split(":")
    embedding = model[0] if model else None
    if bench == "codesearch":
        return collect_codesearch(mode, embedding, log)
    return collect_swebench(mode, embedding, log, swebench_caches.get(embedding or "lexical"))


def collect_tuneset(modes: Sequence[str], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every question of the project's ranking tune set (:mod:`benchmarks.ranking`) in ``modes``, for a check on
    questions the fit never saw (its indexes are built or brought up to date in ``$LLMC_BENCH_CACHE/tune``)."""
    from benchmarks import ranking

    rows = []
    for mode in modes:
        res = ranking.run_mode(ranking.load_tuneset(), mode, variants={"default": None}, replies=False, log=log,
                               reuse=True)
        rows += [{"benchmark": "tuneset-bug" if r["kind"] == "bug" else "tuneset-search", "mode": mode,
                  "repo": r["repo"], "category": r["kind"], "gold": r["top_in_gold"], "confidence": r["confidence"],
                  "signals": r["signals"]} for r in res["variants"]["default"]["rows"]]
    return rows


def render_tuneset(rows: Sequence[dict[str, Any]], command: str, date: str) -> str:
    """The library's confidence on the tune set (no fit): AUC, coverage and precision at the threshold."""
    lines = ["# Confidence on the ranking tune set (not fitted on)", "",
             f"`{command}` on {date}: the library's confidence as shipped. Label: the first hit of `search(q, k=50)` "
             "is in a gold file; search = the code-search questions (behaviour, architecture, symbol), bug = the bug "
             "reports.", "",
             "| set / mode | n | right | AUC | " + " | ".join(f">= {t} (coverage / precision)" for t in THRESHOLDS)
             + " |", "|---|---:|---:|---:|" + "---:|" * len(THRESHOLDS)]
    for bench in sorted({r["benchmark"] for r in rows}):
        for mode in MODES:
            sel = [r for r in rows if r["benchmark"] == bench and r["mode"] == mode]
            if not sel:
                continue
            s, g = [r["confidence"] for r in sel], [r["gold"] for r in sel]
            cells = [at_threshold(s, g, t) for t in THRESHOLDS]
            label = mode if mode == "lexical" else f"{mode} (minilm)"  # benchmarks.ranking searches with MiniLM
            lines.append(f"| {bench} / {label} | {len(sel)} | {_f(float(np.mean(g)))} | {_f(auc(s, g))} | "
                         + " | ".join(f"{_f(c['coverage'], 2)} / {_f(c['precision'], 2)}" for c in cells) + " |")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------------------- fit


def design(rows: Sequence[dict[str, Any]], mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The feature matrix (:func:`~llmc_splitters.retrieval.search.confidence.features`) and labels of ``rows``
    (all of ``mode``, each with signals: a question without them has confidence 0 and is left out of the fits)."""
    x = []
    for r in rows:
        got, v = C.features(r["signals"])
        if got != mode:
            msg = f"a {r['mode']} row of {r['repo']} has the signals of a {got} search: {sorted(r['signals'])}"
            raise ValueError(msg)
        x.append(v)
    return np.array(x, dtype=float).reshape(len(rows), len(C.FEATURES[mode])), np.array([r["gold"] for r in rows],
                                                                                        dtype=float)


def _fitted(rows: Sequence[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """The rows ``mode``'s weights are fitted on: every lexical row; the hybrid rows of :data:`HYBRID_MODEL`
    (rows without an ``embedding`` field are taken as such: files written before it was recorded)."""
    return [r for r in rows if r["mode"] == mode and r["signals"]
            and (mode == "lexical" or r.get("embedding", HYBRID_MODEL) == HYBRID_MODEL)]


def fit(x: np.ndarray, y: np.ndarray, l2: float = L2) -> np.ndarray:
    """Logistic regression weights, intercept first: Newton's method on the L2-penalised log-likelihood."""
    x1 = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(x1.shape[1])
    pen = np.full(x1.shape[1], l2)
    pen[0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x1 @ w)))
        grad = x1.T @ (p - y) + pen * w
        hess = (x1.T * (p * (1 - p))) @ x1 + np.diag(pen) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(w[0] + x @ w[1:])))


def held_out(rows: Sequence[dict[str, Any]], mode: str, l2: float = L2, drop: int | None = None,
             train: Sequence[dict[str, Any]] | None = None) -> np.ndarray:
    """Each row's score from a model fitted on ``train`` (default: :func:`_fitted` of ``rows``) without the rows of
    its repository (0 for a row without signals); ``drop``: a feature's column left out (zeroed)."""
    train = _fitted(rows, mode) if train is None else train
    tx, ty = design(train, mode)
    if drop is not None:
        tx[:, drop] = 0.0
    trepos = np.array([_fold(r) for r in train])
    scored = [i for i, r in enumerate(rows) if r["signals"]]
    x, _ = design([rows[i] for i in scored], mode)
    if drop is not None:
        x[:, drop] = 0.0
    repos = np.array([_fold(rows[i]) for i in scored])
    pred = np.zeros(len(scored))
    for repo in sorted(set(repos)):
        test = repos == repo
        keep = trepos != repo
        pred[test] = predict(fit(tx[keep], ty[keep], l2), x[test])
    out = np.zeros(len(rows))
    out[scored] = pred
    return out


def _fold(row: dict[str, Any]) -> str:
    return f"{row['benchmark']}:{row['repo']}"


def final_fit(rows: Sequence[dict[str, Any]], l2: float = L2) -> dict[str, list[float]]:
    """The coefficients the library ships, per mode (intercept first), rounded as written there."""
    return {mode: [round(float(v), 3) for v in fit(*design(_fitted(rows, mode), mode), l2=l2)] for mode in MODES
            if _fitted(rows, mode)}


# ---------------------------------------------------------------------------------------------------- measure


def auc(scores: Sequence[float], gold: Sequence[bool]) -> float | None:
    """The probability that a right answer scores above a wrong one (ties count half)."""
    s, g = np.asarray(scores, dtype=float), np.asarray(gold, dtype=bool)
    pos, neg = s[g], s[~g]
    if not len(pos) or not len(neg):
        return None
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def at_threshold(scores: Sequence[float], gold: Sequence[bool], t: float) -> dict[str, Any]:
    """Precision (share right) and coverage (share of questions) at and above ``t``, and the share right below."""
    s, g = np.asarray(scores, dtype=float), np.asarray(gold, dtype=bool)
    above = s >= t
    return {"coverage": float(above.mean()) if len(s) else None,
            "precision": float(g[above].mean()) if above.any() else None,
            "below": float(g[~above].mean()) if (~above).any() else None}


def buckets(scores: Sequence[float], gold: Sequence[bool]) -> list[dict[str, Any]]:
    s, g = np.asarray(scores, dtype=float), np.asarray(gold, dtype=bool)
    out = []
    for lo, hi in BUCKETS:
        sel = (s >= lo) & (s < hi)
        out.append({"bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}", "n": int(sel.sum()),
                    "right": float(g[sel].mean()) if sel.any() else None,
                    "mean": float(s[sel].mean()) if sel.any() else None})
    return out


def summary(rows: Sequence[dict[str, Any]], scores: Sequence[float], t: float = THRESHOLD) -> dict[str, Any]:
    gold = [r["gold"] for r in rows]
    return {"n": len(rows), "right": float(np.mean(gold)) if rows else None, "auc": auc(scores, gold),
            **at_threshold(scores, gold, t), "buckets": buckets(scores, gold)}


def groups(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """What is reported: (name, mode, rows) per mode and model, the ones fitted on first."""
    out = []
    for mode in MODES:
        models = [None] if mode == "lexical" else [HYBRID_MODEL, *sorted({r.get("embedding") for r in rows
                                                                         if r["mode"] == mode} - {HYBRID_MODEL})]
        for model in models:
            sel = [r for r in rows if r["mode"] == mode and (mode == "lexical"
                                                               or r.get("embedding", HYBRID_MODEL) == model)]
            if sel:
                name = mode if model is None else f"{mode} ({model}" + (")" if model == HYBRID_MODEL
                                                                         else ", not fitted on)")
                out.append((name, mode, sel))
    return out


def evaluate(rows: Sequence[dict[str, Any]], l2: float = L2) -> dict[str, Any]:
    """Per mode (and hybrid model) and benchmark: the held-out summary, the final fit's (in-sample for the rows it
    is fitted on) one, and precision and coverage at each of :data:`THRESHOLDS` (held out). A hybrid model other
    than :data:`HYBRID_MODEL` is scored by the weights fitted on that model's rows (of the other repositories)."""
    out: dict[str, Any] = {}
    for name, mode, sel in groups(rows):
        train = _fitted(rows, mode)
        ho = held_out(sel, mode, l2, train=train)
        final = fit(*design(train, mode), l2=l2)
        ins = np.array([float(predict(final, design([r], mode)[0])[0]) if r["signals"] else 0.0 for r in sel])
        for bench in (*BENCHMARKS, "all"):
            idx = [i for i, r in enumerate(sel) if bench in ("all", r["benchmark"])]
            if not idx:
                continue
            part = [sel[i] for i in idx]
            out[f"{bench}/{name}"] = {"held_out": summary(part, ho[idx]), "final": summary(part, ins[idx]),
                                      "thresholds": {t: at_threshold(ho[idx], [r["gold"] for r in part], t)
                                                     for t in THRESHOLDS}}
    return out


def ablation(rows: Sequence[dict[str, Any]], l2: float = L2) -> dict[str, dict[str, float | None]]:
    """Held-out AUC per mode (the rows fitted on) with each feature left out (its column zeroed), beside the full
    model's."""
    out: dict[str, dict[str, float | None]] = {}
    for mode in MODES:
        sel = _fitted(rows, mode)
        if not sel:
            continue
        gold = [r["gold"] for r in sel]
        out[mode] = {name: auc(held_out(sel, mode, l2, drop=j - 1 if j else None), gold)
                     for j, name in enumerate(("(none)", *C.FEATURES[mode]))}
    return out


# ----------------------------------------------------------------------------------------------------- report


def _f(x: float | None, d: int = 3) -> str:
    return "-" if x is None else f"{x:.{d}f}"


def render(results: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in results["counts"].items())
    lines = ["# Confidence on the public dev sets", "",
             f"`{results['command']}` on {results['date']}. Label: the first hit of `search(q, k=10)` is in a gold "
             "file. Held out: each repository scored by a model fitted on the other repositories' rows (leave one "
             f"repository out; folds: {results['folds']}). Final: the shipped weights, fitted on all the rows of its "
             "mode (in-sample for the rows they are fitted on); "
             "the library ships its coefficients. Precision = share right among the questions at or above "
             f"{THRESHOLD}; coverage = their share of all questions; below = share right under it.", "",
             f"Questions per benchmark, mode and model: {counts}. The hybrid weights are fitted on the default "
             f"model's ({HYBRID_MODEL}) rows only; a row marked *not fitted on* is another model's search scored "
             "by those weights (held out: fitted on the other repositories). SWE-bench: the instances whose indexes "
             "were in the cache (nothing is built by this script).", "",
             "| benchmark / mode | fit | n | right | AUC | coverage >= 0.6 | precision >= 0.6 | right < 0.6 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, fits in results["evaluation"].items():
        for label in ("held_out", "final"):
            s = fits[label]
            lines.append(f"| {key} | {label.replace('_', ' ')} | {s['n']} | {_f(s['right'])} | {_f(s['auc'])} | "
                         f"{_f(s['coverage'])} | {_f(s['precision'])} | {_f(s['below'])} |")
    lines += ["", "## Calibration (held out): questions and share right per confidence bucket", "",
              "| benchmark / mode | " + " | ".join(b[0] for b in _bucket_names()) + " |",
              "|---|" + "---:|" * len(BUCKETS)]
    for key, fits in results["evaluation"].items():
        cells = [f"{b['n']}: {_f(b['right'], 2)}" for b in fits["held_out"]["buckets"]]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += ["", "## Other thresholds (held out): coverage / precision at and above each", "",
              "| benchmark / mode | " + " | ".join(f">= {t}" for t in THRESHOLDS) + " |",
              "|---|" + "---:|" * len(THRESHOLDS)]
    for key, fits in results["evaluation"].items():
        cells = [f"{_f(c['coverage'], 2)} / {_f(c['precision'], 2)}" for c in fits["thresholds"].values()]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += ["", "## Final coefficients (intercept first)", ""]
    for mode, w in results["coefficients"].items():
        lines.append(f"- {mode}: " + ", ".join(f"{n} {v:+.3f}" for n, v in zip(("intercept", *C.FEATURES[mode]), w)))
    lines += ["", "## Held-out AUC with one feature left out", "", "| mode | feature left out | AUC |", "|---|---|---:|"]
    for mode, res in results["ablation"].items():
        lines += [f"| {mode} | {name} | {_f(v)} |" for name, v in res.items()]
    return "\n".join(lines) + "\n"


def _count(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str | None], int]:
    out: dict[tuple[str, str, str | None], int] = {}
    for r in rows:
        key = (r["benchmark"], r["mode"], r.get("embedding"))
        out[key] = out.get(key, 0) + 1
    return out


def _bucket_names() -> list[tuple[str]]:
    return [(f"{lo:.1f}-{min(hi, 1.0):.1f}",) for lo, hi in BUCKETS]


def check(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The coefficients where the library's differ from a fresh final fit (empty when they agree)."""
    fresh = final_fit(rows)
    return [f"{mode}: library {list(C.WEIGHTS[mode])}, fit {fresh[mode]}" for mode in MODES
            if not np.allclose(C.WEIGHTS[mode], fresh[mode], atol=1e-3)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reuse", action="store_true", help="refit from the collected signals (no search)")
    ap.add_argument("--check", action="store_true", help=f"compare the library's coefficients with a fit of {DATA.name}")
    ap.add_argument("--tuneset", metavar="MODES", help="instead: check the library's confidence on the ranking tune "
                                                       "set in these modes (lexical, hybrid or lexical,hybrid)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--parts", default=",".join(PARTS), help="what to search or reuse (default: all of them)")
    ap.add_argument("--swebench-cache", action="append", default=[], metavar="MODEL=DIR",
                    help="the $LLMC_BENCH_CACHE whose SWE-bench indexes a model's runs read (lexical=DIR for "
                         "lexical); default: $LLMC_BENCH_CACHE")
    ap.add_argument("--collect-only", action="store_true", help="search and keep the signals, do not fit")
    args = ap.parse_args(argv)
    env = [f"{k}={os.environ[k]}" for k in ("LLMC_BENCH_CACHE",) if os.environ.get(k)]
    command = " ".join([*env, "python -m benchmarks.calibrate", *(sys.argv[1:] if argv is None else argv)])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.tuneset:
        modes = args.tuneset.split(",")
        if not set(modes) <= set(MODES):
            ap.error(f"--tuneset takes {' or '.join(MODES)} (comma-separated), not {args.tuneset!r}")
        text = render_tuneset(collect_tuneset(modes, log=lambda m: print(m, file=sys.stderr)), command, date)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "calibration-tuneset.md").write_text(text)
        print(text)
        return
    if args.check:
        rows = json.loads(DATA.read_text())["rows"]
        diff = check(rows)
        print("\n".join(diff) or "the library's coefficients are the fit of " + DATA.name)
        raise SystemExit(1 if diff else 0)
    CACHE.mkdir(parents=True, exist_ok=True)
    caches = {}
    for given in args.swebench_cache:
        name, _, where = given.partition("=")
        caches[name] = Path(where)
    rows = []
    for part in args.parts.split(","):
        if part not in PARTS:
            ap.error(f"--parts takes {', '.join(PARTS)}, not {part!r}")
        cached = CACHE / f"dev-{part.replace(':', '-')}.json"
        if args.reuse:
            got = json.loads(cached.read_text())
        else:
            t0 = time.perf_counter()
            got = collect_part(part, lambda m: print(m, file=sys.stderr), caches)
            cached.write_text(json.dumps(got) + "\n")
            print(f"{part}: {len(got)} questions in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        rows += got
    if args.collect_only:
        return
    results = {"date": date, "command": command,
               "folds": ", ".join(f"{m} {len({_fold(r) for r in _fitted(rows, m)})}" for m in MODES),
               "counts": {f"{b}/{m}" + (f" ({e})" if e else ""): n for (b, m, e), n in sorted(
                   _count(rows).items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or ""))}, "l2": L2,
               "evaluation": evaluate(rows), "coefficients": final_fit(rows), "ablation": ablation(rows)}
    args.out.mkdir(parents=True, exist_ok=True)
    keep = ("benchmark", "mode", "embedding", "repo", "category", "gold", "signals")
    (args.out / "calibration-dev.json").write_text(json.dumps(
        {**{k: results[k] for k in ("date", "command", "l2", "coefficients", "counts")},
         "summary": {k: {f: {m: v for m, v in res[f].items() if m != "buckets"} for f in ("held_out", "final")}
                     for k, res in results["evaluation"].items()},
         "rows": [{k: r[k] for k in keep} for r in rows]}, indent=0) + "\n")
    (args.out / "calibration-dev.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
