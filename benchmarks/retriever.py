"""The parent-context retriever against plain chunk retrieval over the same spans and the same search.

    python -m benchmarks.retriever                    # tune packages, BM25 and hybrid (BM25 + MiniLM), 512/1024/2048
    python -m benchmarks.retriever --split heldout    # the held-out packages (report once, at the end)
    python -m benchmarks.retriever --no-dense         # BM25 only (no model)
    python -m benchmarks.retriever --milvus           # the same, each index held in Milvus Lite (MilvusStore)

The corpus, queries and metrics are those of ``python -m benchmarks.run`` (a function's first doc sentence as the
query, the whole function as gold; see :mod:`benchmarks.corpus` and :mod:`benchmarks.metrics`). Every package is
indexed once per retriever by :class:`~llmc_splitters.retrieval.CodeRetriever` (leaves of 256 cl100k tokens, as in
``benchmarks.run``); then, for each query and budget, four systems answer from that one index:

* ``retriever``: ``retrieve(q, k=budget // 256 * 2, max_context_tokens=budget)``, as ``benchmarks.run`` drives it;
* ``retriever fill``: ``retrieve(q, max_context_tokens=budget)`` with no ``k``: hits with their context while they fit;
* ``retriever k=4``: ``retrieve(q, k=4, max_context_tokens=budget)``;
* ``chunks k=4``: the top 4 hits of the same search, each as its bare span under a ``# path:start-end`` marker, taken
  in rank order while they fit the budget (what ``as_retriever(search_kwargs={"k": 4})`` gives a user);
* ``chunks fill``: the same, over the top 50 hits, filling the budget.

Reported per system, retriever (``bm25`` = lexical, ``hybrid``), budget and language (and their macro average):
full-hit (the whole gold function in the context), context-completeness (the whole function, its class header line
and every import line it uses; over the queries that need context), completeness on the queries whose function is
fully retrieved, line recall, the share of replies with a ``(truncated)`` piece, and tokens used. Plus the
calibration of the confidence: per confidence bucket, the share of queries whose top hit is (a piece of) the gold
function.

Results: ``benchmarks/results/retriever-<split>.json`` and ``.md`` (``retriever-<split>-milvus`` with ``--milvus``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import metrics as M
from .chunkers import count_tokens
from .corpus import CACHE_DIR, FULL, LANGUAGES, Corpus, Package, Query, SourceFile, build_corpus
from .systems import _embedding_adapter, result_pieces

RESULTS = Path(__file__).resolve().parent / "results"
BUDGETS = (512, 1024, 2048)
CHUNK_TOKENS = 256
SYSTEMS = ("retriever", "retriever fill", "retriever k=4", "chunks k=4", "chunks fill")
BUCKETS = ((0.0, 0.3), (0.3, 0.6), (0.6, 1.01))


@dataclass
class Row:
    system: str
    retriever: str
    budget: int
    language: str
    package: str
    qid: str
    full_hit: float
    completeness: float | None
    line_recall: float
    truncated: float
    tokens: int


@dataclass
class Top:
    retriever: str
    language: str
    confidence: float
    top_is_gold: bool
    signals: dict


def _overlaps_gold(q: Query, start_line: int, end_line: int) -> bool:
    """Whether a hit of lines ``start..end`` is (a piece of) the gold function, or the function is inside it."""
    lo, hi = max(start_line, q.start_line), min(end_line, q.end_line)
    if hi < lo:
        return False
    inter = hi - lo + 1
    return inter * 2 >= min(end_line - start_line + 1, q.end_line - q.start_line + 1)


def _plain(hits: list, files: dict[str, SourceFile], budget: int, marker_tokens: Callable[[object], int]
           ) -> list[M.Piece]:
    """Bare spans in rank order while they fit the budget (each under its marker line, counted)."""
    out: list[M.Piece] = []
    left = budget
    for h in hits:
        s = h.span
        f = files.get(s.path)
        if f is None:
            continue
        cost = marker_tokens(s)
        if cost > left:
            continue
        left -= cost
        a = f.line_range(s.start_line)[0]
        b = f.line_range(min(s.end_line, len(f.line_starts)))[1]
        out.append(M.Piece(s.path, a, b, cost))
    return out


def evaluate_package(pkg: Package, retriever: str, dense: object, budgets: tuple[int, ...],
                     milvus: Path | None = None) -> tuple[list[Row], list[Top]]:
    """``milvus``: a directory for a Milvus Lite file per package (the whole index on Milvus); else the local
    engines."""
    from llmc_splitters.retrieval import CodeRetriever
    from llmc_splitters.retrieval.context.expand import render_marker

    embedding = _embedding_adapter(dense) if retriever == "hybrid" else None
    store = None
    if milvus is not None:
        from llmc_splitters.retrieval import MilvusStore

        milvus.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() else "_" for c in pkg.spec.key)
        store = MilvusStore(str(milvus / f"{name}.db"), collection=retriever)
    r = CodeRetriever(embedding=embedding, max_tokens=CHUNK_TOKENS, max_context_tokens=max(budgets), store=store)
    r.index_texts({f.path: f.text for f in pkg.files})
    files = {f.path: f for f in pkg.files}

    def marker_tokens(s: object) -> int:
        return count_tokens(render_marker("# {path}:{start}-{end}", s.path, s.start_line, s.end_line) + "\n" +  # type: ignore[attr-defined]
                            (s.text if s.text.endswith("\n") else s.text + "\n"))  # type: ignore[attr-defined]

    rows: list[Row] = []
    tops: list[Top] = []
    for q in pkg.queries:
        f = files[q.path]
        found = r.search(q.text, 50)
        if found.hits:
            h = found.hits[0].span
            tops.append(Top(retriever, pkg.spec.language, found.confidence,
                            h.path == q.path and _overlaps_gold(q, h.start_line, h.end_line), dict(found.signals)))
        else:
            tops.append(Top(retriever, pkg.spec.language, found.confidence, False, dict(found.signals)))
        for b in budgets:
            contexts: dict[str, tuple[list[M.Piece], bool]] = {}
            res = r.retrieve(q.text, k=max(2, b // CHUNK_TOKENS * 2), max_context_tokens=b)
            contexts["retriever"] = (result_pieces(res, files), any(p.truncated for p in res.pieces))
            resf = r.retrieve(q.text, k=None, max_context_tokens=b)
            contexts["retriever fill"] = (result_pieces(resf, files), any(p.truncated for p in resf.pieces))
            res4 = r.retrieve(q.text, k=4, max_context_tokens=b)
            contexts["retriever k=4"] = (result_pieces(res4, files), any(p.truncated for p in res4.pieces))
            contexts["chunks k=4"] = (_plain(list(found.hits[:4]), files, b, marker_tokens), False)
            contexts["chunks fill"] = (_plain(list(found.hits), files, b, marker_tokens), False)
            for system, (ctx, truncated) in contexts.items():
                comp = M.completeness(f, q, ctx)
                rows.append(Row(system, retriever, b, pkg.spec.language, pkg.spec.name, q.qid,
                                float(M.full_hit(f, q, ctx)), None if comp is None else float(comp),
                                M.line_recall(f, q, ctx), float(truncated), sum(p.tokens for p in ctx)))
    r.index.close()
    if store is not None:
        store.close()
    return rows, tops


def aggregate(rows: list[Row]) -> dict:
    """``{retriever: {budget: {system: {language|"macro": {...}}}}}``."""
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault((row.retriever, row.budget, row.system, row.language), []).append(row)
    out: dict = {}
    for (ret, b, system, lang), rs in groups.items():
        comp = [x.completeness for x in rs if x.completeness is not None]
        comp_hit = [x.completeness for x in rs if x.completeness is not None and x.full_hit]
        cell = {
            "n": len(rs),
            "full_hit": sum(x.full_hit for x in rs) / len(rs),
            "completeness": sum(comp) / len(comp) if comp else None,
            "completeness_n": len(comp),
            "completeness_when_full_hit": sum(comp_hit) / len(comp_hit) if comp_hit else None,
            "line_recall": sum(x.line_recall for x in rs) / len(rs),
            "truncated": sum(x.truncated for x in rs) / len(rs),
            "tokens": sum(x.tokens for x in rs) / len(rs),
        }
        out.setdefault(ret, {}).setdefault(str(b), {}).setdefault(system, {})[lang] = cell
    for ret in out.values():
        for bud in ret.values():
            for langs in bud.values():
                macro: dict = {}
                for m in ("full_hit", "completeness", "completeness_when_full_hit", "line_recall", "truncated",
                          "tokens"):
                    vals = [c[m] for c in langs.values() if c.get(m) is not None]
                    macro[m] = sum(vals) / len(vals) if vals else None
                macro["n"] = sum(c["n"] for c in langs.values())
                langs["macro"] = macro
    return out


def calibration(tops: list[Top]) -> dict:
    """``{retriever: [{bucket, queries, top1_gold}]}``: the share of top hits that are the gold function, per bucket."""
    out: dict = {}
    for ret in sorted({t.retriever for t in tops}):
        rows = []
        for lo, hi in BUCKETS:
            sel = [t for t in tops if t.retriever == ret and lo <= t.confidence < hi]
            rows.append({"bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}", "queries": len(sel),
                         "top1_gold": sum(t.top_is_gold for t in sel) / len(sel) if sel else None})
        out[ret] = rows
    return out


def render(results: dict) -> str:
    agg = results["retrieval"]
    lines = [f"# Parent-context retriever vs plain chunks ({results['split']} packages)", "",
             f"`{results['command']}` on {results['date']} ({results['machine']}); {results['queries']} queries; "
             f"macro over {', '.join(results['languages'])}. Full-hit / completeness / completeness when the function "
             "is fully retrieved / replies with a truncated piece.", ""]
    for ret in agg:
        lines += [f"## {ret}", "", "| system | " + " | ".join(f"{b} full-hit | {b} compl. | {b} compl. if hit | "
                                                               f"{b} trunc." for b in agg[ret]) + " |",
                  "|---|" + "---:|" * (4 * len(agg[ret]))]
        for system in SYSTEMS:
            cells = []
            for b in agg[ret]:
                m = agg[ret][b].get(system, {}).get("macro", {})
                cells += [_f(m.get("full_hit")), _f(m.get("completeness")), _f(m.get("completeness_when_full_hit")),
                          _f(m.get("truncated"))]
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
        lines.append("")
        by_lang = agg[ret].get("1024", {})
        if by_lang:
            lines += ["Per language at 1,024 tokens (full-hit / completeness):", "",
                      "| system | " + " | ".join(results["languages"]) + " |",
                      "|---|" + "---:|" * len(results["languages"])]
            for system in SYSTEMS:
                cells = [f"{_f(by_lang.get(system, {}).get(lang, {}).get('full_hit'))} / "
                         f"{_f(by_lang.get(system, {}).get(lang, {}).get('completeness'))}" for lang in results["languages"]]
                lines.append(f"| {system} | " + " | ".join(cells) + " |")
            lines.append("")
    lines += ["## Confidence calibration", "", "Share of queries whose top hit is (a piece of) the gold function, by "
              "the query's confidence.", "", "| retriever | bucket | queries | top-1 is gold |", "|---|---|---:|---:|"]
    for ret, rows in results["calibration"].items():
        for row in rows:
            lines.append(f"| {ret} | {row['bucket']} | {row['queries']} | {_f(row['top1_gold'])} |")
    return "\n".join(lines) + "\n"


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def run(corpus: Corpus, *, dense: object, budgets: tuple[int, ...] = BUDGETS, log: Callable[[str], None] = print,
        milvus: Path | None = None) -> dict:
    rows: list[Row] = []
    tops: list[Top] = []
    retrievers = ("bm25", "hybrid") if dense is not None else ("bm25",)
    for pkg in corpus.packages:
        if not pkg.queries:
            continue
        t0 = time.time()
        for ret in retrievers:
            got, top = evaluate_package(pkg, ret, dense, budgets, milvus)
            rows += got
            tops += top
        if dense is not None and hasattr(dense, "save"):
            dense.save()
        log(f"  {pkg.spec.language:10s} {pkg.spec.key:32s} {len(pkg.queries):3d} queries {time.time() - t0:6.1f}s")
    return {"retrieval": aggregate(rows), "calibration": calibration(tops),
            "tops": [{"retriever": t.retriever, "language": t.language, "confidence": t.confidence,
                      "top_is_gold": t.top_is_gold, "signals": t.signals} for t in tops],
            "queries": len({(r.package, r.qid) for r in rows}),
            "languages": sorted({r.language for r in rows}, key=LANGUAGES.index)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("tune", "heldout"), default="tune")
    ap.add_argument("--no-dense", action="store_true")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--milvus", action="store_true",
                    help="hold each index in Milvus Lite (MilvusStore) instead of the local engines")
    args = ap.parse_args(argv)
    from dataclasses import replace

    config = replace(FULL, splits=(args.split,))
    corpus = build_corpus(config, languages=tuple(args.languages.split(",")), log=print)
    dense = None
    if not args.no_dense:
        from .retrieval import Dense

        dense = Dense(CACHE_DIR / "embeddings-minilm.pkl")
    budgets = tuple(int(b) for b in args.budgets.split(","))
    if args.milvus:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="llmc-retriever-milvus-") as tmp:
            results = run(corpus, dense=dense, budgets=budgets, milvus=Path(tmp))
    else:
        results = run(corpus, dense=dense, budgets=budgets)
    name = f"retriever-{args.split}" + ("-milvus" if args.milvus else "")
    results.update(split=args.split, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   command=" ".join(["python -m benchmarks.retriever", *(sys.argv[1:] if argv is None else argv)]),
                   machine=f"{platform.platform()}, Python {platform.python_version()}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
