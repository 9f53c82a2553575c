"""CodeTextSplitter in real LangChain pipelines: loaders -> splitter -> Chroma -> retriever | format_docs.

No framework is mocked: LangChain's document loaders read real files, langchain-chroma stores the chunks in an
in-memory Chroma, and the embeddings are LangChain's ``DeterministicFakeEmbedding`` (fast, exact-match only) or the
packaged all-MiniLM-L6-v2 (semantic).
"""

from __future__ import annotations

import ast

import pytest

pytest.importorskip("langchain_text_splitters")
pytest.importorskip("langchain_chroma")
pytest.importorskip("langchain_community")

from langchain_chroma import Chroma  # noqa: E402
from langchain_community.document_loaders import DirectoryLoader, TextLoader  # noqa: E402
from langchain_community.document_loaders.generic import GenericLoader  # noqa: E402
from langchain_community.document_loaders.parsers.txt import TextParser  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_text_splitters import Language, RecursiveCharacterTextSplitter  # noqa: E402

from llmc_splitters.langchain import CodeTextSplitter  # noqa: E402

CHUNK = 256


def format_docs(docs: list[Document]) -> str:
    """The usual RAG prompt formatter, with a citation line per chunk."""
    return "\n\n".join(
        f"# {d.metadata['source']}:{d.metadata['start_line']}-{d.metadata['end_line']}\n{d.page_content}" for d in docs
    )


def load_directory(root) -> list[Document]:
    return DirectoryLoader(str(root), glob="**/*.py", loader_cls=TextLoader, loader_kwargs={"encoding": "utf-8"}).load()


def line_spans_of_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every function/method, decorators included, from Python's own parser."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((node.name, first, node.end_lineno))
    return out


def chunk_lines(text: str, start: int, content: str) -> tuple[int, int]:
    return text.count("\n", 0, start) + 1, text.count("\n", 0, start + len(content.rstrip("\n")) - 1) + 1


# ---------------------------------------------------------------------------------------------------- loaders
def test_directory_loader_output_splits_as_is(stdlib_dir, cl100k):
    docs = load_directory(stdlib_dir)
    assert len(docs) == 5 and all("source" in d.metadata for d in docs)
    chunks = CodeTextSplitter(chunk_size=CHUNK).split_documents(docs)
    by_source = {}
    for c in chunks:
        by_source.setdefault(c.metadata["source"], []).append(c)
        assert c.metadata["language"] == "python"
        assert cl100k.count(c.page_content) <= CHUNK
    assert set(by_source) == {d.metadata["source"] for d in docs}
    for d in docs:
        mine = by_source[d.metadata["source"]]
        # Verbatim, in order, and every non-blank character is kept.
        assert "".join(c.page_content for c in mine).split() == d.page_content.split()
        for c in mine:
            m = c.metadata
            assert d.page_content[m["start_index"] : m["end_index"]] == c.page_content


def test_generic_loader_output_splits_as_is(stdlib_dir):
    loader = GenericLoader.from_filesystem(str(stdlib_dir), glob="**/*", suffixes=[".py"], parser=TextParser())
    docs = loader.load()
    assert len(docs) == 5
    chunks = CodeTextSplitter(chunk_size=CHUNK).transform_documents(docs)
    assert {c.metadata["source"] for c in chunks} == {str(d.metadata["source"]) for d in docs}
    assert all(c.metadata["language"] == "python" for c in chunks)
    assert any(c.metadata.get("symbol") == "TextWrapper.wrap" for c in chunks)


# ---------------------------------------------------------------------------------------------------- Chroma
def test_chroma_from_code_chunks_then_retriever_chain(stdlib_dir, chroma_client, collection_name):
    chunks = CodeTextSplitter(chunk_size=CHUNK).split_documents(load_directory(stdlib_dir))
    store = Chroma.from_documents(
        chunks, DeterministicFakeEmbedding(size=64), client=chroma_client, collection_name=collection_name
    )
    assert store._collection.count() == len(chunks)
    target = next(c for c in chunks if c.metadata.get("symbol") == "TextWrapper.wrap")
    # DeterministicFakeEmbedding maps equal texts to equal vectors: the chunk itself is the nearest neighbour.
    hit = store.similarity_search(target.page_content, k=1)[0]
    assert hit.page_content == target.page_content
    assert hit.metadata == target.metadata, "metadata survives the store unchanged"
    # Metadata filters work on our keys.
    filtered = store.similarity_search("anything", k=3, filter={"symbol": "JSONDecoder.raw_decode"})
    assert filtered and all(d.metadata["symbol"] == "JSONDecoder.raw_decode" for d in filtered)
    # A LangChain chain: retriever | format_docs.
    chain = store.as_retriever(search_kwargs={"k": 2}) | RunnableLambda(format_docs)
    context = chain.invoke(target.page_content)
    first = f"# {target.metadata['source']}:{target.metadata['start_line']}-{target.metadata['end_line']}\n"
    assert context.startswith(first + target.page_content)


