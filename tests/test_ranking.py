"""The ranking rules on a small realistic repository: tests, docs and declarations pushed down unless asked for,
definitions lifted, fragments kept from the top, the ranked file list, and every rule's switch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval import CodeRetriever, FileRank, Ranking
from llmc_splitters.retrieval.search.ranking import noise_kinds

CLIENT = '''\
"""HTTP client."""

import time


class RetryPolicy:
    """How many times a request is retried, and how long to wait between tries."""

    def __init__(self, retries=3, backoff=0.5):
        self.retries = retries
        self.backoff = backoff

    def delay(self, attempt):
        """Seconds to wait before retry number ``attempt`` (exponential backoff)."""
        return self.backoff * (2 ** attempt)


def send_with_retries(request, policy):
    """Send ``request``, retrying on connection errors as ``policy`` says."""
    for attempt in range(policy.retries + 1):
        try:
            return request.send()
        except ConnectionError:
            time.sleep(policy.delay(attempt))
    raise ConnectionError("gave up after retries")
'''

TEST_CLIENT = '''\
from client import RetryPolicy, send_with_retries


def test_retry_policy_delay_backoff_retries():
    policy = RetryPolicy(retries=3, backoff=0.5)
    assert policy.delay(0) == 0.5  # retries backoff delay retries
    assert policy.delay(2) == 2.0  # retries backoff delay retries


def test_send_with_retries_gives_up_after_retries():
    policy = RetryPolicy(retries=0)
    # retries retries retries backoff
'''

DOCS = '''\
# Retries

Retries: set `RetryPolicy(retries=3, backoff=0.5)`; retries wait with exponential backoff between retries.
The delay of each of the retries doubles. Retries, retries, retries.
'''

TYPES = '''\
export interface RetryOptions {
  retries: number;
  backoff: number;
}
'''

FILES = {
    "client.py": CLIENT,
    "tests/test_client.py": TEST_CLIENT,
    "docs/retries.md": DOCS,
    "types/retry.d.ts": TYPES,
}


@pytest.fixture(scope="module")
def retriever():
    r = CodeRetriever(embedding=None)
    r.index_texts(FILES)
    return r


def _files(result) -> list[str]:
    return [f.path for f in result.files]


def test_code_outranks_tests_docs_and_declarations_that_repeat_the_words(retriever):
    res = retriever.search("how are retries and backoff delay configured", k=5)
    assert res.hits[0].span.path == "client.py"
    assert _files(res)[0] == "client.py"
    plain = retriever.search("how are retries and backoff delay configured", k=5, ranking=Ranking().without("noise"))
    assert plain.hits[0].span.path != "client.py"  # the words are denser in the test and the docs


def test_a_question_that_asks_for_the_test_gets_the_test(retriever):
    res = retriever.search("the test for the retry policy delay backoff", k=3)
    assert res.hits[0].span.path == "tests/test_client.py"


def test_a_named_definition_is_lifted():
    r = CodeRetriever(embedding=None, max_tokens=48)  # small leaves: each method is its own span
    caller = ("from client import RetryPolicy\n\n\ndef total_wait(policy: RetryPolicy) -> float:\n"
              "    # RetryPolicy delay: sum of every RetryPolicy.delay\n"
              "    return sum(policy.delay(i) for i in range(policy.retries)) + policy.delay(0) * 0\n")
    r.index_texts({**FILES, "schedule.py": caller})
    assert r.search("where is RetryPolicy.delay defined", k=3).hits[0].span.name == "RetryPolicy.delay"
    # The rule alone (the question read, nothing else) is what lifts it over the caller that repeats its name.
    only = replace(Ranking.plain(), question=True, definition=True)
    res = r.search("where is RetryPolicy.delay defined", k=3, ranking=only)
    assert res.hits[0].span.name == "RetryPolicy.delay"
    off = r.search("where is RetryPolicy.delay defined", k=3, ranking=replace(only, definition=False))
    assert off.hits[0].span.name == "total_wait"


def test_files_list_each_file_once_best_first_with_its_best_span(retriever):
    res = retriever.search("retries backoff", k=2)
    paths = _files(res)
    assert len(paths) == len(set(paths)) and len(paths) > len({h.span.path for h in res.hits})
    assert all(isinstance(f, FileRank) for f in res.files)
    assert [f.score for f in res.files] == sorted((f.score for f in res.files), reverse=True)
    best = next(f for f in res.files if f.path == "client.py")
    assert CLIENT.splitlines()[best.start_line - 1].strip()
    out = retriever.retrieve("retries backoff", max_context_tokens=120)
    assert [f.path for f in out.files] == paths  # beyond what the budget holds


def test_noise_kinds():
    assert noise_kinds("tests/test_client.py", "python", "function") == {"test"}
    assert noise_kinds("src/app.test.ts", "typescript", "function") == {"test"}
    assert noise_kinds("types/retry.d.ts", "typescript", "interface") == {"declaration"}
    assert noise_kinds("src/types.ts", "typescript", "type") == {"declaration"}
    assert noise_kinds("docs/retries.md", "markdown", "section") == {"docs"}
    assert noise_kinds("sales.ipynb#cell4", "markdown", "section") == frozenset()  # a notebook's own prose
    assert noise_kinds("examples/basic.py", "python", "function") == {"example"}
    assert noise_kinds("src/_compat.py", "python", "function") == {"compat"}
    assert noise_kinds("vendor/lib.js", "javascript", "function") == {"vendored"}
    assert noise_kinds("client.py", "python", "function") == frozenset()


def test_a_trailing_fragment_does_not_outrank_its_definition():
    body = "".join(f"  const v{i} = compute{i}(input, options, {i});\n  results.push(v{i});\n\n" for i in range(60))
    src = ("export function buildObjectMapper(input, options) {\n  const results = [];\n\n" + body
           + "  log(results.length);\n  return results;\n}\n")
    r = CodeRetriever(embedding=None, max_tokens=128)
    r.index_texts({"mapper.js": src})

    def first(ranking):
        return r.search("buildObjectMapper", k=3, ranking=ranking).hits[0].span

    assert first(Ranking()).start_line == 1  # the definition's first piece, with its signature
    tail = first(Ranking().without("tiny"))  # what the rule is for: the short last piece wins BM25's length norm
    assert tail.text.strip().endswith("return results;\n}") and tail.token_count < 48


def test_every_rule_has_a_switch_and_bad_settings_are_refused():
    assert Ranking.plain().rules() == ()
    assert set(Ranking().rules()) == set(Ranking.RULES) - {"diversity"}
    with pytest.raises(ConfigurationError, match="unknown ranking rule 'nois'"):
        Ranking().without("nois")
    with pytest.raises(ConfigurationError, match="noise_factor"):
        replace(Ranking(), noise_factor=-1)
    with pytest.raises(ConfigurationError, match="ranking must be a Ranking"):
        CodeRetriever(embedding=None, ranking="plain")


def test_single_letter_names_are_found():
    r = CodeRetriever(embedding=None)
    r.index_texts({"m.py": "def g(x):\n    return x + 1\n\n\ndef helper(value):\n    return value\n"})
    assert r.search("g", k=1).hits[0].span.name == "g"
