"""Code-aware terms, and the lexical index (BM25 on tantivy) over them."""

from __future__ import annotations

import pytest

from llmc_splitters.retrieval import CodeIndex
from llmc_splitters.retrieval.terms import code_terms, split_identifier


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("max_retries", ["max", "retries"]),
        ("maxRetries", ["max", "retries"]),
        ("HTTPServer", ["http", "server"]),
        ("getHTTPResponse2", ["get", "http", "response2"]),
        ("__init__", ["init"]),
        ("$scope", ["scope"]),
        ("x", ["x"]),
    ],
)
def test_split_identifier(identifier: str, parts: list[str]) -> None:
    assert split_identifier(identifier) == parts


def test_terms_keep_whole_identifiers_and_parts() -> None:
    assert code_terms("self.max_retries = maxRetries") == [
        "self", "max_retries", "max", "retry", "maxretries", "max", "retry",
    ]


def test_terms_drop_stopwords_but_keep_single_letter_names() -> None:
    assert code_terms("how are the retries configured in x") == ["retry", "configured", "x"]
    assert code_terms("a_b") == ["a_b"]  # single-letter parts of a longer name are not terms
    assert code_terms("def g(x): return a") == ["def", "g", "x", "return"]


def test_plural_folding_meets_singular() -> None:
    assert set(code_terms("retries")) & set(code_terms("retry"))
    assert code_terms("class status") == ["class", "status"]


def _names(index: CodeIndex, query: str) -> list[str | None]:
    return [h.span.name for h in index.search(query, k=3).hits]


def test_bm25_prefers_exact_identifier() -> None:
    pytest.importorskip("tantivy")
    idx = CodeIndex()
    idx.index_texts({
        "a.py": "def backoff(max_retries):\n    return max_retries * 2\n",
        "b.py": "def retry_later():\n    pass  # retry once\n",
        "c.py": "def unrelated():\n    return 42\n",
    })
    assert _names(idx, "max_retries")[0] == "backoff"
    assert set(_names(idx, "retries")) == {"backoff", "retry_later"}
    assert _names(idx, "nothing matches here zzz") == []


def test_bm25_camel_case_query_finds_snake_case_code() -> None:
    pytest.importorskip("tantivy")
    idx = CodeIndex()
    idx.index_texts({"a.py": "def send_request(url):\n    ...\n", "b.py": "def parse_header(h):\n    ...\n"})
    assert _names(idx, "sendRequest")[0] == "send_request"
