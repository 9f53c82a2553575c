"""Before and after a change, in alternating runs: one ``llmc-splitters index`` with the library of a git revision,
then one with the working tree, and again, so that both see the same state of a shared machine.

    python -m benchmarks.alternate --before 1553b79 --pairs 4 -- /work/speedwork/tree-40 --embedding minilm --workers 1
    python -m benchmarks.alternate --before HEAD~3 --pairs 3 -- /work/speedwork/tree-16000 --embedding none

The arguments after ``--`` go to ``index`` (each run gets a fresh ``--db`` and ``--json -q``). The library of the
revision is ``git archive REV llmc_splitters`` in a temporary directory; each run imports it from there, the other
from this checkout. Reports ``index_seconds`` (what the summary says the index took, the walk excluded) and the
whole command's wall time, per run, and their means. Separate benchmark runs on this 2-core machine differ by more
than the changes this is meant to resolve (the direct encode alone moved between 122 and 166 texts/s in one
session), hence the alternation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _library_at(rev: str, into: Path) -> Path:
    """The ``llmc_splitters`` package of ``rev``, unpacked under ``into``; returns the directory to import from."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "llmc_splitters"],
                             check=True, capture_output=True).stdout
    tar_path = into / "lib.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "lib", filter="data")
    return into / "lib"


def _one(library: Path, args: list[str], db: Path) -> dict[str, float]:
    shutil.rmtree(db, ignore_errors=True)
    cmd = [sys.executable, "-m", "llmc_splitters", "index", *args, "--db", str(db), "--json", "-q"]
    t0 = time.perf_counter()
    # The working directory is the library's: ``python -m`` puts it first on the path.
    # Byte-code is written and reused, as in an installed package.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    out = subprocess.run(cmd, cwd=library, check=True, capture_output=True, text=True,
                         env={**env, "ANONYMIZED_TELEMETRY": "False"}).stdout
    wall = time.perf_counter() - t0
    summary = json.loads(out[out.index("{"):])
    return {"index_seconds": float(summary["index_seconds"]), "wall_seconds": wall,
            "files": summary["indexed_files"]}


def run(before: str, pairs: int, args: list[str]) -> dict:
    """``pairs`` alternating runs of ``index ARGS``: the library of ``before``, then this checkout's."""
    with tempfile.TemporaryDirectory(prefix="llmc-alternate-") as tmp:
        old = _library_at(before, Path(tmp))
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for i in range(pairs):
            for label, lib in (("before", old), ("after", ROOT)):
                got = _one(lib, args, Path(tmp) / "db")
                runs[label].append(got)
                print(f"pair {i + 1} {label:6s} index {got['index_seconds']:8.2f} s  whole command "
                      f"{got['wall_seconds']:8.2f} s", flush=True)
    means = {label: {k: statistics.mean(r[k] for r in rs) for k in ("index_seconds", "wall_seconds")}
             for label, rs in runs.items()}
    return {"before": before, "pairs": pairs, "args": args, "runs": runs, "means": means}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="git revision whose library is 'before'")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the runs as JSON here")
    ap.add_argument("index_args", nargs=argparse.REMAINDER, help="-- then the arguments of `index`")
    ns = ap.parse_args(argv)
    args = ns.index_args[1:] if ns.index_args[:1] == ["--"] else ns.index_args
    if not args:
        ap.error("give the arguments of `index` after --")
    res = run(ns.before, ns.pairs, args)
    m = res["means"]
    print(f"means over {ns.pairs} pairs: index_seconds {m['before']['index_seconds']:.2f} -> "
          f"{m['after']['index_seconds']:.2f} s; whole command {m['before']['wall_seconds']:.2f} -> "
          f"{m['after']['wall_seconds']:.2f} s")
    if ns.out:
        ns.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
