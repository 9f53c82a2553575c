"""Invariants written once and asserted everywhere (unit, property, corpus and adapter tests)."""

from __future__ import annotations

import contextlib
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence

import pytest

from llmc_splitters import Span

# Shared test data. Tests import these from here, never from conftest: with tests/ and integration_tests/ in one
# run, `conftest` names whichever conftest.py pytest loaded last.
DATA = pathlib.Path(__file__).parent / "data"

# A Go file with methods on pointer, value and generic receivers (issue 37).
GO_PROGRAM = """package tea

import (
	"context"
	"sync"
)

// Program is a terminal user interface.
type Program struct {
	ctx  context.Context
	msgs chan Msg
	mu   sync.Mutex
}

// NewProgram creates a new Program.
func NewProgram(model Model) *Program {
	return &Program{msgs: make(chan Msg)}
}

// eventLoop is the central message loop.
func (p *Program) eventLoop(model Model, cmds chan Cmd) (Model, error) {
	for {
		select {
		case <-p.ctx.Done():
			return model, nil
		case msg := <-p.msgs:
			p.mu.Lock()
			model, cmd := model.Update(msg)
			p.mu.Unlock()
			cmds <- cmd
		}
	}
}

// Send sends a message to the program.
func (p Program) Send(msg Msg) {
	p.msgs <- msg
}

func (l *List[T]) Len() int { return len(l.items) }
"""


def words(text: str) -> int:
    """A whitespace word counter: a tokenizer with very different boundaries from BPE."""
    return len(text.split())


def corpus_files() -> list[pathlib.Path]:
    """Every checked-in test document under tests/data."""
    return sorted(p for p in DATA.rglob("*") if p.is_file())


def line_of(text: str, char_index: int) -> int:
    """1-based line of the character at ``char_index`` (only ``\\n`` breaks lines)."""
    return text.count("\n", 0, char_index) + 1


def assert_valid_spans(text: str, spans: Sequence[Span], budget: int | None = None, count=None) -> None:
    """Leaves tile ``text`` exactly, fields agree with ``text``, and each leaf fits ``budget``.

    Args:
        text: The chunked input.
        spans: The leaves, in order.
        budget: Token budget; a leaf over it must be flagged ``metadata["oversize"]`` and be one character.
        count: Token counter (str -> int) to re-check ``token_count`` exactly.
    """
    assert "".join(s.text for s in spans) == text, "leaves do not join back to the input"
    data = text.encode("utf-8", "surrogatepass")
    pos_b = pos_c = 0
    line = 1  # line of text[pos_c]
    for i, s in enumerate(spans):
        assert s.text, f"leaf {i} is empty"
        assert s.start_char == pos_c and s.start_byte == pos_b, f"leaf {i} is not contiguous"
        assert text[s.start_char : s.end_char] == s.text
        assert data[s.start_byte : s.end_byte].decode("utf-8", "surrogatepass") == s.text
        assert s.start_line == line, f"leaf {i} start_line"
        inner = s.text.count("\n", 0, len(s.text) - 1)
        assert s.end_line == line + inner, f"leaf {i} end_line"
        line += s.text.count("\n")
        if budget is not None and s.token_count > budget:
            assert s.metadata.get("oversize") and len(s.text) == 1, f"leaf {i} over budget: {s.token_count}"
        if count is not None:
            assert s.token_count == count(s.text), f"leaf {i} token_count is not exact"
        pos_b, pos_c = s.end_byte, s.end_char
    assert pos_c == len(text) and pos_b == len(data)


