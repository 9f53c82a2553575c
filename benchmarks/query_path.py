"""The query path at repository scale: index time, a fresh-process ``query``, and in-process ``retrieve`` latency on
generated trees of 250 to 16,000 files, lexical-only and with a cheap deterministic embedding; plus the memory of
indexing one 50 MB file.

    python -m benchmarks.query_path                       # 250, 1000, 4000, 16000 files (about an hour on 2 cores)
    python -m benchmarks.query_path --sizes 250,1000      # a subset
    python -m benchmarks.query_path --big-file-mb 50      # only the big-file probe

Each tree is :func:`benchmarks.perf.index_tree`: standard-library modules of 2-30 KB, cycled, each copy in its own
``pNNNNN/`` directory. For every tree, in one run on the same machine:

* **chunk loop**: one process reads every file and runs ``ASTChunker(max_tokens=512, analyze=True).chunk_tree`` (the
  chunker with its analysis, what indexing does before it writes);
* **lexical index**: ``llmc-splitters index TREE --db DB --embedding none`` (the whole command as a user runs it,
  chunking in worker processes by default, a fresh process): wall time, files/s, peak RSS; the ratio
  ``chunk loop / index`` (target >= 0.8); and the same with ``--workers 1`` (chunking in the command's process);
* **hybrid index**: the same files through ``CodeIndex(path, embedding=HashingEmbedding(256))`` in a fresh process
  (embedded Chroma holds the vectors; the model costs nothing, so this is the store's cost);
* **fresh-process query**: ``llmc-splitters query Q --db DB --json`` (lexical index), wall and peak RSS, median of 5
  questions; the ratio to the 250-file tree (target <= 1.5x at 16,000 files, peak under 200 MB);
* **in-process retrieve**: ``CodeRetriever.retrieve`` median over 20 questions after one warm-up, lexical and hybrid
  (target < 50 ms at 16,000 files, lexical).

``--query-rows`` measures only what a user waits for at a query, lexical and hybrid, at each size (default 250 and
4,000 files): a fresh-process ``llmc-splitters query Q --db DB --json`` (wall and peak RSS, median of 5 questions for
the time, the largest peak), and the MCP server's first search (``llmc-splitters mcp --db DB`` over stdio: from
starting the process to the first ``search_code`` answer, median of 3). The hybrid index is read with the default
model (``DEFAULT_BACKEND``: ``code-static``) exactly as a real one is: the query process loads that model, embeds the
question and searches the embedded Chroma store. Its vectors, so that a 4,000-file index takes minutes rather than an
hour to build with a slow model, come from :class:`~llmc_splitters.retrieval.HashingEmbedding` at the model's
dimensions, filed under the default model's name (:class:`_StandIn`); the cost of a query does not depend on the
values of the stored vectors. ``--real-model`` builds it with the model itself.

Peak RSS of a child process comes from ``os.wait4`` (its own high-water mark). Results go to
``benchmarks/results/query_path.json`` and ``query_path.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from .perf import index_tree, synthetic_python

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (250, 1000, 4000, 16000)
QUESTIONS = (
    "parse the header of a message",
    "split a string into shell-like tokens",
    "format a date as an ISO string",
    "decode a base64 encoded string",
    "wrap a long paragraph to a given width",
    "compute the difference between two sequences of lines",
    "read a configuration file with sections",
    "cancel a task if it does not finish before a timeout",
    "quote a string for the shell",
    "compare two files and report differences",
    "create a temporary directory that is removed afterwards",
    "send an email message over SMTP",
    "walk a directory tree",
    "compute a checksum of a file",
    "parse command line arguments",
    "escape HTML special characters",
    "pretty print a nested data structure",
    "convert a number to roman numerals",
    "match a filename against a wildcard pattern",
    "how are retries configured",
)

_CHUNK_LOOP = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from llmc_splitters import ASTChunker
    root = Path(sys.argv[1])
    files = sorted(p for p in root.rglob("*.py"))
    chunker = ASTChunker(max_tokens=512, analyze=True)
    chunker.chunk_tree("def f():\\n    return 1\\n", path="warm.py")
    t0 = time.perf_counter()
    n = 0
    for p in files:
        tree = chunker.chunk_tree(p.read_bytes(), path=p.relative_to(root).as_posix())
        n += len(tree.leaves)
    print(time.perf_counter() - t0, len(files), n)
    """
)

