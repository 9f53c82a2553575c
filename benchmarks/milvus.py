"""The whole index on Milvus Lite against the local engines (SQLite + tantivy, embedded Chroma), on the same trees.

    python -m benchmarks.milvus                       # 250 and 1000 files
    python -m benchmarks.milvus --sizes 250 --hybrid  # also hybrid (HashingEmbedding(256): the model costs nothing)
    python -m benchmarks.milvus --sizes 4000,16000 --hybrid-sizes 4000 --name milvus-large
    python -m benchmarks.milvus --tree distinct --sizes 4000 --hybrid --name milvus-distinct

Each tree is :func:`benchmarks.perf.index_tree` (``--tree copies``, the default: standard-library modules, each copy in
its own directory) or :func:`benchmarks.perf.distinct_tree` (``--tree distinct``: real files, no two alike). For each
tree and each engine: indexing time (``CodeIndex.index_directory``, in this process), the in-process query p50 over
the questions of :mod:`benchmarks.query_path` (``CodeIndex.search``, k=10, after one warm-up), a fresh-process
``llmc-splitters query Q --json`` (``--db DIR`` against ``--milvus FILE``), and the agreement of the two top-10
lists: mean overlap@10 (shared ids / 10) and the share of questions whose first hit is the same. Hybrid is measured
three times on the same collection: fused by Milvus (``fusion="server"``, the default: one ``hybrid_search``, each
list asked its share of times so that the RRF is weighted as the local fusion), the same call with one request per
list (Milvus's plain RRF: what the weighting costs and earns) and fused here (``fusion="client"``: two calls, the
local engines' RRF weights adapted to the question).

The trees hold several copies of each module, whose leaves score exactly alike: both engines order equal scores by
path (the search's tie order), but when the copies of a hit outnumber the candidates each engine returns, the two
engines keep different copies (BM25 statistics per segment make their scores differ in the last digits). So the
agreement is also measured up to copies: the same module's same span in another copy counts as the same hit. The
distinct tree has no such ties.

Hybrid rows also say how far each engine's dense search is from an exact one (every leaf vector compared with the
question's, here): the mean share of the exact top 10 that each engine's own top 10 holds, up to copies. Embedded
Chroma searches an HNSW graph (approximate); Milvus Lite searches exactly (its ``AUTOINDEX`` is a flat index).
Results go to ``benchmarks/results/milvus.json`` and ``milvus.md`` (``--name`` another stem), rewritten after each
size.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llmc_splitters.retrieval.storage.milvus import engines

from .perf import distinct_tree, index_tree
from .query_path import QUESTIONS

RESULTS = Path(__file__).resolve().parent / "results"


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def _overlap(a: list[str], b: list[str]) -> float:
    return len(set(a[:10]) & set(b[:10])) / max(1, min(10, max(len(a), len(b))))


def _copy_overlap(a: list[tuple], b: list[tuple]) -> float:
    """Overlap@10 up to copies: the same module's same span in another ``pNNNNN/`` copy counts as the same hit."""
    return sum((Counter(a[:10]) & Counter(b[:10])).values()) / max(1, min(10, max(len(a), len(b))))


def _p50_search(index, questions) -> tuple[float, dict[str, list[str]], dict[str, list[tuple]]]:
    index.search(questions[0], k=10)  # warm-up
    times, tops, places = [], {}, {}
    for q in questions:
        t0 = time.perf_counter()
        hits = index.search(q, k=10).hits
        times.append(time.perf_counter() - t0)
        tops[q] = [h.span.id for h in hits]
        places[q] = [(h.span.path.split("/", 1)[-1], h.span.start_byte, h.span.end_byte) for h in hits]
    return statistics.median(times) * 1000, tops, places


def _fresh_query(args: list[str], n: int) -> float:
    walls = []
    for q in QUESTIONS[:n]:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "llmc_splitters", "query", q, "--json", *args],
                              capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"query failed: {proc.stderr.strip()}")
    return statistics.median(walls)


def _places(index, ids: list[str]) -> list[tuple]:
    rows = index.span_store.get(ids)
    return [(rows[i].span.path.split("/", 1)[-1], rows[i].span.start_byte, rows[i].span.end_byte) for i in ids
            if i in rows]


