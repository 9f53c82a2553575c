"""CodeParentRetriever (LlamaIndex) on real files: NodeWithScore results, budgets, sources, query engines."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

from llama_index.core import SimpleDirectoryReader  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore  # noqa: E402

from llmc_splitters import ConfigurationError  # noqa: E402
from llmc_splitters.llama_index import CodeParentRetriever  # noqa: E402

QUERIES = [
    "wrap text into lines of a given width",
    "decode a JSON object from a string",
    "split a shell command line into tokens",
    "heap push pop smallest item",
]


@pytest.fixture(scope="module")
def docs(stdlib_dir):
    return SimpleDirectoryReader(str(stdlib_dir), recursive=True, required_exts=[".py"]).load_data()


@pytest.fixture(scope="module")
def lexical(docs):
    return CodeParentRetriever.from_documents(docs, k=4, max_context_tokens=2048)


def test_returns_node_with_scores_best_first_with_sources(docs, lexical, stdlib_dir):
    assert isinstance(lexical, BaseRetriever)
    hits = lexical.retrieve("wrap text into lines of a given width")
    assert len(hits) == 4 and all(isinstance(h, NodeWithScore) for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    # SimpleDirectoryReader gives absolute paths; the retriever stores and cites them relative to their common
    # directory.
    by_path = {pathlib.Path(d.metadata["file_path"]).relative_to(stdlib_dir).as_posix(): d for d in docs}
    for h in hits:
        m = h.node.metadata
        assert m["file_path"] == m["source"] and m["file_path"] in by_path
        assert h.node.node_id == m["span_id"]
        # SOURCE names the reader's document of the hit's file.
        assert h.node.relationships[NodeRelationship.SOURCE].node_id == by_path[m["file_path"]].doc_id
        lines = by_path[m["file_path"]].text.splitlines(keepends=True)
        assert "".join(lines[m["start_line"] - 1 : m["end_line"]]).strip() in h.node.text or m["truncated"]
        # Bookkeeping metadata stays out of the LLM's view: the text's markers already cite the lines.
        assert h.node.get_content(metadata_mode=MetadataMode.LLM) == h.node.text.strip() or \
            h.node.get_content(metadata_mode=MetadataMode.LLM) == h.node.text


@pytest.mark.parametrize(("k", "budget"), [(1, 100), (3, 300), (5, 2048), (8, 4096)])
def test_node_texts_add_up_to_the_budget(lexical, cl100k, k, budget):
    lexical.k, lexical.max_context_tokens = k, budget
    try:
        for query in QUERIES:
            hits = lexical.retrieve(query)
            assert 1 <= len(hits) <= k
            assert sum(cl100k.count(h.node.text) for h in hits) <= budget
            if budget >= 2048:
                assert len(hits) == k
    finally:
        lexical.k, lexical.max_context_tokens = 4, 2048


def test_similarity_top_k_alias_and_async(docs):
    r = CodeParentRetriever.from_documents(docs, similarity_top_k=2)
    assert r.k == r.similarity_top_k == 2
    r.similarity_top_k = 3
    assert len(r.retrieve("base64 encode bytes")) == 3
    sync = [h.node.node_id for h in r.retrieve("heap push pop")]
    assert [h.node.node_id for h in asyncio.run(r.aretrieve("heap push pop"))] == sync


def test_hybrid_with_a_llama_index_embed_model(docs):
    r = CodeParentRetriever.from_documents(docs, embed_model=MockEmbedding(embed_dim=8), k=3)
    assert r.code_retriever.index.embedding_name.startswith("llama_index:MockEmbedding")
    assert len(r.retrieve("decode a JSON object from a string")) == 3


def test_in_a_retriever_query_engine(lexical):
    engine = RetrieverQueryEngine.from_args(lexical, llm=MockLLM())
    response = engine.query("how is a JSON object decoded")
    assert response.source_nodes and all(isinstance(n, NodeWithScore) for n in response.source_nodes)
    assert any(n.node.metadata["file_path"].endswith("json/decoder.py") for n in response.source_nodes)


def test_from_directory_and_persistent_store(stdlib_dir, tmp_path):
    built = CodeParentRetriever.from_directory(stdlib_dir, path=str(tmp_path / "db"), k=2)
    hits = built.retrieve("split a shell command line into tokens")
    assert any(h.node.metadata["file_path"] == "shlex.py" for h in hits)
    reopened = CodeParentRetriever(path=str(tmp_path / "db"), k=2)
    assert [h.node.text for h in reopened.retrieve("split a shell command line into tokens")] == [
        h.node.text for h in hits
    ]


@pytest.mark.slow
def test_minilm_hybrid_finds_code_by_meaning(docs, minilm_llama_index):
    small = [d for d in docs if d.metadata["file_path"].endswith(("textwrap.py", "base64.py", "shlex.py"))]
    r = CodeParentRetriever.from_documents(small, embed_model=minilm_llama_index, k=3, max_tokens=128)
    expectations = {
        "wrap a paragraph of text into lines no longer than a given width": "textwrap.py",
        "encode binary data as base64 text": "base64.py",
        "split a shell command line into words like a POSIX shell": "shlex.py",
    }
    for query, filename in expectations.items():
        hits = r.retrieve(query)
        assert hits and hits[0].node.metadata["file_path"].endswith(filename), query


def test_errors(docs):
    with pytest.raises(ConfigurationError, match="k must be a positive integer"):
        CodeParentRetriever(texts={"m.py": "x = 1\n"}, k=0)
    with pytest.raises(ConfigurationError, match="same setting"):
        CodeParentRetriever(texts={"m.py": "x = 1\n"}, k=2, similarity_top_k=3)
    with pytest.raises(ConfigurationError, match="embed_model must be"):
        CodeParentRetriever(texts={"m.py": "x = 1\n"}, embed_model=object())


def test_each_node_carries_the_ranked_files_beyond_the_budget(lexical):
    nodes = lexical.retrieve("wrap text into lines of a given width")
    ranked = nodes[0].node.metadata["ranked_files"]
    paths = [f["path"] for f in ranked]
    assert len(paths) == len(set(paths)) > 1
    assert paths[0] == nodes[0].node.metadata["file_path"]
    assert all(n.node.metadata["ranked_files"] == ranked for n in nodes)
    assert "ranked_files" in nodes[0].node.excluded_llm_metadata_keys  # the LLM sees the code, not the list
