"""Indexing one big file: time against size, and the ratio per doubling (issue 22, item 4; target at most 2.2x).

    python -m benchmarks.big_file                      # 1, 2, 4, 8, 16 MB (about 8 minutes on 2 cores)
    python -m benchmarks.big_file --sizes 1,2,4        # a subset

Each size is one generated Python file of small functions (a docstring, an assignment, a call each; 1 MB = 10^6
bytes) in a directory of its own, indexed by ``CodeIndex(chunker=ASTChunker(max_tokens=512, analyze=True,
max_file_bytes=64 MiB)).index_directory`` (lexical only, in memory: what ``llmc-splitters index --embedding none``
does) in a fresh process. Reported per size: CPU seconds of the process and wall seconds of ``index_directory``,
CPU seconds of ``chunk_tree`` alone on the same text (the chunker's share), peak RSS, spans written, and the
CPU ratio to the size before (a doubling). Results go to ``benchmarks/results/big_file.json`` and ``big_file.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from llmc_splitters import ASTChunker
    from llmc_splitters.retrieval import CodeIndex

    root = Path(sys.argv[1])
    chunker = ASTChunker(max_tokens=512, analyze=True, max_file_bytes=64 << 20)
    text = (root / "big.py").read_text()
    chunker.chunk_tree(text[:2000], path="warm.py")  # load the grammar and the tokenizer outside the timings
    c0 = time.process_time()
    chunker.chunk_tree(text, path="big.py")
    chunk_cpu = time.process_time() - c0
    idx = CodeIndex(chunker=chunker)
    c0, w0 = time.process_time(), time.perf_counter()
    report = idx.index_directory(root)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    assert report.added == ["big.py"] and not report.failed, report
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "chunk_tree_cpu_s": chunk_cpu, "spans": report.spans,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """
)


def generated_python(nbytes: int) -> str:
    """Small functions up to ``nbytes`` bytes (the shape of the issue's generated file)."""
    out: list[str] = []
    size = n = 0
    while size < nbytes:
        s = f'def func_{n}(a, b=1):\n    """Add {n}."""\n    c = a + b * {n}\n    return helper_{n % 50}(c)\n\n\n'
        out.append(s)
        size += len(s)
        n += 1
    return "".join(out)


def measure(mb: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="llmc-big-") as tmp:
        (Path(tmp) / "big.py").write_text(generated_python(mb * 1_000_000))
        proc = subprocess.run([sys.executable, "-c", _CHILD, tmp], capture_output=True, text=True, check=True)
    return {"mb": mb, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="1,2,4,8,16", help="file sizes in MB, comma-separated (default 1,2,4,8,16)")
    args = ap.parse_args(argv)
    rows: list[dict[str, float]] = []
    for mb in (int(x) for x in args.sizes.split(",")):
        row = measure(mb)
        if rows and mb == 2 * rows[-1]["mb"]:
            row["ratio"] = row["cpu_s"] / rows[-1]["cpu_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "command":
            "python -m benchmarks.big_file" + ("" if args.sizes == "1,2,4,8,16" else f" --sizes {args.sizes}")}
    (RESULTS / "big_file.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Indexing one big generated Python file",
        "",
        f"`{meta['command']}` (Python {meta['python']}, {meta['machine']}). CPU and wall seconds of "
        "`index_directory` (lexical, analysis on) in a fresh process; `chunk_tree` CPU alone for comparison; the "
        "ratio is the CPU time over that of half the size (target at most 2.2).",
        "",
        "| MB | index CPU s | index wall s | chunk_tree CPU s | spans | peak MB | ratio per doubling |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "-"
        lines.append(f"| {r['mb']} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {r['chunk_tree_cpu_s']:.1f} | "
                     f"{r['spans']} | {r['peak_mb']:.0f} | {ratio} |")
    (RESULTS / "big_file.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
