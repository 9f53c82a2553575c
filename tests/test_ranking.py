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
    assert noise_kinds("src/types.ts", "typescript", "function") == frozenset()
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
    assert set(Ranking().rules()) == set(Ranking.RULES)
    with pytest.raises(ConfigurationError, match="unknown ranking rule 'nois'"):
        Ranking().without("nois")
    with pytest.raises(ConfigurationError, match="noise_factor"):
        replace(Ranking(), noise_factor=-1)
    with pytest.raises(ConfigurationError, match="decay"):
        replace(Ranking(), decay=-0.5)
    with pytest.raises(ConfigurationError, match="diverse_words"):
        replace(Ranking(), diverse_words=True)
    with pytest.raises(ConfigurationError, match="ranking must be a Ranking"):
        CodeRetriever(embedding=None, ranking="plain")


def test_single_letter_names_are_found():
    r = CodeRetriever(embedding=None)
    r.index_texts({"m.py": "def g(x):\n    return x + 1\n\n\ndef helper(value):\n    return value\n"})
    assert r.search("g", k=1).hits[0].span.name == "g"


SESSIONS = '''\
\"\"\"Sessions: settings that persist across requests.\"\"\"

from .adapters import HTTPAdapter


class Session:
    \"\"\"Cookie persistence, connection pooling and configuration.\"\"\"

    def __init__(self):
        self.headers = {}
        self.cookies = {}
        self.adapters = {"https://": HTTPAdapter(), "http://": HTTPAdapter()}
        self.max_redirects = 30
        self.trust_env = True

    def prepare_request(self, request):
        \"\"\"Merge the request's headers and cookies with these.\"\"\"
        headers = dict(self.headers, **request.headers)
        cookies = dict(self.cookies, **request.cookies)
        return request.prepare(headers=headers, cookies=cookies)

    def request(self, method, url):
        \"\"\"Prepare a request and send it through the mounted adapter.\"\"\"
        prepared = self.prepare_request(Request(method, url))
        return self.get_adapter(url).send(prepared, max_redirects=self.max_redirects)

    def get_adapter(self, url):
        \"\"\"The adapter mounted for the longest prefix of ``url``.\"\"\"
        for prefix, adapter in sorted(self.adapters.items(), key=lambda kv: -len(kv[0])):
            if url.startswith(prefix):
                return adapter
        raise InvalidSchema(f"No connection adapters were found for {url!r}")
'''

API = '''\
\"\"\"The requests API.\"\"\"

from . import sessions


def session():
    \"\"\"Returns a :class:`Session` for context-management.

    .. deprecated:: 1.0.0
        This method has been deprecated since version 1.0.0 and is only kept for backwards compatibility. New code
        should use :class:`~requests.sessions.Session` to create a session. This may be removed at a future date.

    :rtype: Session
    \"\"\"
    return sessions.Session()
'''


def test_a_question_of_one_capitalised_word_finds_the_class_it_names():
    r = CodeRetriever(embedding=None)
    r.index_texts({"requests/sessions.py": SESSIONS, "requests/api.py": API})
    top = r.search("Session", k=3).hits[0].span
    assert (top.path, top.name) == ("requests/sessions.py", "Session")
    # Without the definition rule, what says "session" more densely comes first (the module's docstring).
    assert r.search("Session", k=3, ranking=Ranking().without("definition")).hits[0].span.name != "Session"


def test_a_namespace_qualified_name_is_a_name():
    r = CodeRetriever(embedding=None)
    rack = {
        "lib/rack/response.rb": "module Rack\n  class Response\n    def initialize(body = [], status = 200)\n"
                                "      @body, @status = body, status\n    end\n  end\nend\n",
        "lib/rack/mock_response.rb": "module Rack\n  class MockResponse < Rack::Response\n    # A Rack::Response "
                                     "for tests: Rack::Response plus the errors\n    def initialize(status)\n"
                                     "      super([], status)\n    end\n  end\nend\n",
    }
    r.index_texts(rack)
    assert r.search("Rack::Response", k=2).hits[0].span.path == "lib/rack/response.rb"  # the leaf that defines it
    off = r.search("Rack::Response", k=2, ranking=Ranking().without("definition")).hits[0].span
    assert off.path == "lib/rack/mock_response.rb"  # the subclass that repeats the name


