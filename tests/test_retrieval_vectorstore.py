"""The parent-context retriever with its vectors in a LangChain VectorStore (InMemoryVectorStore)."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("tantivy")

from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402

from helpers import DATA  # noqa: E402
from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402
from llmc_splitters.retrieval.vectorstore import VectorStoreAdapter, code_index  # noqa: E402

FILES = {
    "textwrap.py": (DATA / "python" / "textwrap.py").read_text(),
    "decoder.py": (DATA / "python" / "json_decoder.py").read_text(),
    "events.js": (DATA / "javascript" / "events.js").read_text(),
}
QUERIES = ["dedent common leading whitespace", "wrap a paragraph into lines", "scan a JSON string literal",
           "emit an event to listeners", "shorten text with a placeholder"]


def _lc_index(vs=None, path=None):
    vs = vs if vs is not None else InMemoryVectorStore(HashingEmbedding(64))
    return code_index(vs, path=path, max_tokens=128), vs


def test_retriever_over_a_langchain_vectorstore_expands_hits_with_parents() -> None:
    idx, vs = _lc_index()
    r = CodeRetriever(index=idx, k=2, max_context_tokens=600)
    report = r.index_texts(FILES)
    assert sorted(report.added) == sorted(FILES)
    res = r.retrieve("dedent common leading whitespace")
    assert res.hits[0].span.path == "textwrap.py"
    # The module-level names the hit uses come with it (bindings read from the span store).
    assert "# textwrap.py:416-417\n_whitespace_only_re = re.compile" in res.context
    assert res.token_count <= 600
    # Only searched records sit in the vector store: parents, skeletons and bindings stay in the span store.
    assert {v["metadata"]["role"] for v in vs.store.values()} == {"leaf", "summary"}
    assert len(vs.store) == sum(1 for _ in idx.spans()) + len(FILES) + sum(
        1 for p in FILES for s in idx.spans(p, role="parent") if s.metadata.get("skeleton") and s.parent_id)


def test_same_ranking_as_the_chroma_store() -> None:
    pytest.importorskip("chromadb")
    emb = HashingEmbedding(64)
    chroma = CodeIndex(embedding=emb, max_tokens=128)
    chroma.index_texts(FILES)
    lc, _ = _lc_index(InMemoryVectorStore(emb))
    lc.index_texts(FILES)
    for q in QUERIES:
        a = chroma.search(q, k=5)
        b = lc.search(q, k=5)
        assert [h.span.id for h in a.hits] == [h.span.id for h in b.hits], q
        assert a.confidence == pytest.approx(b.confidence, abs=1e-3)
        assert chroma.search(q, k=3, multi_stage=True).hits[0].span.id == lc.search(q, k=3, multi_stage=True).hits[0].span.id
        assert [h.span.id for h in chroma.search(q, k=3, path="events.js").hits] == \
            [h.span.id for h in lc.search(q, k=3, path="events.js").hits]
        ra = CodeRetriever(index=chroma, k=3, max_context_tokens=800).retrieve(q)
        rb = CodeRetriever(index=lc, k=3, max_context_tokens=800).retrieve(q)
        assert ra.context == rb.context, "the same parent-context expansion"


def test_reindex_remove_and_reopen(tmp_path) -> None:
    idx, vs = _lc_index(path=tmp_path / "db")
    idx.index_texts(FILES)
    n = len(vs.store)
    edited = FILES["textwrap.py"].replace("def dedent(text):", "def dedent(text):\n    # edited", 1)
    report = idx.index_texts({"textwrap.py": edited})
    assert report.updated == ["textwrap.py"]
    texts = [v["text"] for v in vs.store.values() if v["metadata"]["file"] == "textwrap.py"]
    assert any("# edited" in t for t in texts)
    assert not any("def dedent(text):\n    \"\"\"" in t for t in texts), "the old version is gone"
    assert len(vs.store) == n
    idx.remove("events.js")
    assert all(v["metadata"]["file"] != "events.js" for v in vs.store.values())
    again = code_index(vs, path=tmp_path / "db", max_tokens=128)
    assert again.paths == ["decoder.py", "textwrap.py"], "a new index over the same stores sees everything"
    assert again.search("dedent common leading whitespace", k=1).hits[0].span.path == "textwrap.py"
    assert "# edited" in again.get_symbol("dedent")[0].text


def test_embedding_mismatch_and_bad_arguments(tmp_path) -> None:
    code_index(InMemoryVectorStore(HashingEmbedding(64)), path=tmp_path / "db").index_texts({"a.py": "x = 1\n"})

    class Other(HashingEmbedding):
        name = "model-b"

    with pytest.raises(ConfigurationError, match="holds vectors from .*HashingEmbedding.*, not .*Other"):
        code_index(InMemoryVectorStore(Other(64)), path=tmp_path / "db")
    with pytest.raises(ConfigurationError, match="namespace"):
        VectorStoreAdapter(None, namespace="a/b")
    with pytest.raises(ConfigurationError, match="embedding"):
        code_index(InMemoryVectorStore(HashingEmbedding(8)), embedding=HashingEmbedding(8))
    with pytest.warns(DeprecationWarning, match="docstore is not used"):
        code_index(InMemoryVectorStore(HashingEmbedding(8)), object())


def test_two_indexes_share_one_vectorstore_by_namespace() -> None:
    vs = InMemoryVectorStore(HashingEmbedding(64))
    a = code_index(vs, namespace="a", max_tokens=128)
    b = code_index(vs, namespace="b", max_tokens=128)
    a.index_texts({"textwrap.py": FILES["textwrap.py"]})
    b.index_texts({"events.js": FILES["events.js"]})
    assert {h.span.path for h in a.search("emit an event to listeners", k=5).hits} <= {"textwrap.py"}
    assert {h.span.path for h in b.search("dedent common leading whitespace", k=5).hits} <= {"events.js"}


def test_langchain_parent_retriever_over_a_vectorstore(tmp_path) -> None:
    from llmc_splitters.langchain.retriever import CodeParentRetriever

    vs = InMemoryVectorStore(HashingEmbedding(64))
    r = CodeParentRetriever.from_vectorstore(vs, path=tmp_path / "db", texts=FILES, max_tokens=128, k=2,
                                             max_context_tokens=800)
    docs = r.invoke("dedent common leading whitespace")
    assert 1 <= len(docs) <= 2
    assert docs[0].metadata["source"] == "textwrap.py"
    assert len(vs.store) > 0
    # A second retriever over the same stores (e.g. filled by an ingestion run) needs no indexing.
    again = CodeParentRetriever.from_vectorstore(vs, path=tmp_path / "db", max_tokens=128, k=2)
    assert again.invoke("dedent common leading whitespace")[0].page_content == docs[0].page_content


def test_a_store_that_scores_by_distance_ranks_like_one_that_scores_by_similarity() -> None:
    pytest.importorskip("langchain_chroma")
    import uuid

    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    emb = HashingEmbedding(64)
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    chroma = Chroma(collection_name=f"c{uuid.uuid4().hex[:8]}", client=client, embedding_function=emb,
                    collection_metadata={"hnsw:space": "cosine"})
    by_distance, _ = _lc_index(chroma)  # langchain-chroma's "relevance scores" are cosine distances
    by_similarity, _ = _lc_index(InMemoryVectorStore(emb))
    by_distance.index_texts(FILES)
    by_similarity.index_texts(FILES)
    for q in QUERIES:
        qv = by_distance.embed_query(q)
        a = [i for i, _ in by_distance.vectors.query(qv, 5)]
        b = [i for i, _ in by_similarity.vectors.query(qv, 5)]
        assert a[:3] == b[:3], q
        scores = [sc for _, sc in by_distance.vectors.query(qv, 5)]
        assert scores == sorted(scores, reverse=True)
