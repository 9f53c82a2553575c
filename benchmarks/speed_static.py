"""Hybrid at the speed of lexical (issue 39): our index, lexical and hybrid with the default model, beside Semble's,
cold, on the same trees, in one run.

    python -m benchmarks.speed_static                       # six dev repositories, 3 cold builds each, + 4,000 files
    python -m benchmarks.speed_static --repeat 1 --scale 0 --repos click,chi     # a smoke run

**Trees**: six dev repositories of the code-search benchmark (click, flask, axios on its npm stand-in, express,
bats-core, chi), exported by :mod:`benchmarks.codesearch` into ``$LLMC_BENCH_CACHE/codesearch/src``. Semble's walker
says which files it indexes by default (its code extensions and ignore rules, :mod:`benchmarks.speed_semble`); exactly
those are copied into a work directory, so both systems read the same files.

**Cold index** of each tree by each system, in a fresh process into an empty index (Semble: an empty
``SEMBLE_CACHE_LOCATION``), ``--repeat`` times, interleaved (tree by tree, system by system, so that a change in the
machine's load falls on all of them): ours is the whole command a user runs, ``llmc-splitters index TREE --db DB
--embedding SPEC --json -q``, lexical (``none``), hybrid with the default model (``DEFAULT_BACKEND``), and hybrid with
``minilm`` for reference (its one-time ONNX export made before); Semble's is ``SembleIndex.from_path`` and ``save``
(what ``semble search`` does the first time) on a stand-in model of its model's shape, in its own venv. Each
measured as the process's wall time and CPU seconds (user + system of it and the children it waited for, from
``os.wait4``), and its peak RSS; also the seconds inside the process (ours: the summary's ``walk_seconds +
index_seconds``; Semble's: build + save). Per tree the median of the repeats; the totals add the medians.

**Search p50**: one process per system opens (Semble: builds) every tree's index and searches each of the tree's
benchmark questions once, ``k=10``, after one warm-up search: the median over all questions (ours:
``CodeRetriever(path=DB, embedding=<the index's model>).search(q, k=10)``; Semble: ``index.search(q, top_k=10)``, its
default hybrid).

**Fresh-process query**: ``llmc-splitters query Q --db DB --json`` on each tree's default-hybrid index (one question a
tree), and on a 4,000-file generated tree (``--scale``; :func:`benchmarks.query_path.measure_query_rows` with the
real model: the lexical and hybrid indexes, 5 questions, the MCP server's first search): wall, CPU and peak RSS.

The machine is shared: the load average is recorded at the start and the end of each part; CPU seconds are less
sensitive to it than wall time. Results: ``benchmarks/results/speed_static.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from . import query_path as Q

RESULTS = Path(__file__).resolve().parent / "results"
HERE = Path(__file__).resolve().parent
REPOS = ("click", "flask", "axios", "express", "bats-core", "chi")
SEMBLE_PYTHON = Path("/work/venvs/semble/bin/python")
# potion-code-16M-v2, Semble's default model: 16.2M parameters at 256 dimensions.
SEMBLE_SHAPE = (63_000, 256)
K = 10

_SEARCH = textwrap.dedent(
    """
    import json, sys, time
    from llmc_splitters.retrieval import CodeIndex, CodeRetriever
    from llmc_splitters.retrieval.embeddings import resolve_embedding
    job = json.loads(open(sys.argv[1]).read())
    out = {}
    for name, db in job["dbs"].items():
        rec = CodeIndex.recorded(db)["embedding"]
        emb = None if rec == "none" else resolve_embedding(rec)
        r = CodeRetriever(path=db, embedding=emb)
        qs = job["queries"][name]
        r.search(qs[-1], k=job["k"])
        times = []
        for q in qs:
            t0 = time.perf_counter()
            r.search(q, k=job["k"])
            times.append(time.perf_counter() - t0)
        r.index.close()
        out[name] = times
    print(json.dumps(out))
    """
)


_IMPORT_CHROMA = "import sys\nif sys.argv[1] == 'hide': sys.modules['rfc3987_syntax'] = None\nimport chromadb\n"


def chroma_import() -> dict[str, float]:
    """CPU seconds of ``import chromadb`` in a fresh process (median of 3), as this venv has it and with
    ``rfc3987_syntax`` hidden: jsonschema compiles that package's grammars on import when it is installed (jupyter's
    ``jsonschema[format-nongpl]`` brings it; no dependency of ours does), the larger part of chromadb's import here."""
    out = {}
    for how in ("as installed", "hide"):
        cpus = []
        for _ in range(3):
            Q._run([sys.executable, "-c", _IMPORT_CHROMA, how])
            cpus.append(Q._LAST_CPU[0])
        out["without rfc3987_syntax" if how == "hide" else how] = statistics.median(cpus)
    baseline = []
    for _ in range(3):
        Q._run([sys.executable, "-c", "pass"])
        baseline.append(Q._LAST_CPU[0])
    out["python alone"] = statistics.median(baseline)
    return out


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _log(msg: str) -> None:
    print(msg, flush=True)


