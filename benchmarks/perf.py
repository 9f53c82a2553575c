"""Throughput against the parse+encode floor, peak memory on a generated 5 MB file, and peak memory of indexing a
tree of N files (each in a subprocess).

Run as a module to measure memory in a fresh process::

    python -m benchmarks.perf --target llmc --mb 5
    python -m benchmarks.perf --target index --files 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from .corpus import SourceFile, get_parser, parser_language


def floor_seconds(files: list[SourceFile]) -> dict[str, float]:
    """Per language: one tree-sitter parse + one cl100k encode per file."""
    from .chunkers import encoding

    enc = encoding()
    out: dict[str, float] = {}
    for f in files:
        parser = get_parser(parser_language(f.language, f.path))
        data = f.text.encode("utf-8", "surrogatepass")
        t0 = time.thread_time()
        parser.parse(data)
        enc.encode(f.text, disallowed_special=())
        out[f.language] = out.get(f.language, 0.0) + time.thread_time() - t0
    return out


def synthetic_python(target_bytes: int) -> str:
    """A deterministic Python module of about ``target_bytes``: classes, methods, docstrings, imports, long bodies."""
    parts = ["import os\nimport re\nfrom collections import OrderedDict as _OD\n\n"]
    size = len(parts[0])
    i = 0
    while size < target_bytes:
        body = "".join(f"        v{j} = self.{['alpha', 'beta', 'gamma'][j % 3]}_{i} * {j} + len(os.sep)\n"
                       for j in range(8 + i % 40))
        block = (
            f"class Service{i}(object):\n"
            f'    """Service number {i}: holds settings and computes values."""\n\n'
            f"    limit = {i % 97}\n\n"
            f"    def __init__(self, alpha_{i}=1, beta_{i}=2):\n"
            f"        self.alpha_{i} = alpha_{i}\n        self.beta_{i} = beta_{i}\n        self.gamma_{i} = {i}\n\n"
            f"    @property\n    def total_{i}(self):\n"
            f'        """Return the total of service {i}."""\n'
            f"{body}"
            f"        return v0 + self.limit\n\n"
            f"    def match_{i}(self, text):\n"
            f"        return re.match(r'^item{i}-(\\d+)$', text) is not None\n\n\n"
            f"def helper_{i}(items):\n"
            f"    table = _OD()\n    for k, v in enumerate(items):\n        table[k] = v * {i}\n    return table\n\n\n"
        )
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 1e6


def _peak_mb(since: float = 0.0) -> float:
    """Peak resident memory of this process (VmHWM), at least ``since`` (an earlier reading). ``ru_maxrss`` is not
    used: Linux carries it over ``execve`` from the parent, so a child of a big process would report the parent's
    peak. Linux records the high-water mark lazily and reports it as the larger of that record and the current RSS,
    so a later reading can come out lower than an earlier one taken at a transient high: ``since`` keeps it
    monotonic."""
    return max(since, _vm_hwm_mb())


def _vm_hwm_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1e3
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def index_tree(dest: Path, n_files: int, max_bytes: int = 30_000) -> int:
    """Write ``n_files`` real source files under ``dest``: standard-library modules (2 KB to ``max_bytes``, sorted by
    name, cycled) each in its own directory ``pNNNNN/``, so every copy is a distinct file to the index. Returns the
    bytes written."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    mods = [p for p in sorted(stdlib.glob("*.py")) if 2_000 <= p.stat().st_size <= max_bytes]
    texts = [(p.name, p.read_bytes()) for p in mods]
    total = 0
    for i in range(n_files):
        name, data = texts[i % len(texts)]
        d = dest / f"p{i:05d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
        total += len(data)
    return total


def distinct_tree(dest: Path, n_files: int, max_bytes: int = 30_000) -> int:
    """Write ``n_files`` real Python files under ``dest``, no two alike: the standard library's modules (its
    packages too, not its ``site-packages``) under ``std/``, then this interpreter's installed packages under
    ``site/``, each 2 KB to ``max_bytes``, in path order, a file whose bytes were already taken left out. Unlike
    :func:`index_tree`, whose copies give every leaf identical twins (ties that two engines may break apart, and a
    graph index's worst case), every leaf is its own. Which packages fill it depends on the environment (the
    project's ``.ci/setup`` installs one). Returns the bytes written.

    Raises:
        SystemExit: Fewer than ``n_files`` such files are installed.
    """
    paths = sysconfig.get_paths()
    std, site = Path(paths["stdlib"]), Path(paths["purelib"])
    roots = [("std", std, std / "site-packages"), ("site", site, None)]
    seen: set[bytes] = set()
    total = written = 0
    for prefix, root, skip in roots:
        for p in sorted(root.rglob("*.py")):
            if written == n_files:
                return total
            if (skip is not None and skip in p.parents) or not 2_000 <= p.stat().st_size <= max_bytes:
                continue
            data = p.read_bytes()
            digest = hashlib.sha1(data).digest()
            if digest in seen:
                continue
            seen.add(digest)
            out = dest / prefix / p.relative_to(root)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            total += len(data)
            written += 1
    if written < n_files:
        raise SystemExit(f"only {written} distinct Python files of 2 KB to {max_bytes} bytes are installed here")
    return total