def test_a_typescript_type_the_question_names_is_not_pushed_down():
    r = CodeRetriever(embedding=None)
    r.index_texts({
        "src/types.ts": "export interface ZodType<Output = unknown> {\n  parse(data: unknown): Output;\n"
                        "  safeParse(data: unknown): { success: boolean };\n}\n",
        "src/string.ts": "import type { ZodType } from './types';\n\nexport function string(): ZodType<string> {\n"
                         "  // a ZodType for strings: every ZodType has parse\n  return makeZodType('string');\n}\n",
    })
    top = r.search("ZodType", k=2).hits[0].span
    assert (top.path, top.name) == ("src/types.ts", "ZodType")
    # A question that does not name it leaves the declaration below the code.
    assert r.search("parse a string", k=2).hits[0].span.path == "src/string.ts"


LOCK = '''\
local M = {}

function M.update()
  local pins = {}
  for _, plugin in ipairs(Config.plugins) do
    pins[plugin.name] = { branch = plugin.branch, commit = plugin.commit }
  end
  Util.write_file(Config.options.lockfile, vim.json.encode(pins))
end

function M.get(plugin)
  return M.load()[plugin.name]
end

return M
'''

COMMANDS = '''\
local M = {}

-- restore: install the commit the lockfile pins for every plugin; update: move the lockfile to the new commits
function M.restore(opts)
  opts = opts or {}
  opts.lockfile = true  -- reads each plugin's commit from the lockfile: the lockfile pins plugin commits
  return M.run("restore", opts)
end

function M.update(opts)
  opts = opts or {}
  opts.lockfile = true  -- writes the lockfile after the update: the lockfile pins the new plugin commits
  return M.run("update", opts)
end

return M
'''


def test_a_file_named_for_what_the_question_asks_comes_first():
    r = CodeRetriever(embedding=None)
    r.index_texts({"lua/lazy/manage/lock.lua": LOCK, "lua/lazy/view/commands.lua": COMMANDS})
    question = "how the lockfile pins plugin commits"
    assert r.search(question, k=3).hits[0].span.path == "lua/lazy/manage/lock.lua"
    # BM25 alone prefers the file that repeats the words.
    assert r.search(question, k=3, ranking=Ranking().without("path")).hits[0].span.path == "lua/lazy/view/commands.lua"


def test_a_file_the_question_names_comes_first():
    fmt = ("def format(number, decimal_sep, decimal_pos=None):\n    str_number = str(number)\n"
           "    if str_number[0] == '-':\n        sign = '-'\n        str_number = str_number[1:]\n"
           "    return sign + str_number\n")
    formats = ("def number_format(value, decimal_pos=None, use_l10n=None):\n"
               "    # the sign of a negative decimal: a negative decimal keeps its sign, a decimal is never lost\n"
               "    return numberformat.format(value, get_format('DECIMAL_SEPARATOR'), decimal_pos)\n")
    r = CodeRetriever(embedding=None)
    r.index_texts({"django/utils/numberformat.py": fmt, "django/utils/formats.py": formats,
                   "django/db/models/functions/math.py": "def sign(x):\n    return (x > 0) - (x < 0)\n"})
    report = "Fix numberformat.py: the sign of a negative decimal is lost"
    assert r.search(report, k=3).hits[0].span.path == "django/utils/numberformat.py"
    assert r.search(report, k=3, ranking=Ranking().without("path")).hits[0].span.path == "django/utils/formats.py"


def test_the_files_a_question_names_are_found_by_path_or_by_a_name_few_files_have():
    from llmc_splitters.retrieval.search.hits import _named_files

    r = CodeRetriever(embedding=None)
    r.index_texts({"django/utils/numberformat.py": "x = 1\n", "django/__init__.py": "y = 1\n",
                   "django/db/__init__.py": "z = 1\n", "django/db/models/__init__.py": "w = 1\n",
                   "django/forms/__init__.py": "v = 1\n"})
    store = r.index.parts.spans
    assert _named_files(store, ["numberformat.py"]) == ["django/utils/numberformat.py"]
    # A traceback-like path is matched by its longest indexed suffix.
    assert _named_files(store, ["home/me/venv/site-packages/django/utils/numberformat.py"]) == [
        "django/utils/numberformat.py"]
    assert _named_files(store, ["__init__.py"]) == []  # four files have that name: it names none
    assert _named_files(store, ["settings.py"]) == []


