"""The parent-context retriever over a LangChain VectorStore + docstore (InMemoryVectorStore + InMemoryStore)."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("bm25s")

from langchain_core.stores import InMemoryStore  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402

from helpers import DATA  # noqa: E402
from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402
from llmc_splitters.retrieval.vectorstore import VectorStoreAdapter, code_index, matches_where  # noqa: E402

FILES = {
    "textwrap.py": (DATA / "python" / "textwrap.py").read_text(),
    "decoder.py": (DATA / "python" / "json_decoder.py").read_text(),
    "events.js": (DATA / "javascript" / "events.js").read_text(),
}
QUERIES = ["dedent common leading whitespace", "wrap a paragraph into lines", "scan a JSON string literal",
           "emit an event to listeners", "shorten text with a placeholder"]


def _lc_index(vs=None, ds=None):
    vs = vs if vs is not None else InMemoryVectorStore(HashingEmbedding(64))
    ds = ds if ds is not None else InMemoryStore()
    return code_index(vs, ds, max_tokens=128), vs, ds


def test_retriever_over_langchain_stores_expands_hits_with_parents() -> None:
    idx, vs, ds = _lc_index()
    r = CodeRetriever(index=idx, k=2, max_context_tokens=600)
    report = r.index_texts(FILES)
    assert sorted(report.added) == sorted(FILES)
    res = r.retrieve("dedent common leading whitespace")
    assert res.hits[0].span.path == "textwrap.py"
    # The module-level names the hit uses come with it (bindings kept on the file record in the docstore).
    assert "# textwrap.py:416-417\n_whitespace_only_re = re.compile" in res.context
    assert res.token_count <= 600
    # Searched records sit in the vector store, everything (parents, skeletons) in the docstore.
    vs_roles = {v["metadata"]["role"] for v in vs.store.values()}
    assert vs_roles == {"leaf", "summary"}
    doc_roles = {d.metadata.get("role") for d in ds.mget(list(ds.yield_keys(prefix="llmc/r/")))}
    assert doc_roles == {"leaf", "parent", "summary"}
    skeletons = [d for d in ds.mget(list(ds.yield_keys(prefix="llmc/r/"))) if "skeleton" in d.metadata.get("span_json", "")]
    assert skeletons, "class skeletons are kept in the docstore"


def test_same_ranking_as_the_chroma_store() -> None:
    pytest.importorskip("chromadb")
    emb = HashingEmbedding(64)
    chroma = CodeIndex(embedding=emb, max_tokens=128)
    chroma.index_texts(FILES)
    lc, _, _ = _lc_index(InMemoryVectorStore(emb))
    lc.index_texts(FILES)
    for q in QUERIES:
        a = chroma.search(q, k=5)
        b = lc.search(q, k=5)
        assert [h.span.id for h in a.hits] == [h.span.id for h in b.hits], q
        assert a.confidence == pytest.approx(b.confidence, abs=1e-3)
        assert chroma.search(q, k=3, multi_stage=True).hits[0].span.id == lc.search(q, k=3, multi_stage=True).hits[0].span.id
        ra = CodeRetriever(index=chroma, k=3, max_context_tokens=800).retrieve(q)
        rb = CodeRetriever(index=lc, k=3, max_context_tokens=800).retrieve(q)
        assert ra.context == rb.context, "the same parent-context expansion"


def test_reindex_remove_and_reopen() -> None:
    idx, vs, ds = _lc_index()
    idx.index_texts(FILES)
    n = len(vs.store)
    edited = FILES["textwrap.py"].replace("def dedent(text):", "def dedent(text):\n    # edited", 1)
    report = idx.index_texts({"textwrap.py": edited})
    assert report.updated == ["textwrap.py"]
    texts = [v["text"] for v in vs.store.values() if v["metadata"]["path"] == "textwrap.py"]
    assert any("# edited" in t for t in texts)
    assert not any("def dedent(text):\n    \"\"\"" in t for t in texts), "the old version is gone"
    assert len(vs.store) == n
    idx.remove("events.js")
    assert all(v["metadata"]["path"] != "events.js" for v in vs.store.values())
    assert all(d.metadata.get("path") != "events.js" for d in ds.mget(list(ds.yield_keys())) if d is not None)
    again = code_index(vs, ds, max_tokens=128)
    assert again.paths == ["decoder.py", "textwrap.py"], "a new index over the same stores sees everything"
    assert again.search("dedent common leading whitespace", k=1).hits[0].span.path == "textwrap.py"
    assert "# edited" in again.get_symbol("dedent")[0].text


def test_embedding_mismatch_and_bad_arguments() -> None:
    ds = InMemoryStore()
    VectorStoreAdapter(InMemoryVectorStore(HashingEmbedding(64)), ds).open("model-a")
    with pytest.raises(ConfigurationError, match="model-a"):
        VectorStoreAdapter(InMemoryVectorStore(HashingEmbedding(64)), ds).open("model-b")
    with pytest.raises(ConfigurationError, match="namespace"):
        VectorStoreAdapter(None, ds, namespace="a/b")
    with pytest.raises(ConfigurationError, match="embedding"):
        code_index(InMemoryVectorStore(HashingEmbedding(8)), ds, embedding=HashingEmbedding(8))


def test_file_backed_docstore_accepts_the_keys(tmp_path) -> None:
    storage = pytest.importorskip("langchain_classic.storage")
    ds = storage.create_kv_docstore(storage.LocalFileStore(str(tmp_path / "docs")))
    idx, _, _ = _lc_index(ds=ds)
    idx.index_texts({"textwrap.py": FILES["textwrap.py"]})
    assert idx.search("dedent", k=1).hits[0].span.path == "textwrap.py"


@pytest.mark.parametrize(
    ("where", "ok"),
    [
        ({"role": "leaf"}, True),
        ({"role": {"$ne": "leaf"}}, False),
        ({"path": {"$in": ["a.py", "b.py"]}}, True),
        ({"path": {"$nin": ["a.py"]}}, False),
        ({"missing": {"$ne": 1}}, True),
        ({"missing": 1}, False),
        ({"start_line": {"$gte": 3, "$lt": 10}}, True),
        ({"$or": [{"role": "parent"}, {"path": "a.py"}]}, True),
        ({"$and": [{"role": "leaf"}, {"path": "b.py"}]}, False),
    ],
)
def test_matches_where(where, ok) -> None:
    assert matches_where({"role": "leaf", "path": "a.py", "start_line": 3}, where) is ok


def test_langchain_parent_retriever_over_a_vectorstore_and_docstore() -> None:
    from llmc_splitters.langchain.retriever import CodeParentRetriever

    vs, ds = InMemoryVectorStore(HashingEmbedding(64)), InMemoryStore()
    r = CodeParentRetriever.from_vectorstore(vs, ds, texts=FILES, max_tokens=128, k=2, max_context_tokens=800)
    docs = r.invoke("dedent common leading whitespace")
    assert 1 <= len(docs) <= 2
    assert docs[0].metadata["source"] == "textwrap.py"
    assert len(vs.store) > 0 and any(True for _ in ds.yield_keys(prefix="llmc/r/"))
    # A second retriever over the same stores (e.g. filled by a Ray ingestion) needs no indexing.
    again = CodeParentRetriever.from_vectorstore(vs, ds, max_tokens=128, k=2)
    assert again.invoke("dedent common leading whitespace")[0].page_content == docs[0].page_content
