"""Arguments are checked: an unknown keyword to a public constructor or ``from_*`` raises our ConfigurationError
naming the nearest valid argument; the frameworks' conventional spellings are honoured."""

from __future__ import annotations

import os

import pytest

from llmc_splitters import ASTChunker, ConfigurationError
from llmc_splitters._faces import relative_paths, resolve_top_k
from llmc_splitters.errors import checked_arguments, nearest_argument

SRC = "import os\n\n\ndef home():\n    return os.environ['HOME']\n"


def _lc_docs():
    from langchain_core.documents import Document

    return [Document(page_content=SRC, metadata={"source": "m.py"})]


def _li_docs():
    from llama_index.core import Document

    return [Document(text=SRC, metadata={"file_path": "m.py"})]


def _lc_retriever():
    pytest.importorskip("chromadb")
    pytest.importorskip("tantivy")
    from llmc_splitters.langchain import CodeParentRetriever

    return CodeParentRetriever


def _li_retriever():
    pytest.importorskip("chromadb")
    pytest.importorskip("tantivy")
    from llmc_splitters.llama_index import CodeParentRetriever

    return CodeParentRetriever


def _splitter():
    pytest.importorskip("langchain_text_splitters")
    from llmc_splitters.langchain import CodeTextSplitter

    return CodeTextSplitter


def _parser():
    pytest.importorskip("llama_index.core")
    from llmc_splitters.llama_index import CodeNodeParser

    return CodeNodeParser


# (what is called, the misspelled argument, the suggestion the error must make)
MISSPELLED = [
    ("lc-from_documents", lambda: _lc_retriever().from_documents(_lc_docs(), embeddings=None), "embeddings", "embedding"),
    ("lc-top_k", lambda: _lc_retriever().from_documents(_lc_docs(), top_k=1), "top_k", "k"),
    ("lc-max_context_token", lambda: _lc_retriever().from_documents(_lc_docs(), max_context_token=50),
     "max_context_token", "max_context_tokens"),
    ("lc-constructor", lambda: _lc_retriever()(texts={"m.py": SRC}, embedings=None), "embedings", "embedding"),
    ("lc-from_directory", lambda: _lc_retriever().from_directory(".", excludes=["x"]), "excludes", "exclude"),
    ("li-from_documents", lambda: _li_retriever().from_documents(_li_docs(), embeddings=None), "embeddings",
     "embedding"),
    ("li-top_k", lambda: _li_retriever().from_documents(_li_docs(), top_k=1), "top_k", "k"),
    ("li-max_context_token", lambda: _li_retriever().from_documents(_li_docs(), max_context_token=50),
     "max_context_token", "max_context_tokens"),
    ("splitter", lambda: _splitter()(chunk_sise=64), "chunk_sise", "chunk_size"),
    ("splitter-from_language", lambda: _splitter().from_language("python", max_token=64), "max_token",
     "max_tokens"),
    ("parser", lambda: _parser()(chunksize=64), "chunksize", "chunk_size"),
    ("parser-from_defaults", lambda: _parser().from_defaults(include_parent=True), "include_parent",
     "include_parents"),
    ("chunker", lambda: ASTChunker(max_token=64), "max_token", "max_tokens"),
    ("chunker-tokeniser", lambda: ASTChunker(tokeniser=len), "tokeniser", "tokenizer"),
]


@pytest.mark.parametrize(("call", "wrong", "right"), [m[1:] for m in MISSPELLED], ids=[m[0] for m in MISSPELLED])
def test_a_misspelled_argument_names_the_nearest_valid_one(call, wrong, right):
    with pytest.raises(ConfigurationError) as info:
        call()
    message = str(info.value)
    assert f"unknown argument {wrong!r}; did you mean {right!r}?" in message
    assert not isinstance(info.value, TypeError)


