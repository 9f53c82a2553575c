"""CodeNodeParser in real LlamaIndex pipelines: SimpleDirectoryReader -> IngestionPipeline -> ChromaVectorStore.

No framework is mocked: documents come from ``SimpleDirectoryReader`` over real files, nodes go through
``IngestionPipeline`` into a ``ChromaVectorStore`` (in-memory chromadb) and are read back through
``VectorStoreIndex.as_retriever()``. Embeddings are the package's ``LocalEmbedding("hashing")`` (fast, and a
distinct vector per text: LlamaIndex's ``MockEmbedding`` gives every text the same vector, and Chroma's filtered
HNSW search over a graph of identical points sometimes returns nothing) or the packaged all-MiniLM-L6-v2 behind a
small ``BaseEmbedding``.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.vector_stores.chroma")

from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline  # noqa: E402
from llama_index.core.node_parser import get_leaf_nodes  # noqa: E402
from llama_index.core.retrievers import AutoMergingRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.core.storage.docstore import SimpleDocumentStore  # noqa: E402
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters  # noqa: E402
from llama_index.vector_stores.chroma import ChromaVectorStore  # noqa: E402

from llmc_splitters.llama_index import CodeNodeParser, LocalEmbedding  # noqa: E402


def relations(node) -> dict[str, Any]:
    """A node's relationships as plain ids, for comparison across a store round trip."""
    out = {}
    for kind, rel in node.relationships.items():
        out[kind.name] = [r.node_id for r in rel] if isinstance(rel, list) else rel.node_id
    return out


def read_docs(root):
    docs = SimpleDirectoryReader(str(root), recursive=True, required_exts=[".py"], filename_as_id=True).load_data()
    assert len(docs) == 5 and all("file_path" in d.metadata for d in docs)
    return docs


def assert_same_node(got: TextNode, want: TextNode) -> None:
    assert got.node_id == want.node_id
    assert got.text == want.text
    assert (got.start_char_idx, got.end_char_idx) == (want.start_char_idx, want.end_char_idx)
    assert got.metadata == want.metadata
    assert relations(got) == relations(want), "relationships changed in the store"


def test_ingestion_pipeline_into_chroma_then_vector_store_index(stdlib_dir, chroma_client, collection_name, cl100k):
    docs = read_docs(stdlib_dir)
    vector_store = ChromaVectorStore(chroma_collection=chroma_client.get_or_create_collection(collection_name))
    pipeline = IngestionPipeline(
        transformations=[CodeNodeParser(chunk_size=256), LocalEmbedding("hashing")], vector_store=vector_store
    )
    nodes = pipeline.run(documents=docs)
    assert vector_store._collection.count() == len(nodes) > 50
    texts = {d.doc_id: d.text for d in docs}
    for n in nodes:
        assert texts[n.ref_doc_id][n.start_char_idx : n.end_char_idx] == n.text
        assert cl100k.count(n.text) <= 256
        assert n.embedding is not None
    by_id = {n.node_id: n for n in nodes}

    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=LocalEmbedding("hashing"))
    wrap = index.as_retriever(
        similarity_top_k=3, filters=MetadataFilters(filters=[ExactMatchFilter(key="symbol", value="TextWrapper.wrap")])
    ).retrieve("wrap text")
    assert len(wrap) == 1 and isinstance(wrap[0], NodeWithScore)
    assert_same_node(wrap[0].node, by_id[wrap[0].node.node_id])
    assert wrap[0].node.metadata["file_path"].endswith("textwrap.py")
    assert {"SOURCE", "PREVIOUS", "NEXT"} <= relations(wrap[0].node).keys()
    for hit in index.as_retriever(similarity_top_k=5).retrieve("decode"):
        assert_same_node(hit.node, by_id[hit.node.node_id])


def test_vector_store_index_from_documents_with_transformations(stdlib_dir, chroma_client, collection_name):
    docs = read_docs(stdlib_dir)
    vector_store = ChromaVectorStore(chroma_collection=chroma_client.get_or_create_collection(collection_name))
    index = VectorStoreIndex.from_documents(
        docs,
        transformations=[CodeNodeParser(chunk_size=200)],
        embed_model=LocalEmbedding("hashing"),
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
    )
    total = vector_store._collection.count()
    hits = index.as_retriever(
        similarity_top_k=2, filters=MetadataFilters(filters=[ExactMatchFilter(key="kind", value="function")])
    ).retrieve("anything")
    assert len(hits) == 2 and all(h.node.metadata["kind"] == "function" for h in hits)
    # SOURCE names the reader's document: deleting it by ref_doc_id removes exactly its nodes.
    shlex_doc = next(d for d in docs if d.metadata["file_path"].endswith("shlex.py"))
    shlex_nodes = CodeNodeParser(chunk_size=200).get_nodes_from_documents([shlex_doc])
    index.delete_ref_doc(shlex_doc.doc_id)
    assert vector_store._collection.count() == total - len(shlex_nodes)


