"""Code-aware terms and BM25 over them."""

from __future__ import annotations

import pytest

from llmc_splitters.retrieval.terms import BM25Index, code_terms, split_identifier


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


def test_bm25_prefers_exact_identifier() -> None:
    docs = [
        "def backoff(max_retries): return max_retries * 2",
        "def retry_later(): pass  # retry once",
        "def unrelated(): return 42",
    ]
    idx = BM25Index(docs)
    assert idx.search("max_retries", k=3)[0][0] == 0
    assert {i for i, _ in idx.search("retries", k=3)} == {0, 1}
    assert idx.search("nothing matches here zzz") == []


def test_bm25_camel_case_query_finds_snake_case_code() -> None:
    idx = BM25Index(["def send_request(url): ...", "def parse_header(h): ..."])
    assert idx.search("sendRequest", k=1)[0][0] == 0


def test_bm25_allowed_subset_and_empty_corpus() -> None:
    idx = BM25Index(["alpha beta", "alpha gamma", "delta"])
    assert [i for i, _ in idx.search("alpha", allowed=[1])] == [1]
    assert BM25Index([]).search("alpha") == []