_HYBRID_INDEX = textwrap.dedent(
    """
    import sys, time
    from llmc_splitters.retrieval import CodeIndex, HashingEmbedding
    idx = CodeIndex(sys.argv[2], embedding=HashingEmbedding(256))
    t0 = time.perf_counter()
    report = idx.index_directory(sys.argv[1])
    print(time.perf_counter() - t0, len(report.added), report.embedded)
    """
)

_RETRIEVE = textwrap.dedent(
    """
    import json, statistics, sys, time
    from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding
    emb = HashingEmbedding(256) if sys.argv[2] == "hashing" else None
    r = CodeRetriever(index=CodeIndex(sys.argv[1], embedding=emb, create=False), k=4, max_context_tokens=2048)
    questions = json.loads(sys.argv[3])
    r.retrieve(questions[-1])
    times, hits = [], 0
    for q in questions:
        t0 = time.perf_counter()
        res = r.retrieve(q)
        times.append(time.perf_counter() - t0)
        hits += bool(res.hits)
    print(json.dumps({"median_ms": 1000 * statistics.median(times), "max_ms": 1000 * max(times), "answered": hits,
                      "n": len(questions)}))
    """
)


_HYBRID_STAND_IN = textwrap.dedent(
    """
    import sys, time
    from benchmarks.query_path import _StandIn
    from llmc_splitters.retrieval import CodeIndex
    idx = CodeIndex(sys.argv[2], embedding=_StandIn())
    t0 = time.perf_counter()
    report = idx.index_directory(sys.argv[1])
    print(time.perf_counter() - t0, len(report.added), report.embedded)
    """
)

_MCP_FIRST = textwrap.dedent(
    """
    import os, sys, time
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "llmc_splitters", "mcp", "--db", sys.argv[1]],
                                        env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                t1 = time.perf_counter()
                await s.initialize()
                res = await s.call_tool("search_code", {"query": sys.argv[2]})
                assert not res.is_error, res.content[0].text
                print(time.perf_counter() - t1)

    anyio.run(main)
    """
)


class _StandIn:
    """Vectors of :class:`~llmc_splitters.retrieval.HashingEmbedding` at the default model's dimensions, filed under
    its name: an index that a ``query`` opens, and pays for, as one built with the model (see the module
    docstring). Only for building benchmark indexes."""

    def __init__(self) -> None:
        from llmc_splitters.retrieval import HashingEmbedding
        from llmc_splitters.retrieval.embeddings import DEFAULT_BACKEND, resolve_embedding

        ident = resolve_embedding(DEFAULT_BACKEND).identity
        self.name, self.dimension, self.max_input_tokens = ident.name, ident.dimension, ident.max_input_tokens
        self._hash = HashingEmbedding(ident.dimension)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._hash.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._hash.embed_query(text)


_LIBRARY: list[str] = []  # --library: where the children import llmc_splitters from
_LAST_CPU: list[float] = [0.0]  # CPU seconds (user + system) of the last child _run waited for


def _run(cmd: list[str], timeout: float = 7200, env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """Run a command (with ``env`` added to this process's environment); ``(stdout, wall seconds, peak RSS MB of
    that process)``.

    Its output goes to temporary files, not pipes: a child writing more than a pipe holds (the JSON summary of a
    4,000-file run) would block while this process waits for it to exit.
    """
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        t0 = time.perf_counter()
        # Byte-code is written and reused as in an installed package (PYTHONDONTWRITEBYTECODE would make every
        # fresh process compile the library again).
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, **(env or {})}
        if _LIBRARY:
            env["PYTHONPATH"] = os.pathsep.join([*_LIBRARY, env.get("PYTHONPATH", "")])
        # With --library the children run in that tree (``python -m`` puts the working directory first on the path).
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, text=True, cwd=_LIBRARY[0] if _LIBRARY else None,
                                env={**env, "ANONYMIZED_TELEMETRY": "False"})
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                raise TimeoutError(" ".join(cmd))
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    _LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {code}: {err[-2000:]}")
    return out, wall, usage.ru_maxrss / 1024


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmc_splitters", *args]