def test_conventional_spellings_are_honoured():
    lc = _lc_retriever().from_documents(_lc_docs(), search_kwargs={"k": 1})
    assert lc.k == 1 and len(lc.invoke("home directory")) == 1
    li = _li_retriever().from_documents(_li_docs(), similarity_top_k=1)
    assert li.k == li.similarity_top_k == 1 and len(li.retrieve("home directory")) == 1
    with pytest.raises(ConfigurationError, match="supports only 'k'.*'filter'"):
        _lc_retriever().from_documents(_lc_docs(), search_kwargs={"k": 1, "filter": {"source": "m.py"}})
    with pytest.raises(ConfigurationError, match="same setting"):
        _lc_retriever().from_documents(_lc_docs(), k=2, search_kwargs={"k": 3})


def test_resolve_top_k():
    assert resolve_top_k(None, None, None) is None  # fill the budget
    assert resolve_top_k(None, 3, None) == resolve_top_k(None, None, {"k": 3}) == resolve_top_k(3, 3, {"k": 3}) == 3
    with pytest.raises(ConfigurationError, match="similarity_top_k must be a positive integer"):
        resolve_top_k(None, 0, None)


def test_checked_arguments_keeps_the_signature_and_leaves_valid_calls_alone():
    import inspect

    class Box:
        @checked_arguments
        def __init__(self, size: int = 1, *, colour: str = "red") -> None:
            self.size, self.colour = size, colour

    assert list(inspect.signature(Box.__init__).parameters) == ["self", "size", "colour"]
    assert Box(2, colour="blue").colour == "blue"
    with pytest.raises(ConfigurationError, match="'color'; did you mean 'colour'"):
        Box(color="blue")
    assert nearest_argument("zzz", ["size", "colour"]) is None


# ------------------------------------------------------------------------------------------------ relative paths
def test_relative_paths_default_to_the_common_directory_of_absolute_paths(tmp_path):
    a, b = str(tmp_path / "src/httpx/_client.py"), str(tmp_path / "src/httpx/_models.py")
    assert relative_paths([a, b, None], None) == ["_client.py", "_models.py", None]
    assert relative_paths([a], None) == ["_client.py"]
    assert relative_paths([a, b], str(tmp_path / "src")) == ["httpx/_client.py", "httpx/_models.py"]
    assert relative_paths([a, "rel/x.py"], None) == [a, "rel/x.py"], "mixed: as given"
    assert relative_paths([a], False) == [a]
    with pytest.raises(ConfigurationError, match="not under root"):
        relative_paths([a], str(tmp_path / "elsewhere"))


def test_retrievers_store_and_cite_relative_paths(tmp_path):
    from langchain_core.documents import Document

    root = tmp_path / "home/me/src"
    (root / "httpx").mkdir(parents=True)
    (root / "httpx/_client.py").write_text(SRC, encoding="utf-8")
    docs = [Document(page_content=SRC, metadata={"source": str(root / "httpx/_client.py")})]
    hit = _lc_retriever().from_documents(docs, k=1).invoke("home directory")[0]
    assert hit.metadata["source"] == "_client.py" and hit.page_content.startswith("# _client.py:1-1")
    assert os.sep + "home" not in hit.page_content
    hit = _lc_retriever().from_documents(docs, k=1, root=str(root)).invoke("home directory")[0]
    assert hit.metadata["source"] == "httpx/_client.py"
    hit = _lc_retriever().from_directory(str(root), k=1).invoke("home directory")[0]
    assert hit.metadata["source"] == "httpx/_client.py"
    hit = _lc_retriever().from_directory(str(root / "httpx"), k=1, root=str(root)).invoke("home directory")[0]
    assert hit.metadata["source"] == "httpx/_client.py"
    from llama_index.core import Document as LIDocument

    li_docs = [LIDocument(text=SRC, metadata={"file_path": str(root / "httpx/_client.py")})]
    node = _li_retriever().from_documents(li_docs, k=1, root=str(root)).retrieve("home directory")[0].node
    assert node.metadata["file_path"] == "httpx/_client.py" and node.text.startswith("# httpx/_client.py:1-1")
