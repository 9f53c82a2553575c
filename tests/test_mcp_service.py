"""The MCP server's core without MCP: budgets, path rules, slices, the stat-first scan, the refresher, snapshots.

Runs on real standard-library modules, lexical only, with no SDK: ``CodeService`` is framework-free.
The end-to-end tests with the SDK's client are in ``integration_tests/test_mcp.py``.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import sysconfig
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("tantivy")

from llmc_splitters.chunking.tokens import resolve_tokenizer
from llmc_splitters.errors import FilterWarning, RequestError
from llmc_splitters.ingest.fresh import Refresher, TreeState
from llmc_splitters.ingest.walk import WalkOptions
from llmc_splitters.mcp import CodeService, ServiceSettings
from llmc_splitters.mcp.paths import inside_root, relative_path
from llmc_splitters.mcp.replies import compact_json
from llmc_splitters.retrieval import CodeRetriever

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ("json/__init__.py", "json/decoder.py", "json/encoder.py", "textwrap.py", "heapq.py", "shlex.py")
CL100K = resolve_tokenizer()


def _copy(root: Path) -> Path:
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, root / rel)
    return root


@pytest.fixture(scope="module")
def served():
    """A service over an in-memory index of the copied modules (read-only: no root)."""
    import tempfile

    root = _copy(Path(tempfile.mkdtemp()))
    r = CodeRetriever()
    r.index_directory(root)
    return CodeService(lambda: r, freshness="off", settings=ServiceSettings(max_tokens=2000, hard_cap=4000)), root


def _tokens(reply) -> int:
    return CL100K.count(reply.text) + CL100K.count(compact_json(reply.data))


# ------------------------------------------------------------------------------------------------ budgets


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=150, max_value=6000), k=st.none() | st.integers(min_value=1, max_value=8),
       query=st.sampled_from(["decode a JSON document", "wrap a paragraph", "heap push pop", "shell-like split",
                              "JSONEncoder iterencode", "dedent"]))
def test_search_reply_never_exceeds_its_budget(served, budget, k, query):
    service, _root = served
    reply = service.search_code(query, max_tokens=budget, k=k)
    limit = min(budget, 4000)
    assert _tokens(reply) <= limit
    assert reply.data["max_tokens"] == limit and reply.data["clamped"] == (budget > 4000)
    shown = [h for h in reply.data["hits"] if h["in_context"]]
    assert shown, "the best hit is always in the context (cut, if it must be)"


def test_without_k_the_reply_fills_its_budget_as_the_core_does(served):
    """Leftover of issue 22: the server's default k was 4 while CodeRetriever fills the budget (k=None); now the
    server, its command line and the core agree."""
    from llmc_splitters.cli import build_parser

    assert ServiceSettings().k is None
    assert build_parser().parse_args(["mcp"]).k is None
    service, _root = served
    query = "decode a JSON document"
    four = service.search_code(query, max_tokens=4000, k=4)
    filled = service.search_code(query, max_tokens=4000)
    assert _tokens(filled) <= 4000
    shown = [h for h in filled.data["hits"] if h["in_context"]]
    assert len(shown) > len([h for h in four.data["hits"] if h["in_context"]])
    # Only candidates up to the last one taken are listed, not all 50.
    assert filled.data["hits"][-1]["in_context"]
    # The context is the core's fill of the same budget's candidates.
    direct = service._retriever().retrieve(query, k=None, max_context_tokens=filled.data["context_tokens"])
    assert [h["path"] for h in shown][:1] == [direct.hits[0].span.path]


def test_a_budget_too_small_for_one_hit_says_what_is_enough(served):
    service, _root = served
    with pytest.raises(RequestError, match=r"too small .* use at least \d+"):
        service.search_code("decode", max_tokens=20)


def test_the_context_is_the_retrievers_context(served):
    """The server adds a listing, never other text: its context is what CodeRetriever.retrieve renders."""
    service, _root = served
    reply = service.search_code("JSONEncoder iterencode c_make_encoder", max_tokens=4000, k=3)
    direct = service._retriever().retrieve("JSONEncoder iterencode c_make_encoder", k=3,
                                           max_context_tokens=reply.data["context_tokens"])
    assert direct.context in reply.text


def test_filters_by_path_and_language(served):
    service, _root = served
    reply = service.search_code("decode encode", path="json/", k=5)
    assert reply.data["hits"] and all(h["path"].startswith("json/") for h in reply.data["hits"])
    reply = service.search_code("decode encode", path="json/encoder.py", k=5)
    assert {h["path"] for h in reply.data["hits"]} == {"json/encoder.py"}
    reply = service.search_code("heap", language="Python", k=2)
    assert [h["language"] for h in reply.data["hits"]] == ["python", "python"]
    # A filter that matches no indexed file is a bad argument, said as such (not "the words matched nothing").
    # In process the index warns as well (the server process ignores FilterWarning: its reply says it).
    with pytest.raises(RequestError, match=r"no indexed file is in the language 'markdown' \(the index holds python\)"), \
            pytest.warns(FilterWarning):
        service.search_code("heap", language="markdown")
    with pytest.raises(RequestError, match=r"no indexed path starts with 'src/json/'; paths are stored relative to the "
                                           r"indexed root, like 'json/.*' \(try path='json/'\)"):
        service.search_code("decode", path="src/json")
    reply = service.search_code("heappushpop", path="json/")  # words of the index, none of them under json/
    assert reply.data["hits"] == [] and reply.text.startswith("no hits: nothing in the index matches these words")
    assert "indexed files match the filters (path='json/')" in reply.text


# ------------------------------------------------------------------------------------------------- slices


def test_get_lines_is_exact_and_cut_at_a_line_with_the_way_on(served):
    service, root = served
    text = (root / "shlex.py").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    reply = service.get_lines("shlex.py", 10, 20)
    assert reply.text == "# shlex.py:10-20\n" + "".join(lines[9:20])
    whole = service.get_lines("shlex.py", 1)  # to the end of the file, but held to the 2000-token default
    assert _tokens(whole) <= 2000
    cut = whole.data["slices"][0]["shown_to"]
    assert 1 < cut < len(lines)
    assert whole.text.startswith(f"note: shlex.py:1-{len(lines)} was cut at line {cut}")
    assert f"get_lines('shlex.py', {cut + 1}, {len(lines)})" in whole.text
    assert whole.text.endswith("".join(lines[:cut]))
    rest = service.get_lines("shlex.py", cut + 1, len(lines))
    assert "".join(lines[cut:]).startswith(rest.text.split("\n", 1)[1].split("note:")[0][:200])
    assert service.get_lines("shlex.py", len(lines) - 1, 10**6).data["slices"][0]["end_line"] == len(lines)


def test_get_symbol_returns_the_definition_whole(served):
    service, root = served
    reply = service.get_symbol("TextWrapper.wrap")
    [sl] = reply.data["slices"]
    lines = (root / "textwrap.py").read_text(encoding="utf-8").splitlines(keepends=True)
    assert "".join(lines[sl["start_line"] - 1 : sl["end_line"]]).rstrip("\n") in reply.text
    assert reply.text.lstrip().startswith("# textwrap.py:")
    assert "def wrap(self, text):" in reply.text and sl["shown_to"] == sl["end_line"]


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.get_lines("../../etc/passwd", 1), "leaves the indexed root"),
    (lambda s: s.get_lines("/etc/passwd", 1), "is absolute"),
    (lambda s: s.get_lines("json/decoder.py", 0), "start must be a line number"),
    (lambda s: s.get_lines("json/decoder.py", True), "start must be a line number"),
    (lambda s: s.get_lines("textwrp.py", 1), "did you mean 'textwrap.py'"),
    (lambda s: s.get_symbol(""), "name is empty"),
    (lambda s: s.search_code("x" * 5000), "keep it under"),
    (lambda s: s.search_code("x", k=51), "k must be"),
    (lambda s: s.search_code("x", max_tokens="lots"), "max_tokens must be"),
    (lambda s: s.reindex(), "cannot re-index"),
])
def test_bad_requests_raise_one_actionable_sentence(served, call, message):
    service, _root = served
    with pytest.raises(RequestError, match=message) as info:
        call(service)
    assert "\n" not in str(info.value)


# -------------------------------------------------------------------------------------------------- paths


@given(st.lists(st.sampled_from(["a", "b.py", ".", "..", "", "x y", "ü"]), min_size=1, max_size=6),
       st.sampled_from(["", "/", "./", "~/", "C:\\", "\\\\"]), st.sampled_from(["/", "\\"]))
def test_relative_path_never_returns_a_path_that_leaves_the_root(parts, lead, sep):
    value = lead + sep.join(parts)
    try:
        got = relative_path(value, allow_root=True)
    except RequestError:
        slashed = value.replace("\\", "/")
        absolute = slashed.startswith(("/", "~", "C:"))
        assert ".." in parts or absolute or not any(p not in ("", ".") for p in parts)
        return
    assert not got.startswith("/") and ".." not in got.split("/") and "\\" not in got
    assert got == "/".join(p for p in parts if p not in ("", "."))


def test_inside_root_refuses_links_out(tmp_path):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    (root / "pkg" / "in.py").write_text("x = 1\n")
    (root / "alias.py").symlink_to(root / "pkg" / "in.py")
    assert inside_root(root, "pkg/in.py") == root / "pkg" / "in.py"
    assert inside_root(root, "alias.py") == root / "alias.py"  # a link that stays inside is fine
    with pytest.raises(RequestError, match="points outside"):
        inside_root(root, "out/anything.py")


# ------------------------------------------------------------------------------------------- freshness


def test_a_scan_of_an_unchanged_tree_reads_no_file(tmp_path, monkeypatch):
    root = _copy(tmp_path)
    time.sleep(0.1)  # a directory changed in the last 50 ms before a walk is walked again next time (a race guard)
    state = TreeState(root, WalkOptions())
    first = state.scan()
    assert sorted(first.changed) == sorted(FILES) and first.walked
    state.commit(first)

    def no_reading(*args, **kwargs):
        raise AssertionError(f"a file was opened: {args[:1]}")

    monkeypatch.setattr(builtins, "open", no_reading)
    monkeypatch.setattr(io, "open", no_reading)
    monkeypatch.setattr(Path, "open", no_reading)
    again = state.scan()
    assert not again and not again.walked
    monkeypatch.undo()

    time.sleep(0.01)
    (root / "heapq.py").write_text("def heap():\n    return 1\n", encoding="utf-8")  # edited in place
    edited = state.scan()
    assert edited.changed == ["heapq.py"] and not edited.walked
    state.commit(edited)
    (root / "json" / "new.py").write_text("N = 1\n", encoding="utf-8")  # the directory changes: walk again
    (root / "shlex.py").unlink()
    time.sleep(0.1)
    moved = state.scan()
    assert moved.walked and moved.changed == ["json/new.py"] and moved.removed == ["shlex.py"]


def test_refresher_applies_changes_in_batches_and_reports_them(tmp_path):
    root = _copy(tmp_path / "src")
    r = CodeRetriever()
    refresher = Refresher(lambda: r.index, root, WalkOptions())
    first = refresher.refresh()
    assert sorted(first.added) == sorted(FILES) and first.walked and refresher.caught_up
    assert first.bytes_read == sum((root / f).stat().st_size for f in FILES)
    again = refresher.refresh()
    assert not again.changed and again.bytes_read == 0  # nothing changed: nothing read, nothing re-indexed
    (root / "heapq.py").write_text("def heap_thing():\n    return 1\n", encoding="utf-8")
    (root / "textwrap.py").unlink()
    rep = refresher.refresh()
    assert rep.updated == ["heapq.py"] and rep.removed == ["textwrap.py"]
    assert sorted(r.index.paths) == sorted(set(FILES) - {"textwrap.py"})
    assert r.search("heap_thing", 1).hits[0].span.name == "heap_thing"
    (root / "bin.py").write_bytes(b"\x00\x01\x02" * 100)  # the walk skips it (binary): reindex says why
    only = refresher.refresh(full=True, only=["bin.py"], force=True)
    assert "bin.py" in only.skipped and not only.changed


def test_a_restart_catches_up_by_stat_and_a_touch_re_embeds_nothing(tmp_path):
    """A new server has no stats of its own: its catch-up hands every file to the index, which reads none whose
    size and modification time it recorded. A touch (new mtime, same content) is read and hashed, and skipped."""
    from fakes import CountingEmbedding

    root = _copy(tmp_path / "src")
    emb = CountingEmbedding()
    r = CodeRetriever(path=tmp_path / "db", embedding=emb)
    Refresher(lambda: r.index, root, WalkOptions()).refresh()
    embedded = len(emb.calls)
    restarted = Refresher(lambda: r.index, root, WalkOptions())
    caught_up = restarted.refresh()
    assert caught_up.walked and caught_up.unchanged == len(FILES) and not caught_up.changed
    assert caught_up.bytes_read == 0
    later = time.time() + 5
    for rel in FILES:
        os.utime(root / rel, (later, later))
    touched = restarted.refresh()
    assert touched.unchanged == len(FILES) and not touched.changed
    assert touched.bytes_read == sum((root / f).stat().st_size for f in FILES)  # read and hashed, once
    assert len(emb.calls) == embedded  # nothing re-embedded
    assert restarted.refresh().bytes_read == 0  # the index recorded the new stats


def test_before_request_sees_an_edit_made_just_before(tmp_path):
    root = _copy(tmp_path / "src")
    r = CodeRetriever()
    service = CodeService(lambda: r, root=root, freshness="refresh")
    service.refresher.refresh()
    for i in range(3):
        (root / "json" / f"added_{i}.py").write_text(f"def quux_{i}():\n    return {i}\n", encoding="utf-8")
        assert service.search_code(f"quux_{i}", k=1).data["hits"][0]["symbol"] == f"quux_{i}"
    status = service.index_status().data
    assert status["files_indexed"] == len(FILES) + 3 and status["freshness"] == "refresh"
    assert status["root"] == "src" and str(tmp_path) not in json.dumps(status)


def test_watch_mode_indexes_after_the_writes_stop(tmp_path):
    pytest.importorskip("watchdog")
    root = _copy(tmp_path / "src")
    r = CodeRetriever()
    service = CodeService(lambda: r, root=root, freshness="watch", debounce=0.3)
    service.start()
    try:
        deadline = time.monotonic() + 120  # a bound against a hang, not a timing claim
        while not service.refresher.caught_up:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        target = root / "heapq.py"
        for i in range(5):  # a file written in several steps is indexed once it is quiet
            with target.open("a", encoding="utf-8") as fh:
                fh.write(f"\n\ndef step_{i}():\n    return {i}\n")
            time.sleep(0.05)
        while not (service.index_status().data["pending_changes"] == 0 and not service.refresher.running
                   and r.search("step_4", 1).hits and r.search("step_4", 1).hits[0].span.name == "step_4"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert service.index_status().data["freshness"] == "watch"
    finally:
        service.stop()


# ------------------------------------------------------------------------------------------ consistency

OLD = "import os\nimport sys\n\n\nclass Widget:\n    def frobnicate(self):\n        return os.getcwd()\n\n    def other(self):\n        return sys.argv\n"
NEW = "import json\n# two lines that move\n# everything down\nimport os\n\n\nclass Widget:\n    size = 3\n\n    def frobnicate(self):\n        return os.getcwd()\n\n    def other(self):\n        return sys.argv\n"


def test_a_search_reply_is_read_in_one_snapshot_while_the_file_is_rewritten(tmp_path):
    """No lock between searches and refreshes: the file is rewritten (by another thread, committed) after the
    search found its hit and before the hit's context is read, and the reply still shows one version of it."""
    r = CodeRetriever(path=tmp_path / "db", max_tokens=16)
    r.index_texts({"w.py": OLD})
    service = CodeService(lambda: r, freshness="off")
    real = r.index.hit_context
    rewrites = []

    def rewritten_first(span, score=0.0):
        if not rewrites:
            t = threading.Thread(target=lambda: rewrites.append(r.index_texts({"w.py": NEW})))
            t.start()
            t.join(30)
        return real(span, score)

    r.index.hit_context = rewritten_first
    reply = service.search_code("frobnicate getcwd", k=1, max_tokens=600)
    assert rewrites and rewrites[0].updated == ["w.py"]  # the rewrite was committed during the call
    assert "import os\n" in reply.text and "import json" not in reply.text
    assert reply.data["hits"][0]["start_line"] == 6  # the old version's lines
    after = service.search_code("frobnicate getcwd", k=1, max_tokens=600)
    assert after.data["hits"][0]["start_line"] == 10 and "import os\n" in after.text


