"""Run Semble (the ``semble`` package from PyPI, in a venv of its own) over prepared source trees and print its top
hits as JSON: the peer that :mod:`benchmarks.codesearch` runs beside our retriever and scores with the same scorer.

Run with that venv's python, never imported by our code (it needs only ``semble`` and ``model2vec``)::

    /work/venvs/semble/bin/python benchmarks/codesearch_semble.py < job.json > hits.json

The job: ``{"model_dir": DIR, "alpha": 0.0, "k": 10, "repos": [{"name", "root", "queries": [...]}]}``. The answer:
``{"semble_version", "model_dir", "repos": {name: {"chunks", "index_s", "hits": [[[path, start, end], ...], ...]}}}``,
one hit list per query in order; a repository Semble fails on has ``"error"`` instead.

Semble's model lives only on the model hub, so the driver builds a stand-in of the same form once (a model2vec
``StaticModel``: random 256-dimensional vectors over a small word-level vocabulary) in ``model_dir``. With
``alpha=0`` Semble's hybrid search weighs the vector list by 0 and drops what only that list found, so its
BM25-and-rules ranking is what is measured and the stand-in has no effect on the hits.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

STANDIN_DIM = 256
STANDIN_VOCAB = 4096


def standin_model(model_dir: Path) -> Path:
    """A random static model in ``model_dir`` (made once)."""
    if (model_dir / "config.json").is_file():
        return model_dir
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[PAD]": 0, "[UNK]": 1, **{f"w{i}": i + 2 for i in range(STANDIN_VOCAB - 2)}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.random.default_rng(0).standard_normal((STANDIN_VOCAB, STANDIN_DIM)).astype(np.float32)
    StaticModel(vectors, tokenizer, normalize=True).save_pretrained(str(model_dir))
    return model_dir


class _Collect(logging.Handler):
    """Semble's warnings (a language it parses by lines, say), kept per repository for the report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.add(record.getMessage())


def main() -> None:
    job = json.load(sys.stdin)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import semble
    from semble import SembleIndex

    model_dir = str(standin_model(Path(job["model_dir"])))
    out: dict = {"semble_version": semble.__version__, "model_dir": model_dir, "repos": {}}
    for repo in job["repos"]:
        caught = _Collect()
        logging.getLogger().addHandler(caught)
        t0 = time.perf_counter()
        try:
            index = SembleIndex.from_path(repo["root"], model_path=model_dir)
            index_s = time.perf_counter() - t0
            hits = [[[r.chunk.file_path, r.chunk.start_line, r.chunk.end_line]
                     for r in index.search(q, top_k=job["k"], alpha=job["alpha"])] for q in repo["queries"]]
        except Exception as exc:  # noqa: BLE001 - reported per repository, the others still run
            out["repos"][repo["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        finally:
            logging.getLogger().removeHandler(caught)
        out["repos"][repo["name"]] = {"chunks": len(index.chunks), "index_s": index_s, "hits": hits,
                                      "warnings": sorted(caught.messages)}
        print(f"semble  {repo['name']:14} {len(index.chunks)} chunks in {index_s:.1f} s", file=sys.stderr)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