def measure_tree(n_files: int, work: Path, log: object = print, *, lexical_only: bool = False) -> dict:
    """Every measurement of one tree (see the module docstring); ``lexical_only``: the chunk loop and the lexical
    index alone (what :mod:`benchmarks.speed` compares)."""
    src = work / f"tree-{n_files}"
    if not src.exists():
        index_tree(src, n_files)
    nbytes = sum(p.stat().st_size for p in src.rglob("*.py"))
    row: dict = {"files": n_files, "mb": nbytes / 1e6}
    out, wall, _ = _run([sys.executable, "-c", _CHUNK_LOOP, str(src)])
    secs, files, leaves = out.split()
    row["chunk_loop_seconds"] = float(secs)
    row["chunk_loop_files_per_s"] = int(files) / float(secs)
    row["leaves"] = int(leaves)
    log(f"  {n_files:6d} files: chunk loop {float(secs):7.1f} s")
    lex_db = work / f"lex-{n_files}"
    shutil.rmtree(lex_db, ignore_errors=True)
    out, wall, rss = _run(_cli("index", str(src), "--db", str(lex_db), "--embedding", "none", "--workers", "1",
                               "--json", "-q", "--max-file-size", str(1 << 20)))
    row.update(lexical_one_process_seconds=wall, lexical_one_process_vs_chunk=float(secs) / wall)
    log(f"  {n_files:6d} files: lexical index, --workers 1 {wall:7.1f} s "
        f"({row['lexical_one_process_vs_chunk']:.2f}x of the chunk loop)")
    shutil.rmtree(lex_db, ignore_errors=True)
    out, wall, rss = _run(_cli("index", str(src), "--db", str(lex_db), "--embedding", "none",
                               "--json", "-q", "--max-file-size", str(1 << 20)))
    summary = json.loads(out)
    row.update(lexical_index_seconds=wall, lexical_index_files_per_s=n_files / wall, lexical_index_peak_mb=rss,
               lexical_vs_chunk=float(secs) / wall, records=summary["records_written"],
               db_mb=sum(f.stat().st_size for f in lex_db.rglob("*") if f.is_file()) / 1e6)
    log(f"  {n_files:6d} files: lexical index {wall:7.1f} s ({row['lexical_vs_chunk']:.2f}x of the chunk loop)")
    if lexical_only:
        shutil.rmtree(lex_db, ignore_errors=True)
        return row
    out, wall, rss = _run(_cli("index", str(src), "--db", str(lex_db), "--embedding", "none", "--json", "-q"))
    again = json.loads(out)
    row.update(noop_reindex_seconds=wall, noop_reindex_bytes_read=again["bytes_read"])
    hyb_db = work / f"hyb-{n_files}"
    shutil.rmtree(hyb_db, ignore_errors=True)
    out, wall, rss = _run([sys.executable, "-c", _HYBRID_INDEX, str(src), str(hyb_db)])
    row.update(hybrid_index_seconds=wall, hybrid_index_files_per_s=n_files / wall, hybrid_index_peak_mb=rss)
    log(f"  {n_files:6d} files: hybrid index {wall:7.1f} s")
    walls, peaks = [], []
    for q in QUESTIONS[:5]:
        out, wall, rss = _run(_cli("query", q, "--db", str(lex_db), "--json"))
        assert json.loads(out)["hits"], q
        walls.append(wall)
        peaks.append(rss)
    row.update(cli_query_seconds=statistics.median(walls), cli_query_peak_mb=max(peaks))
    log(f"  {n_files:6d} files: fresh-process query {row['cli_query_seconds']:.2f} s, {max(peaks):.0f} MB")
    for mode, db in (("none", lex_db), ("hashing", hyb_db)):
        out, _, rss = _run([sys.executable, "-c", _RETRIEVE, str(db), mode, json.dumps(QUESTIONS)])
        got = json.loads(out)
        row[f"retrieve_{mode}_median_ms"] = got["median_ms"]
        row[f"retrieve_{mode}_max_ms"] = got["max_ms"]
        row[f"retrieve_{mode}_answered"] = got["answered"]
        row[f"retrieve_{mode}_peak_mb"] = rss
    log(f"  {n_files:6d} files: retrieve lexical {row['retrieve_none_median_ms']:.1f} ms, "
        f"hybrid {row['retrieve_hashing_median_ms']:.1f} ms")
    shutil.rmtree(hyb_db, ignore_errors=True)
    return row


