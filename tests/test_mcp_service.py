"""The MCP server's core without MCP: budgets, path rules, slices, the stat-first scan, the refresher, the lock.

Runs on real standard-library modules, in memory (lexical only), with no SDK: ``CodeService`` is framework-free.
The end-to-end tests with the SDK's client are in ``integration_tests/test_mcp.py``.
"""

from __future__ import annotations

import builtins
import io
import json
import shutil
import sysconfig
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("chromadb")
pytest.importorskip("bm25s")

from llmc_splitters.chunking.tokens import resolve_tokenizer
from llmc_splitters.errors import RequestError
from llmc_splitters.ingest.walk import WalkOptions
from llmc_splitters.mcp import CodeService, ServiceSettings
from llmc_splitters.mcp.fresh import Refresher, TreeState
from llmc_splitters.mcp.locks import ReadWriteLock
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


def _collection() -> str:
    import uuid

    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def served():
    """A service over an in-memory index of the copied modules (read-only: no root)."""
    import tempfile

    root = _copy(Path(tempfile.mkdtemp()))
    r = CodeRetriever(collection=_collection())
    r.index_directory(root)
    return CodeService(lambda: r, freshness="off", settings=ServiceSettings(max_tokens=2000, hard_cap=4000)), root


def _tokens(reply) -> int:
    return CL100K.count(reply.text) + CL100K.count(compact_json(reply.data))


# ------------------------------------------------------------------------------------------------ budgets


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=150, max_value=6000), k=st.integers(min_value=1, max_value=8),
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
    assert service.search_code("heap", language="markdown").data["hits"] == []


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
    r = CodeRetriever(collection=_collection())
    refresher = Refresher(lambda: r, root, WalkOptions(), ReadWriteLock(), batch=2)
    first = refresher.refresh()
    assert sorted(first.added) == sorted(FILES) and first.walked and refresher.caught_up
    assert not refresher.refresh().changed  # nothing changed: nothing re-indexed
    (root / "heapq.py").write_text("def heap_thing():\n    return 1\n", encoding="utf-8")
    (root / "textwrap.py").unlink()
    rep = refresher.refresh()
    assert rep.updated == ["heapq.py"] and rep.removed == ["textwrap.py"]
    assert sorted(r.index.paths) == sorted(set(FILES) - {"textwrap.py"})
    assert r.search("heap_thing", 1).hits[0].span.name == "heap_thing"
    (root / "bin.py").write_bytes(b"\x00\x01\x02" * 100)  # the walk skips it (binary): reindex says why
    only = refresher.refresh(full=True, only=["bin.py"], force=True)
    assert "bin.py" in only.skipped and not only.changed


def test_before_request_sees_an_edit_made_just_before(tmp_path):
    root = _copy(tmp_path / "src")
    r = CodeRetriever(collection=_collection())
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
    r = CodeRetriever(collection=_collection())
    service = CodeService(lambda: r, root=root, freshness="watch", debounce=0.3)
    service.start()
    try:
        deadline = time.monotonic() + 30
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


# -------------------------------------------------------------------------------------------------- lock


def test_lock_lets_readers_in_between_writer_batches_and_writers_in_between_readers():
    lock = ReadWriteLock()
    events: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            with lock.write():
                events.append("w")
                time.sleep(0.002)

    def reader() -> None:
        for _ in range(20):
            with lock.read():
                events.append("r")
                time.sleep(0.001)

    w = threading.Thread(target=writer)
    w.start()
    readers = [threading.Thread(target=reader) for _ in range(4)]
    for t in readers:
        t.start()
    for t in readers:
        t.join(10)
    stop.set()
    w.join(10)
    assert events.count("r") == 80  # no reader starved behind back-to-back writes
    assert events.count("w") > 1


def test_lock_excludes_readers_while_writing():
    lock = ReadWriteLock()
    inside = {"r": 0, "w": 0}
    bad = []
    guard = threading.Lock()

    def enter(kind: str) -> None:
        with guard:
            inside[kind] += 1
            if inside["w"] > 1 or (inside["w"] and inside["r"]):
                bad.append(dict(inside))

    def leave(kind: str) -> None:
        with guard:
            inside[kind] -= 1

    def work(i: int) -> None:
        for _ in range(50):
            ctx, kind = (lock.write(), "w") if i % 3 == 0 else (lock.read(), "r")
            with ctx:
                enter(kind)
                time.sleep(0.0002)
                leave(kind)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not bad


def test_slices_hold_the_budget_with_a_line_longer_than_it_and_many_matches():
    r = CodeRetriever(collection=_collection())
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