def _semble(job: dict, work: Path, python: Path, env: dict[str, str] | None = None) -> tuple[dict, float, float, float]:
    """Run the Semble driver on ``job``: ``(answer, wall s, CPU s, peak MB)``."""
    path = work / "semble-job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    out, wall, peak = Q._run([str(python), str(HERE / "speed_semble.py"), str(path)],
                             env={"HF_HUB_OFFLINE": "1", **(env or {})})
    return json.loads(out), wall, Q._LAST_CPU[0], peak


def trees(names: list[str], work: Path, python: Path) -> tuple[dict[str, Path], dict[str, list[str]], dict]:
    """The work trees (the files Semble indexes, copied), each tree's benchmark questions, and what each tree is."""
    from .codesearch import Config, prepare

    prepared = {p.spec.name: p for p in prepare(names, Config(log=lambda _: None))}
    missing = [n for n in names if prepared[n].root is None]
    if missing:
        raise SystemExit(f"speed_static: no source tree for {missing}: {[prepared[n].skip for n in missing]}")
    answer, *_ = _semble({"mode": "files", "roots": {n: str(prepared[n].root) for n in names}}, work, python)
    out, about = {}, {}
    for name in names:
        dest = work / "trees" / name
        if not dest.is_dir():
            for rel in answer["files"][name]:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(prepared[name].root / rel, dest / rel)
        out[name] = dest
        p = prepared[name]
        about[name] = {"files": len(answer["files"][name]),
                       "bytes": sum(f.stat().st_size for f in dest.rglob("*") if f.is_file()),
                       "source": p.standin.label if p.standin is not None else p.spec.revision[:12]}
    return out, {n: [t.query for t in prepared[n].tasks] for n in names}, about


def cold_ours(tree: Path, db: Path, spec: str) -> dict[str, Any]:
    shutil.rmtree(db, ignore_errors=True)
    out, wall, peak = Q._run(Q._cli("index", str(tree), "--db", str(db), "--embedding", spec, "--json", "-q"))
    summary = json.loads(out)
    return {"wall_s": wall, "cpu_s": Q._LAST_CPU[0], "peak_mb": peak, "files": summary["files"],
            "inside_s": summary["walk_seconds"] + summary["index_seconds"], "embedded": summary["embedded"],
            "spans": summary["leaf_spans"], "embedding": summary["embedding"]}


def cold_semble(tree: Path, model_dir: Path, work: Path, python: Path) -> dict[str, Any]:
    cache = work / "semble-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    got, wall, cpu, peak = _semble({"mode": "build", "root": str(tree), "model_dir": str(model_dir)}, work, python,
                                   {"SEMBLE_CACHE_LOCATION": str(cache)})
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak, "inside_s": got["build_s"] + got["save_s"],
            "build_s": got["build_s"], "import_s": got["import_s"], "chunks": got["chunks"],
            "version": got["semble_version"]}


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    row = dict(runs[0])
    for key in ("wall_s", "cpu_s", "peak_mb", "inside_s", "build_s", "import_s"):
        if key in row:
            row[key] = statistics.median(r[key] for r in runs)
    row["runs"] = len(runs)
    return row