def measure_query_rows(n_files: int, work: Path, *, real_model: bool = False, log: object = print) -> dict:
    """What a user waits for at a query on a tree of ``n_files`` files, lexical and hybrid (see the module
    docstring)."""
    src = work / f"tree-{n_files}"
    if not src.exists():
        index_tree(src, n_files)
    row: dict = {"files": n_files}
    lex_db = work / f"lex-{n_files}"
    if not (lex_db / "llmc.sqlite3").is_file():
        _, row["lexical_build_seconds"], _ = _run(_cli("index", str(src), "--db", str(lex_db), "--embedding", "none",
                                                       "--json", "-q"))
        row["lexical_build_cpu_seconds"] = _LAST_CPU[0]
    hyb_db = work / (f"hyb-real-{n_files}" if real_model else f"hyb-default-{n_files}")
    if not (hyb_db / "llmc.sqlite3").is_file():
        # With the real model, the command a user runs (the default model); else the stand-in's vectors.
        cmd = (_cli("index", str(src), "--db", str(hyb_db), "--json", "-q") if real_model else
               [sys.executable, "-c", _HYBRID_STAND_IN, str(src), str(hyb_db)])
        _, row["hybrid_build_seconds"], _ = _run(cmd)
        row["hybrid_build_cpu_seconds"] = _LAST_CPU[0]
    _run(_cli("index", "--prepare-model"))  # the one-time model preparation is not a query's cost
    for mode, db in (("lexical", lex_db), ("hybrid", hyb_db)):
        _run(_cli("query", QUESTIONS[-1], "--db", str(db), "--json"))  # byte-code written, files in the page cache
        walls, peaks, cpus = [], [], []
        for q in QUESTIONS[:5]:
            out, wall, rss = _run(_cli("query", q, "--db", str(db), "--json"))
            got = json.loads(out)
            assert got["hits"] and got["mode"] == mode, (q, got["mode"])
            walls.append(wall)
            peaks.append(rss)
            cpus.append(_LAST_CPU[0])
        row[f"{mode}_query_seconds"] = statistics.median(walls)
        row[f"{mode}_query_cpu_seconds"] = statistics.median(cpus)
        row[f"{mode}_query_peak_mb"] = max(peaks)
        firsts = [float(_run([sys.executable, "-c", _MCP_FIRST, str(db), q])[0]) for q in QUESTIONS[5:8]]
        row[f"{mode}_mcp_first_search_seconds"] = statistics.median(firsts)
        log(f"  {n_files:6d} files, {mode}: fresh query {row[f'{mode}_query_seconds']:.2f} s "
            f"(CPU {row[f'{mode}_query_cpu_seconds']:.2f} s), "
            f"{row[f'{mode}_query_peak_mb']:.0f} MB; MCP first search {row[f'{mode}_mcp_first_search_seconds']:.2f} s")
    return row