def test_slices_hold_the_budget_with_a_line_longer_than_it_and_many_matches():
    r = CodeRetriever()
    minified = "var a=" + "+".join(f"f{i}(x)" for i in range(4000)) + ";\n"
    many = "".join(f"class C{i}:\n    def run(self):\n        return {i}\n\n" for i in range(60))
    r.index_texts({"app.min.js": minified, "many.py": many})
    service = CodeService(lambda: r, freshness="off", settings=ServiceSettings(max_tokens=300, hard_cap=300))
    reply = service.get_lines("app.min.js", 1)
    assert _tokens(reply) <= 300
    assert reply.text.split("\n")[1] == "# app.min.js:1-1 (truncated)" or "(truncated)" in reply.text
    body = reply.text.split("(truncated)\n", 1)[1]
    assert body and minified.startswith(body)
    reply = service.get_symbol("run")  # 60 methods named run: the first ones shown, the others listed
    assert _tokens(reply) <= 300
    shown = [s["shown_to"] is not None for s in reply.data["slices"]]
    assert shown[0] and shown == sorted(shown, reverse=True)  # a shown prefix, then (room permitting) listed
    assert "60 matches; the first 50 are listed" in reply.text
    assert 1 <= len(shown) <= 50 and "def run(self):" in reply.text
    assert reply.text.count("def run(self):") == sum(shown)


