"""Build the shipped static code embedding (``code-static``) from scratch, offline, reproducibly.

    python -m benchmarks.build_static                  # the whole recipe; writes the package's weights file
    python -m benchmarks.build_static --out /tmp/x.npz # a variant somewhere else (the package is not touched)

It lives beside the benchmarks because it is a development tool made of their parts (the registry fetchers of
``benchmarks.corpus``, the caches under ``~/.cache/llmc-bench``), not something a user runs: the wheel ships its
result, ``llmc_splitters/retrieval/embeddings/data/code-static.npz``, and the SHA-256 and dimension the build
writes into ``code_static.py``.

The recipe (tokenlearn's, with a code vocabulary and the index's own views):

1. **Corpus** (``benchmarks.static_corpus``): sources of pinned PyPI, npm and Debian packages, none of them a
   benchmark repository; the *views* the index embeds for them (leaves with their path and symbol header, file and
   class summaries), made by ``CodeRetriever.index_texts`` itself. Plus, as prose the model must also place, the
   first sentences of the corpus's docstrings (``benchmarks.corpus.extract_queries``).
2. **Sample**: at most ``--per-package`` views a package, the docstring sentences, deduplicated, shuffled with a
   fixed seed; the first ``--texts`` of them.
3. **Teacher**: the packaged MiniLM as the index runs it by default (``minilm-onnx-128``) embeds each bounded view.
4. **Vocabulary**: the pieces :class:`~llmc_splitters.retrieval.embeddings.code_static.CodeTokenizer` cuts the
   sample into (identifier parts, lowercased; whole identifiers that are frequent), the ``--vocab`` most frequent.
5. **Fit**: each piece starts at the teacher's vector of the piece alone (weighted down by its frequency, SIF); the
   table is trained (sparse Adam, torch on one CPU thread) so that the sum of a text's piece vectors points where
   the teacher's vector of the text points (cosine loss), in the teacher's space centred and reduced by PCA to
   ``--dim``; and so that the first sentence of a corpus docstring is nearer its own function than the other
   functions of the batch (in-batch softmax, ``--pair-weight``). The epoch with the best held-back score is kept.
6. **Ship**: int8 with a float16 scale per row, the vocabulary and the recipe (settings, corpus digest, teacher
   digest, this script's digest) in one ``.npz``.

Every step is cached under ``~/.cache/llmc-bench/static-build/`` (packages, views, teacher vectors).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .static_corpus import CORPUS, corpus_digest, fetch_package, package_views

CACHE = Path.home() / ".cache" / "llmc-bench" / "static-build"
SEED = 39
_PART = 1024  # texts per cached part of teacher vectors


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _teacher() -> Any:
    from llmc_splitters.retrieval.embeddings import OnnxMiniLMEmbedding

    return OnnxMiniLMEmbedding(max_seq_length=128)


# ----------------------------------------------------------------------------------------------------------------
# 1-2. Corpus and sample
# ----------------------------------------------------------------------------------------------------------------


def docstring_pairs(spec: Any, cache: Path) -> list[list[str]]:
    """``[first sentence of a docstring, the function without it]`` for the package's documented functions."""
    from .corpus import extract_queries, package_files

    out = cache / "docstrings" / f"{spec.registry}-{spec.name}-{spec.version}.json".replace("/", "_")
    if out.is_file():
        return json.loads(out.read_text(encoding="utf-8"))
    root, _ = fetch_package(spec, cache / "packages")
    pairs = []
    for rel, text in package_files(spec, root):
        try:
            new_text, queries = extract_queries(spec.name, spec.language, rel, text)
        except Exception:  # noqa: BLE001, S112 - a file the extractor cannot read gives no pairs
            continue
        pairs += [[q.text, new_text[q.gold_start:q.gold_end]] for q in queries]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pairs), encoding="utf-8")
    return pairs