EXCEPTIONS = {
    "src/Exception/TransferException.php": "<?php\nclass TransferException extends \\RuntimeException implements "
                                           "GuzzleException\n{\n}\n",
    "src/Exception/RequestException.php": "<?php\n/** HTTP request exception: the request failed with an error "
                                          "response or a transfer error. */\nclass RequestException extends "
                                          "TransferException\n{\n    public function getRequest() { return "
                                          "$this->request; }\n}\n",
    "src/Exception/GuzzleException.php": "<?php\n/** Every exception Guzzle throws: HTTP and transfer errors. */\n"
                                         "interface GuzzleException extends \\Throwable\n{\n}\n",
}
STATS = "<?php\n" + "".join(
    f"/** Transfer stats {i}: the HTTP transfer error and the exception of a failed transfer. */\n"
    f"function transfer_error_{i}($exception) {{ return $exception->getHandlerErrorData({i}); }}\n\n"
    for i in range(12))


def test_a_short_question_gets_a_page_of_files_and_a_reply_keeps_its_best_answers_whole():
    r = CodeRetriever(embedding=None, max_tokens=48)
    r.index_texts({**EXCEPTIONS, "src/TransferStats.php": STATS})
    question = "exception hierarchy for HTTP and transfer errors"
    page = [h.span.path for h in r.search(question, k=4).hits]
    assert len(set(page)) >= 3  # the page covers the files that answer
    one_file = [h.span.path for h in r.search(question, k=4, ranking=Ranking().without("diversity")).hits]
    assert len(set(one_file)) < len(set(page))  # BM25 alone: pieces of one file that repeat the words
    # A reply is ranked without the diversity: its context holds the best hits whole, its files show the breadth.
    reply = r.retrieve(question, k=4, max_context_tokens=400)
    assert [h.span.id for h in reply.hits] == [h.span.id for h in
                                               r.search(question, k=4, ranking=Ranking().for_reply()).hits]
    assert len(reply.files) >= 3


def test_a_long_question_keeps_the_order_of_its_file_and_lets_another_file_onto_the_page():
    r = CodeRetriever(embedding=None, max_tokens=48)
    r.index_texts({**EXCEPTIONS, "src/TransferStats.php": STATS})
    long = ("when a transfer fails the handler error data of the exception is read by the transfer stats for every "
            "transfer error and exception it records")
    with_rule = r.search(long, k=6).hits
    without = r.search(long, k=6, ranking=Ranking().without("diversity")).hits
    assert {h.span.path for h in without} == {"src/TransferStats.php"}
    # The mild decay of a long question (0.95 per span of the file already taken) keeps its best file first and in
    # its own order, and lets the best span of another file onto the first page.
    assert [h.span.id for h in with_rule[:3]] == [h.span.id for h in without[:3]]
    own = [h.span.id for h in with_rule if h.span.path == "src/TransferStats.php"]
    assert own == [h.span.id for h in without][:len(own)]
    assert len({h.span.path for h in with_rule}) == 2
    short = r.search(long, k=6, ranking=replace(Ranking(), diverse_words=100)).hits  # read as a short question
    assert len({h.span.path for h in short}) > 2


def test_a_report_lifts_the_definition_its_title_names():
    blockmatrix = ("class BlockDiagMatrix(BlockMatrix):\n    \"\"\"A block diagonal matrix.\"\"\"\n\n"
                   "    @property\n    def blocks(self):\n        mats = self.args\n"
                   "        return [[mats[i] if i == j else 0 for j in range(len(mats))] for i in range(len(mats))]\n")
    dense = ("def _convert(matrix):\n    # a BlockDiagMatrix with one Matrix element: convert it back to a regular "
             "Matrix element\n    return Matrix(matrix.element, element=0)\n")
    filler = {f"sympy/core/mod{i}.py": f"def add{i}(a, b):\n    return a + b + {i}\n" for i in range(30)}
    r = CodeRetriever(embedding=None)
    r.index_texts({"sympy/matrices/expressions/blockmatrix.py": blockmatrix, "sympy/matrices/dense.py": dense,
                   **filler})
    report = ("BlockDiagMatrix with one element cannot be converted to regular Matrix\n\nCreating a BlockDiagMatrix "
              "with one Matrix element will raise if trying to convert it back to a regular Matrix:\n\n```python\n"
              "M = sympy.Matrix([[1, 2], [3, 4]])\nD = sympy.BlockDiagMatrix(M)\nB = sympy.Matrix(D)\n```\n")
    assert r.search(report, k=3).hits[0].span.name == "BlockDiagMatrix"
    # Without it, the code that talks about a BlockDiagMatrix in more of the report's words comes first.
    assert r.search(report, k=3, ranking=replace(Ranking(), headline_boost=1.0)).hits[0].span.path == \
        "sympy/matrices/dense.py"
