"""CodeParentRetriever (LangChain) on real files: budgets, k, citations, stores, embeddings and chains."""

from __future__ import annotations

import asyncio
import pathlib
import re

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

from langchain_community.document_loaders import DirectoryLoader, TextLoader  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

from llmc_splitters import ConfigurationError  # noqa: E402
from llmc_splitters.langchain import CodeParentRetriever, CodeTextSplitter  # noqa: E402

MARKER = re.compile(r"^# (?P<path>\S+):(?P<start>\d+)-(?P<end>\d+)"
                    r"(?: \((?P<note>skeleton|truncated|excerpt|continues)\))?$", re.M)
QUERIES = [
    "wrap text into lines of a given width",
    "decode a JSON object from a string",
    "split a shell command line into tokens",
    "heap push pop smallest item",
    "base64 encode bytes",
]


def load(root) -> list[Document]:
    return DirectoryLoader(str(root), glob="**/*.py", loader_cls=TextLoader, loader_kwargs={"encoding": "utf-8"}).load()


def slices(page_content: str):
    """(path, start, end, note, text) for every marked slice of a page_content."""
    marks = list(MARKER.finditer(page_content))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(page_content)
        yield m["path"], int(m["start"]), int(m["end"]), m["note"], page_content[m.end() + 1 : end]


def assert_cited_exactly(docs: list[Document], files: dict[str, str]) -> None:
    """Every verbatim slice equals the file at the lines its marker names; the hit itself is among them."""
    for d in docs:
        source = d.metadata["source"]
        lines = files[source].splitlines(keepends=True)
        found_hit = False
        for path, start, end, note, text in slices(d.page_content):
            if note == "skeleton":
                continue
            original = "".join(files[path].splitlines(keepends=True)[start - 1 : end])
            if note == "excerpt":  # the head of a long statement, the lines naming what the hit uses, its end
                kept = iter(original.splitlines())
                assert all(line in kept for line in text.splitlines())
                continue
            if note == "continues":  # a piece of a definition that goes on past it: verbatim all the same
                note = None
            if note == "truncated":
                assert original.startswith(text.rstrip("\n"))
            else:
                # A verbatim slice of exactly the marked lines (a span may begin or end inside a line).
                body = text[:-1] if text.endswith("\n") else text  # the renderer ends every slice with a newline
                assert body in original
                assert body.count("\n") == end - start
            if path == source and start <= d.metadata["start_line"] and d.metadata["end_line"] <= end:
                found_hit = True
            if note == "truncated" and path == source and start == d.metadata["start_line"]:
                found_hit = d.metadata["truncated"]  # the head of a hit too big for its share
        hit_lines = "".join(lines[d.metadata["start_line"] - 1 : d.metadata["end_line"]])
        # start_line/end_line locate what is shown of the hit: the hit, or (zoomed) the part of it that fit.
        assert found_hit, f"the hit {source}:{d.metadata['start_line']} is not in its own document"
        if d.metadata.get("zoomed"):
            assert d.metadata["hit_start_line"] <= d.metadata["start_line"] <= d.metadata["end_line"] <= \
                d.metadata["hit_end_line"]
        assert hit_lines.strip()


@pytest.fixture(scope="module")
def corpus(stdlib_dir):
    docs = load(stdlib_dir)
    # DirectoryLoader gives absolute paths; the retriever stores and cites them relative to their common directory.
    return docs, {pathlib.Path(d.metadata["source"]).relative_to(stdlib_dir).as_posix(): d.page_content for d in docs}


@pytest.fixture(scope="module")
def lexical(corpus):
    docs, _ = corpus
    return CodeParentRetriever.from_documents(docs, embedding=None, k=4, max_context_tokens=2048)


def test_is_a_langchain_retriever_with_plain_constructor(corpus, lexical):
    assert isinstance(lexical, BaseRetriever)
    _, files = corpus
    plain = CodeParentRetriever(texts=files, k=2)
    assert len(plain.invoke("wrap text width")) == 2
    assert plain.k == 2 and plain.max_context_tokens == 2048


@pytest.mark.parametrize("budget", [120, 400, 2048])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_page_contents_add_up_to_the_budget_and_cite_exactly(corpus, lexical, cl100k, k, budget):
    _, files = corpus
    for query in QUERIES:
        docs = lexical.invoke(query, k=k, max_context_tokens=budget)
        assert 1 <= len(docs) <= k
        assert sum(cl100k.count(d.page_content) for d in docs) <= budget
        assert all(d.metadata["context_tokens"] == cl100k.count(d.page_content) for d in docs)
        assert [d.metadata["rank"] for d in docs] == sorted(d.metadata["rank"] for d in docs)
        assert_cited_exactly(docs, files)
        if budget >= 2048:
            assert len(docs) == k, "an ample budget returns exactly k documents"


def test_k_at_invoke_time_and_adjacent_hits_stay_separate_documents(lexical):
    docs = lexical.invoke("wrap text into lines of a given width", k=3)
    assert len(docs) == 3
    assert len(lexical.invoke("wrap text into lines of a given width")) == 4
    # The module functions wrap() and fill() are adjacent spans: each is still its own document.
    symbols = [d.metadata.get("symbol") for d in docs]
    assert len(set(d.metadata["span_id"] for d in docs)) == 3, symbols


