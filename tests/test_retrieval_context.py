"""Context that fits, on real files: a query matching one method gets that whole method, its class header and
every binding line it uses, before any other method's body; never over budget, never the same line twice.

The Python file is the standard library's ``sched`` (its class ``scheduler`` fits one 2,000-token leaf, so the hit
is the whole class and must be zoomed into); the TypeScript file has a class, ``import type`` and a module constant.
"""

from __future__ import annotations

import inspect
import re
import sched

import pytest

pytest.importorskip("tantivy")

from llmc_splitters.chunking.tokens import resolve_tokenizer  # noqa: E402
from llmc_splitters.retrieval import CodeRetriever  # noqa: E402

BUDGETS = (150, 200, 300, 400, 600, 1000, 2000, 4000)
SCHED = inspect.getsource(sched)

CLIENT_TS = """\
import type { Request, Response } from "./types";
import { retry } from "./retry";
import * as log from "./log";

const MAX_ATTEMPTS = 4;
const USER_AGENT = "llmc";

export class Client {
  private closed = false;

  constructor(private readonly baseUrl: string) {}

  /** Send a request, retrying a failed attempt. */
  async send(request: Request): Promise<Response> {
    log.debug("sending", request.path);
    return retry(() => fetch(this.baseUrl + request.path, { headers: { ua: USER_AGENT } }), MAX_ATTEMPTS);
  }

  /** Close the client: later sends fail. */
  close(): void {
    this.closed = true;
    log.info("closed", this.baseUrl);
  }

  /** Whether the server answers at all. */
  async ping(): Promise<boolean> {
    const res = await fetch(this.baseUrl + "/ping");
    return res.ok;
  }
}
"""


def lines_of(text: str, start: int, end: int) -> list[str]:
    return text.splitlines(keepends=True)[start - 1 : end]


def shown_lines(result) -> list[tuple[int, str]]:
    """Every verbatim line the context shows, as ``(line number, text)``, in render order."""
    out = []
    for p in result.pieces:
        if p.kind == "skeleton":
            continue
        for k, line in enumerate(p.text.splitlines(keepends=True)):
            out.append((p.start_line + k, line))
    return out


def check(result, source: str, *, method: tuple[int, int], header: int, bindings: list[int],
          other_bodies: list[tuple[int, int]], budget: int) -> None:
    count = resolve_tokenizer(None).count
    assert count(result.context) == result.token_count <= budget
    shown = shown_lines(result)
    numbers = [n for n, _ in shown]
    assert len(numbers) == len(set(numbers)), "a line is shown twice"
    skeletons = [p for p in result.pieces if p.kind == "skeleton"]
    for sk in skeletons:  # a skeleton repeats no line shown verbatim (a closing brace is no line's content)
        verbatim = {t.strip() for _, t in shown if t.strip()}
        assert not [ln for ln in sk.text.splitlines()[1:]
                    if ln.strip() and ln.strip() not in ("...", "}", "};") and ln.strip() in verbatim]
    for n, text in shown:
        assert text == lines_of(source, n, n)[0], f"line {n} is not verbatim"
    have = set(numbers)
    assert set(range(method[0], method[1] + 1)) <= have, f"the whole method at {budget} tokens"
    header_shown = header in have or any(p.start_line == header for p in skeletons)
    assert header_shown, f"the class header at {budget} tokens"
    for b in bindings:
        assert b in have, f"binding line {b} at {budget} tokens"
    complete = True  # everything above is there
    for a, z in other_bodies:
        body = set(range(a + 1, z + 1))
        if body & have:
            assert complete  # another method's body only once the method's context is whole
            assert result.token_count > 0


@pytest.fixture(scope="module")
def sched_retriever():
    r = CodeRetriever(max_tokens=2000, k=1)
    r.index_texts({"sched.py": SCHED})
    return r


def _line(source: str, needle: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if needle in ln)


@pytest.mark.parametrize("budget", BUDGETS)
def test_python_method_of_a_class_that_fits_one_leaf(sched_retriever, budget):
    start = _line(SCHED, "def cancel(self, event):")
    end = _line(SCHED, "heapq.heapify(self._queue)")
    # The hit is the whole class (one leaf): a budget under it zooms into the method.
    res = sched_retriever.retrieve("remove an event from the queue, raise ValueError if it is not there",
                                   max_context_tokens=budget)
    assert res.hits[0].span.kind == "class"
    others = [(_line(SCHED, "def enterabs("), _line(SCHED, "def enter(") - 1),
              (_line(SCHED, "def run(self, blocking=True):"), _line(SCHED, "def queue(self):") - 1)]
    check(res, SCHED, method=(start, end), header=_line(SCHED, "class scheduler:"),
          bindings=[_line(SCHED, "import heapq")], other_bodies=others, budget=budget)
    if budget < 600:
        assert not any(p.truncated for p in res.pieces)
        run_body = _line(SCHED, "delayfunc = self.delayfunc")
        assert run_body not in {n for n, _ in shown_lines(res)}, "another method's body before the context"


def test_python_binding_lines_not_blocks(sched_retriever):
    # enterabs uses the module constant Event: its binding statement, not the module block around it.
    res = sched_retriever.retrieve("enter a new event in the queue at an absolute time", max_context_tokens=300)
    event = _line(SCHED, "Event = namedtuple(")
    have = {n for n, _ in shown_lines(res)}
    assert event in have
    all_line = _line(SCHED, "__all__ = [")
    assert all_line not in have, "the glue block around the binding"


@pytest.fixture(scope="module")
def ts_retriever():
    r = CodeRetriever(max_tokens=2000, k=1)
    r.index_texts({"src/client.ts": CLIENT_TS})
    return r