def test_watch_mode_retries_a_refresh_that_failed(tmp_path, monkeypatch):
    """Another process holding the index's writer makes a refresh fail: it is tried again with no new event."""
    pytest.importorskip("watchdog")
    from llmc_splitters.retrieval.storage.span_store import StoreError

    root = _copy(tmp_path / "src")
    r = CodeRetriever()
    service = CodeService(lambda: r, root=root, freshness="watch", debounce=0.1)
    monkeypatch.setattr(service.refresher, "RETRY_SECONDS", 0.3)
    real = r.index.index_files
    failures = []

    def busy_once(*args, **kwargs):
        if not failures and service.refresher.caught_up:
            failures.append(1)
            raise StoreError("could not open the lexical index for writing: another process is indexing into it")
        return real(*args, **kwargs)

    monkeypatch.setattr(r.index, "index_files", busy_once)
    service.start()
    try:
        deadline = time.monotonic() + 120  # a bound against a hang, not a timing claim
        while not service.refresher.caught_up:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (root / "heapq.py").write_text("def retried_thing():\n    return 1\n", encoding="utf-8")
        while not (failures and not service.refresher.running and r.search("retried_thing", 1).hits
                   and r.search("retried_thing", 1).hits[0].span.name == "retried_thing"):
            assert time.monotonic() < deadline, service.index_status().text
            time.sleep(0.05)
        assert service.refresher.last_error is None  # the retry succeeded
    finally:
        service.stop(wait=5)