def measure_big_file(mb: float, work: Path) -> dict:
    """Index one generated Python file of ``mb`` MB through the CLI (``--max-file-size`` raised): peak RSS, disk, and
    how the summary says it was split."""
    src = work / f"big-{mb:g}"
    src.mkdir(parents=True, exist_ok=True)
    text = synthetic_python(int(mb * 1_000_000))
    (src / "big.py").write_text(text)
    db = work / f"big-db-{mb:g}"
    shutil.rmtree(db, ignore_errors=True)
    out, wall, rss = _run(_cli("index", str(src), "--db", str(db), "--embedding", "none", "--json", "-q",
                               "--max-file-size", str(len(text.encode()) + 1)))
    summary = json.loads(out)
    return {"mb": len(text.encode()) / 1e6, "seconds": wall, "peak_rss_mb": rss, "added": summary["added"],
            "leaves": summary["leaf_spans"], "split": summary.get("split_notes", {}),
            "db_mb": sum(f.stat().st_size for f in db.rglob("*") if f.is_file()) / 1e6}


def render(results: dict) -> str:
    rows = results["trees"]
    base = rows[0] if rows else None
    lines = [
        "# The query path at repository scale",
        "",
        f"`{results.get('command', '')}` on {results.get('date', '')}; {results.get('machine', '')}. One run; every "
        "row on the same machine. Load average at the start: " + results.get("load", "") + ".",
        "",
        "| files | MB | leaves | chunk loop s | lexical index s (files/s) | lexical / chunk loop | no-op re-index s "
        "(bytes read) | hybrid index s | fresh `query` s | `query` peak MB | retrieve lexical ms | retrieve hybrid "
        "ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['files']:,} | {r['mb']:.0f} | {r['leaves']:,} | {r['chunk_loop_seconds']:.1f} | "
            f"{r['lexical_index_seconds']:.1f} ({r['lexical_index_files_per_s']:.1f}) | {r['lexical_vs_chunk']:.2f} | "
            f"{r['noop_reindex_seconds']:.1f} ({r['noop_reindex_bytes_read']}) | {r['hybrid_index_seconds']:.1f} | "
            f"{r['cli_query_seconds']:.2f} | {r['cli_query_peak_mb']:.0f} | {r['retrieve_none_median_ms']:.1f} | "
            f"{r['retrieve_hashing_median_ms']:.1f} |")
    if base and len(rows) > 1:
        last = rows[-1]
        lines += ["", f"Fresh-process query at {last['files']:,} files: "
                      f"{last['cli_query_seconds'] / base['cli_query_seconds']:.2f}x the one at {base['files']:,} "
                      f"files (target <= 1.5x), peak {last['cli_query_peak_mb']:.0f} MB (target < 200 MB). "
                      f"In-process lexical retrieve at {last['files']:,} files: {last['retrieve_none_median_ms']:.1f} ms "
                      "median (target < 50 ms)."]
    qrows = results.get("query_rows")
    if qrows:
        lines += ["", "## What a query waits for", "",
                  f"`{results.get('query_rows_command', '')}` on {results.get('query_rows_date', '')}, load average "
                  f"at the start {results.get('query_rows_load', '')}. Fresh-process `llmc-splitters query Q --db DB "
                  "--json`: median wall of 5 "
                  "questions, the largest peak RSS; MCP first search: `llmc-splitters mcp --db DB` over stdio, from "
                  "starting it to the first `search_code` answer, median of 3. CPU s: user + system time of the query process "
                  "(its threads together; less sensitive than wall time to a loaded machine). The hybrid index is read with the "
                  "default model (" + qrows[0].get("model", "minilm") + "); see the module docstring for how its "
                  "vectors are made.", "",
                  "| files | lexical query s (CPU s) | lexical peak MB | hybrid query s (CPU s) | hybrid peak MB | MCP "
                  "first search lexical s | MCP first search hybrid s |", "|---:|---:|---:|---:|---:|---:|---:|"]
        before = {r["files"]: r for r in results.get("query_rows_before", [])}
        for r in [*qrows, *before.values()]:
            tag = f" ({results.get('query_rows_before_library', 'before')})" if r in before.values() else ""
            lines.append(f"| {r['files']:,}{tag} | {r['lexical_query_seconds']:.2f} "
                         f"({r['lexical_query_cpu_seconds']:.2f}) | {r['lexical_query_peak_mb']:.0f} | "
                         f"{r['hybrid_query_seconds']:.2f} ({r['hybrid_query_cpu_seconds']:.2f}) | "
                         f"{r['hybrid_query_peak_mb']:.0f} | {r['lexical_mcp_first_search_seconds']:.2f} | "
                         f"{r['hybrid_mcp_first_search_seconds']:.2f} |")
        if before:
            lines += ["", f"Rows marked {results.get('query_rows_before_library', 'before')}: "
                          f"`{results.get('query_rows_before_command', '')}` right after, on the same indexes, with "
                          "the source tree before this change (chromadb loaded for a hybrid query, the model's weights "
                          "parsed)."]
    big = results.get("big_file")
    if big:
        lines += ["", f"One {big['mb']:.0f} MB Python file through `llmc-splitters index --max-file-size ...`: peak "
                      f"{big['peak_rss_mb']:.0f} MB RSS (target < 1 GB), {big['seconds']:.0f} s, {big['leaves']:,} "
                      f"leaves, {big['db_mb']:.0f} MB on disk; the summary says: {big['split']}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--big-file-mb", type=float, default=50.0, help="0: skip the big-file probe")
    ap.add_argument("--no-trees", action="store_true", help="only the big-file probe")
    ap.add_argument("--work", type=Path, default=None, help="keep the trees and indexes here")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--query-rows", default=None, metavar="SIZES",
                    help="only the query rows (lexical and hybrid) at these sizes, e.g. 250,4000")
    ap.add_argument("--real-model", action="store_true", help="build the hybrid index of --query-rows with the model")
    ap.add_argument("--library", type=Path, default=None,
                    help="query with the llmc_splitters of this source tree (a before/after on the same indexes)")
    args = ap.parse_args(argv)
    if args.library is not None:
        _LIBRARY.append(str(args.library.resolve()))
    work = args.work or Path(tempfile.mkdtemp(prefix="llmc-query-path-"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    results: dict = {"command": " ".join(["python -m benchmarks.query_path", *(argv or sys.argv[1:])]),
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": load,
                     "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                     "trees": []}
    if args.query_rows:
        from llmc_splitters.retrieval.embeddings import DEFAULT_BACKEND, resolve_embedding

        model = resolve_embedding(DEFAULT_BACKEND).identity.name + (
            " (vectors by the model)" if args.real_model else " (stand-in vectors)")
        results["query_rows"] = []
        for n in (int(x) for x in args.query_rows.split(",") if x):
            print(f"query rows, {n} files", flush=True)
            results["query_rows"].append({**measure_query_rows(n, work, real_model=args.real_model), "model": model})
        args.out.mkdir(parents=True, exist_ok=True)
        old = json.loads((args.out / "query_path.json").read_text()) if (args.out / "query_path.json").is_file() else {}
        merged = {**old, "query_rows": results["query_rows"], "query_rows_command": results["command"],
                  "query_rows_date": results["date"], "query_rows_load": load}
        (args.out / "query_path.json").write_text(json.dumps(merged, indent=1) + "\n")
        (args.out / "query_path.md").write_text(render({**merged, "command": merged.get("command", ""),
                                                        "trees": merged.get("trees", [])}))
        print(render({**merged, "trees": merged.get("trees", [])}))
        return
    if not args.no_trees:
        for n in (int(x) for x in args.sizes.split(",") if x):
            print(f"tree of {n} files", flush=True)
            results["trees"].append(measure_tree(n, work))
    if args.big_file_mb > 0:
        print(f"one {args.big_file_mb:g} MB file", flush=True)
        results["big_file"] = measure_big_file(args.big_file_mb, work)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "query_path.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "query_path.md").write_text(render(results))
    print(render(results))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