def sample(cache: Path, teacher: Any, *, per_package: int, per_package_prose: int, texts: int
           ) -> tuple[list[str], list[str], dict[str, int]]:
    """``(whole texts, teacher texts, counts)``: the training sample, in a fixed order."""
    rng = random.Random(SEED)
    rows: list[tuple[str, str]] = []
    counts = {"views": 0, "prose": 0}
    for spec in CORPUS:
        views = package_views(spec, cache, teacher, _log)
        rng.shuffle(views)
        rows += [(w, b) for w, b in views[:per_package]]
        counts["views"] += min(per_package, len(views))
        prose = sorted({q for q, _ in docstring_pairs(spec, cache)})
        rng.shuffle(prose)
        rows += [(q, q) for q in prose[:per_package_prose]]
        counts["prose"] += min(per_package_prose, len(prose))
    seen: set[str] = set()
    unique = []
    for w, b in rows:
        if b.strip() and b not in seen:
            seen.add(b)
            unique.append((w, b))
    rng.shuffle(unique)
    unique = unique[:texts]
    counts["sample"] = len(unique)
    return [w for w, _ in unique], [b for _, b in unique], counts


# ----------------------------------------------------------------------------------------------------------------
# 3. Teacher
# ----------------------------------------------------------------------------------------------------------------