def test_parent_context_is_added_once(corpus, lexical):
    docs = lexical.invoke("TextWrapper wrap chunks width", k=4, max_context_tokens=4096)
    textwrap_docs = [d for d in docs if d.metadata["source"].endswith("textwrap.py")]
    assert textwrap_docs
    method_docs = [d for d in docs if "." in (d.metadata.get("symbol") or "")]
    assert method_docs, "a method hit"
    first = method_docs[0]
    # A method hit shows its class header (or the class skeleton) before it: in its own document, or in an earlier
    # one of the reply (the class itself ranks first for a question that names it, and context is not repeated).
    upto = docs[: docs.index(first) + 1]
    assert any(
        ("class TextWrapper" in text) for d in upto for _, _, _, _, text in slices(d.page_content)
    ), first.page_content[:400]
    # Context slices (not hits) are never repeated across documents.
    context = [
        (p, a, b) for d in docs for p, a, b, _, _ in slices(d.page_content)
        if not (p == d.metadata["source"] and a <= d.metadata["start_line"] and d.metadata["end_line"] <= b)
    ]
    assert len(context) == len(set(context))


def test_expand_context_off_returns_the_hits_only(lexical, corpus):
    _, files = corpus
    plain = CodeParentRetriever(code_retriever=lexical.code_retriever, k=3, expand_context=False)
    for d in plain.invoke("decode a JSON object from a string"):
        assert len(list(slices(d.page_content))) == 1
        assert d.metadata["context_lines"] == [f"{d.metadata['source']}:{d.metadata['start_line']}-{d.metadata['end_line']}"]


def test_from_directory_and_persistent_store_reopen(stdlib_dir, tmp_path):
    store = tmp_path / "chroma"
    built = CodeParentRetriever.from_directory(stdlib_dir, path=str(store), k=3)
    first = built.invoke("decode a JSON object from a string")
    assert {d.metadata["source"] for d in first} <= {"json/decoder.py", "textwrap.py", "base64.py", "shlex.py",
                                                      "heapq.py"}
    assert any(d.metadata["source"] == "json/decoder.py" for d in first)
    reopened = CodeParentRetriever(path=str(store), k=3)  # nothing to index: the store already holds it
    assert [d.page_content for d in reopened.invoke("decode a JSON object from a string")] == [
        d.page_content for d in first
    ]


def test_a_given_chroma_client_and_collection_are_used(corpus, chroma_client, collection_name):
    docs, _ = corpus
    r = CodeParentRetriever.from_documents(docs, embedding=DeterministicFakeEmbedding(size=32), client=chroma_client,
                                           collection_name=collection_name, k=2)
    assert chroma_client.get_collection(collection_name).count() > 0  # the vectors went to the given client
    assert len(r.invoke("base64 encode bytes")) == 2


def test_hybrid_with_fake_embedding_and_async(corpus):
    docs, _ = corpus
    r = CodeParentRetriever.from_documents(docs, embedding=DeterministicFakeEmbedding(size=32), k=3)
    sync = r.invoke("heap push pop smallest item")
    assert len(sync) == 3
    asynced = asyncio.run(r.ainvoke("heap push pop smallest item"))
    assert [d.page_content for d in asynced] == [d.page_content for d in sync]
    assert [len(b) for b in r.batch(["base64 encode bytes", "wrap text"], k=2)] == [2, 2]


@pytest.mark.slow
def test_minilm_hybrid_finds_code_by_meaning_in_a_chain(corpus, minilm_langchain, cl100k):
    docs, _ = corpus
    # Three files keep the embedding work small; MiniLM reads at most 254 word pieces, so leaves are small.
    docs = [d for d in docs if d.metadata["source"].endswith(("textwrap.py", "base64.py", "shlex.py"))]
    r = CodeParentRetriever.from_documents(docs, embedding=minilm_langchain, k=3, max_context_tokens=1500,
                                           max_tokens=128)
    expectations = {
        "wrap a paragraph of text into lines no longer than a given width": "textwrap.py",
        "encode binary data as base64 text": "base64.py",
        "split a shell command line into words like a POSIX shell": "shlex.py",
    }
    for query, filename in expectations.items():
        got = r.invoke(query)
        assert got and got[0].metadata["source"].endswith(filename), (query, [d.metadata["source"] for d in got])
    chain = r | RunnableLambda(lambda ds: "\n\n".join(d.page_content for d in ds))
    context = chain.invoke("remove common leading whitespace from every line")
    assert "def dedent" in context and cl100k.count(context) <= 1500 + 2 * 3


def test_errors_are_raised_at_construction_or_call(corpus):
    _, files = corpus
    with pytest.raises(ConfigurationError, match="k must be a positive integer"):
        CodeParentRetriever(texts=files, k=0)
    with pytest.raises(ConfigurationError, match="max_context_tokens must be a positive integer"):
        CodeParentRetriever(texts=files, max_context_tokens=-5)
    source, text = next((k, v) for k, v in files.items() if k.endswith("textwrap.py"))
    chunks = CodeTextSplitter(chunk_size=64).split_documents([Document(page_content=text, metadata={"source": source})])
    with pytest.raises(ConfigurationError, match="one Document per file"):
        CodeParentRetriever.from_documents(chunks)
    r = CodeParentRetriever(texts={"m.py": "def f():\n    return 1\n"}, k=1)
    with pytest.raises(ConfigurationError, match="k must be a positive integer"):
        r.invoke("f", k=0)


def test_each_document_carries_the_ranked_files_beyond_the_budget(lexical, corpus):
    _, files = corpus
    docs = lexical.invoke("wrap text into lines of a given width", k=1, max_context_tokens=400)
    ranked = docs[0].metadata["ranked_files"]
    paths = [f["path"] for f in ranked]
    assert len(paths) == len(set(paths)) > 1  # more files than the one document the budget holds
    assert paths[0] == docs[0].metadata["source"]
    assert all(p in files for p in paths)
    assert [f["score"] for f in ranked] == sorted((f["score"] for f in ranked), reverse=True)
    assert {"path", "score", "start_line", "end_line", "symbol"} == set(ranked[0])
