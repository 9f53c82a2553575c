"""Scale-out measurements and the sizing of a 1,000,000-file repository.

Parts (each result is written to ``benchmarks/results/scale.json`` and ``scale.md``):

* ``manifest``: a real git repository whose trees list 1,000,000 files (built with ``git mktree --missing``: no
  blob is written, so it takes seconds), then, in a fresh process each, ``git ls-tree -r`` -> :class:`ManifestState`
  plan of (a) the first, full run and (b) the next run after a 1% change set (0.5% modified, 0.25% added, 0.25%
  deleted), with wall time and peak RSS;
* ``chunk``: single-core throughput of :func:`~llmc_splitters.ingest.chunk_file` (parse, split, analyse, rows) on
  real code (the Python standard library of the running interpreter);
* ``embed``: MiniLM (all-MiniLM-L6-v2, CPU) texts per second on those rows' embedding texts, 1 and 2 threads;
* ``ray``: the Ray pipeline on a real tree (a git repository of standard-library modules) into a ``chroma run``
  server: lexical-only and with MiniLM, cold and warm;
* ``sizing``: core-hours and vector-store memory for 1,000,000 files, from the measured rates.

Run::

    python -m benchmarks.scale                 # everything (about 10-15 minutes on 2 cores)
    python -m benchmarks.scale --part manifest --files 1000000
    python -m benchmarks.scale --quick         # small sizes, to check that it runs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
_FP = "v1-benchmark"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ------------------------------------------------------------------------------------------------- manifest


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 - synthetic blob ids


def _mktree(git_dir: Path, files: int, version: int, dirs: int = 1000) -> str:
    """A tree of ``files`` files in ``dirs`` directories; ``version`` 1 applies the 1% change set. Returns its SHA."""
    proc = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "mktree", "--missing", "--batch"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    per_dir = files // dirs
    roots = []
    for d in range(dirs):
        lines = []
        for j in range(per_dir):
            i = d * per_dir + j
            name = f"module_{i:07d}.py"
            sha = _sha(f"{i}")
            if version == 1:
                if i % 200 == 0:  # 0.5% modified
                    sha = _sha(f"{i}-v2")
                elif i % 400 == 1:  # 0.25% deleted
                    continue
            lines.append(f"100644 blob {sha}\t{name}")
            if version == 1 and i % 400 == 3:  # 0.25% added
                lines.append(f"100644 blob {_sha(f'new-{i}')}\tadded_{i:07d}.py")
        proc.stdin.write("\n".join(lines) + "\n\n")
        proc.stdin.flush()
        roots.append(f"040000 tree {proc.stdout.readline().strip()}\tpkg_{d:04d}")
    proc.stdin.write("\n".join(roots) + "\n\n")
    proc.stdin.flush()
    top = proc.stdout.readline().strip()
    proc.stdin.close()
    proc.wait()
    return top


def _plan_child(git_dir: str, ref: str, state_dir: str, commit: bool) -> None:
    """Run in a fresh process: list the tree with git, plan against the state, print time and peak RSS."""
    from llmc_splitters.ingest.manifest import ManifestState, git_manifest

    rss0 = _rss_mb()
    t = time.perf_counter()
    c = time.process_time()
    state = ManifestState(state_dir)
    plan = state.plan(git_manifest(git_dir, ref=ref, sizes=False), fingerprint=_FP)
    plan_s = time.perf_counter() - t
    plan_cpu = time.process_time() - c
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_plan = _rss_mb()
    t = time.perf_counter()
    if commit:
        state.commit(plan)
    commit_s = time.perf_counter() - t
    print(json.dumps({
        "seconds_plan": round(plan_s, 2), "seconds_commit": round(commit_s, 2),
        "cpu_seconds_plan": round(plan_cpu, 2), "cpu_seconds_git": round(kids.ru_utime + kids.ru_stime, 2),
        "peak_rss_mb": round(rss_plan, 1), "rss_before_mb": round(rss0, 1),
        "total": plan.total, "added": len(plan.added), "changed": len(plan.changed), "deleted": len(plan.deleted),
        "unchanged": plan.unchanged,
        "baseline_mb": round(state.baseline.stat().st_size / 1e6, 1) if state.baseline.exists() else None,
    }))


def _listing_child(git_dir: str, ref: str) -> None:
    from llmc_splitters.ingest.manifest import git_manifest

    t = time.perf_counter()
    n = sum(1 for _ in git_manifest(git_dir, ref=ref, sizes=False))
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"entries": n, "seconds": round(time.perf_counter() - t, 2), "cpu_seconds": round(
        time.process_time() + kids.ru_utime + kids.ru_stime, 2), "peak_rss_mb": round(_rss_mb(), 1)}))


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.scale", *args], check=True, capture_output=True,
                         text=True, cwd=Path(__file__).parent.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_manifest(files: int) -> dict[str, Any]:
    """Plan and diff a ``files``-file git repository with a 1% change set."""
    work = Path(tempfile.mkdtemp(prefix="llmc-scale-"))
    try:
        git_dir = work / "repo.git"
        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
        t = time.perf_counter()
        v0 = _mktree(git_dir, files, 0)
        v1 = _mktree(git_dir, files, 1)
        build = time.perf_counter() - t
        listing = _child("_listing", str(git_dir), v1)
        first = _child("_plan", str(git_dir), v0, str(work / "state"), "1")
        second = _child("_plan", str(git_dir), v1, str(work / "state"), "0")
        return {"files": files, "seconds_build_trees": round(build, 1), "git_ls_tree": listing,
                "first_run_plan": first, "one_percent_plan": second}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------- chunk + embed


def stdlib_sample(max_bytes: int) -> list[Path]:
    """Standard-library ``.py`` files (no tests), in path order, up to ``max_bytes``."""
    out: list[Path] = []
    total = 0
    for p in sorted(STDLIB.rglob("*.py")):
        rel = p.relative_to(STDLIB).as_posix()
        if any(part in rel for part in ("test", "site-packages", "idlelib", "lib2to3", "__pycache__")):
            continue
        size = p.stat().st_size
        if size == 0 or size > 400_000:
            continue
        out.append(p)
        total += size
        if total >= max_bytes:
            break
    return out


def bench_chunk(max_bytes: int) -> dict[str, Any]:
    from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint

    files = stdlib_sample(max_bytes)
    settings = IngestSettings(max_tokens=512)
    fp = settings_fingerprint(settings)
    chunk_file("", "warm.py", b"def f():\n    return 1\n", settings, fingerprint=fp)
    nbytes = rows = searched = leaves = 0
    t = time.process_time()
    for p in files:
        data = p.read_bytes()
        res = chunk_file("", p.relative_to(STDLIB).as_posix(), data, settings, fingerprint=fp)
        nbytes += len(data)
        rows += len(res.rows)
        leaves += sum(1 for r in res.rows if r["role"] == "leaf")
        searched += sum(1 for r in res.rows if r["role"] in ("leaf", "summary"))
    cpu = time.process_time() - t
    return {
        "corpus": f"CPython {platform.python_version()} standard library (.py, no tests)",
        "files": len(files), "mb": round(nbytes / 1e6, 2), "cpu_seconds": round(cpu, 1),
        "mb_per_core_second": round(nbytes / 1e6 / cpu, 3), "files_per_core_second": round(len(files) / cpu, 1),
        "avg_file_kb": round(nbytes / 1e3 / len(files), 1), "records_per_file": round(rows / len(files), 1),
        "leaves_per_file": round(leaves / len(files), 1), "searched_per_file": round(searched / len(files), 1),
        "max_tokens": settings.max_tokens,
    }


def bench_embed(n_texts: int) -> dict[str, Any]:
    import torch

    from llmc_splitters.ingest import BATCH_COLUMNS, IngestSettings, chunk_batch
    from llmc_splitters.ingest.pipeline import EmbedStage
    from llmc_splitters.retrieval.embeddings import MiniLMEmbedding

    files = stdlib_sample(2_000_000)
    batch = chunk_batch({"path": [p.name for p in files], "data": [p.read_bytes() for p in files]},
                        IngestSettings(max_tokens=512))
    keep = [i for i, r in enumerate(batch["role"]) if r in ("leaf", "summary")][:n_texts]
    sub = {c: [batch[c][i] for i in keep] for c in BATCH_COLUMNS}
    stage = EmbedStage(MiniLMEmbedding, None, batch_size=64)
    stage({c: v[:64] for c, v in sub.items()})  # warm-up
    out: dict[str, Any] = {"model": stage.name, "texts": len(keep), "dims": stage.model.identity.dimension}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        t = time.perf_counter()
        c = time.process_time()
        done = stage(sub)
        s = time.perf_counter() - t
        cpu = time.process_time() - c
        out[f"texts_per_second_{threads}_threads"] = round(len(keep) / s, 1)
        # CPU time, not wall time: what core-hours are made of, and robust to other load on the machine.
        out[f"texts_per_cpu_second_{threads}_threads"] = round(len(keep) / cpu, 1)
    tokens = [json.loads(m).get("embedded_tokens", 0) for m in done["metadata"]]
    out["avg_embedded_tokens"] = round(sum(tokens) / max(1, len(tokens)), 1)
    out["truncated_share"] = round(
        sum(json.loads(m).get("embedded_view") == "truncated" for m in done["metadata"]) / max(1, len(tokens)), 3)
    return out


# --------------------------------------------------------------------------------------------------------- ray


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_ray(max_bytes: int) -> dict[str, Any]:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from llmc_splitters.ingest import IngestSettings, settings_fingerprint
    from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest
    from llmc_splitters.ingest.pipeline import ChromaSink
    from llmc_splitters.ingest.ray import run_ray
    from llmc_splitters.retrieval.embeddings import MiniLMEmbedding

    work = Path(tempfile.mkdtemp(prefix="llmc-ray-"))
    files = stdlib_sample(max_bytes)
    repo = work / "repo"
    for p in files:
        dest = repo / p.relative_to(STDLIB)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    nbytes = sum(p.stat().st_size for p in files)
    port = _free_port()
    cli = Path(sys.executable).with_name("chroma")
    server = subprocess.Popen([str(cli), "run", "--path", str(work / "db"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict[str, Any] = {"files": len(files), "mb": round(nbytes / 1e6, 2), "cpus": os.cpu_count()}
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://localhost:{port}/api/v2/heartbeat", timeout=1)  # noqa: S310
                break
            except OSError:
                time.sleep(0.2)
        t = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        results["seconds_ray_init"] = round(time.perf_counter() - t, 1)
        settings = IngestSettings(max_tokens=512)
        fp = settings_fingerprint(settings)

        def run(name: str, collection: str, factory: Any, *, full: bool = False) -> None:
            state = ManifestState(work / f"state-{collection}")
            plan = state.plan(filter_manifest(git_manifest(repo)), fingerprint=fp, full=full)
            t0 = time.perf_counter()
            s = run_ray(plan, ChromaSink(host="localhost", port=port, collection=collection),
                        index=work / f"index-{collection}", roots=str(repo),
                        settings=settings, embedding_factory=factory, state=state, files_per_batch=8,
                        chunk_num_cpus=0.5, embed_num_cpus=1.0, write_num_cpus=0.25, embed_batch_size=256,
                        write_batch_size=500, progress=None)
            wall = time.perf_counter() - t0
            results[name] = {
                "seconds": round(wall, 1), "files_chunked": s.files_chunked, "records_written": s.spans_written,
                "texts_embedded": s.spans_embedded, "texts_cached": s.spans_cached,
                "files_per_second": round(s.files_chunked / wall, 1), "mb_per_second": round(nbytes / 1e6 / wall, 3),
                "records_per_second": round(s.spans_written / wall, 1),
            }

        run("lexical_cold", "lexical", None)
        run("lexical_warm_full_rerun", "lexical", None, full=True)
        run("minilm", "minilm", MiniLMEmbedding)
        run("minilm_full_rerun_cached", "minilm", MiniLMEmbedding, full=True)
    finally:
        ray.shutdown()
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    return results


# ------------------------------------------------------------------------------------------------------ sizing


def sizing(chunk: dict[str, Any], embed: dict[str, Any], files: int = 1_000_000) -> dict[str, Any]:
    """Core-hours and vector-store memory for ``files`` files, at the measured per-byte rates."""
    out: dict[str, Any] = {"files": files, "scenarios": []}
    per_kb_searched = chunk["searched_per_file"] / chunk["avg_file_kb"]
    per_kb_records = chunk["records_per_file"] / chunk["avg_file_kb"]
    dims = embed.get("dims") or 384
    rate = embed.get("texts_per_cpu_second_1_threads") or embed.get("texts_per_second_1_threads") or 1.0
    for label, avg_kb in (("standard-library-like files (measured average)", chunk["avg_file_kb"]),
                          ("small-file monorepo, 4 KB average", 4.0)):
        total_mb = files * avg_kb / 1e3
        searched = files * avg_kb * per_kb_searched
        records = files * avg_kb * per_kb_records
        chunk_h = total_mb / chunk["mb_per_core_second"] / 3600
        embed_h = searched / rate / 3600
        vec_gb = searched * dims * 4 / 1e9
        hnsw_gb = searched * 16 * 2 * 4 / 1e9  # M=16: about 2*M neighbour ids of 4 bytes per vector
        chroma_layout_gb = records * dims * 4 / 1e9  # one collection: parents hold placeholder vectors too
        out["scenarios"].append({
            "label": label, "avg_file_kb": avg_kb, "total_gb": round(total_mb / 1e3, 2),
            "searched_records": int(searched), "all_records": int(records),
            "chunk_core_hours": round(chunk_h, 1), "embed_core_hours_minilm_cpu": round(embed_h, 1),
            "vectors_gb_float32": round(vec_gb, 1), "hnsw_links_gb": round(hnsw_gb, 1),
            "chroma_one_collection_vectors_gb": round(chroma_layout_gb, 1),
        })
    return out


# ------------------------------------------------------------------------------------------------------ report


def write_report(results: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["# Scale-out measurements", "", f"Machine: {results['machine']}.", "",
             "Load average (1, 5, 15 min) when each part started: "
             + "; ".join(f"{k.removesuffix('_before')} {', '.join(f'{x:.1f}' for x in v)}"
                         for k, v in results.get("load_average", {}).items())
             + ". The machine was shared with other jobs, so wall times are pessimistic; CPU-time rates (used for "
             "the sizing) are much less affected.", ""]
    m = results.get("manifest")
    if m:
        f, s = m["first_run_plan"], m["one_percent_plan"]
        lines += [
            f"## Planning {m['files']:,} files (real `git ls-tree -r` of trees built with `git mktree --missing`)",
            "",
            "| step | wall s | CPU s (ours + git) | peak RSS MB | result |",
            "|---|---:|---:|---:|---|",
            f"| `git ls-tree -r` streamed through `git_manifest` | {m['git_ls_tree']['seconds']} | "
            f"{m['git_ls_tree'].get('cpu_seconds', '')} | "
            f"{m['git_ls_tree']['peak_rss_mb']} | {m['git_ls_tree']['entries']:,} entries |",
            f"| first run: plan (everything added) + commit | {f['seconds_plan']} + {f['seconds_commit']} | "
            f"{f.get('cpu_seconds_plan', '')} + {f.get('cpu_seconds_git', '')} | "
            f"{f['peak_rss_mb']} | {f['added']:,} added; baseline file {f['baseline_mb']} MB |",
            f"| next run, 1% change set: plan (git listing + diff + new manifest written) | {s['seconds_plan']} | "
            f"{s.get('cpu_seconds_plan', '')} + {s.get('cpu_seconds_git', '')} | {s['peak_rss_mb']} | "
            f"{s['added']:,} added, {s['changed']:,} changed, {s['deleted']:,} deleted, {s['unchanged']:,} unchanged |",
            "",
            f"Peak RSS includes the interpreter and imports ({s['rss_before_mb']} MB before planning). The diff is a "
            "merge of two sorted streams: memory holds the change set, not the manifests. The first run holds every "
            "entry in its plan (all are to be chunked).",
            "",
        ]
    c = results.get("chunk")
    if c:
        lines += ["## Chunking throughput (one core)", "",
                  f"{c['corpus']}: {c['files']} files, {c['mb']} MB, average {c['avg_file_kb']} KB: "
                  f"**{c['mb_per_core_second']} MB per core-second** ({c['files_per_core_second']} files/s), "
                  f"{c['records_per_file']} records and {c['searched_per_file']} embedded texts per file "
                  f"(max_tokens={c['max_tokens']}; parse, split, analyse, rows).", ""]
    e = results.get("embed")
    if e:
        lines += ["## Embedding throughput (CPU)", "",
                  f"{e['model']} ({e['dims']} dims) on {e['texts']} of those texts (average "
                  f"{e['avg_embedded_tokens']} word pieces; {e['truncated_share']:.0%} cut at the model's 254): "
                  f"**{e['texts_per_cpu_second_1_threads']} texts per CPU-second on 1 thread** "
                  f"({e['texts_per_second_1_threads']}/s wall); 2 threads: {e['texts_per_cpu_second_2_threads']} per "
                  f"CPU-second, {e['texts_per_second_2_threads']}/s wall.", ""]
    r = results.get("ray")
    if r:
        lines += [f"## Ray pipeline on a real tree ({r['files']} standard-library files, {r['mb']} MB, "
                  f"{r['cpus']} CPUs, local `chroma run` server)", "",
                  "| run | wall s | files/s | MB/s | records written | texts embedded | from cache |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for k in ("lexical_cold", "lexical_warm_full_rerun", "minilm", "minilm_full_rerun_cached"):
            v = r.get(k)
            if v:
                lines.append(f"| {k} | {v['seconds']} | {v['files_per_second']} | {v['mb_per_second']} | "
                             f"{v['records_written']} | {v['texts_embedded']} | {v['texts_cached']} |")
        lines += ["", f"`ray.init` took {r['seconds_ray_init']} s. Wall times include Ray Data start-up and actor "
                  "start (model load); on 2 cores the stages share the CPUs.", ""]
    z = results.get("sizing")
    if z:
        lines += [f"## Sizing for {z['files']:,} files", "",
                  "| scenario | corpus GB | embedded texts | chunk core-h | MiniLM CPU core-h | vectors GB | "
                  "HNSW links GB | one-collection Chroma vectors GB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for s in z["scenarios"]:
            lines.append(f"| {s['label']} | {s['total_gb']} | {s['searched_records']:,} | {s['chunk_core_hours']} | "
                         f"{s['embed_core_hours_minilm_cpu']} | {s['vectors_gb_float32']} | {s['hnsw_links_gb']} | "
                         f"{s['chroma_one_collection_vectors_gb']} |")
        lines += ["", "Chunk and embedding core-hours scale linearly with bytes; divide by cores (or use GPUs for "
                  "embedding: `embed_num_gpus`). Vectors are float32 x dims per embedded text; the one-collection "
                  "Chroma layout also stores a placeholder vector per parent record.", ""]
    (RESULTS / "scale.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "manifest", "chunk", "embed", "ray"], default="all")
    ap.add_argument("--files", type=int, default=1_000_000, help="files in the synthetic manifest")
    ap.add_argument("--quick", action="store_true", help="small sizes (checks that it runs)")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    if (RESULTS / "scale.json").exists():
        results = json.loads((RESULTS / "scale.json").read_text())
    results["machine"] = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    parts = ["manifest", "chunk", "embed", "ray"] if args.part == "all" else [args.part]
    load: dict[str, list[float]] = results.setdefault("load_average", {})
    if "manifest" in parts:
        load["manifest_before"] = list(os.getloadavg())
        results["manifest"] = bench_manifest(20_000 if args.quick else args.files)
        print(json.dumps(results["manifest"], indent=2), flush=True)
    if "chunk" in parts:
        load["chunk_before"] = list(os.getloadavg())
        results["chunk"] = bench_chunk(500_000 if args.quick else 8_000_000)
        print(json.dumps(results["chunk"], indent=2), flush=True)
    if "embed" in parts:
        load["embed_before"] = list(os.getloadavg())
        results["embed"] = bench_embed(128 if args.quick else 1024)
        print(json.dumps(results["embed"], indent=2), flush=True)
    if "ray" in parts:
        load["ray_before"] = list(os.getloadavg())
        results["ray"] = bench_ray(300_000 if args.quick else 3_000_000)
        print(json.dumps(results["ray"], indent=2), flush=True)
    if "chunk" in results and "embed" in results:
        results["sizing"] = sizing(results["chunk"], results["embed"])
    if not args.quick:
        write_report(results)
    else:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_plan":
        _plan_child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1")
    elif len(sys.argv) > 1 and sys.argv[1] == "_listing":
        _listing_child(sys.argv[2], sys.argv[3])
    else:
        main()