def measure(names: list[str], work: Path, *, repeat: int, scale: int, minilm: bool,
            python: Path = SEMBLE_PYTHON) -> dict[str, Any]:
    from llmc_splitters.retrieval.embeddings import DEFAULT_BACKEND

    res: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": _load(),
                           "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
                                      f"{platform.python_version()}", "default": DEFAULT_BACKEND,
                           "repeat": repeat}
    roots, queries, res["trees"] = trees(names, work, python)
    from llmc_splitters.retrieval.embeddings.minilm import bundled_minilm_path

    model_dir = work / "semble-standin"
    tokenizer = Path(bundled_minilm_path()) / "tokenizer.json"
    _semble({"mode": "model", "model_dir": str(model_dir), "tokenizer": str(tokenizer), "rows": SEMBLE_SHAPE[0],
             "dim": SEMBLE_SHAPE[1]}, work, python)
    res["semble_model"] = {"rows": SEMBLE_SHAPE[0], "dim": SEMBLE_SHAPE[1],
                           "mb": sum(f.stat().st_size for f in model_dir.rglob("*") if f.is_file()) / 1e6}
    systems = {"lexical": "none", "hybrid": DEFAULT_BACKEND, **({"hybrid-minilm": "minilm"} if minilm else {})}
    if minilm:
        Q._run(Q._cli("index", "--prepare-model", "--embedding", "minilm"))  # the one-time export is not an index's
    runs: dict[str, dict[str, list]] = {s: {n: [] for n in names} for s in (*systems, "semble")}
    _log(f"cold builds: {len(names)} trees x {len(runs)} systems x {repeat} (load {_load()})")
    for rep in range(repeat):
        for name in names:
            for system, spec in systems.items():
                runs[system][name].append(cold_ours(roots[name], work / "db" / f"{name}-{system}", spec))
            runs["semble"][name].append(cold_semble(roots[name], model_dir, work, python))
            _log(f"  {rep + 1}/{repeat} {name:10}" + "".join(
                f"  {s} {runs[s][name][-1]['wall_s']:.2f}s/{runs[s][name][-1]['cpu_s']:.2f}cpu" for s in runs))
    res["load_after_builds"] = _load()
    res["cold"] = {s: {n: _median_row(r) for n, r in by.items()} for s, by in runs.items()}
    res["totals"] = {s: {k: sum(row[k] for row in by.values()) for k in ("wall_s", "cpu_s", "inside_s")}
                     for s, by in res["cold"].items()}
    res["search"] = {}
    for system in systems:
        job = work / "search-job.json"
        job.write_text(json.dumps({"dbs": {n: str(work / "db" / f"{n}-{system}") for n in names},
                                   "queries": queries, "k": K}))
        out, _, peak = Q._run([sys.executable, "-c", _SEARCH, str(job)])
        res["search"][system] = _times(json.loads(out), peak)
    got, _, _, peak = _semble({"mode": "search", "roots": {n: str(roots[n]) for n in names}, "queries": queries,
                               "model_dir": str(model_dir), "k": K}, work, python,
                              {"SEMBLE_CACHE_LOCATION": str(work / "semble-cache-search")})
    res["search"]["semble"] = _times(got["times"], peak)
    _log("search p50 ms: " + ", ".join(f"{s} {v['p50_ms']:.2f}" for s, v in res["search"].items()))
    fresh = []
    for name in names:
        q = queries[name][0]
        Q._run(Q._cli("query", q, "--db", str(work / "db" / f"{name}-hybrid"), "--json"))  # byte-code, page cache
        out, wall, peak = Q._run(Q._cli("query", q, "--db", str(work / "db" / f"{name}-hybrid"), "--json"))
        assert json.loads(out)["mode"] == "hybrid", name
        fresh.append({"tree": name, "wall_s": wall, "cpu_s": Q._LAST_CPU[0], "peak_mb": peak})
    res["fresh_query"] = {"rows": fresh, "median_s": statistics.median(r["wall_s"] for r in fresh),
                          "median_cpu_s": statistics.median(r["cpu_s"] for r in fresh),
                          "max_peak_mb": max(r["peak_mb"] for r in fresh)}
    _log(f"fresh hybrid query: median {res['fresh_query']['median_s']:.2f} s, "
         f"peak {res['fresh_query']['max_peak_mb']:.0f} MB")
    res["chroma_import_cpu_s"] = chroma_import()
    if scale:
        res["load_before_scale"] = _load()
        res["scale"] = Q.measure_query_rows(scale, work, real_model=True, log=_log)
    res["load_end"] = _load()
    return res