@pytest.mark.parametrize("budget", BUDGETS)
def test_typescript_method_with_import_type(ts_retriever, budget):
    start = _line(CLIENT_TS, "/** Send a request, retrying")
    end = _line(CLIENT_TS, "MAX_ATTEMPTS);") + 1
    res = ts_retriever.retrieve("send a request to the server and retry a failed attempt", max_context_tokens=budget)
    others = [(_line(CLIENT_TS, "close(): void {"), _line(CLIENT_TS, "log.info(\"closed\"")),
              (_line(CLIENT_TS, "async ping()"), _line(CLIENT_TS, "return res.ok;"))]
    check(res, CLIENT_TS, method=(start, end), header=_line(CLIENT_TS, "export class Client {"),
          bindings=[_line(CLIENT_TS, "import type { Request"), _line(CLIENT_TS, "import { retry }"),
                    _line(CLIENT_TS, "import * as log"), _line(CLIENT_TS, "const MAX_ATTEMPTS"),
                    _line(CLIENT_TS, "const USER_AGENT")],
          other_bodies=others, budget=budget)


def test_a_short_parenthesised_import_is_shown_whole():
    """Issue 37, item 6: a multi-line import is shown so that it parses; a short one whole, under one marker."""
    src = ("from collections import (\n    OrderedDict,\n    defaultdict,\n    namedtuple,\n)\n\n\n"
           "def group(pairs):\n    out = defaultdict(list)\n    for k, v in pairs:\n        out[k].append(v)\n"
           "    return out\n")
    r = CodeRetriever(k=1, max_context_tokens=200)
    r.index_texts({"g.py": src})
    res = r.retrieve("group pairs by key into lists")
    assert res.context.startswith("# g.py:1-5\nfrom collections import (\n    OrderedDict,\n    defaultdict,\n"
                                  "    namedtuple,\n)\n# g.py:8-12\ndef group(pairs):\n")


def test_a_long_parenthesised_import_is_shown_by_its_head_the_names_used_and_its_closing_line():
    """Issue 37, item 6: of a long import, the head, the lines naming what the hit uses and the closing line, under
    one marker: what is shown parses and says where the names come from."""
    names = ["ChainMap", "Counter", "OrderedDict", "UserDict", "UserList", "UserString", "defaultdict", "deque",
             "namedtuple", "abc"]
    src = ("from collections import (\n" + "".join(f"    {n},\n" for n in names) + ")\n\n\n"
           "def group(pairs):\n    out = defaultdict(list)\n    for k, v in pairs:\n        out[k].append(v)\n"
           "    return Counter(out)\n")
    r = CodeRetriever(k=1, max_context_tokens=200)
    r.index_texts({"g.py": src})
    res = r.retrieve("group pairs by key into lists")
    excerpt = "from collections import (\n    Counter,\n    defaultdict,\n)\n"
    assert res.context.startswith(f"# g.py:1-12 (excerpt)\n{excerpt}# g.py:15-19\ndef group(pairs):\n")
    compile(excerpt, "g.py", "exec")
    [piece] = [p for p in res.pieces if p.kind == "excerpt"]
    assert (piece.start_line, piece.end_line) == (1, 12)


def test_a_split_class_method_is_not_repeated_by_its_skeleton():
    r = CodeRetriever(max_tokens=128, k=1)
    r.index_texts({"sched.py": SCHED})
    # 400 tokens: the whole class (850) does not fit, its skeleton does.
    res = r.retrieve("remove an event from the queue, raise ValueError if it is not there", max_context_tokens=400)
    skel = next(p for p in res.pieces if p.kind == "skeleton")
    assert "def cancel(self, event):" not in skel.text  # shown whole, not again in the skeleton
    assert "def enterabs(self, time, priority, action, argument=(), kwargs=_sentinel):" in skel.text


RETRY_PY = '''\
MAX_SAFE_TIMEOUT = 2_147_483_647


class Reply:
    def retry(self, fn):
        """Send the request, retrying on failure as the retry options allow."""
        try:
            return fn()
        except Exception as error:
            if not self.should_retry(error):
                raise
            self.retry_count += 1
            ms = self.calculate_delay()
            if ms > MAX_SAFE_TIMEOUT:
                raise RangeError(f"The retry delay {ms} s is over {MAX_SAFE_TIMEOUT} s")
            delay(ms)
            for hook in self.hooks.before_request:
                hook(self.request)
            return self.retry(fn)

    def close(self):
        self.closed = True
'''


def test_a_piece_of_a_split_method_says_that_it_continues():
    """Issue 37: a piece of a split method ended with no sign that it goes on. Its marker now says where the
    method ends (the span's text is unchanged); once the method is shown whole, the note goes."""
    r = CodeRetriever(max_tokens=60, k=1)
    r.index_texts({"reply.py": RETRY_PY})
    query = "retry delay over MAX_SAFE_TIMEOUT RangeError"
    end = _line(RETRY_PY, "return self.retry(fn)")
    res = r.retrieve(query, max_context_tokens=150)
    hit = res.hits[0].span
    assert hit.metadata.get("split") and hit.end_line < end
    [piece] = [p for p in res.pieces if p.kind == "hit"]
    assert piece.continues == end and not piece.truncated
    assert f"# reply.py:{piece.start_line}-{piece.end_line} (continues)\n" in res.context
    assert hit.text in res.context and "(continues" not in hit.text
    whole = r.retrieve(query, max_context_tokens=600)
    assert all(p.continues is None for p in whole.pieces) and "(continues" not in whole.context
    assert "".join(lines_of(RETRY_PY, _line(RETRY_PY, "def retry"), end)) in whole.context
