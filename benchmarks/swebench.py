"""SWE-bench Lite file localisation on the dev split (sympy and django): a dev set for ranking work.

    python -m benchmarks.swebench --prepare                 # once: download the Django sdists (the only download)
    python -m benchmarks.swebench --mode lexical            # the 30 + 30 subset, BM25 only
    python -m benchmarks.swebench --mode both --tag baseline
    python -m benchmarks.swebench --mode lexical --ablate noise,files --dump /tmp/misses.jsonl
    python -m benchmarks.swebench --all                     # every dev instance (114 django, 77 sympy)
    python -m benchmarks.swebench --repos sympy/sympy       # one of the two repositories
    python -m benchmarks.swebench --mode both --cached-only # only instances whose indexes are built in both modes
    python -m benchmarks.swebench --mode hybrid --embedding code-static --limit 10   # another model's hybrid
    python -m benchmarks.swebench --mode hybrid --ablate path --rank 'lexical_weight={"symbol":0,"words":0,"report":0}'

Only the instances of ``sympy/sympy`` and ``django/django`` are read (the other repositories of SWE-bench Lite are
held out; see :mod:`benchmarks.swebench_data`). The subset is the ``--limit`` (default 30) instances of each
repository with the smallest sha1(instance_id). Where the sources come from and how the indexes are cached:
:mod:`benchmarks.swebench_sources`.

Per instance, the question is the ``problem_statement`` as is, asked through the public API of
:class:`~llmc_splitters.retrieval.CodeRetriever` (lexical: ``embedding=None``; hybrid: ``minilm``, or ``--embedding``: any spec ``resolve_embedding`` takes, whose
indexes are filed apart, under ``hybrid-<spec>``):
``search(q, k=10)`` and ``retrieve(q, max_context_tokens=2048)``. A ranking variant is given to the retriever
(``CodeRetriever(ranking=...)``, which both calls use; ``retrieve`` takes no ``ranking=`` of its own). Metrics, then
their means per repository and overall:

* ``hits_hit@k``: a gold file (a non-test file the gold patch edits) among the files of the first k hits;
* ``hits_mrr``: 1 / the rank of the first hit in a gold file (0 when none of the 10 is);
* ``files_hit@k``: a gold file among the first k of the ranked file list (``SearchResult.files``);
* ``recall@2048``: the share of gold definitions (what the patch's hunks touch in the pre-fix file) with at least
  half of their lines shown in the reply's pieces of the same file (:func:`benchmarks.ranking.shown`); averaged
  over the instances that have one (``n_recall``); ``module_level`` counts instances with a hunk outside every
  definition.

Results: ``benchmarks/results/swebench[-TAG].json`` and ``.md``; ``--dump FILE`` writes per instance (JSON lines)
the question's first lines, the gold files and definitions, the top-10 hits and the ranked files.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .ranking import Gold, ranked_files, shown, variants_for
from .variants import settings_from
from .swebench_data import DEV_REPOS, Instance, gold_definitions, gold_files, load_dev, parse_patch, subset
from .swebench_sources import build_index, data_text, is_built, open_retriever, prepare, resolve

RESULTS = Path(__file__).resolve().parent / "results"
K = 10
BUDGET = 2048
KS = (1, 5, 10)
METRICS = (*(f"hits_hit@{k}" for k in KS), "hits_mrr", *(f"files_hit@{k}" for k in KS), f"recall@{BUDGET}")
_EMBEDDINGS: dict[str, Any] = {}
MINILM = "minilm"


def dev_instances(limit: int | None = 30) -> list[Instance]:
    """The dev subset: ``limit`` instances of each dev repository (``None``: all of them)."""
    return subset(load_dev(data_text()), limit)


def embedding_for(mode: str, spec: str = MINILM) -> Any:
    """``None`` for lexical; for hybrid the model ``spec`` names (MiniLM by default), loaded once per process."""
    if mode == "lexical":
        return None
    if spec not in _EMBEDDINGS:
        from llmc_splitters.retrieval.embeddings import resolve_embedding

        _EMBEDDINGS[spec] = resolve_embedding(spec)
    return _EMBEDDINGS[spec]


def index_kind(mode: str, spec: str = MINILM) -> str:
    """What an index's name ends with: the mode, and for a hybrid index of a model other than MiniLM the model too
    (indexes of two models never replace each other; MiniLM's keep the name they were cached under)."""
    if mode == "lexical" or spec == MINILM:
        return mode
    return f"{mode}-" + "".join(c if c.isalnum() or c in ".-" else "_" for c in spec)


def score(gold: Sequence[str], defs: Sequence[Gold], result: Any, pieces: Sequence[Any]) -> dict[str, float]:
    """The metrics of one instance: its gold files and definitions, a ``search`` result and a reply's pieces."""
    golden = set(gold)
    paths = [h.span.path for h in result.hits[:K]]
    files = ranked_files(result)
    out: dict[str, float] = {}
    for k in KS:
        out[f"hits_hit@{k}"] = float(any(p in golden for p in paths[:k]))
        out[f"files_hit@{k}"] = float(any(p in golden for p in files[:k]))
    first = next((i for i, p in enumerate(paths) if p in golden), None)
    out["hits_mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    if defs:
        out[f"recall@{BUDGET}"] = shown(defs, pieces)
    return out


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Means and counts per repository and overall (``all``)."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    for r in rows:
        groups.setdefault(r["repo"], []).append(r)
    out = {}
    for name, rs in groups.items():
        scored = [r for r in rs if "skipped" not in r]
        g: dict[str, Any] = {"n": len(rs), "scored": len(scored), "skipped": len(rs) - len(scored),
                             "n_recall": sum(f"recall@{BUDGET}" in r for r in scored),
                             "module_level": sum(r["module_level"] > 0 for r in scored)}
        for m in METRICS:
            vals = [r[m] for r in scored if m in r]
            g[m] = sum(vals) / len(vals) if vals else None
        out[name] = g
    return out


def run(mode: str, ranking: Any = None, instances: Sequence[Instance] | None = None, *,
        embedding: str = MINILM, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every instance (default: the 30 + 30 subset) in ``mode`` (``lexical`` or ``hybrid``) with a ranking
    variant (a :class:`~llmc_splitters.retrieval.Ranking`; ``None``: the library's default); ``embedding``: the
    hybrid model's spec. Indexes are built
    once and reused from the cache, so a loop over variants costs only the questions.

    Returns ``{"mode", "summary", "rows", "details", "index_seconds", "seconds"}``: ``rows`` hold the metrics
    (or ``skipped`` with the reason), ``details`` what ``--dump`` writes (with the search's confidence and its
    signals, for :mod:`benchmarks.calibrate`)."""
    if mode not in ("lexical", "hybrid"):
        msg = f"mode must be lexical or hybrid, got {mode!r}"
        raise SystemExit(msg)
    chosen = dev_instances() if instances is None else list(instances)
    kind = index_kind(mode, embedding)
    model = embedding_for(mode, embedding)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    index_seconds = 0.0
    for inst in chosen:
        patches = parse_patch(inst.patch)
        src = resolve(inst, patches)
        if isinstance(src, str):
            log(f"{mode:7} skip {inst.id}: {src}")
            rows.append({"id": inst.id, "repo": inst.repo, "skipped": src})
            continue
        gold = gold_files(patches)
        defs = gold_definitions(patches, src.pre_fix)
        index_dir, spent = build_index(src, kind, model, log=log)
        index_seconds += spent
        r = open_retriever(index_dir, model, ranking)
        try:
            res = r.search(inst.question, k=K)
            reply = r.retrieve(inst.question, max_context_tokens=BUDGET)
        finally:
            r.index.close()
        row = {"id": inst.id, "repo": inst.repo, "source": src.how, "gold_files": len(gold),
               "gold_defs": len(defs.gold), "module_level": defs.module_level,
               **score(gold, defs.gold, res, reply.pieces)}
        if defs.unparsed:
            row["unparsed"] = defs.unparsed
        rows.append(row)
        details.append({
            "id": inst.id, "repo": inst.repo, "question": inst.question.strip().splitlines()[:5],
            "gold_files": gold, "gold_defs": [f"{g.path}:{g.start_line}-{g.end_line} {g.symbol}" for g in defs.gold],
            "hits": [f"{h.span.path}:{h.span.start_line}-{h.span.end_line}" for h in res.hits[:K]],
            "files": ranked_files(res)[:K],
            "scores": {m: row[m] for m in METRICS if m in row},
            "confidence": res.confidence, "signals": dict(res.signals),
        })
    return {"mode": mode, "embedding": None if model is None else embedding, "summary": aggregate(rows), "rows": rows, "details": details,
            "index_seconds": index_seconds, "seconds": time.perf_counter() - t0}


def built(inst: Instance, modes: Sequence[str], embedding: str = MINILM) -> bool:
    """Whether an instance's indexes are built in every mode (or it is skipped: it needs none)."""
    src = resolve(inst, parse_patch(inst.patch))
    return isinstance(src, str) or all(is_built(src, index_kind(m, embedding)) for m in modes)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def render(results: dict[str, Any]) -> str:
    """The Markdown report."""
    lines = [f"# SWE-bench Lite file localisation, dev split ({results['date']})", "",
             f"`{results['command']}`; {results['machine']}; wall time {results['wall_seconds']:.0f} s.", "",
             f"{results['instances']} instances ({', '.join(results['repos'])} only; per repository the "
             f"{results['limit'] or 'all'} with the smallest sha1(instance_id)). hits = the files of the first k "
             f"hits of `search(q, k={K})`; files = `SearchResult.files`; mrr = first hit in a gold file; "
             f"recall = gold definitions shown in `retrieve(q, max_context_tokens={BUDGET})` (means over the "
             "`n_recall` instances with one). Skipped: Django instances whose gold patch applies to no candidate "
             "sdist. See `benchmarks/swebench.py`.", ""]
    cols = METRICS
    head = "| mode | variant | repo | n | scored | n_recall | module_level | " + " | ".join(cols) + " |"
    for mode, variants in results["modes"].items():
        model = next(iter(variants.values())).get("embedding")
        lines += [f"## {mode}" + (f" ({model})" if model else ""), "", head, "|" + "---|" * (len(cols) + 7)]
        for name, res in variants.items():
            for repo, g in res["summary"].items():
                lines.append(f"| {mode} | {name} | {repo} | {g['n']} | {g['scored']} | {g['n_recall']} | "
                             f"{g['module_level']} | " + " | ".join(_f(g[c]) for c in cols) + " |")
        first = next(iter(variants.values()))
        lines += ["", f"Question time {first['seconds'] - first['index_seconds']:.0f} s, indexing "
                  f"{first['index_seconds']:.0f} s (0 when the indexes were cached).", ""]
    skipped = results["skipped"]
    if skipped:
        lines += ["## Skipped", ""] + [f"- {r['id']}: {r['skipped']}" for r in skipped] + [""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepare", action="store_true", help="download the Django sdists and export the sympy trees "
                                                           "of the chosen instances, then stop")
    ap.add_argument("--mode", choices=("lexical", "hybrid", "both"), default="both")
    ap.add_argument("--limit", type=int, default=30, help="instances per repository (default 30)")
    ap.add_argument("--all", action="store_true", help="every dev instance")
    ap.add_argument("--repos", default="", help=f"only these of {', '.join(DEV_REPOS)} (comma-separated)")
    ap.add_argument("--cached-only", action="store_true", help="only the instances whose indexes are built in "
                                                                "every mode asked (and those skipped)")
    ap.add_argument("--ablate", default="", help="ranking rules to switch off one at a time, or 'all'")
    ap.add_argument("--rank", action="append", default=[], metavar="NAME=VALUE",
                    help="a Ranking field (JSON value) set in every variant, e.g. lexical_weight={...} (repeatable)")
    ap.add_argument("--embedding", default=MINILM, help="the hybrid runs' model (any spec resolve_embedding takes; "
                                                         "default: MiniLM)")
    ap.add_argument("--tag", default="", help="results file suffix")
    ap.add_argument("--dump", type=Path, help="write per-instance details (JSON lines) here")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    limit = None if args.all else args.limit
    chosen = dev_instances(limit)
    if args.repos:
        repos = args.repos.split(",")
        unknown = [r for r in repos if r not in DEV_REPOS]
        if unknown:
            ap.error(f"--repos takes only the dev repositories ({', '.join(DEV_REPOS)}), not {unknown[0]}")
        chosen = [i for i in chosen if i.repo in repos]
    if args.prepare:
        prepare(chosen)
        return
    modes = ("lexical", "hybrid") if args.mode == "both" else (args.mode,)
    if args.cached_only:
        chosen = [i for i in chosen if built(i, modes, args.embedding)]
    variants = variants_for(args.ablate or None)
    if args.rank:
        from llmc_splitters.retrieval import Ranking

        values = settings_from(args.rank)
        variants = {name: replace(r or Ranking(), **values) for name, r in variants.items()}
    out: dict[str, dict[str, Any]] = {}
    details = []
    for m in modes:
        out[m] = {}
        for name, ranking in variants.items():
            res = run(m, ranking, chosen, embedding=args.embedding)
            details += [{"mode": m, "variant": name, **d} for d in res.pop("details")]
            out[m][name] = res
    first = next(iter(next(iter(out.values())).values()))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python -m benchmarks.swebench", *(sys.argv[1:] if argv is None else argv)]),
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
        "limit": limit, "instances": len(chosen), "repos": sorted({i.repo for i in chosen}), "skipped": [r for r in first["rows"] if "skipped" in r],
        "wall_seconds": time.perf_counter() - t0, "modes": out,
    }
    name = f"swebench-{args.tag}" if args.tag else "swebench"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(results))
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in details))
    print(render(results))


if __name__ == "__main__":
    main()
