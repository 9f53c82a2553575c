"""The MCP server on a generated tree: its memory idle and after 100 queries, query latency, and what a freshness
check costs when nothing changed (stat-only wall time and bytes read).

    python -m benchmarks.mcp --files 4000            # writes benchmarks/results/mcp.json and mcp.md

Steps, each measured on its own:

1. a tree of ``--files`` standard-library modules (:func:`benchmarks.perf.index_tree`), indexed by
   ``llmc-splitters index --embedding none`` (lexical: no model in the server's memory);
2. the freshness scan of :class:`llmc_splitters.ingest.fresh.TreeState` in this process: the first scan (walks the
   tree, reading each file's first 8 KiB), a scan with nothing changed, and a scan after touching every file (mtime
   changed, content not); bytes read come from ``/proc/self/io`` (``rchar``: every byte a read call returned, page
   cache and SQLite pages included), so "0" means nothing was read at all;
3. refreshes through :class:`~llmc_splitters.ingest.fresh.Refresher` on the index: the catch-up of a new server
   (every selected file handed to the index, which compares each file's stat with the one it recorded), a refresh
   after touching every file (read and hashed by the index, nothing re-chunked), and one more with nothing changed;
   file bytes the index read come from its :class:`~llmc_splitters.retrieval.IndexReport` (``bytes_read``);
4. ``llmc-splitters mcp --db DB --http PORT --freshness refresh`` as a subprocess: RSS (``psutil``) listening, once
   search is ready and once it has caught up with the tree, then after 100 ``search_code`` calls (over the SDK's
   streamable-HTTP client, a stat-only freshness check before each), with their latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.perf import index_tree

RESULTS = Path(__file__).parent / "results"
QUERIES = [
    "parse the header of a message", "decode a JSON document", "wrap a paragraph of text", "split a string like a shell",
    "open a file and read lines", "format a date", "compute a hash digest", "escape html entities",
    "compare two sequences", "copy a directory tree", "read a configuration file", "encode base64",
    "start a thread", "send an http request", "parse command line arguments", "random number generator",
]


def _rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return -1


def _timed(fn: Any) -> tuple[Any, float, int]:
    """``(result, seconds, bytes read)``; the bytes of reading ``/proc/self/io`` itself are taken off."""
    r0 = _rchar()
    own = _rchar() - r0
    r0 = _rchar()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    return out, dt, max(0, _rchar() - r0 - own)


def bench_scan(src: Path, db: Path) -> dict[str, Any]:
    from llmc_splitters.ingest.fresh import TreeState
    from llmc_splitters.ingest.walk import WalkOptions

    state = TreeState(src.resolve(), WalkOptions(never_enter=(str(db),)))
    first, t_first, b_first = _timed(state.scan)
    state.commit(first)
    again, t_again, b_again = _timed(state.scan)
    now = time.time()
    for p in src.rglob("*.py"):
        os.utime(p, (now, now))
    touched, t_touch, b_touch = _timed(state.scan)
    return {
        "files": len(first.changed),
        "first_scan": {"seconds": round(t_first, 3), "bytes_read": b_first, "walked": first.walked},
        "unchanged_scan": {"seconds": round(t_again, 4), "bytes_read": b_again, "walked": again.walked,
                           "changed": len(again.changed)},
        "touched_scan": {"seconds": round(t_touch, 4), "bytes_read": b_touch, "walked": touched.walked,
                         "changed": len(touched.changed)},
    }


def bench_refresh(src: Path, db: Path) -> dict[str, Any]:
    """Three refreshes on the index after :func:`bench_scan` touched every file (new mtimes, same content)."""
    from llmc_splitters.ingest.fresh import Refresher
    from llmc_splitters.ingest.walk import WalkOptions
    from llmc_splitters.retrieval import CodeIndex

    index = CodeIndex(db, create=False)

    def run(refresher: Refresher) -> dict[str, Any]:
        rep, seconds, rchar = _timed(refresher.refresh)
        return {"seconds": round(seconds, 2), "unchanged": rep.unchanged, "updated": len(rep.updated),
                "added": len(rep.added), "removed": len(rep.removed), "file_bytes_read": rep.bytes_read,
                "rchar": rchar, "walked": rep.walked}

    def new_server() -> Refresher:  # no stats of its own: its first refresh walks and hands every file over
        return Refresher(lambda: index, src.resolve(), WalkOptions(never_enter=(str(db),)))

    touched = run(new_server())  # every stat differs from the index's: each file is read, hashed, skipped
    restarted = new_server()
    first = run(restarted)  # every stat matches the one the index recorded: no file is read
    again = run(restarted)
    index.close()
    return {"after_touch": touched, "catch_up": first, "unchanged": again}


def bench_calls(src: Path, db: Path, n: int = 40) -> dict[str, Any]:
    """Where a search_code call's time goes, in process (no transport): medians of ``n`` calls, in seconds."""
    from llmc_splitters.ingest.walk import WalkOptions
    from llmc_splitters.mcp import CodeService
    from llmc_splitters.mcp.service import search_with_contexts
    from llmc_splitters.retrieval import CodeIndex, CodeRetriever

    r = CodeRetriever(index=CodeIndex(db, create=False))
    off = CodeService(lambda: r, freshness="off")
    refresh = CodeService(lambda: r, root=src, walk_options=WalkOptions(never_enter=(str(db),)), freshness="refresh")
    assert refresh.refresher is not None
    refresh.refresher.refresh()

    def median(fn: Any) -> float:
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            fn(QUERIES[i % len(QUERIES)])
            times.append(time.perf_counter() - t0)
        return round(statistics.median(times), 4)

    return {
        "calls": n,
        "search_with_contexts": median(lambda q: search_with_contexts(r, q, 4, None, None)),
        "search_code_freshness_off": median(off.search_code),
        "search_code_freshness_refresh": median(refresh.search_code),
        "stat_only_scan": median(lambda q: refresh.refresher.state.scan()),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_server(src: Path, db: Path, queries: int) -> dict[str, Any]:
    import anyio
    import psutil
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "llmc_splitters", "mcp", "--db", str(db), "--http", str(port),
                             "--freshness", "refresh"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps = psutil.Process(proc.pid)
    out: dict[str, Any] = {}
    try:
        t_start = time.perf_counter()
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server exited")
            time.sleep(0.1)
        out["rss_listening_mb"] = round(ps.memory_info().rss / 1e6, 1)

        async def run() -> None:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    st = (await s.call_tool("index_status", {})).structured_content
                    while not st["search_ready"]:  # opened, and one search run (after that: searches are served)
                        await anyio.sleep(0.1)
                        st = (await s.call_tool("index_status", {})).structured_content
                    out["search_ready_seconds"] = round(time.perf_counter() - t_start, 1)
                    out["rss_search_ready_mb"] = round(ps.memory_info().rss / 1e6, 1)
                    while not (st["caught_up"] and not st["refreshing"]):
                        await anyio.sleep(0.2)
                        st = (await s.call_tool("index_status", {})).structured_content
                    out["caught_up_seconds"] = round(time.perf_counter() - t_start, 1)
                    out["files_indexed"] = st["files_indexed"]
                    await anyio.sleep(2)
                    out["rss_idle_mb"] = round(ps.memory_info().rss / 1e6, 1)
                    lat = []
                    for i in range(queries):
                        t0 = time.perf_counter()
                        res = await s.call_tool("search_code", {"query": QUERIES[i % len(QUERIES)]})
                        lat.append(time.perf_counter() - t0)
                        assert not res.is_error, res.content[0].text
                    out["rss_after_queries_mb"] = round(ps.memory_info().rss / 1e6, 1)
                    out["queries"] = queries
                    out["first_query_seconds"] = round(lat[0], 3)
                    rest = sorted(lat[1:])
                    out["query_p50_seconds"] = round(statistics.median(rest), 3)
                    out["query_p95_seconds"] = round(rest[int(0.95 * (len(rest) - 1))], 3)

        anyio.run(run)
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def write_report(res: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mcp.json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    sc, tr, sv = res["scan"], res["refresh"], res["server"]
    lines = [
        "# The MCP server: freshness check cost and memory",
        "",
        f"`python -m benchmarks.mcp --files {res['files']}` on {res['date']} (load average at start "
        f"{res['load_start']:.1f}, at end {res['load_end']:.1f}; 2 shared cores). Lexical index (no model) of "
        f"{res['bytes'] / 1e6:.1f} MB of standard-library modules; `llmc-splitters index` took "
        f"{res['index_seconds']:.0f} s (incremental when `--keep` finds an index). Notes by hand: "
        "[MCP-NOTES.md](MCP-NOTES.md).",
        "",
        "## Freshness scan (`TreeState.scan`, in process)",
        "",
        "| scan | seconds | bytes read | walked | files changed |",
        "|---|---|---|---|---|",
        f"| first (no stats yet) | {sc['first_scan']['seconds']} | {sc['first_scan']['bytes_read']:,} | yes | "
        f"{sc['files']:,} |",
        f"| nothing changed | {sc['unchanged_scan']['seconds']} | {sc['unchanged_scan']['bytes_read']:,} | "
        f"{'yes' if sc['unchanged_scan']['walked'] else 'no'} | {sc['unchanged_scan']['changed']} |",
        f"| every file touched (content same) | {sc['touched_scan']['seconds']} | "
        f"{sc['touched_scan']['bytes_read']:,} | {'yes' if sc['touched_scan']['walked'] else 'no'} | "
        f"{sc['touched_scan']['changed']:,} |",
        "",
        "## Refreshes (`Refresher.refresh` on the index, in process)",
        "",
        "| refresh | seconds | files unchanged | updated | file bytes read by the index | all bytes read (rchar) |",
        "|---|---|---|---|---|---|",
        *(f"| {label} | {tr[key]['seconds']} | {tr[key]['unchanged']:,} | {tr[key]['updated']} | "
          f"{tr[key]['file_bytes_read']:,} | {tr[key]['rchar']:,} |"
          for key, label in (("after_touch", "a new server's catch-up after every file was touched (content same)"),
                             ("catch_up", "a new server's catch-up, nothing changed"),
                             ("unchanged", "that server's next check, nothing changed"))),
        "",
        "A catch-up walks the tree (the walker reads the first 8 KiB of each file to skip binary and generated "
        "ones) and hands every selected file to the index, which reads none whose size and modification time it "
        "recorded: its other bytes are those and SQLite pages. After a touch the index reads and hashes each file "
        "once, re-chunks and re-embeds none, and records the new stats. Later checks are the stat-only scan.",
        "",
        "## Server (`llmc-splitters mcp --db DB --http PORT --freshness refresh`, RSS)",
        "",
        "| state | RSS MB |",
        "|---|---|",
        f"| listening, before any request | {sv['rss_listening_mb']} |",
        f"| search ready (index open, one search run) | {sv['rss_search_ready_mb']} |",
        f"| caught up with the tree, idle | {sv['rss_idle_mb']} |",
        f"| after {sv['queries']} search_code calls | {sv['rss_after_queries_mb']} |",
        "",
        f"In process, medians of {res['calls']['calls']} calls: the search with the hits' context "
        f"{res['calls']['search_with_contexts']} s; the whole budgeted reply {res['calls']['search_code_freshness_off']}"
        f" s; with the stat-only scan of refresh mode first {res['calls']['search_code_freshness_refresh']} s (the "
        f"scan alone {res['calls']['stat_only_scan']} s). The rest of a call over HTTP is the transport.",
        "",
        f"Search ready {sv['search_ready_seconds']} s after start, caught up with the tree ({sv['files_indexed']:,} "
        f"files) at {sv['caught_up_seconds']} s. First search_code {sv['first_query_seconds']} s; then p50 "
        f"{sv['query_p50_seconds']} s, p95 {sv['query_p95_seconds']} s per call (default 8,000-token replies, a "
        "stat-only freshness check before each).",
        "",
    ]
    (RESULTS / "mcp.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2, help="chunking processes of the index command")
    ap.add_argument("--keep", metavar="DIR", help="build the tree and index here (reused when present)")
    args = ap.parse_args(argv)
    res: dict[str, Any] = {"files": args.files, "date": time.strftime("%Y-%m-%d"),
                           "load_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="llmc-mcp-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        src, db = base / "src", base / "db"
        if not src.exists():
            res["bytes"] = index_tree(src, args.files)
        else:
            res["bytes"] = sum(p.stat().st_size for p in src.rglob("*.py"))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "llmc_splitters", "index", str(src), "--db", str(db), "--embedding",
                        "none", "--workers", str(args.workers), "-q"], check=True, stdout=subprocess.DEVNULL)
        res["index_seconds"] = round(time.perf_counter() - t0, 1)
        res["scan"] = bench_scan(src, db)
        res["refresh"] = bench_refresh(src, db)
        res["calls"] = bench_calls(src, db)
        res["server"] = bench_server(src, db, args.queries)
    res["load_end"] = os.getloadavg()[0]
    write_report(res)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