def _dense_recall(local, remote, emb) -> tuple[float, float]:
    """Mean share of the exact dense top 10 (every leaf vector of the local store against the question's) held by
    each engine's own dense top 10, up to copies: ``(local, Milvus)``."""
    import numpy as np

    col = local.parts.dense.vectors().collection_of("leaf")
    ids: list[str] = []
    vecs = []
    for offset in range(0, col.count(), 5000):
        got = col.get(include=["embeddings"], limit=5000, offset=offset)
        ids += got["ids"]
        vecs.append(np.asarray(got["embeddings"], dtype=np.float32))
    m = np.concatenate(vecs)
    m /= np.linalg.norm(m, axis=1, keepdims=True) + 1e-12
    held: tuple[list[float], list[float]] = ([], [])
    for q in QUESTIONS:
        qv = np.asarray(emb.embed_query(q), dtype=np.float32)
        exact = _places(local, [ids[i] for i in np.argsort(-(m @ qv), kind="stable")[:10]])
        for got_from, index in zip(held, (local, remote)):
            top = [i for i, _ in index.parts.dense.vectors().query([float(x) for x in qv], 10, role="leaf")]
            got_from.append(_copy_overlap(exact, _places(index, top)))
    return sum(held[0]) / len(held[0]), sum(held[1]) / len(held[1])


def run_size(n: int, hybrid: bool, fresh: int = 5, tree: str = "copies") -> list[dict]:
    from llmc_splitters.retrieval import CodeIndex, HashingEmbedding, MilvusStore

    out = []
    with tempfile.TemporaryDirectory(prefix="llmc-milvus-bench-") as tmp:
        src = Path(tmp) / "src"
        nbytes = (distinct_tree if tree == "distinct" else index_tree)(src, n)
        modes = [("lexical", None)] + ([("hybrid", HashingEmbedding(256))] if hybrid else [])
        for mode, emb in modes:
            row: dict = {"files": n, "tree": tree, "bytes": nbytes, "mode": mode}
            local_dir = Path(tmp) / f"local-{mode}"
            t0 = time.perf_counter()
            local = CodeIndex(local_dir, embedding=emb)
            local.index_directory(src)
            row["local_index_s"] = round(time.perf_counter() - t0, 2)
            db = str(Path(tmp) / f"milvus-{mode}.db")
            t0 = time.perf_counter()
            remote = CodeIndex(store=MilvusStore(db, collection="bench"), embedding=emb)
            remote.index_directory(src)
            row["milvus_index_s"] = round(time.perf_counter() - t0, 2)
            row["leaves"] = local.leaf_count()
            row["rows"] = remote.span_store.counts()["spans"]
            row["local_disk_mb"] = round(_du(local_dir) / 1e6, 1)
            row["milvus_disk_mb"] = round(_du(Path(db)) / 1e6, 1)
            assert remote.leaf_count() == row["leaves"], "the engines hold different leaves"
            row["local_query_p50_ms"], a, ca = _p50_search(local, QUESTIONS)
            row["milvus_query_p50_ms"], b, cb = _p50_search(remote, QUESTIONS)
            row = _agreement(row, (a, ca), (b, cb), row["milvus_query_p50_ms"])
            if emb is not None:
                row["dense_exact_local"], row["dense_exact_milvus"] = (round(x, 3) for x in
                                                                       _dense_recall(local, remote, emb))
            if mode == "lexical":
                local.close()
                remote.store.close()  # Milvus Lite: one process holds the file at a time
                row["local_fresh_query_s"] = round(_fresh_query(["--db", str(local_dir)], fresh), 2)
                row["milvus_fresh_query_s"] = round(_fresh_query(["--milvus", db, "--collection", "bench"], fresh), 2)
            for k in ("local_query_p50_ms", "milvus_query_p50_ms"):
                row[k] = round(row[k], 2)
            print(json.dumps(row), flush=True)
            out.append(row)
            if mode == "hybrid":
                # The same collection, one request per list (Milvus's plain RRF): what the weighting costs and earns.
                real_shares = engines._shares
                engines._shares = lambda w: (1, 1)
                try:
                    p50, c, cc = _p50_search(remote, QUESTIONS)
                finally:
                    engines._shares = real_shares
                out.append(_agreement({**row, "mode": "hybrid, server fusion, plain RRF"}, (a, ca), (c, cc), p50))
                print(json.dumps(out[-1]), flush=True)
                # The same collection, fused here (two calls) with the local engines' shape-adapted weights.
                remote.store.close()
                client = CodeIndex(store=MilvusStore(db, collection="bench", fusion="client"), embedding=emb)
                p50, c, cc = _p50_search(client, QUESTIONS)
                out.append(_agreement({**row, "mode": "hybrid, client fusion"}, (a, ca), (c, cc), p50))
                print(json.dumps(out[-1]), flush=True)
                client.store.close()
    return out


