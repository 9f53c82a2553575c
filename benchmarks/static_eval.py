"""The static code embedding beside lexical and MiniLM: docstring-benchmark quality, texts/s on one core, size.

    python -m benchmarks.static_eval                      # none, minilm-onnx-128, minilm-static, code-static
    python -m benchmarks.static_eval --backends code-static --weights /tmp/variant.npz   # a variant of the build

Quality is ``benchmarks.embeddings.quality`` on the docstring benchmark's tune packages (full-hit and completeness
at 1,024 tokens, macro over languages): dense chunk retrieval with the model alone, and the hybrid retriever (BM25
and the model fused) that the index serves; ``none`` is the same retriever lexical only. Speed: the whole views the
index embeds for the tune packages' files (a static model has no window), embedded in calls of 64 by one thread
pinned to one core, after a warm-up; model load timed apart.

Writes ``benchmarks/results/code-static.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "code-static.json"
BACKENDS = ("none", "minilm-onnx-128", "minilm-static", "code-static")


def _log(msg: str) -> None:
    print(msg, flush=True)


def whole_views(corpus: Any, n: int) -> list[str]:
    """Leaf views of the tune packages' spans as the index makes them (path and symbol header), not bounded."""
    from llmc_splitters import ASTChunker

    chunker = ASTChunker(max_tokens=512)
    texts = []
    for f in corpus.files():
        for s in chunker.chunk(f.text, language=f.language, path=f.path):
            if s.text.strip():
                head = f"{s.path or ''} {s.name or ''}".strip()
                texts.append(f"{head}\n{s.text}" if head else s.text)
    random.Random(17).shuffle(texts)
    return texts[:n]


def speed(backend: str, texts: list[str], weights: Path | None) -> dict[str, Any]:
    """Texts/s of one thread on one core (the process pinned to its first allowed core)."""
    from llmc_splitters.retrieval.embeddings import CodeStaticEmbedding, resolve_embedding

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    t0 = time.perf_counter()
    emb = CodeStaticEmbedding(weights) if backend == "code-static" and weights else resolve_embedding(backend)
    if hasattr(emb, "threads"):
        emb.threads = 1
    emb.embed_documents(texts[:1])
    load = time.perf_counter() - t0
    emb.embed_documents(texts[:64])
    t0, c0 = time.perf_counter(), time.process_time()
    for at in range(0, len(texts), 64):
        emb.embed_documents(texts[at:at + 64])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    chars = sum(map(len, texts))
    return {"texts": len(texts), "texts_per_s": len(texts) / wall, "texts_per_cpu_s": len(texts) / cpu,
            "mb_per_s": chars / wall / 1e6, "load_s": load, "load_average": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--weights", type=Path, help="a code-static weights file to measure instead of the shipped one")
    ap.add_argument("--sample", type=int, default=2000, help="texts for the speed measurement")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--texts-file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:  # in a fresh process, so that one backend's imports and threads do not slow another
        print(json.dumps(speed(args.probe, json.loads(args.texts_file.read_text()), args.weights)))
        return
    import subprocess
    import sys
    import tempfile

    from llmc_splitters.retrieval.embeddings import CodeStaticEmbedding

    from .embeddings import quality, tune_corpus

    if args.weights:  # quality() resolves by name: point the shipped name at the variant
        import llmc_splitters.retrieval.embeddings.resolve as resolve

        resolve.BACKENDS["code-static"] = (lambda: CodeStaticEmbedding(args.weights), "variant")
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results.setdefault("backends", {})
    corpus = tune_corpus()
    names = args.backends.split(",")
    if not args.no_speed:
        texts = whole_views(corpus, args.sample)
        with tempfile.TemporaryDirectory() as tmp:
            tf = Path(tmp) / "texts.json"
            tf.write_text(json.dumps(texts))
            for name in names:
                if name == "none":
                    continue
                cmd = [sys.executable, "-m", "benchmarks.static_eval", "--probe", name, "--texts-file", str(tf)]
                cmd += ["--weights", str(args.weights)] if args.weights else []
                proc = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                      cwd=Path(__file__).resolve().parent.parent)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                results["backends"].setdefault(name, {})["speed_one_core"] = r
                _log(f"  speed {name:16s} {r['texts_per_s']:9.1f} texts/s on one core ({r['mb_per_s']:.2f} MB/s, "
                     f"load {r['load_s']:.2f}s, loadavg {r['load_average']:.1f})")
    if not args.speed_only:
        for name in names:
            results["backends"].setdefault(name, {})["quality"] = quality(corpus, name, log=_log)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1) + "\n")
    if "code-static" in names:
        emb = CodeStaticEmbedding(args.weights) if args.weights else CodeStaticEmbedding()
        results["backends"]["code-static"].update({"file_mb": emb.path.stat().st_size / 1e6,
                                                   "identity": emb.identity.as_dict(), "recipe": emb.recipe})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
