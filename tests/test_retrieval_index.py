"""The hierarchical index and CodeRetriever on real code, with a real embedded Chroma (PersistentClient)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

from fakes import CountingEmbedding  # noqa: E402

from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402
from llmc_splitters.chunking.tokens import resolve_tokenizer  # noqa: E402

CLIENT_JS = """\
import axios from "axios";
import { retry as withRetry, sleep } from "./util.js";
import * as log from "./log.js";
const path = require("path");

const DEFAULT_TIMEOUT = 5000;
const MAX_RETRIES = 3;

/**
 * An HTTP client with retries.
 */
export class Client {
  constructor(baseUrl, options = {}) {
    this.baseUrl = baseUrl;
    this.timeout = options.timeout ?? DEFAULT_TIMEOUT;
    this.headers = { "user-agent": "llmc", ...options.headers };
  }

  /** Send a request, retrying on failure. */
  async send(method, route, body) {
    const url = path.join(this.baseUrl, route);
    return withRetry(async () => {
      const response = await axios.request({ method, url, data: body, timeout: this.timeout });
      return response.data;
    }, MAX_RETRIES);
  }

  /** Close the client and flush the log. */
  close() {
    log.info("closing client for", this.baseUrl);
    this.closed = true;
  }

  async ping() {
    await sleep(10);
    return this.send("GET", "/ping");
  }
}