def _agreement(row: dict, local: tuple[dict, dict], milvus: tuple[dict, dict], p50: float) -> dict:
    """``row`` with the Milvus p50 and the agreement of its top-10 lists with the local engines': by id, and up
    to copies (``(ids, places)`` of each, by question)."""
    (a, ca), (b, cb) = local, milvus
    overlaps = [_overlap(a[q], b[q]) for q in QUESTIONS]
    copies = [_copy_overlap(ca[q], cb[q]) for q in QUESTIONS]
    return {**row, "milvus_query_p50_ms": round(p50, 2), "mean_overlap_at_10": round(sum(overlaps) / len(overlaps), 3),
            "min_overlap_at_10": round(min(overlaps), 2),
            "same_top1": round(sum(a[q][:1] == b[q][:1] for q in QUESTIONS) / len(QUESTIONS), 3),
            "mean_overlap_at_10_up_to_copies": round(sum(copies) / len(copies), 3),
            "same_top1_up_to_copies": round(sum(ca[q][:1] == cb[q][:1] for q in QUESTIONS) / len(QUESTIONS), 3)}


def _markdown(rows: list[dict]) -> str:
    head = ("| files | tree | mode | leaves | index local s | index Milvus s | query p50 local ms | query p50 Milvus ms | "
            "fresh query local s | fresh query Milvus s | mean overlap@10 | min overlap@10 | same top-1 | "
            "overlap@10 up to copies | same top-1 up to copies | dense vs exact, local / Milvus | disk local MB | "
            "disk Milvus MB |")
    lines = [
        "# The whole index on Milvus Lite against the local engines", "",
        f"`python -m benchmarks.milvus` on {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}; see the module docstring for what is measured.", "",
        head, "|" + "---|" * 18,
    ]
    for r in rows:
        exact = f"{r['dense_exact_local']} / {r['dense_exact_milvus']}" if "dense_exact_local" in r else ""
        lines.append(
            f"| {r['files']} | {r.get('tree', 'copies')} | {r['mode']} | {r['leaves']} | {r['local_index_s']} | "
            f"{r['milvus_index_s']} | {r['local_query_p50_ms']} | {r['milvus_query_p50_ms']} | "
            f"{r.get('local_fresh_query_s', '')} | {r.get('milvus_fresh_query_s', '')} | {r['mean_overlap_at_10']} | "
            f"{r['min_overlap_at_10']} | {r['same_top1']} | {r['mean_overlap_at_10_up_to_copies']} | "
            f"{r['same_top1_up_to_copies']} | {exact} | {r['local_disk_mb']} | {r['milvus_disk_mb']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="250,1000", help="tree sizes in files (comma-separated)")
    p.add_argument("--hybrid", action="store_true", help="also hybrid search (HashingEmbedding(256))")
    p.add_argument("--hybrid-sizes", default=None,
                   help="the sizes measured hybrid too (comma-separated; default: every size with --hybrid)")
    p.add_argument("--name", default="milvus", help="results file stem under benchmarks/results/")
    p.add_argument("--fresh", type=int, default=5, help="questions asked by a fresh-process query (median)")
    p.add_argument("--tree", choices=("copies", "distinct"), default="copies",
                   help="copies: standard-library modules, each copy in its own directory; distinct: real files, "
                   "no two alike (see the module docstring)")
    args = p.parse_args(argv)
    sizes = [int(n) for n in args.sizes.split(",")]
    hybrid = ({int(n) for n in args.hybrid_sizes.split(",")} if args.hybrid_sizes is not None
              else set(sizes) if args.hybrid else set())
    rows: list[dict] = []
    RESULTS.mkdir(exist_ok=True)
    for n in sizes:
        rows += run_size(n, n in hybrid, args.fresh, args.tree)
        # Written after each size: a long run keeps what it measured.
        (RESULTS / f"{args.name}.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        (RESULTS / f"{args.name}.md").write_text(_markdown(rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
