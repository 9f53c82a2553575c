"""Hybrid indexing against its encoder: texts embedded per second by ``llmc-splitters index`` and by a direct batched
encode of the same texts with the same backend, side by side, in one run; and the whole-command time of the default
model against MiniLM on torch on the same tree.

    python -m benchmarks.hybrid_index                            # 40 files, the default and minilm-torch
    python -m benchmarks.hybrid_index --files 120 --backends minilm

For each backend, on one generated tree (:func:`benchmarks.perf.index_tree`: standard-library modules, each copy in
its own directory, so every text is distinct) and each step a fresh process:

* **index**: ``llmc-splitters index TREE --db DB --embedding BACKEND --workers 1 --json -q``, after
  ``index --prepare-model`` (a one-time build is not indexing): its ``embedded`` texts over its ``index_seconds``
  (chunking, counting, embedding and every write) and over the whole command's wall time (start-up and the model's
  loading included);
* **direct**: the texts that index embedded, rebuilt from the index it wrote (each searched row's bounded view,
  :meth:`CodeIndex._view`, one per distinct vector-cache key), embedded by the same backend after a warm-up, by a
  :class:`~llmc_splitters.retrieval.embeddings.BatchEmbedder` with the index's default workers (``"auto"``): the
  encoder alone, with the same batching (sorted by length, across all the texts) and workers as the index, and
  nothing else on the machine's cores.

The ratio ``index texts/s / direct texts/s`` is the share of the encoder's speed that reaches the user (target
>= 0.8); the last line compares the whole-command times of the default and of ``minilm-torch`` (target >= 4x).
Results go to ``benchmarks/results/hybrid_index.json`` and ``.md``. The machine is shared: compare the numbers of
one run, not of two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from .perf import index_tree
from . import query_path
from .query_path import _cli, _run

RESULTS = Path(__file__).resolve().parent / "results"

_DIRECT = textwrap.dedent(
    """
    import json, sys, time
    from llmc_splitters.retrieval import CodeIndex
    from llmc_splitters.retrieval.embeddings import BatchEmbedder, resolve_embedding
    from llmc_splitters.retrieval.storage.file_rows import embed_source
    emb = resolve_embedding(sys.argv[2])
    idx = CodeIndex(sys.argv[1], embedding=emb, create=False)
    texts = {}
    for path in idx.paths:
        for r in idx.span_store.searched(path):
            if r.embed_hash:
                texts.setdefault(r.embed_hash, idx._view(embed_source(r.span, r.role), {})[0])
    texts = list(texts.values())
    encoder = BatchEmbedder(emb, workers="auto")
    encoder.embed(texts[:16])
    t0 = time.perf_counter()
    assert not encoder.embed(texts).failures
    print(json.dumps({"texts": len(texts), "seconds": time.perf_counter() - t0}))
    """
)


def measure(backend: str, src: Path, work: Path) -> dict:
    """The index and direct rows of one backend."""
    _run(_cli("index", "--prepare-model", "--embedding", backend))
    db = work / f"db-{backend}"
    shutil.rmtree(db, ignore_errors=True)
    out, wall, rss = _run(_cli("index", str(src), "--db", str(db), "--embedding", backend, "--workers", "1",
                               "--json", "-q"))
    summary = json.loads(out)
    row = {"backend": backend, "model": summary["embedding_name"], "files": summary["indexed_files"],
           "embedded": summary["embedded"], "index_seconds": summary["index_seconds"], "command_seconds": wall,
           "index_peak_mb": rss}
    out, _, _ = _run([sys.executable, "-c", _DIRECT, str(db), backend])
    direct = json.loads(out)
    row.update(direct_texts=direct["texts"], direct_seconds=direct["seconds"],
               direct_texts_per_s=direct["texts"] / direct["seconds"],
               index_texts_per_s=summary["embedded"] / summary["index_seconds"],
               command_texts_per_s=summary["embedded"] / wall)
    row["index_vs_direct"] = row["index_texts_per_s"] / row["direct_texts_per_s"]
    row["command_vs_direct"] = row["command_texts_per_s"] / row["direct_texts_per_s"]
    print(f"  {backend}: index {row['index_texts_per_s']:.1f} texts/s ({row['command_texts_per_s']:.1f} whole "
          f"command), direct {row['direct_texts_per_s']:.1f} texts/s: {row['index_vs_direct']:.2f}x", flush=True)
    return row


def render(res: dict) -> str:
    lines = ["# Hybrid indexing against its encoder", "",
             f"`{res['command']}` on {res['date']}; {res['machine']}; load average at the start {res['load']}. "
             f"One tree of {res['files']} files; every row in this one run.", "",
             "| backend | model | texts | direct encode texts/s | `index` texts/s (index_seconds) | index / direct | "
             "whole command s | whole command texts/s | command / direct |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in [*res["rows"], *res.get("before", [])]:
        tag = " (before)" if r in res.get("before", []) else ""
        lines.append(f"| {r['backend']}{tag} | {r['model']} | {r['embedded']:,} | {r['direct_texts_per_s']:.1f} | "
                     f"{r['index_texts_per_s']:.1f} | {r['index_vs_direct']:.2f} | {r['command_seconds']:.1f} | "
                     f"{r['command_texts_per_s']:.1f} | {r['command_vs_direct']:.2f} |")
    by = {r["backend"]: r for r in res["rows"]}
    if "minilm" in by and "minilm-torch" in by:
        ratio = by["minilm-torch"]["command_seconds"] / by["minilm"]["command_seconds"]
        lines += ["", f"Whole `index` command, the default ({by['minilm']['model']}) against MiniLM on torch on the "
                      f"same tree: {by['minilm']['command_seconds']:.1f} s against "
                      f"{by['minilm-torch']['command_seconds']:.1f} s, {ratio:.2f}x (target >= 4x)."]
    if res.get("before"):
        lines += ["", f"Rows marked before: `{res.get('before_command', '')}` right after, on the same tree, with the "
                      "source tree before this change (embedding and writing on one thread, the model's weights parsed)."]
    for extra in res.get("earlier", []):
        lines += ["", f"Earlier, `{extra['command']}` ({extra['date']}, load average {extra['load']}; its index "
                      "processes started just before embedding and writing moved to two threads):", "",
                  *render({**extra, "rows": extra["rows"]}).splitlines()[4:]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--backends", default="minilm,minilm-torch")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--library", type=Path, default=None,
                    help="index with the llmc_splitters of this source tree (a before/after on the same tree)")
    args = ap.parse_args(argv)
    if args.library is not None:
        query_path._LIBRARY.append(str(args.library.resolve()))
    work = args.work or Path(tempfile.mkdtemp(prefix="llmc-hybrid-index-"))
    src = work / f"tree-{args.files}"
    if not src.exists():
        index_tree(src, args.files)
    res = {"command": " ".join(["python -m benchmarks.hybrid_index", *(argv or sys.argv[1:])]),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
           "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
           "files": args.files, "rows": []}
    for backend in args.backends.split(","):
        res["rows"].append(measure(backend, src, work))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hybrid_index.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "hybrid_index.md").write_text(render(res))
    print(render(res))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
