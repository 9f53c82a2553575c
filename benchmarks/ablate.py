"""Every ranking rule on and off, on every retrieval benchmark: the public dev sets, the tune set, the docstring set.

    python -m benchmarks.ablate                                   # lexical and hybrid, all sets, every rule off in turn
    python -m benchmarks.ablate --modes lexical --sets codesearch,swebench
    python -m benchmarks.ablate --rules path,diversity --tag paths

Each variant is the library's default :class:`~llmc_splitters.retrieval.Ranking` with one rule off (``-path``), and
``plain`` has every rule off. Each benchmark is run through its own harness, with its own indexes re-used (a ranking
variant needs no re-index):

* ``codesearch``: Semble's code-search benchmark, dev repositories only (:mod:`benchmarks.codesearch`): NDCG@10 of the
  hits;
* ``swebench``: SWE-bench Lite file localisation, dev split (:mod:`benchmarks.swebench`): the first hit in a gold
  file (hit@1), a gold file among the first 10 hits (hit@10), and the gold functions shown in a 2,048-token reply;
* ``tune``: the project's tune set (:mod:`benchmarks.ranking`): NDCG@10 of the hits (span) and of the ranked files;
* ``docstring``: the docstring benchmark's tune packages (:mod:`benchmarks.retriever`): the whole function in a
  ``retrieve(q, k=4, max_context_tokens=1024)`` reply (full-hit).

Results: ``benchmarks/results/ablation[-TAG].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SETS = ("codesearch", "swebench", "tune", "docstring")
MODES = ("lexical", "hybrid")


def variants(rules: str) -> dict[str, Any]:
    """``default``, each of ``rules`` (``all``: every rule) off in turn, and ``plain`` (every rule off)."""
    from llmc_splitters.retrieval import Ranking

    names = Ranking.RULES if rules == "all" else tuple(r for r in rules.split(",") if r)
    out: dict[str, Any] = {"default": Ranking()}
    out.update({f"-{r}": Ranking().without(r) for r in names})
    out["plain"] = Ranking.plain()
    return out


def _codesearch(mode: str, ranking: Any, embedding: str) -> dict[str, float]:
    from benchmarks import codesearch

    res = codesearch.run(mode=mode, ranking=ranking, cfg=codesearch.Config(log=lambda _: None, embedding=embedding))
    return {"ndcg10": res["summary"]["overall"]["ndcg10"]}


def _swebench(mode: str, ranking: Any, embedding: str) -> dict[str, float]:
    from benchmarks import swebench

    s = swebench.run(mode, ranking=ranking, embedding=embedding, log=lambda _: None)["summary"]["all"]
    return {"hit@1": s["hits_hit@1"], "hit@10": s["hits_hit@10"], "recall@2048": s["recall@2048"]}


def _tune(mode: str, ranking: Any, embedding: str) -> dict[str, float]:  # noqa: ARG001 - the tune set's own
    from benchmarks import ranking as tune

    res = tune.run_mode(tune.load_tuneset(), mode, variants={"v": ranking}, replies=False, log=lambda _: None,
                        reuse=True)
    s = res["variants"]["v"]["summary"]["all"]["all"]
    return {"span_ndcg": s["span_ndcg"], "file_ndcg": s["file_ndcg"]}


_CORPUS: dict[str, Any] = {}


def _docstring(mode: str, ranking: Any, embedding: str) -> dict[str, float]:  # noqa: ARG001 - MiniLM's vectors
    from dataclasses import replace

    from benchmarks import retriever
    from benchmarks.corpus import CACHE_DIR, FULL, build_corpus

    if "tune" not in _CORPUS:
        _CORPUS["tune"] = build_corpus(replace(FULL, splits=("tune",)), log=lambda _: None)
    dense = None
    if mode == "hybrid":
        from benchmarks.retrieval import Dense

        dense = Dense(CACHE_DIR / "embeddings-minilm.pkl")
    res = retriever.run(_CORPUS["tune"], dense=dense, budgets=(1024,), log=lambda _: None, ranking=ranking)
    name = "bm25" if mode == "lexical" else "hybrid"
    cell = res["retrieval"][name]["1024"]["retriever k=4"]["macro"]
    return {"full_hit@1024": cell["full_hit"]}


RUNNERS: dict[str, Callable[[str, Any, str], dict[str, float]]] = {
    "codesearch": _codesearch, "swebench": _swebench, "tune": _tune, "docstring": _docstring}


def run(modes: tuple[str, ...], sets: tuple[str, ...], rules: str, log: Callable[[str], None] = print, *,
        embedding: str = "minilm") -> dict[str, Any]:
    """``{mode: {variant: {set: {metric: value}}}}`` for every variant of :func:`variants`; ``embedding``: the hybrid
    model of the code-search and SWE-bench runs."""
    out: dict[str, Any] = {}
    for mode in modes:
        out[mode] = {}
        for name, ranking in variants(rules).items():
            row: dict[str, Any] = {}
            for s in sets:
                t0 = time.perf_counter()
                row[s] = RUNNERS[s](mode, ranking, embedding)
                log(f"{mode:7} {name:12} {s:10} " + " ".join(f"{k} {v:.3f}" for k, v in row[s].items())
                    + f"  ({time.perf_counter() - t0:.0f} s)")
            out[mode][name] = row
    return out


def render(results: dict[str, Any]) -> str:
    """The Markdown report: per mode, one row per variant, one column per benchmark metric, with the change from the
    default beside each value."""
    lines = [f"# Ranking rules on and off ({results['date']})", "", f"`{results['command']}`; {results['machine']}.",
             "", "Each variant is the default ranking with one rule off; `plain` has every rule off. codesearch = "
             "Semble's code-search benchmark, dev repositories only (NDCG@10 of the hits); swebench = SWE-bench Lite "
             "dev split (sympy, django): hit@1/hit@10 of the hits' files, recall of the gold functions in a "
             "2,048-token reply; tune = the project's tune set (NDCG@10 of the hits, and of the ranked files); "
             "docstring = the docstring benchmark's tune packages (whole function in a k=4, 1,024-token reply). "
             f"Hybrid: code search and SWE-bench with `{results.get('embedding', 'minilm')}`, the tune and docstring sets "
             "with MiniLM.", ""]
    for mode, rows in results["modes"].items():
        default = rows.get("default", {})
        cols = [(s, m) for s, metrics in default.items() for m in metrics]
        lines += [f"## {mode}", "", "| variant | " + " | ".join(f"{s} {m}" for s, m in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for name, row in rows.items():
            cells = []
            for s, m in cols:
                v = row.get(s, {}).get(m)
                d = None if v is None or name == "default" else v - default[s][m]
                cells.append("-" if v is None else f"{v:.3f}" + ("" if d is None else f" ({d:+.3f})"))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--rules", default="all", help="rules to switch off one at a time (default: all)")
    ap.add_argument("--embedding", default="minilm",
                    help="the hybrid model of the code-search and SWE-bench runs (default: minilm, whose SWE-bench "
                         "indexes are built; the docstring set's hybrid is MiniLM's precomputed vectors)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    sets = tuple(s for s in args.sets.split(",") if s)
    bad = [x for x in (*modes, *sets) if x not in (*MODES, *SETS)]
    if bad:
        raise SystemExit(f"ablate: unknown mode or set {bad[0]!r}; modes: {', '.join(MODES)}; sets: {', '.join(SETS)}")
    t0 = time.perf_counter()
    results = {"modes": run(modes, sets, args.rules, embedding=args.embedding),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "command": " ".join(["python -m benchmarks.ablate", *(sys.argv[1:] if argv is None else argv)]),
               "machine": f"{platform.platform()}, Python {platform.python_version()}",
               "embedding": args.embedding, "seconds": round(time.perf_counter() - t0)}
    name = "ablation" + (f"-{args.tag}" if args.tag else "")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(results))
    print(f"wrote {args.out / name}.md ({results['seconds']} s)")


if __name__ == "__main__":
    main()
