"""The lexical query path of two source trees of the library on the same generated tree, in one run: the index's size
on disk, in-process ``search``/``retrieve`` p50 (of questions in words, and of pasted error messages that the tree's
modules raise: ``message_search_ms``) and a fresh-process ``query``.

    python -m benchmarks.ranking_speed --files 16000 --before /path/to/old/checkout --after . --work /tmp/rs

Made to check that a ranking change keeps the query path (issue 23, point 9): in-process search p50 within 1.5x,
a fresh ``query`` as before, the index at most 1.5x the size. The tree is :func:`benchmarks.perf.index_tree`
(standard-library modules, each copy in its own directory); both trees are indexed by ``llmc-splitters index
--embedding none`` of their own code; each probe runs 3 times, alternating, and medians are reported. Results:
``benchmarks/results/ranking-speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .perf import index_tree
from .query_path import QUESTIONS

RESULTS = Path(__file__).resolve().parent / "results"
# Messages the tree's standard-library modules raise (textwrap, string, csv, queue, netrc), pasted as a user would.
MESSAGES = (
    "ValueError: invalid width -1 (must be > 0)",
    "ValueError: Invalid placeholder in string: line 3, col 7",
    "ValueError: dict contains fields not in fieldnames: 'age'",
    "ValueError: task_done() called too many times",
    "netrc.NetrcParseError: Macro definition missing null line terminator. (/home/me/.netrc, line 4)",
)
PROBE = r'''
import json, statistics, sys, time
from llmc_splitters.retrieval import CodeRetriever
r = CodeRetriever(path=sys.argv[1], embedding=None)
qs, ms = json.loads(sys.argv[2]), json.loads(sys.argv[3])
r.search(qs[0], k=10); r.retrieve(qs[0])
s, t, m = [], [], []
for _ in range(2):
    for q in qs:
        a = time.perf_counter(); r.search(q, k=10); s.append(time.perf_counter() - a)
        a = time.perf_counter(); r.retrieve(q); t.append(time.perf_counter() - a)
    for q in ms:
        a = time.perf_counter(); r.search(q, k=10); m.append(time.perf_counter() - a)
print(json.dumps({"search_ms": statistics.median(s) * 1000, "retrieve_ms": statistics.median(t) * 1000,
                  "message_search_ms": statistics.median(m) * 1000}))
'''


def _size(db: Path, part: str = "") -> int:
    return sum(f.stat().st_size for f in db.rglob("*") if f.is_file() and part in str(f.relative_to(db)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=16000)
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the library before the change")
    ap.add_argument("--after", type=Path, default=Path("."))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    tree = args.work / f"tree{args.files}"
    if not tree.exists():
        index_tree(tree, args.files)
    code = {"before": args.before.resolve(), "after": args.after.resolve()}
    out: dict[str, object] = {"command": " ".join(["python -m benchmarks.ranking_speed", *(argv or sys.argv[1:])]),
                              "files": args.files}
    for name, src in code.items():
        env = dict(os.environ, PYTHONPATH=str(src))
        db = args.work / f"db{args.files}-{name}"
        if not db.exists():
            t0 = time.time()
            subprocess.run([sys.executable, "-m", "llmc_splitters", "index", str(tree), "--db", str(db),
                            "--embedding", "none"], env=env, check=True, capture_output=True)
            out[f"{name}_index_s"] = time.time() - t0
        out[f"{name}_bytes"] = _size(db)
        out[f"{name}_lexical_bytes"] = _size(db, "lexical")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in code}
    for _ in range(3):
        for name, src in code.items():
            env = dict(os.environ, PYTHONPATH=str(src))
            db = args.work / f"db{args.files}-{name}"
            got = subprocess.run([sys.executable, "-c", PROBE, str(db), json.dumps(list(QUESTIONS)),
                                  json.dumps(list(MESSAGES))], env=env, capture_output=True, text=True, check=True)
            row = json.loads(got.stdout.strip().splitlines()[-1])
            fresh = []
            for q in QUESTIONS[:5]:
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "llmc_splitters", "query", q, "--db", str(db), "--json"],
                               env=env, capture_output=True, check=True)
                fresh.append(time.perf_counter() - t0)
            runs[name].append({**row, "fresh_query_s": statistics.median(fresh)})
    out["runs"] = runs
    out["median"] = {name: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for name, rs in runs.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ranking-speed.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["median"], indent=1))


if __name__ == "__main__":
    main()