export function makeClient(url) {
  return new Client(url);
}
"""


def line_no(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for i, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(needle)


def assert_pieces_exact(result, files: dict[str, str]) -> None:
    """Every non-skeleton piece is exactly the lines it claims; the budget holds."""
    count = resolve_tokenizer(None).count
    assert count(result.context) == result.token_count <= result.max_context_tokens
    for p in result.pieces:
        lines = files[p.path].splitlines(keepends=True)
        assert 1 <= p.start_line <= p.end_line <= len(lines)
        if p.kind != "skeleton" and not p.truncated:
            assert p.text == "".join(lines[p.start_line - 1 : p.end_line]), (p.kind, p.start_line, p.end_line)
        assert f"# {p.path}:{p.start_line}-{p.end_line}" in result.context


@pytest.fixture
def js_retriever(tmp_path: Path) -> CodeRetriever:
    r = CodeRetriever(path=tmp_path / "db", k=1, max_tokens=64)
    r.index_texts({"src/client.js": CLIENT_JS})
    return r


def test_js_method_hit_with_class_skeleton_and_exactly_its_imports(js_retriever: CodeRetriever) -> None:
    res = js_retriever.retrieve("send request with retry", max_context_tokens=240)
    assert_pieces_exact(res, {"src/client.js": CLIENT_JS})
    by_kind = {}
    for p in res.pieces:
        by_kind.setdefault(p.kind, []).append(p)
    (hit,) = by_kind["hit"]
    assert hit.start_line <= line_no(CLIENT_JS, "async send(") and hit.end_line >= line_no(CLIENT_JS, "}, MAX_RETRIES);") + 1
    (skel,) = by_kind["skeleton"]
    closing = CLIENT_JS.splitlines().index("}") + 1
    assert skel.start_line == line_no(CLIENT_JS, "/**") and skel.end_line in (closing, closing + 1)
    assert "async send(method, route, body) { /* … */ }" in skel.text and "close() { /* … */ }" in skel.text
    imported = {ln for p in by_kind["import"] for ln in range(p.start_line, p.end_line + 1)}
    # axios, withRetry, path and MAX_RETRIES are used; log, sleep's line is shared with withRetry; DEFAULT_TIMEOUT not.
    assert imported == {1, 2, 4, 7}
    assert res.token_count <= 240


def test_js_small_budget_still_returns_the_method(js_retriever: CodeRetriever) -> None:
    res = js_retriever.retrieve("send request with retry", max_context_tokens=100)
    assert_pieces_exact(res, {"src/client.js": CLIENT_JS})
    assert "async send(method, route, body) {" in res.context and "return response.data;" in res.context
    assert "(skeleton)" not in res.context


def test_js_large_budget_takes_the_whole_class(js_retriever: CodeRetriever) -> None:
    res = js_retriever.retrieve("send request with retry", max_context_tokens=2000)
    assert_pieces_exact(res, {"src/client.js": CLIENT_JS})
    assert "(skeleton)" not in res.context and "this.closed = true;" in res.context
    assert "import * as log" not in res.context


@pytest.fixture(scope="module")
def argparse_source() -> str:
    import argparse

    return inspect.getsource(argparse)


def test_stdlib_method_hit_with_skeleton_and_imports(tmp_path: Path, argparse_source: str) -> None:
    r = CodeRetriever(path=tmp_path / "db", k=1, max_tokens=256)
    r.index_texts({"argparse.py": argparse_source})
    res = r.retrieve("print usage message to stderr and exit with error", max_context_tokens=2048)
    files = {"argparse.py": argparse_source}
    assert_pieces_exact(res, files)
    assert res.hits[0].span.name == "ArgumentParser.error"
    kinds = [p.kind for p in res.pieces]
    assert kinds.count("hit") == 1 and "skeleton" in kinds
    hit = next(p for p in res.pieces if p.kind == "hit")
    assert hit.start_line == line_no(argparse_source, "    def error(self, message):")
    imports = [p for p in res.pieces if p.kind == "import"]
    assert [p.text for p in imports] == ["import sys as _sys\n", "from gettext import gettext as _, ngettext\n"]
    skel = next(p for p in res.pieces if p.kind == "skeleton")
    assert skel.text.startswith("class ArgumentParser(_AttributeHolder, _ActionsContainer):\n")
    assert "    def exit(self, status=0, message=None):\n" in skel.text
    assert "    def error(self, message):\n" not in skel.text  # shown whole: not repeated by the skeleton
    # Too small for the skeleton: the method survives.
    small = r.retrieve("print usage message to stderr and exit with error", max_context_tokens=150)
    assert_pieces_exact(small, files)
    assert "def error(self, message):" in small.context and "(skeleton)" not in small.context


def test_exact_slices_by_symbol_and_lines(js_retriever: CodeRetriever) -> None:
    (send,) = js_retriever.get_symbol("Client.send")
    lines = CLIENT_JS.splitlines(keepends=True)
    assert send.text == "".join(lines[send.start_line - 1 : send.end_line])
    assert "async send(" in send.text
    (cls,) = js_retriever.get_symbol("Client")
    assert cls.text.startswith("/**") and cls.text.rstrip().endswith("}")
    assert js_retriever.get_symbol("send")[0] == send  # suffix fallback
    assert js_retriever.get_symbol("nope") == []
    snip = js_retriever.get_lines("src/client.js", 7)
    assert snip.text == "const MAX_RETRIES = 3;\n"
    assert js_retriever.get_lines("src/client.js", 1, 2).text == "".join(lines[:2])


def test_symbol_inside_a_class_that_fits_one_leaf(tmp_path: Path) -> None:
    src = "class Small:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n"
    r = CodeRetriever(path=tmp_path / "db", max_tokens=512)
    r.index_texts({"s.py": src})
    (b,) = r.get_symbol("Small.b")
    assert (b.start_line, b.end_line) == (5, 6)
    assert b.text == "    def b(self):\n        return 2\n"


def test_persisted_index_reloads_without_reindexing(tmp_path: Path) -> None:
    r = CodeRetriever(path=tmp_path / "db", k=1, max_tokens=64)
    r.index_texts({"src/client.js": CLIENT_JS})
    before = r.retrieve("close the client and flush the log", max_context_tokens=300)
    again = CodeRetriever(path=tmp_path / "db", k=1, max_tokens=64)
    assert again.index.paths == ["src/client.js"]
    after = again.retrieve("close the client and flush the log", max_context_tokens=300)
    assert after.context == before.context
    assert again.index_texts({"src/client.js": CLIENT_JS}).unchanged == ["src/client.js"]


def test_incremental_reindex_embeds_only_the_changed_file(tmp_path: Path, argparse_source: str) -> None:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "client.js").write_text(CLIENT_JS)
    (root / "argparse.py").write_text(argparse_source)
    (root / "gone.py").write_text("def gone():\n    return 1\n")
    emb = CountingEmbedding()
    r = CodeRetriever(path=tmp_path / "db", embedding=emb, max_tokens=128, k=2)
    first = r.index_directory(root)
    assert sorted(first.added) == ["argparse.py", "gone.py", "src/client.js"]
    assert first.embedded == len(emb.calls) > 0
    assert r.search("send request with retry").hits[0].span.path == "src/client.js"

    # Edit one method, delete one file.
    emb.calls.clear()
    (root / "src" / "client.js").write_text(CLIENT_JS.replace("this.closed = true;", "this.closed = Boolean(1);"))
    (root / "gone.py").unlink()
    second = r.index_directory(root)
    assert second.updated == ["src/client.js"] and second.unchanged == ["argparse.py"]
    assert second.removed == ["gone.py"]
    assert emb.calls, "the edited file must be re-embedded"
    assert all("src/client.js" in t or "Boolean(1)" in t for t in emb.calls)
    # Unchanged spans of the edited file reuse their vectors: only the edited method and the summaries move.
    assert len(emb.calls) < len(r.index.spans("src/client.js")) and second.reused > 0
    assert "gone.py" not in r.index.paths
    assert all(h.span.path != "gone.py" for h in r.search("gone", k=5).hits)
    # A third pass changes nothing and embeds nothing.
    emb.calls.clear()
    third = r.index_directory(root)
    assert sorted(third.unchanged) == ["argparse.py", "src/client.js"] and emb.calls == []


def test_lexical_only_index_refuses_other_embedding(tmp_path: Path) -> None:
    from llmc_splitters.errors import ConfigurationError

    CodeRetriever(path=tmp_path / "db").index_texts({"a.py": "x = 1\n"})
    with pytest.raises(ConfigurationError, match="holds vectors from 'none'"):
        CodeRetriever(path=tmp_path / "db", embedding=HashingEmbedding())


def test_multi_stage_and_confidence(tmp_path: Path, argparse_source: str) -> None:
    r = CodeRetriever(path=tmp_path / "db", embedding=HashingEmbedding(), max_tokens=128, k=3)
    r.index_texts({"argparse.py": argparse_source, "src/client.js": CLIENT_JS})
    res = r.search("send request with retry", multi_stage=True)
    assert res.summaries and res.hits[0].span.path == "src/client.js"
    assert any("local_lexical" in h.ranks for h in res.hits)
    clear = r.search("ArgumentParser add_subparsers")
    vague = r.search("value")
    for s in (res, clear, vague):
        assert 0.0 <= s.confidence <= 1.0
        assert [h.score for h in s.hits] == sorted((h.score for h in s.hits), reverse=True)
    # The confidence is that the first hit's file answers (tests/test_confidence.py): of these two files only
    # argparse.py holds either question's words, so both are sure of it.
    assert clear.hits[0].span.path == vague.hits[0].span.path == "argparse.py"
    assert clear.confidence > 0.9 and vague.confidence > 0.9
    assert r.search("zzqqxx unmatched").confidence == 0.0


def test_file_summary_and_summarizer_hook(tmp_path: Path) -> None:
    seen = []

    def summarize(info):
        seen.append(info)
        return "Talks to the HTTP API."

    r = CodeRetriever(path=tmp_path / "db", summarizer=summarize, max_tokens=64)
    r.index_texts({"src/client.js": CLIENT_JS})
    text = r.index.file_summary("src/client.js")
    assert text.startswith("File: src/client.js (javascript)")
    assert "class Client" in text and "function makeClient" in text and "Talks to the HTTP API." in text
    assert seen[0].path == "src/client.js" and ("class", "Client") == seen[0].symbols[0][:2]


def test_budget_never_exceeded(js_retriever: CodeRetriever) -> None:
    for budget in (1, 5, 20, 50, 80, 150, 300, 1000):
        for q in ("send request", "close log", "ping sleep", "makeClient", "timeout headers"):
            res = js_retriever.retrieve(q, k=3, max_context_tokens=budget)
            assert res.token_count <= budget
            assert_pieces_exact(res, {"src/client.js": CLIENT_JS})


def _thirteen_modules(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for i in range(13):
        d = src / f"pkg{i:02d}"
        d.mkdir(parents=True)
        (d / "mod.py").write_text(
            f'"""Module {i}."""\nimport os\n\n\ndef compute_{i}(x):\n    return os.sep * x + {i}\n\n\n'
            f"class Holder{i}:\n    def value(self):\n        return compute_{i}(2)\n"
        )
    return src


def test_groups_that_reach_the_writer_together_share_one_transaction(tmp_path: Path, monkeypatch) -> None:
    """The writer joins the groups that arrive within its window into one span-store transaction, up to its row
    limit; the first file is written at once; every file lands whole and searchable, as with one group each."""
    from llmc_splitters.retrieval.indexing import indexer as indexing

    monkeypatch.setattr(indexing, "_GROUP_FILES", 4)
    monkeypatch.setattr(indexing, "_WRITE_BATCH_SECONDS", 60.0)  # never reached: the row limit or the end decides
    src = _thirteen_modules(tmp_path)
    probe = CodeIndex(tmp_path / "probe")
    rows: list[int] = []
    real_probe = probe.span_store.write_files
    monkeypatch.setattr(probe.span_store, "write_files",
                        lambda ws, pending: rows.extend(len(w.rows) for w in ws) or real_probe(ws, pending=pending))
    probe.index_files([src / "pkg00" / "mod.py"], root=src)
    monkeypatch.setattr(indexing, "_WRITE_BATCH_ROWS", 5 * rows[0])
    idx = CodeIndex(tmp_path / "db")
    writes: list[int] = []
    real_write = idx.span_store.write_files
    monkeypatch.setattr(idx.span_store, "write_files",
                        lambda ws, pending: writes.append(len(ws)) or real_write(ws, pending=pending))
    report = idx.index_directory(src)
    assert len(report.added) == 13 and not report.failed
    # Groups of 1, 2, 4, 4 and 2 files: the first alone, then 2 + 4 (past 5 files' rows), then 4 + 2 at the end.
    assert writes == [1, 6, 6]
    assert idx.leaf_count() == 13 * probe.leaf_count()
    assert [h.span.path for h in idx.search("compute_11", k=1).hits] == ["pkg11/mod.py"]


def test_a_batch_the_store_cannot_write_fails_its_files_alone_and_the_next_run_writes_them(
        tmp_path: Path, monkeypatch) -> None:
    from llmc_splitters.retrieval.storage.span_store import StoreError
    from llmc_splitters.retrieval.indexing import indexer as indexing

    monkeypatch.setattr(indexing, "_GROUP_FILES", 4)
    monkeypatch.setattr(indexing, "_WRITE_BATCH_SECONDS", 60.0)
    monkeypatch.setattr(indexing, "_WRITE_BATCH_ROWS", 10**6)  # after the first file, one batch of 12
    src = _thirteen_modules(tmp_path)
    idx = CodeIndex(tmp_path / "db")
    real_write = idx.span_store.write_files
    calls: list[list[str]] = []

    def flaky(ws, pending):  # noqa: ANN001
        calls.append([w.marker.path for w in ws])
        if len(calls) == 2:
            raise StoreError("disk full")
        return real_write(ws, pending=pending)

    monkeypatch.setattr(idx.span_store, "write_files", flaky)
    report = idx.index_directory(src)
    assert [len(c) for c in calls] == [1, 12]
    assert sorted(report.failed) == sorted(calls[1]) and report.added == calls[0]
    assert all("disk full" in why for why in report.failed.values())
    assert idx.paths == calls[0]  # nothing of the failed batch was half-written
    again = idx.index_directory(src)
    assert sorted(again.added) == sorted(calls[1]) and not again.failed and len(idx.paths) == 13


def test_writes_go_by_group_and_a_query_reads_only_its_candidates(tmp_path: Path, monkeypatch) -> None:
    """Structural, not timed: while a tree is indexed with no time to join groups, no span-store transaction
    carries more than one group of files; a query reads its candidates by id in one batch (at most one list per
    engine), never the index; a reopened index reads nothing at open and skips an unchanged tree without reading a
    file."""
    from llmc_splitters.retrieval.indexing import indexer as indexing

    monkeypatch.setattr(indexing, "_GROUP_FILES", 4)
    monkeypatch.setattr(indexing, "_WRITE_BATCH_SECONDS", 0.0)
    src = _thirteen_modules(tmp_path)
    r = CodeRetriever(path=tmp_path / "db", embedding=HashingEmbedding(64))
    store = r.index.span_store
    writes: list[int] = []
    real_write = store.write_files
    monkeypatch.setattr(store, "write_files", lambda ws, pending: writes.append(len(ws)) or real_write(ws, pending=pending))
    report = r.index_directory(src)
    assert len(report.added) == 13 and not report.failed
    assert writes == [1, 2, 4, 4, 2]  # the first groups grow (the model starts on the first file), then 4 files each
    assert len(r.index.paths) == 13 and r.index.leaf_count() == sum(r.index.leaf_count(p) for p in r.index.paths) > 0
    gets: list[int] = []
    real_get = store.get
    monkeypatch.setattr(store, "get", lambda ids: gets.append(len(ids)) or real_get(ids))
    hits = r.index.search("compute_7 holder", k=3, candidates=10).hits
    assert any(h.span.path == "pkg07/mod.py" for h in hits)
    assert gets[0] <= 2 * 10, "the first read is the candidates of both lists"
    # An edit is searchable at once; an unchanged tree is skipped on its stat alone.
    (src / "pkg03" / "mod.py").write_text("def brand_new_function_name():\n    return 42\n")
    report = r.index_directory(src)
    assert report.updated == ["pkg03/mod.py"] and len(report.unchanged) == 12
    assert [h.span.path for h in r.search("brand_new_function_name", k=1).hits] == ["pkg03/mod.py"]
    reopened = CodeRetriever(path=tmp_path / "db", embedding=HashingEmbedding(64))
    assert reopened.index.paths == r.index.paths and reopened.index.leaf_count() == r.index.leaf_count()
    again = reopened.index_directory(src)
    assert again.unchanged == r.index.paths and again.bytes_read == 0


def test_a_bare_method_name_finds_methods_of_classes_that_fit_one_leaf(tmp_path: Path) -> None:
    """``run`` finds ``Job.run`` also when the method is not a span of its own (only an entry of its class leaf's
    ``symbols``), and non-ASCII names are found as the chunker recorded them."""
    src = "".join(f"class Job{i}:\n    def run(self):\n        return {i}\n\n" for i in range(3))
    src += "class Größe:\n    def läuft(self):\n        return 'ja'\n"
    r = CodeRetriever(path=tmp_path / "db", max_tokens=512)
    r.index_texts({"jobs.py": src})
    assert [s.name for s in r.index.spans("jobs.py")] == ["Job0", "Job1", "Job2", "Größe"]  # methods inside leaves
    lines = src.splitlines(keepends=True)
    runs = r.get_symbol("run")
    assert [(s.start_line, s.end_line) for s in runs] == [(2, 3), (6, 7), (10, 11)]
    assert [s.text for s in runs] == ["".join(lines[a - 1 : b]) for a, b in ((2, 3), (6, 7), (10, 11))]
    assert r.get_symbol("run") == sorted(r.get_symbol("Job0.run") + r.get_symbol("Job1.run") + r.get_symbol("Job2.run"),
                                         key=lambda s: s.start_byte)
    (umlaut,) = r.get_symbol("läuft")
    assert umlaut.text == "    def läuft(self):\n        return 'ja'\n"
    assert r.get_symbol("Größe.läuft") == [umlaut]
    assert r.get_symbol("un") == []  # a suffix of a name part is not a name