@pytest.mark.slow
def test_chroma_with_minilm_finds_code_by_meaning(stdlib_dir, chroma_client, collection_name, minilm_langchain):
    # MiniLM reads at most 254 word pieces: keep chunks well inside that. Three files keep the embedding work small.
    files = [d for d in load_directory(stdlib_dir) if d.metadata["source"].endswith(("textwrap.py", "base64.py",
                                                                                     "shlex.py"))]
    chunks = CodeTextSplitter(chunk_size=128, context_header=True, header_reserve=24).split_documents(files)
    store = Chroma.from_documents(
        chunks, minilm_langchain, client=chroma_client, collection_name=collection_name
    )
    retriever = store.as_retriever(search_kwargs={"k": 4})
    expectations = {
        "wrap a paragraph of text into lines no longer than a given width": "textwrap.py",
        "encode binary data as base64 text": "base64.py",
        "split a shell command line into words like a POSIX shell": "shlex.py",
    }
    for query, filename in expectations.items():
        docs = retriever.invoke(query)
        assert len(docs) == 4
        assert any(d.metadata["source"].endswith(filename) for d in docs), (query, [d.metadata for d in docs])
    context = (retriever | RunnableLambda(format_docs)).invoke("dedent common leading whitespace")
    assert "textwrap.py:" in context


# ---------------------------------------------------------------------------------------------------- drop-in
def test_drop_in_comparison_with_recursive_character_splitter(cl100k):
    """On a real file, ours keeps every function that fits whole and every line; the recursive splitter cuts."""
    import textwrap as module

    path = module.__file__
    text = open(path, encoding="utf-8").read()  # noqa: PTH123, SIM115
    ours = CodeTextSplitter(chunk_size=CHUNK).create_documents([text], [{"source": path}])
    theirs = RecursiveCharacterTextSplitter.from_language(
        Language.PYTHON, chunk_size=CHUNK, chunk_overlap=0, length_function=cl100k.count, add_start_index=True
    ).create_documents([text])

    # 1. No chunk of ours is over chunk_size tokens.
    assert max(cl100k.count(d.page_content) for d in ours) <= CHUNK
    # 2. No non-blank line is lost: each appears, verbatim, in the chunk whose line range holds it.
    lines = text.splitlines(keepends=True)
    covered = set()
    for d in ours:
        m = d.metadata
        assert "".join(lines[m["start_line"] - 1 : m["end_line"]]).find(d.page_content.strip("\n")) >= 0
        covered.update(range(m["start_line"], m["end_line"] + 1))
    assert all(i + 1 in covered for i, line in enumerate(lines) if line.strip())

    # 3. Functions that fit the budget: never split by ours, at least one split in two by the recursive splitter.
    ours_ranges = [(d.metadata["start_line"], d.metadata["end_line"]) for d in ours]
    theirs_ranges = [chunk_lines(text, d.metadata["start_index"], d.page_content) for d in theirs]
    fitting = [
        (name, a, b)
        for name, a, b in line_spans_of_functions(text)
        if cl100k.count("".join(lines[a - 1 : b])) <= CHUNK - 8
    ]
    assert len(fitting) > 10

    def whole_in_one(ranges, a, b):
        return any(s <= a and b <= e for s, e in ranges)

    split_by_ours = [f for f in fitting if not whole_in_one(ours_ranges, f[1], f[2])]
    split_by_theirs = [f for f in fitting if not whole_in_one(theirs_ranges, f[1], f[2])]
    assert split_by_ours == []
    assert split_by_theirs, "the recursive splitter kept every fitting function whole on this file"
