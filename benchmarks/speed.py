"""What a user waits for, in one run: every speed target of issue 24 side by side.

    python -m benchmarks.speed                 # the whole report (about 40 minutes on 2 cores)
    python -m benchmarks.speed --quick         # smaller trees and the quick chunker corpus (a smoke run)

Each section is the benchmark module named below, run here in the same process run, on the same machine:

* **hybrid indexing** (:mod:`benchmarks.hybrid_index`, on 160 files): direct batched encode texts/s against ``index``
  texts/s, per backend (the default ``minilm``, ONNX int8, and ``minilm-torch``), and the whole ``index`` command of the
  default against MiniLM on torch on the same tree (targets: index >= 0.8x direct; whole command >= 4x);
* **queries** (:func:`benchmarks.query_path.measure_query_rows`): fresh-process ``query``, lexical and hybrid, wall
  time and peak RSS, and the MCP server's first search after start, at 250 and 4,000 files (targets: hybrid query
  under 1.5 s and 200 MB at 4,000 files; MCP first search within 2 s);
* **lexical indexing** (:func:`benchmarks.query_path.measure_tree`, lexical only): the chunk loop against the whole
  ``index --embedding none`` command at 2,000 and 16,000 files (target >= 0.8x);
* **the chunker** (:mod:`benchmarks.throughput`): every chunker against the parse+encode floor, median of 3
  passes in one process (target: ours under 1.5x, and faster than every peer).

Writes ``benchmarks/results/speed.json`` and ``speed.md``. The machine is shared: the load average at the start
and the end is recorded; compare numbers of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from . import hybrid_index, query_path, throughput
from .perf import index_tree

RESULTS = Path(__file__).resolve().parent / "results"
PEERS = ("langchain-recursive", "astchunk", "chonkie-code")  # the chunkers issue 24 names


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(work: Path, *, quick: bool = False) -> dict:
    """Every section; see the module docstring."""
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": _load(),
                 "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"}
    # 160 files (about 4,200 texts): on 40 (900 texts, 5 s of encoding) the index command's fixed costs (importing
    # chromadb, 0.6 s of CPU; loading the model; the last group's writes) weigh as much as its per-text ones.
    n_hybrid = 12 if quick else 160
    src = work / f"tree-{n_hybrid}"
    if not src.exists():
        index_tree(src, n_hybrid)
    print(f"hybrid indexing, {n_hybrid} files", flush=True)
    res["hybrid_files"] = n_hybrid
    res["hybrid"] = [hybrid_index.measure(b, src, work) for b in ("minilm", "minilm-torch")]
    print("queries", flush=True)
    res["queries"] = [query_path.measure_query_rows(n, work) for n in ((100, 250) if quick else (250, 4000))]
    print("lexical indexing", flush=True)
    res["lexical"] = [query_path.measure_tree(n, work, lexical_only=True)
                      for n in ((250, 500) if quick else (2000, 16000))]
    print("chunker throughput", flush=True)
    res["throughput"] = throughput.measure(quick=quick, log=lambda m: print(m, flush=True))
    res["load_end"] = _load()
    return res


def targets(res: dict) -> list[tuple[str, str, str, bool]]:
    """``(target, measured, where, met)`` for each target."""
    out = []
    for r in res["hybrid"]:
        out.append((f"`index` >= 0.8x direct encode ({r['backend']})", f"{r['index_vs_direct']:.2f}x",
                    f"{r['embedded']:,} texts", r["index_vs_direct"] >= 0.8))
    by = {r["backend"]: r for r in res["hybrid"]}
    ratio = by["minilm-torch"]["command_seconds"] / by["minilm"]["command_seconds"]
    out.append(("whole `index`: default >= 4x MiniLM on torch", f"{ratio:.2f}x "
                f"({by['minilm']['command_seconds']:.1f} s vs {by['minilm-torch']['command_seconds']:.1f} s)",
                f"{res['hybrid_files']} files", ratio >= 4))
    big = res["queries"][-1]
    out.append(("fresh hybrid `query` < 1.5 s and < 200 MB", f"{big['hybrid_query_seconds']:.2f} s, "
                f"{big['hybrid_query_peak_mb']:.0f} MB", f"{big['files']:,} files",
                big["hybrid_query_seconds"] < 1.5 and big["hybrid_query_peak_mb"] < 200))
    for mode in ("lexical", "hybrid"):
        worst = max(r[f"{mode}_mcp_first_search_seconds"] for r in res["queries"])
        out.append((f"MCP first search within 2 s ({mode})", f"{worst:.2f} s (worst size)",
                    ", ".join(f"{r['files']:,}" for r in res["queries"]) + " files", worst <= 2))
    for r in res["lexical"]:
        out.append(("lexical `index` >= 0.8x the chunk loop", f"{r['lexical_vs_chunk']:.2f}x",
                    f"{r['files']:,} files", r["lexical_vs_chunk"] >= 0.8))
    chunkers = res["throughput"]["chunkers"]
    ours = chunkers["llmc ASTChunker"]["ratio_to_floor"]
    out.append(("chunker < 1.5x the floor", f"{ours:.2f}x", "tune files", ours < 1.5))
    for peer in PEERS:
        if peer in chunkers:
            theirs = chunkers[peer]["ratio_to_floor"]
            out.append((f"chunker faster than {peer}", f"{ours:.2f}x vs {theirs:.2f}x", "tune files", ours < theirs))
    return out


def render(res: dict, command: str) -> str:
    lines = ["# What a user waits for", "",
             f"`{command}` on {res['date']}; {res['machine']}; load average {res['load_start']} at the start, "
             f"{res['load_end']} at the end. Every row in this one run.", "",
             "| target | measured | on | met |", "|---|---|---|---|"]
    lines += [f"| {t} | {m} | {w} | {'yes' if ok else 'no'} |" for t, m, w, ok in targets(res)]
    lines += ["", "## Hybrid indexing", "", *hybrid_index.render(
        {"command": command, "date": res["date"], "load": res["load_start"], "machine": res["machine"],
         "files": res["hybrid_files"], "rows": res["hybrid"]}).splitlines()[4:]]
    lines += ["", "## Queries", "", "| files | lexical query s | lexical MB | hybrid query s | hybrid MB | "
              "MCP first search lexical s | hybrid s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["queries"]:
        lines.append(f"| {r['files']:,} | {r['lexical_query_seconds']:.2f} | {r['lexical_query_peak_mb']:.0f} | "
                     f"{r['hybrid_query_seconds']:.2f} | {r['hybrid_query_peak_mb']:.0f} | "
                     f"{r['lexical_mcp_first_search_seconds']:.2f} | {r['hybrid_mcp_first_search_seconds']:.2f} |")
    lines += ["", "## Lexical indexing", "", "| files | MB | chunk loop s | `index` s | index / chunk loop | "
              "`index --workers 1` s | / chunk loop |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["lexical"]:
        lines.append(f"| {r['files']:,} | {r['mb']:.1f} | {r['chunk_loop_seconds']:.1f} | "
                     f"{r['lexical_index_seconds']:.1f} | {r['lexical_vs_chunk']:.2f} | "
                     f"{r['lexical_one_process_seconds']:.1f} | {r['lexical_one_process_vs_chunk']:.2f} |")
    lines += ["", "## The chunker", "", throughput.table(res["throughput"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="llmc-speed-"))
    res = measure(work, quick=args.quick)
    command = " ".join(["python -m benchmarks.speed", *(argv if argv is not None else sys.argv[1:])])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.json").write_text(json.dumps({"command": command, **res}, indent=1) + "\n")
    (args.out / "speed.md").write_text(render(res, command))
    print(render(res, command))


if __name__ == "__main__":
    main()