def test_rerunning_a_pipeline_with_a_docstore_does_not_duplicate(stdlib_dir, chroma_client, collection_name):
    docs = read_docs(stdlib_dir)
    vector_store = ChromaVectorStore(chroma_collection=chroma_client.get_or_create_collection(collection_name))
    docstore = SimpleDocumentStore()

    def run():
        return IngestionPipeline(
            transformations=[CodeNodeParser(chunk_size=256), LocalEmbedding("hashing")],
            vector_store=vector_store,
            docstore=docstore,
            docstore_strategy=DocstoreStrategy.UPSERTS,
        ).run(documents=docs)

    first = run()
    count = vector_store._collection.count()
    assert count == len(first)
    assert run() == [], "unchanged documents are skipped"
    assert vector_store._collection.count() == count


def test_parent_child_links_survive_chroma_and_drive_auto_merging(stdlib_dir, chroma_client, collection_name):
    docs = read_docs(stdlib_dir)
    doc = next(d for d in docs if d.metadata["file_path"].endswith("json/decoder.py"))
    parser = CodeNodeParser(chunk_size=128, include_parents=True)
    nodes = parser.get_nodes_from_documents([doc])
    leaves = get_leaf_nodes(nodes)
    assert len(nodes) > len(leaves) > 10
    by_id = {n.node_id: n for n in nodes}

    # All levels through Chroma and back: PARENT/CHILD/PREVIOUS/NEXT/SOURCE unchanged.
    vector_store = ChromaVectorStore(chroma_collection=chroma_client.get_or_create_collection(collection_name))
    IngestionPipeline(transformations=[parser, LocalEmbedding("hashing")], vector_store=vector_store).run(
        documents=[doc]
    )
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=LocalEmbedding("hashing"))
    back = index.as_retriever(similarity_top_k=len(nodes)).retrieve("anything")
    assert len(back) == len(nodes)
    for hit in back:
        assert_same_node(hit.node, by_id[hit.node.node_id])
    kinds = {tuple(sorted(relations(h.node))) for h in back}
    assert ("CHILD", "SOURCE") in kinds and ("NEXT", "PARENT", "PREVIOUS", "SOURCE") in kinds

    # The HierarchicalNodeParser recipe: leaves in the vector index, every level in the docstore; a docstore-based
    # retriever follows PARENT/CHILD. Retrieving all the pieces of one split function merges them into it.
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    leaf_index = VectorStoreIndex(leaves, storage_context=storage, embed_model=LocalEmbedding("hashing"))
    parent = next(
        n for n in nodes
        if n.metadata["kind"] == "function" and n.child_nodes
        and all(not by_id[c.node_id].child_nodes for c in n.child_nodes)
    )
    pieces = leaf_index.as_retriever(
        similarity_top_k=len(leaves),
        filters=MetadataFilters(filters=[ExactMatchFilter(key="parent_id", value=parent.node_id)]),  # the PARENT id
    )
    assert len(pieces.retrieve("anything")) == len(parent.child_nodes)
    merged = AutoMergingRetriever(pieces, storage, verbose=False).retrieve("anything")
    assert [m.node.node_id for m in merged] == [parent.node_id]
    assert merged[0].node.text == doc.text[parent.start_char_idx : parent.end_char_idx]
    assert "".join(by_id[c.node_id].text for c in parent.child_nodes).strip() == parent.text.strip()


@pytest.mark.slow
def test_minilm_pipeline_finds_code_by_meaning(stdlib_dir, chroma_client, collection_name, minilm_llama_index):
    # Three files keep the embedding work small.
    docs = [d for d in read_docs(stdlib_dir) if d.metadata["file_path"].endswith(("textwrap.py", "base64.py",
                                                                                   "shlex.py"))]
    embed = minilm_llama_index
    vector_store = ChromaVectorStore(chroma_collection=chroma_client.get_or_create_collection(collection_name))
    nodes = IngestionPipeline(
        transformations=[CodeNodeParser(chunk_size=128), embed], vector_store=vector_store
    ).run(documents=docs)
    by_id = {n.node_id: n for n in nodes}
    retriever = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed).as_retriever(similarity_top_k=4)
    expectations = {
        "wrap a paragraph of text into lines no longer than a given width": "textwrap.py",
        "encode binary data as base64 text": "base64.py",
        "split a shell command line into words like a POSIX shell": "shlex.py",
    }
    for query, filename in expectations.items():
        hits = retriever.retrieve(query)
        assert len(hits) == 4
        assert any(h.node.metadata["file_path"].endswith(filename) for h in hits), (query, hits)
        for h in hits:
            assert_same_node(h.node, by_id[h.node.node_id])
