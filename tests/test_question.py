"""Question analysis on bug-report texts written for these tests (frames, paths, identifiers, code, dumps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters.retrieval import analyze_question
from llmc_splitters.retrieval.search.question import weigh

PY_REPORT = '''\
Uploading a file with a unicode name crashes `Client.post`

Steps: call client.post("/upload", files={"f": open("é.txt", "rb")})

Traceback (most recent call last):
  File "/home/me/app/run.py", line 8, in <module>
    main()
  File "/home/me/venv/lib/python3.11/site-packages/httpx/_client.py", line 1144, in post
    return self.request(
  File "/home/me/venv/lib/python3.11/site-packages/httpx/_multipart.py", line 61, in render_headers
    name = self.name.encode("ascii")
UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9'

pip list:
anyio       4.2.0
certifi     2024.2.2
h11         0.14.0
httpcore    1.0.2
httpx       0.26.0
'''

JS_REPORT = '''\
TypeError when a route has no handler

    TypeError: Cannot read properties of undefined (reading 'handle')
        at Layer.handleRequest (/srv/node_modules/express/lib/router/layer.js:95:5)
        at next (/srv/node_modules/express/lib/router/route.js:149:13)
        at Route.dispatch (/srv/node_modules/express/lib/router/route.js:119:3)
        at node:internal/process/task_queues:95:5
'''

BASH_REPORT = '''\
nvm use fails in a subshell

    $ bash -c 'nvm use 18'
    /root/.nvm/nvm.sh: line 3120: nvm_resolve_local_alias: command not found
'''


def test_python_traceback_frames_nearest_error_first_and_weighted_most():
    q = analyze_question(PY_REPORT)
    assert q.shape == "report"
    assert [f.function for f in q.frames] == ["render_headers", "post", None]
    assert q.frames[0].path.endswith("httpx/_multipart.py") and q.frames[0].line == 61
    # Said once each: the raising frame's names outweigh the outermost frame's, which outweigh a word of prose.
    assert q.terms["render_headers"] > q.terms["run"] > q.terms["uploading"] == 1.0
    assert q.terms["multipart"] == q.terms["render_headers"]
    assert "client.post" in q.names and "render_headers" in q.names


def test_pip_list_dump_is_not_searched():
    q = analyze_question(PY_REPORT)
    for package in ("anyio", "certifi", "h11", "httpcore"):
        assert package not in q.terms
    # frame boilerplate and line numbers are not terms either
    assert "line" not in q.terms and "1144" not in q.terms


def test_javascript_frames_skip_node_internals():
    q = analyze_question(JS_REPORT)
    assert [f.function for f in q.frames] == ["Layer.handleRequest", "next", "Route.dispatch"]
    assert q.frames[0].path.endswith("lib/router/layer.js") and q.frames[0].distance == 0
    assert "layer.handlerequest" in q.names and "handlerequest" in q.names
    assert q.terms["layer"] > q.terms["dispatch"]


def test_bash_error_line_is_a_frame():
    q = analyze_question(BASH_REPORT)
    assert [(f.path, f.line) for f in q.frames] == [("/root/.nvm/nvm.sh", 3120)]
    assert "nvm_resolve_local_alias" in q.names


def test_paths_and_dotted_names_in_prose():
    q = analyze_question("why does src/routing/params.ts reject `:id?` while Router.match accepts it")
    assert "src/routing/params.ts" in q.paths
    assert "router.match" in q.names and "match" in q.names
    assert q.shape == "words"


def test_shapes():
    assert analyze_question("ObjectMapper").shape == "symbol"
    assert analyze_question("where is parse_headers defined").shape == "symbol"
    assert analyze_question("how are retries configured when the server sends Retry-After").shape == "words"
    assert analyze_question(PY_REPORT).shape == "report"


def test_asks_for_tests_and_docs_but_a_report_asks_for_code():
    assert "test" in analyze_question("the test for nested config values").asks_for
    assert "docs" in analyze_question("where is the changelog entry for 2.0").asks_for
    assert analyze_question("how are headers parsed").asks_for == frozenset()
    report = "crash in the test client\n\nWhen using follow_redirects in the test client the session is lost.\n" * 2
    assert analyze_question(report).asks_for == frozenset()


def test_repeated_words_saturate():
    q = analyze_question("timeout " * 20)
    assert 1.0 < q.terms["timeout"] < 5.0


def test_weigh_drops_common_words_from_reports_only():
    q = analyze_question(PY_REPORT)
    df = {t: 1 for t in q.terms} | {"self": 90}
    assert "self" in q.terms and "self" not in weigh(q, 100, df)
    short = analyze_question("self name")
    assert "self" in weigh(short, 100, {"self": 90, "name": 1})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_a_question_with_positive_weights(text):
    q = analyze_question(text)
    assert q.shape in {"symbol", "words", "report"}
    assert all(w >= 1.0 for w in q.terms.values())
    assert all(f.distance >= 0 for f in q.frames)


def test_a_question_of_one_word_is_a_name_whatever_its_case():
    for word in ("Session", "view", "Timeout"):
        q = analyze_question(word)
        assert (q.shape, q.names) == ("symbol", (word.lower(),))


def test_namespace_qualified_names_are_names():
    assert analyze_question("Rack::Response").names == ("rack.response", "response")
    assert analyze_question("where is GuzzleHttp\\Client defined").names[:2] == ("guzzlehttp.client", "client")


def test_an_acronym_in_prose_is_not_a_name():
    q = analyze_question("connection pooling and TCP connector")
    assert (q.shape, q.names) == ("words", ())
    assert "tcp" in q.terms  # still searched as a word
    assert analyze_question("HTTPServer request handling").names == ("httpserver",)  # two humps: code


IPYTHON_REPORT = '''\
_print_SingularityFunction() got an unexpected keyword argument 'exp'
On a Jupyter Notebook cell:
```
Python 3.8.5 | packaged by conda-forge | (default, Jul 24 2020, 01:25:15)
Type 'copyright', 'credits' or 'license' for more information
IPython 7.19.0 -- An enhanced Interactive Python. Type '?' for help.
~/anaconda3/lib/python3.8/site-packages/sympy/printing/printer.py in _print(self, expr, **kwargs)
    327                     return printmethod(expr, **kwargs)
~/anaconda3/lib/python3.8/site-packages/sympy/printing/latex.py in _print_Pow(self, expr)
--> 651                 return self._print(expr.base, exp=self._print(expr.exp))
TypeError: _print_SingularityFunction() got an unexpected keyword argument 'exp'
```
'''


def test_ipython_frames_are_frames_and_the_banner_is_not_searched():
    q = analyze_question(IPYTHON_REPORT)
    assert [(f.path.rsplit("/", 1)[-1], f.function) for f in q.frames] == [("latex.py", "_print_Pow"),
                                                                        ("printer.py", "_print")]
    assert not {"copyright", "credits", "conda", "forge", "ipython", "enhanced"} & set(q.terms)
    assert q.named == ()  # the files of a traceback are its frames, not files the report names


def test_a_report_names_files_outside_its_frames_and_not_fractions():
    q = analyze_question("Fix numberformat.py crash\nDescription\n\nwhen x/4 is null, see django/utils/html.py\n"
                         "and 1/2 of the cases\n" + "more words here to make it long " * 6)
    assert q.shape == "report"
    assert q.named == ("numberformat.py", "django/utils/html.py")
    assert q.topic == frozenset()  # a report's words name no file
    assert analyze_question("how the lockfile pins plugin commits").topic == {"lockfile", "pin", "plugin", "commit"}


def test_a_report_title_gives_the_names_it_is_about():
    q = analyze_question("cse() has strange behaviour for MatrixSymbol indexing\n\nExample:\n```python\n"
                         "import sympy as sp\nfrom pprint import pprint\nA = sp.MatrixSymbol('a', 4, 4)\n```\n")
    assert q.shape == "report"
    assert set(q.headline) == {"cse", "matrixsymbol"}
    assert "sp.matrixsymbol" in q.names and "sp.matrixsymbol" not in q.headline  # the body's code: not the subject
    assert analyze_question("partitions() reusing the output dictionaries").names == ("partitions",)
