"""Without ``k`` the framework retrievers fill the budget, as the core ``CodeRetriever`` does (issue 22, item 6).

Both ``CodeParentRetriever``s and ``CodeRetriever.retrieve_per_hit`` default to ``k=None``: hits in rank order,
one document each, while they fit ``max_context_tokens``. ``k``, LangChain's ``search_kwargs={"k": ...}`` and
LlamaIndex's ``similarity_top_k`` still give a fixed count.
"""

from __future__ import annotations

import pytest

from helpers import DATA
from llmc_splitters.retrieval.context.expand import render_marker

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

FILES = {
    "textwrap.py": (DATA / "python" / "textwrap.py").read_text(encoding="utf-8"),
    "json/decoder.py": (DATA / "python" / "json_decoder.py").read_text(encoding="utf-8"),
}
QUERY = "wrap text into lines of a given width"


@pytest.fixture(scope="module")
def lc():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from llmc_splitters.langchain import CodeParentRetriever

    docs = [Document(page_content=text, metadata={"source": path}) for path, text in FILES.items()]
    return CodeParentRetriever.from_documents(docs, embedding=None)


@pytest.fixture(scope="module")
def li():
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from llmc_splitters.llama_index import CodeParentRetriever

    docs = [Document(text=text, metadata={"file_path": path}) for path, text in FILES.items()]
    return CodeParentRetriever.from_documents(docs)


def test_the_default_is_fill_not_four(lc, li):
    assert lc.k is None
    assert li.k is None and li.similarity_top_k is None
    assert lc.code_retriever.k is None and li.code_retriever.k is None


@pytest.mark.parametrize("budget", [300, 1024, 4096])
def test_invoke_without_k_fills_the_budget(lc, cl100k, budget):
    docs = lc.invoke(QUERY, max_context_tokens=budget)
    assert [d.metadata["span_id"] for d in lc.invoke(QUERY, k=None, max_context_tokens=budget)] == [
        d.metadata["span_id"] for d in docs
    ]
    used = sum(cl100k.count(d.page_content) for d in docs)
    assert used <= budget
    # Filled: every candidate left out is bigger, bare (marker and text), than what is left of the budget.
    shown = {d.metadata["span_id"] for d in docs}
    left = budget - used
    candidates = lc.code_retriever.search(QUERY, 50).hits
    for hit in candidates:
        if hit.span.id not in shown:
            s = hit.span
            assert cl100k.count(render_marker("# {path}:{start}-{end}", s.path, s.start_line, s.end_line)
                                + "\n" + s.text) > left, (s.path, s.name)
    if budget >= 1024:
        assert len(docs) > 4, "an ample budget holds more than the old default of 4 hits"
    assert [d.metadata["rank"] for d in docs] == sorted(d.metadata["rank"] for d in docs)


def test_a_fixed_count_is_still_honoured(lc, li):
    assert len(lc.invoke(QUERY, k=4, max_context_tokens=4096)) == 4
    assert len(lc.invoke(QUERY, max_context_tokens=4096)) > 4
    from langchain_core.documents import Document

    from llmc_splitters.langchain import CodeParentRetriever

    docs = [Document(page_content=text, metadata={"source": path}) for path, text in FILES.items()]
    four = CodeParentRetriever.from_documents(docs, search_kwargs={"k": 4}, max_context_tokens=4096)
    assert four.k == 4 and len(four.invoke(QUERY)) == 4
    li.similarity_top_k, li.max_context_tokens = 4, 4096
    try:
        assert li.k == 4 and len(li.retrieve(QUERY)) == 4
        li.similarity_top_k = None
        assert len(li.retrieve(QUERY)) > 4
    finally:
        li.similarity_top_k, li.max_context_tokens = None, 2048


def test_the_faces_and_the_core_agree(lc, li, cl100k):
    from llmc_splitters.retrieval import CodeRetriever

    core = CodeRetriever(embedding=None, max_context_tokens=1024)
    core.index_texts(FILES)
    _, packed = core.retrieve_per_hit(QUERY)
    expected = [(hit.span.path, hit.span.start_line, exp.context) for hit, exp in packed]
    assert [(d.metadata["source"], d.metadata.get("hit_start_line", d.metadata["start_line"]), d.page_content)
            for d in lc.invoke(QUERY, max_context_tokens=1024)] == expected
    li.max_context_tokens = 1024
    try:
        assert [h.node.text for h in li.retrieve(QUERY)] == [context for _, _, context in expected]
    finally:
        li.max_context_tokens = 2048
    # The merged context of CodeRetriever.retrieve fills the same budget from the same ranked hits.
    merged = core.retrieve(QUERY)
    assert merged.token_count <= 1024 and merged.hits[0].span.id == packed[0][0].span.id


def test_an_explicit_k_none_fills_whatever_the_retrievers_k(cl100k):
    from langchain_core.documents import Document

    from llmc_splitters.langchain import CodeParentRetriever
    from llmc_splitters.retrieval import CodeRetriever

    docs = [Document(page_content=text, metadata={"source": path}) for path, text in FILES.items()]
    four = CodeParentRetriever.from_documents(docs, k=4, max_context_tokens=4096)
    assert len(four.invoke(QUERY)) == 4
    filled = four.invoke(QUERY, k=None)
    assert len(filled) > 4 and sum(cl100k.count(d.page_content) for d in filled) <= 4096
    core = CodeRetriever(embedding=None, k=4, max_context_tokens=4096)
    core.index_texts(FILES)
    assert len(core.retrieve_per_hit(QUERY)[1]) == 4 and len(core.retrieve_per_hit(QUERY, None)[1]) > 4
    assert len(core.retrieve(QUERY).hits) == 4 and len(core.retrieve(QUERY, k=None).hits) > 4