def _times(by_tree: dict[str, list[float]], peak: float) -> dict[str, Any]:
    times = sorted(t for ts in by_tree.values() for t in ts)
    return {"p50_ms": 1000 * statistics.median(times), "p90_ms": 1000 * times[int(0.9 * (len(times) - 1))],
            "n": len(times), "peak_mb": peak}


def targets(res: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``(target, measured, met)`` for each of issue 39's speed targets."""
    t, s = res["totals"], res["search"]
    out = []
    for what, key in (("wall", "wall_s"), ("CPU", "cpu_s")):
        r = t["hybrid"][key] / t["lexical"][key]
        out.append((f"hybrid `index` within 2x of lexical ({what})",
                    f"{r:.2f}x ({t['hybrid'][key]:.1f} s / {t['lexical'][key]:.1f} s)", r <= 2))
        r = t["hybrid"][key] / t["semble"][key]
        out.append((f"hybrid `index` within 3x of Semble's cold index ({what})",
                    f"{r:.2f}x ({t['hybrid'][key]:.1f} s / {t['semble'][key]:.1f} s)", r <= 3))
    sc = res.get("scale", {})
    for what, key in (("wall", "seconds"), ("CPU", "cpu_seconds")):
        if f"lexical_build_{key}" in sc and f"hybrid_build_{key}" in sc:
            lex, hyb = sc[f"lexical_build_{key}"], sc[f"hybrid_build_{key}"]
            out.append((f"hybrid `index` within 2x of lexical, {sc['files']:,} files ({what})",
                        f"{hyb / lex:.2f}x ({hyb:.1f} s / {lex:.1f} s)", hyb <= 2 * lex))
    r = s["hybrid"]["p50_ms"] / s["lexical"]["p50_ms"]
    out.append(("hybrid search p50 within 2x of lexical",
                f"{r:.2f}x ({s['hybrid']['p50_ms']:.2f} ms / {s['lexical']['p50_ms']:.2f} ms)", r <= 2))
    rows = [("six trees", res["fresh_query"]["median_s"], res["fresh_query"]["max_peak_mb"])]
    if "scale" in res:
        sc = res["scale"]
        rows.append((f"{sc['files']:,} files", sc["hybrid_query_seconds"], sc["hybrid_query_peak_mb"]))
    for where, secs, mb in rows:
        out.append((f"fresh-process hybrid `query` <= 0.5 s and <= 200 MB ({where})", f"{secs:.2f} s, {mb:.0f} MB",
                    secs <= 0.5 and mb <= 200))
    return out


def render(res: dict[str, Any], command: str) -> str:
    systems = list(res["cold"])
    version = next(iter(res["cold"]["semble"].values()))["version"]
    label = {"lexical": "ours lexical", "hybrid": f"ours hybrid ({res['default']})",
             "hybrid-minilm": "ours hybrid (minilm)", "semble": f"Semble {version}"}
    lines = ["# Hybrid at the speed of lexical (issue 39)", "",
             f"`{command}` on {res['date']}; {res['machine']}. Load average (1, 5, 15 min): {res['load_start']} at "
             f"the start, {res['load_after_builds']} after the builds, {res['load_end']} at the end. Cold builds: "
             f"median of {res['repeat']} per tree and system, interleaved. Semble on a stand-in of its model's shape "
             f"({res['semble_model']['rows']:,} x {res['semble_model']['dim']} float32, WordPiece, "
             f"{res['semble_model']['mb']:.0f} MB). See `benchmarks/speed_static.py`.", "",
             "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {'yes' if ok else 'no'} |" for t, m, ok in targets(res)]
    lines += ["", "## Cold index, per tree (wall s / CPU s; peak MB)", "",
              "| tree | files | KB | " + " | ".join(label[s] for s in systems) + " |",
              "|---|---:|---:|" + "---|" * len(systems)]
    for name, about in res["trees"].items():
        cells = [f"{res['cold'][s][name]['wall_s']:.2f} / {res['cold'][s][name]['cpu_s']:.2f}; "
                 f"{res['cold'][s][name]['peak_mb']:.0f}" for s in systems]
        lines.append(f"| {name} ({about['source']}) | {about['files']} | {about['bytes'] / 1e3:.0f} | "
                     + " | ".join(cells) + " |")
    lines.append("| **total** | | | " + " | ".join(
        f"**{res['totals'][s]['wall_s']:.1f} / {res['totals'][s]['cpu_s']:.1f}**" for s in systems) + " |")
    lines.append("| inside the process, total s | | | " + " | ".join(
        f"{res['totals'][s]['inside_s']:.1f}" for s in systems) + " |")
    hyb = res["cold"]["hybrid"]
    lines += ["", f"Ours hybrid embedded {sum(r['embedded'] for r in hyb.values()):,} texts "
                  f"({sum(r['spans'] for r in hyb.values()):,} leaf spans); Semble made "
                  f"{sum(r['chunks'] for r in res['cold']['semble'].values()):,} chunks. Semble's import "
                  f"{sum(r['import_s'] for r in res['cold']['semble'].values()):.1f} s and build "
                  f"{sum(r['build_s'] for r in res['cold']['semble'].values()):.1f} s in total (its in-process "
                  "column adds the save).", "",
              "## Search (in process, k=10, after one warm-up)", "",
              "| system | questions | p50 ms | p90 ms | peak MB |", "|---|---:|---:|---:|---:|"]
    for s, v in res["search"].items():
        lines.append(f"| {label[s]} | {v['n']} | {v['p50_ms']:.2f} | {v['p90_ms']:.2f} | {v['peak_mb']:.0f} |")
    fq = res["fresh_query"]
    lines += ["", "## Fresh-process hybrid `query` (default model)", "",
              "| tree | wall s | CPU s | peak MB |", "|---|---:|---:|---:|"]
    lines += [f"| {r['tree']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_mb']:.0f} |" for r in fq["rows"]]
    ci = res["chroma_import_cpu_s"]
    lines += ["", "Where a small hybrid index's time goes beyond the lexical one's: `import chromadb` costs "
                  f"{ci['as installed']:.2f} CPU s in a fresh process here ({ci['without rfc3987_syntax']:.2f} s with "
                  "`rfc3987_syntax` hidden: jsonschema compiles its grammars on import when it is installed, which "
                  "jupyter's `jsonschema[format-nongpl]` does in this venv; none of our dependencies needs it), against "
                  f"{ci['python alone']:.2f} s for Python alone; it is paid once per index command (the command "
                  "line, which owns its process, keeps the grammar from being compiled)."]
    if "scale" in res:
        sc = res["scale"]
        lines += ["", f"At {sc['files']:,} generated files (`benchmarks.query_path.measure_query_rows`, vectors by "
                      f"the model; load {res['load_before_scale']} before): fresh `query` lexical "
                      f"{sc['lexical_query_seconds']:.2f} s (CPU {sc['lexical_query_cpu_seconds']:.2f} s, "
                      f"{sc['lexical_query_peak_mb']:.0f} MB), hybrid {sc['hybrid_query_seconds']:.2f} s (CPU "
                      f"{sc['hybrid_query_cpu_seconds']:.2f} s, {sc['hybrid_query_peak_mb']:.0f} MB); MCP first "
                      f"search lexical {sc['lexical_mcp_first_search_seconds']:.2f} s, hybrid "
                      f"{sc['hybrid_mcp_first_search_seconds']:.2f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", default=",".join(REPOS))
    ap.add_argument("--repeat", type=int, default=3, help="cold builds per tree and system (the median is kept)")
    ap.add_argument("--scale", type=int, default=4000, help="files of the generated tree for the fresh query (0: none)")
    ap.add_argument("--minilm", action=argparse.BooleanOptionalAction, default=True,
                    help="also build hybrid indexes with minilm, for reference")
    ap.add_argument("--semble-python", type=Path, default=SEMBLE_PYTHON)
    ap.add_argument("--work", type=Path, default=None, help="keep the trees and indexes here")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="llmc-speed-static-"))
    work.mkdir(parents=True, exist_ok=True)
    res = measure([n for n in args.repos.split(",") if n], work, repeat=args.repeat, scale=args.scale,
                  minilm=args.minilm, python=args.semble_python)
    command = " ".join(["python -m benchmarks.speed_static", *(argv if argv is not None else sys.argv[1:])])
    name = f"speed_static-{args.tag}" if args.tag else "speed_static"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps({"command": command, **res}, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(res, command))
    print(render(res, command))


if __name__ == "__main__":
    main()