def teacher_vectors(texts: list[str], cache: Path, teacher: Any, *, workers: int = 2) -> np.ndarray:
    """The teacher's (normalised) vectors of ``texts``, computed in parts of 1,024 that are cached by content."""
    from llmc_splitters.retrieval.embeddings import BatchEmbedder

    folder = cache / "teacher" / hashlib.sha256(teacher.name.encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    t0, done = time.perf_counter(), 0
    with BatchEmbedder(teacher, workers=workers, kind="thread") as be:
        for at in range(0, len(texts), _PART):
            chunk = texts[at:at + _PART]
            key = hashlib.sha256("\x00".join(chunk).encode("utf-8", "surrogatepass")).hexdigest()[:20]
            path = folder / f"{key}.npy"
            if path.is_file():
                parts.append(np.load(path))
                continue
            res = be.embed(chunk)
            if res.failures:
                msg = f"the teacher failed on {len(res.failures)} texts: {res.failures[0]}"
                raise RuntimeError(msg)
            vecs = np.asarray(res.vectors, dtype=np.float32)
            np.save(path, vecs)
            parts.append(vecs)
            done += len(chunk)
            rate = done / (time.perf_counter() - t0)
            _log(f"  teacher {at + len(chunk):7d}/{len(texts)}  {rate:6.1f} texts/s")
    return np.concatenate(parts) if parts else np.zeros((0, 384), np.float32)


# ----------------------------------------------------------------------------------------------------------------
# 4. Vocabulary
# ----------------------------------------------------------------------------------------------------------------


def count_pieces(texts: list[str]) -> Counter:
    """How often each candidate piece occurs: identifier parts, whole identifiers of several parts, numbers."""
    from llmc_splitters.retrieval.embeddings.code_static import word_pieces, words

    counts: Counter = Counter()
    for t in texts:
        for w in words(t):
            whole, parts = word_pieces(w)
            if len(parts) > 1:
                counts[whole] += 1
            counts.update(parts)
    return counts


def make_vocabulary(texts: list[str], size: int, min_count: int) -> tuple[list[str], np.ndarray]:
    """The ``size`` most frequent pieces seen at least ``min_count`` times (ties by piece), and their counts."""
    counts = count_pieces(texts)
    ranked = sorted((p for p, c in counts.items() if c >= min_count and p), key=lambda p: (-counts[p], p))[:size]
    return ranked, np.array([counts[p] for p in ranked], dtype=np.float64)


def piece_vectors(vocab: list[str], cache: Path, teacher: Any) -> np.ndarray:
    """The teacher's vector of each piece alone (the table's starting point, as model2vec distils)."""
    return teacher_vectors(vocab, cache, teacher)


# ----------------------------------------------------------------------------------------------------------------
# 5. Fit
# ----------------------------------------------------------------------------------------------------------------


def encode_ids(texts: list[str], vocab: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, offsets)`` of ``texts`` with the run-time tokenizer."""
    from llmc_splitters.retrieval.embeddings.code_static import CodeTokenizer

    tok = CodeTokenizer(vocab)
    flat: list[int] = []
    offsets = []
    for t in texts:
        offsets.append(len(flat))
        flat.extend(tok.ids(t))
    return np.asarray(flat, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


def pca(targets: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, components)``: the centred targets' principal axes, ``dim`` of them (columns), sign-fixed."""
    mean = targets.mean(axis=0)
    x = (targets - mean).astype(np.float64)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    comps = vt[:dim].T
    comps *= np.sign(comps[np.abs(comps).argmax(axis=0), np.arange(dim)])  # a fixed sign per axis
    return mean.astype(np.float32), comps.astype(np.float32)


class Bags:
    """Texts as id lists for ``torch.nn.EmbeddingBag``: flat ids and where each text starts and ends."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids, self.starts = ids, offsets
        self.ends = np.append(offsets[1:], len(ids)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, rows: np.ndarray) -> tuple[Any, Any]:
        import torch

        lens = self.ends[rows] - self.starts[rows]
        parts = [self.ids[self.starts[r]:self.ends[r]] for r in rows]
        flat = np.concatenate(parts) if lens.sum() else np.zeros(0, np.int64)
        return torch.from_numpy(flat), torch.from_numpy(np.concatenate([[0], np.cumsum(lens)[:-1]]))


def fit(texts: Bags, targets: np.ndarray, init: np.ndarray, *, epochs: int, lr: float, batch: int,
        val_share: float, pairs: tuple[Bags, Bags] | None = None, pair_weight: float = 0.0,
        temperature: float = 0.05, log: Any = _log) -> tuple[np.ndarray, dict[str, float]]:
    """Train the table so that each text's sum of piece vectors has the teacher's direction (cosine loss), and, with
    ``pairs`` (docstring sentence, function), so that a sentence's vector is nearer its function's than the batch's
    other functions' (in-batch softmax at ``temperature``, weighted by ``pair_weight``). Returns the table of the
    epoch with the best held-back score (the cosine, plus the pairs' mean reciprocal rank when they train)."""
    import torch

    f = torch.nn.functional
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # sparse steps are small: one thread is as fast, and leaves the other core free
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(texts))
    n_val = max(1, int(len(texts) * val_share))
    val, train = order[:n_val], order[n_val:]
    # Sparse gradients: a step touches the rows of its texts' pieces only (a few thousand of the table's rows).
    bag = torch.nn.EmbeddingBag(init.shape[0], init.shape[1], mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(init))
    opt = torch.optim.SparseAdam(list(bag.parameters()), lr=lr)
    tgt = f.normalize(torch.from_numpy(targets), dim=1)
    use_pairs = pairs is not None and pair_weight > 0
    if use_pairs:
        p_order = rng.permutation(len(pairs[0]))
        p_val, p_train = p_order[:min(2000, len(p_order) // 10)], p_order[min(2000, len(p_order) // 10):]

    def cosine(rows: np.ndarray) -> float:
        with torch.no_grad():
            total = 0.0
            for at in range(0, len(rows), 4096):
                x, o = texts.take(rows[at:at + 4096])
                total += f.cosine_similarity(bag(x, o), tgt[torch.from_numpy(rows[at:at + 4096])], dim=1).sum().item()
        return total / len(rows)

    def mrr(rows: np.ndarray) -> float:
        """Mean reciprocal rank of each held-back sentence's function among all held-back functions."""
        with torch.no_grad():
            q, c = (f.normalize(bag(*b.take(rows)), dim=1) for b in pairs)
            scores = q @ c.T
            ranks = (scores > scores.diag()[:, None]).sum(1) + 1
        return (1.0 / ranks.float()).mean().item()

    def score() -> tuple[float, str]:
        c = cosine(val)
        if not use_pairs:
            return c, f"cosine {c:.4f}"
        m = mrr(p_val)
        return c + m, f"cosine {c:.4f}, pair MRR {m:.4f}"

    s0, what = score()
    best = (s0, 0, bag.weight.detach().clone(), what)
    log(f"  fit: {len(train)} texts, {n_val} held back; at start: {what}")
    for epoch in range(1, epochs + 1):
        perm = rng.permutation(train)
        p_perm = rng.permutation(p_train) if use_pairs else None
        steps = (len(perm) + batch - 1) // batch
        t0 = time.perf_counter()
        for step in range(steps):
            rows = perm[step * batch:(step + 1) * batch]
            x, o = texts.take(rows)
            loss = 1.0 - f.cosine_similarity(bag(x, o), tgt[torch.from_numpy(rows)], dim=1).mean()
            if use_pairs:
                prow = p_perm[(step * batch) % len(p_perm):][:batch]
                q, c = (f.normalize(bag(*b.take(prow)), dim=1) for b in pairs)
                logits = q @ c.T / temperature
                loss = loss + pair_weight * f.cross_entropy(logits, torch.arange(len(prow)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        sc, what = score()
        log(f"  epoch {epoch:2d}: held back {what} ({time.perf_counter() - t0:.0f}s)")
        if sc > best[0]:
            best = (sc, epoch, bag.weight.detach().clone(), what)
    return best[2].numpy(), {"held_back": best[3], "best_epoch": best[1]}


# ----------------------------------------------------------------------------------------------------------------
# 6. Ship
# ----------------------------------------------------------------------------------------------------------------


def quantize(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows and a float16 scale per row (the largest magnitude of a row maps to 127)."""
    peak = np.abs(table).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float16)
    q = np.clip(np.rint(table / scale.astype(np.float32)[:, None]), -127, 127).astype(np.int8)
    return q, scale


def write_weights(path: Path, table: np.ndarray, vocab: list[str], recipe: dict[str, Any]) -> str:
    """Write the ``.npz`` (vectors, scales, vocabulary, recipe) reproducibly; its SHA-256."""
    import io
    import zipfile

    q, scale = quantize(table)
    arrays = {"vectors": q, "scales": scale,
              "vocabulary": np.frombuffer("\n".join(vocab).encode("utf-8"), dtype=np.uint8),
              "recipe": np.frombuffer(json.dumps(recipe, sort_keys=True).encode("utf-8"), dtype=np.uint8)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # np.savez stamps the current time into the zip; written by hand with a fixed date, equal inputs give equal bytes.
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())
    tmp.replace(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_digest(sha: str, dim: int) -> None:
    """Write the shipped file's SHA-256 and dimension into ``code_static.py`` (what the identity names)."""
    import re

    from llmc_splitters.retrieval.embeddings import code_static

    src = Path(code_static.__file__)
    text = src.read_text(encoding="utf-8")
    text = re.sub(r'^WEIGHTS_SHA256 = .*$', f'WEIGHTS_SHA256 = "{sha}"', text, count=1, flags=re.M)
    text = re.sub(r"^DIMENSION = .*$", f"DIMENSION = {dim}", text, count=1, flags=re.M)
    src.write_text(text, encoding="utf-8")


def _sources_digest() -> str:
    """SHA-256 over the recipe's code: this script, the corpus list and the run-time tokenizer."""
    from llmc_splitters.retrieval import terms
    from llmc_splitters.retrieval.embeddings import code_static

    from . import static_corpus

    h = hashlib.sha256()
    for mod in (sys.modules[__name__], static_corpus, code_static, terms):
        text = Path(mod.__file__).read_text(encoding="utf-8")
        if mod is code_static:  # the recorded digest is an output of the build, not part of its recipe
            text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("WEIGHTS_SHA256 =", "DIMENSION =")))
        h.update(text.encode("utf-8"))
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--texts", type=int, default=80_000, help="the sample (views and prose); the vocabulary's source")
    ap.add_argument("--train-texts", type=int, help="train on the sample's first N texts only (default: all)")
    ap.add_argument("--per-package", type=int, default=1500, help="views at most from one package")
    ap.add_argument("--per-package-prose", type=int, default=300, help="docstring sentences at most from one package")
    ap.add_argument("--vocab", type=int, default=16_000, help="vocabulary size")
    ap.add_argument("--min-count", type=int, default=3, help="occurrences at least of a vocabulary piece")
    ap.add_argument("--dim", type=int, default=256, help="vector size (PCA of the teacher's space)")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--train-on", choices=("whole", "bounded"), default="bounded",
                    help="the student reads the whole view or the teacher's bounded head of it")
    ap.add_argument("--pair-weight", type=float, default=0.5,
                    help="weight of the (docstring sentence, function) contrastive loss (0: distillation only)")
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--out", type=Path, help="weights file (default: the package's, and its digest recorded)")
    ap.add_argument("--featurize-only", action="store_true", help="stop after the teacher's vectors")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    teacher = _teacher()
    _log(f"corpus: {len(CORPUS)} packages ({corpus_digest()[:12]})")
    whole, bounded, counts = sample(args.cache, teacher, per_package=args.per_package,
                                    per_package_prose=args.per_package_prose, texts=args.texts)
    _log(f"sample: {counts}")
    vocab, counts_v = make_vocabulary(whole, args.vocab, args.min_count)
    _log(f"vocabulary: {len(vocab)} pieces (least frequent seen {int(counts_v[-1])} times)")
    pv = piece_vectors(vocab, args.cache, teacher)
    n = args.train_texts or len(bounded)
    targets = teacher_vectors(bounded[:n], args.cache, teacher)
    _log(f"teacher vectors {targets.shape} after {time.perf_counter() - started:.0f}s")
    if args.featurize_only:
        return
    texts = (whole if args.train_on == "whole" else bounded)[:n]
    mean, comps = pca(targets, args.dim)
    init = (pv - mean) @ comps
    # Start from model2vec's weighting: frequent pieces weigh less (SIF, a / (a + p)).
    p = counts_v / counts_v.sum()
    init *= (1e-3 / (1e-3 + p))[:, None].astype(np.float32)
    bags = Bags(*encode_ids(texts, vocab))
    _log(f"pieces: {len(bags.ids)} in {len(texts)} texts ({len(bags.ids) / max(1, len(texts)):.0f} a text)")
    pairs = None
    if args.pair_weight > 0:
        found = [p for spec in CORPUS for p in docstring_pairs(spec, args.cache)]
        pairs = (Bags(*encode_ids([q for q, _ in found], vocab)), Bags(*encode_ids([c for _, c in found], vocab)))
        _log(f"pairs: {len(found)} (docstring sentence, function)")
    table, stats = fit(bags, (targets - mean) @ comps, init.astype(np.float32), epochs=args.epochs, lr=args.lr,
                       batch=args.batch, val_share=0.05, pairs=pairs, pair_weight=args.pair_weight,
                       temperature=args.temperature)
    from llmc_splitters.retrieval.embeddings._runtime import dist_version, files_digest
    from llmc_splitters.retrieval.embeddings.minilm import bundled_minilm_path

    recipe = {"format": 1, "teacher": teacher.name, "teacher_files": files_digest(bundled_minilm_path()),
              "corpus": corpus_digest(), "packages": len(CORPUS), "sources": _sources_digest(), **counts,
              "trained_on": n, "vocabulary": len(vocab), "min_count": args.min_count, "dimension": args.dim,
              "epochs": args.epochs, "lr": args.lr, "batch": args.batch, "train_on": args.train_on,
              "pair_weight": args.pair_weight, "temperature": args.temperature, "seed": SEED,
              "torch": dist_version("torch"), "numpy": dist_version("numpy"), **stats}
    from llmc_splitters.retrieval.embeddings.code_static import WEIGHTS_FILE

    out = args.out or WEIGHTS_FILE
    sha = write_weights(out, table, vocab, recipe)
    if args.out is None:
        record_digest(sha, args.dim)
    size = out.stat().st_size
    _log(f"wrote {out} ({size / 1e6:.2f} MB, sha256 {sha[:12]}) after {time.perf_counter() - started:.0f}s: {stats}")


if __name__ == "__main__":
    main(sys.argv[1:])