def test_a_held_start_opens_and_warms_the_index_but_scans_the_tree_only_when_released(tmp_path):
    """What the command line does: the index opens and answers while the SDK is imported; the watcher and the
    catch-up wait for the second start(), and replies meanwhile say the index is still catching up."""
    pytest.importorskip("watchdog")
    root = _copy(tmp_path / "src")
    r = CodeRetriever()
    r.index_directory(root)
    (root / "heapq.py").write_text("def edited_while_down():\n    return 1\n", encoding="utf-8")
    service = CodeService(lambda: r, root=root, freshness="watch", debounce=0.1)
    service.start(catch_up=False)
    try:
        deadline = time.monotonic() + 120  # a bound against a hang, not a timing claim
        while not service.search_ready:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
        assert service.refresher.mode != "watch" and not service.refresher.caught_up
        reply = service.search_code("edited_while_down", k=1)
        assert "still catching up" in reply.text
        assert all(h["symbol"] != "edited_while_down" for h in reply.data["hits"])
        service.start()
        while not service.refresher.caught_up:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert service.refresher.mode == "watch"
        assert service.search_code("edited_while_down", k=1).data["hits"][0]["symbol"] == "edited_while_down"
    finally:
        service.stop(wait=5)


def test_notebook_cells_are_the_documents_of_replies_and_get_lines(tmp_path):
    notebook = Path(__file__).parent / "data" / "notebooks" / "tide-analysis.ipynb"
    shutil.copyfile(notebook, tmp_path / "tides.ipynb")
    cells = {f"tides.ipynb#cell{i}": "".join(c["source"]) for i, c in enumerate(json.loads(notebook.read_text())["cells"])}
    r = CodeRetriever()
    r.index_directory(tmp_path)
    service = CodeService(lambda: r, freshness="off")
    [sym] = service.get_symbol("daily_extremes").data["slices"]
    cell = sym["path"]
    assert cell.startswith("tides.ipynb#cell") and "def daily_extremes" in cells[cell]
    reply = service.search_code("daily high and low water extremes", k=3, path="tides.ipynb")
    assert reply.data["hits"] and all(h["path"].startswith("tides.ipynb#cell") for h in reply.data["hits"])
    lines = cells[cell].splitlines(keepends=True)
    got = service.get_lines(cell, 1, 2)
    assert got.text == f"# {cell}:1-2\n" + "".join(lines[:2])
    assert got.data["lines_in_file"] == len(lines)
    with pytest.raises(RequestError, match=r"is a notebook: its cells are indexed one by one \(tides.ipynb#cell0"):
        service.get_lines("tides.ipynb", 1)


def test_search_reply_lists_the_ranked_files_within_its_budget(served):
    service, _root = served
    reply = service.search_code("decode a JSON document", max_tokens=2000, k=4)
    files = [f["path"] for f in reply.data["files"]]
    assert files and files[0] == reply.data["hits"][0]["path"] and len(files) == len(set(files))
    assert "files, best first:" in reply.text
    assert " score " not in reply.text.split("\n\n", 1)[0]  # channel ranks, not a bare fused score
    tight = service.search_code("decode a JSON document", max_tokens=300, k=4)
    assert len(tight.data["files"]) <= len(files) and _tokens(tight) <= 300