def _index_probe(n_files: int, embedding: str, trace: bool) -> dict[str, float | str | int]:
    """Index a generated tree of ``n_files`` files into a fresh embedded Chroma store; peak RSS and time."""
    import tempfile

    from llmc_splitters.retrieval import CodeRetriever, HashingEmbedding

    with tempfile.TemporaryDirectory(prefix="llmc-index-probe-") as tmp:
        src = Path(tmp) / "src"
        nbytes = index_tree(src, n_files)
        emb = HashingEmbedding(256) if embedding == "hashing" else None
        retriever = CodeRetriever(path=str(Path(tmp) / "db"), embedding=emb)
        warm = Path(tmp) / "warm"
        warm.mkdir()
        (warm / "w.py").write_text("def f():\n    return 1\n")
        # Warm-up (grammar, tokenizer, the stores' modules loaded) in a temporary index of its own.
        warm_up = CodeRetriever(embedding=emb)
        warm_up.index_directory(warm)
        del warm_up
        if trace:
            import tracemalloc

            tracemalloc.start()
        base = _rss_mb()
        peak_before = _peak_mb()
        t0 = time.perf_counter()
        report = retriever.index_directory(src)
        dt = time.perf_counter() - t0
        peak = _peak_mb(peak_before)
        traced = tracemalloc.get_traced_memory()[1] / 1e6 if trace else None
        after = _rss_mb()
        records = retriever.index.span_store.counts()["spans"]
        t1 = time.perf_counter()
        retriever.search("parse the header of a message", k=4)
        first_query = time.perf_counter() - t1
        peak_query = _peak_mb(peak)
    out: dict[str, float | str | int] = {
        "target": "index", "files": n_files, "bytes": nbytes, "embedding": embedding, "seconds": dt,
        "rss_before_mb": base, "peak_before_mb": peak_before, "peak_rss_mb": peak, "peak_delta_mb": peak - base,
        "rss_after_mb": after, "records": records, "written": report.spans, "failed": len(report.failed),
        "first_query_seconds": first_query, "peak_after_query_mb": peak_query,
    }
    if traced is not None:
        out["traced_peak_mb"] = traced
    return out


def _probe(target: str, mb: float) -> dict[str, float | str | int]:
    text = synthetic_python(int(mb * 1_000_000))
    if target == "llmc":
        from llmc_splitters import ASTChunker

        chunker = ASTChunker(max_tokens=256)
        chunker.chunk("def f():\n    return 1\n", language="python")  # warm-up: grammar and tokenizer loaded
        base = _rss_mb()
        peak_before = _peak_mb()
        t0 = time.perf_counter()
        spans = chunker.chunk(text, language="python", path="big.py")
        dt = time.perf_counter() - t0
        n = len(spans)
        ok = "".join(s.text for s in spans) == text
        over = sum(s.token_count > 256 for s in spans)
    elif target == "floor":
        from .chunkers import encoding

        enc = encoding()
        parser = get_parser("python")
        parser.parse(b"x = 1\n")
        enc.encode("x = 1")
        base = _rss_mb()
        peak_before = _peak_mb()
        t0 = time.perf_counter()
        tree = parser.parse(text.encode())
        toks = enc.encode(text, disallowed_special=())
        dt = time.perf_counter() - t0
        n, ok, over = len(toks), True, 0
        del tree
    else:
        msg = f"unknown target {target!r}"
        raise ValueError(msg)
    peak = _peak_mb(peak_before)
    return {"target": target, "bytes": len(text.encode()), "seconds": dt, "rss_before_mb": base,
            "peak_rss_mb": peak, "peak_before_mb": peak_before, "peak_delta_mb": peak - base, "items": n,
            "lossless": ok, "over_budget": over}


def measure_memory(target: str, mb: float = 5.0, timeout: float = 900, *, files: int = 250,
                   embedding: str = "hashing") -> dict:
    """Run :func:`_probe` (or, for ``target="index"``, :func:`_index_probe` on ``files`` files) in a fresh
    interpreter; returns its JSON, or an ``error`` entry."""
    cmd = [sys.executable, "-m", "benchmarks.perf", "--target", target, "--mb", str(mb)]
    if target == "index":
        cmd += ["--files", str(files), "--embedding", embedding]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        return {"target": target, "error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="llmc")
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--files", type=int, default=250, help="--target index: files in the generated tree")
    ap.add_argument("--embedding", choices=("hashing", "none"), default="hashing", help="--target index")
    ap.add_argument("--tracemalloc", action="store_true", help="--target index: also report the traced Python peak")
    args = ap.parse_args()
    if args.target == "index":
        print(json.dumps(_index_probe(args.files, args.embedding, args.tracemalloc)))
    else:
        print(json.dumps(_probe(args.target, args.mb)))


if __name__ == "__main__":
    main()