def assert_valid_tree(text: str, tree) -> None:
    """Every parent's range contains its children's; leaves' parents are structural spans of the tree."""
    ids = {s.id for s in tree.spans}
    assert tree.root.parent_id is None and tree.root.start_char == 0 and tree.root.end_char == len(text)
    for s in tree.spans:
        if s.parent_id is None:
            continue
        assert s.parent_id in ids, "dangling parent_id"
        p = tree.get(s.parent_id)
        assert p.start_byte <= s.start_byte and s.end_byte <= p.end_byte, "child outside its parent"
        assert text[s.start_char : s.end_char] == s.text
    assert len(ids) == len(tree.spans), "duplicate span ids"


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def chroma_server(data: pathlib.Path) -> Iterator[tuple[str, int]]:
    """A real ``chroma run`` server on a free localhost port, storing under ``data``; yields ``(host, port)`` once
    its heartbeat answers and stops it on exit. Skips the test when the ``chroma`` CLI is not installed."""
    local = pathlib.Path(sys.executable).with_name("chroma")
    cli = str(local) if local.exists() else shutil.which("chroma")
    if cli is None:
        pytest.skip("the `chroma` CLI is not installed (pip install 'llmc-splitters[chroma]')")
    port = free_port()
    url = f"http://localhost:{port}/api/v2/heartbeat"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 - localhost only
                return resp.status == 200
        except OSError:
            return False

    with _serving([cli, "run", "--path", str(data / "db"), "--host", "localhost", "--port", str(port)],
                  data / "server.log", ready, "chroma run", url):
        yield "localhost", port


@contextlib.contextmanager
def _serving(cmd: list[str], log_path: pathlib.Path, ready: Callable[[], bool], what: str,
             address: str) -> Iterator[None]:
    """Run a server process (output in ``log_path``) until the block ends; enter the block once ``ready()``
    (fail the test when it exits first, or is not ready within 60 s); terminate it, then kill it, on exit."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while not ready():
                if proc.poll() is not None:
                    pytest.fail(f"{what} exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not answer {address} within 60 s")
                time.sleep(0.2)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def milvus_server(data: pathlib.Path) -> Iterator[str]:
    """Milvus Lite's gRPC server (``python -m milvus_lite server``) in its own process on a free localhost port,
    storing under ``data``: a real Milvus server for several processes. Yields its address
    (``http://127.0.0.1:PORT``) once a client connects, and stops it on exit."""
    pytest.importorskip("milvus_lite")
    pymilvus = pytest.importorskip("pymilvus")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            pymilvus.MilvusClient(uri=uri, timeout=1).close()
        except Exception:  # noqa: BLE001 - not listening yet
            return False
        return True

    with _serving([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data / "milvus"), "--host",
                   "127.0.0.1", "--port", str(port)], data / "milvus.log", ready, "the Milvus Lite server", uri):
        yield uri


# ---------------------------------------------------------------------------------------- reading an index directly


def index_sql(index: pathlib.Path, query: str) -> set[tuple]:
    """The rows of a query on the span store of the index at ``index``."""
    import sqlite3

    conn = sqlite3.connect(index / "llmc.sqlite3")
    try:
        return set(conn.execute(query))
    finally:
        conn.close()


def index_rows(index: pathlib.Path) -> set[tuple]:
    """``(id, role, path, text)`` of every span row."""
    return index_sql(index, "SELECT id, role, path, text FROM spans")


# Every column of a span row but the table's own row number (which follows the order files were written in).
_SPAN_COLUMNS = ("id, file, path, role, kind, name, tail, language, start_byte, end_byte, start_char, end_char, "
                 "start_line, end_line, parent_id, token_count, text, metadata, embed_hash")


def index_contents(index: pathlib.Path) -> tuple[set[tuple], set[tuple]]:
    """Every column of every span row, and every file marker but its time and stat."""
    return (index_sql(index, f"SELECT {_SPAN_COLUMNS} FROM spans"),
            index_sql(index, "SELECT path, hash, settings, language, n_spans, n_leaves, bindings FROM files"))


def searched_ids(index: pathlib.Path) -> set[str]:
    """Ids of the rows that are searched (leaves and summaries)."""
    return {r[0] for r in index_sql(index, "SELECT id FROM spans WHERE role != 'parent'")}
