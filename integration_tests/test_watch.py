"""``llmc-splitters index PATH --watch``: after indexing, the command follows the tree (a file watcher with debounce)
until SIGINT or SIGTERM. Edits, new files and deletions reach the index with no second run; another process (here
the test, through ``CodeIndex``) reads the index meanwhile.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import STDLIB

pytest.importorskip("watchdog")
pytest.importorskip("tantivy")

pytestmark = pytest.mark.timeout(180)

FILES = ("textwrap.py", "shlex.py", "json/decoder.py")


def _search(db: Path, query: str) -> list[tuple[str | None, str | None]]:
    from llmc_splitters.retrieval import CodeIndex

    index = CodeIndex(db, create=False)
    try:
        return [(h.span.path, h.span.name) for h in index.search(query, k=3).hits]
    finally:
        index.close()


def _eventually(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not seen within {timeout} s: {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_index_watch_follows_edits_new_files_and_deletions_until_stopped(tmp_path, stop):
    root = tmp_path / "src"
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, root / rel)
    db = tmp_path / "db"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc_splitters", "index", str(root), "--db", str(db), "--embedding", "none",
         "--watch", "--json", "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        summary = json.loads(_read_json_object(proc))  # the first run's summary, as without --watch
        assert summary["added"] == len(FILES)
        while not proc.stderr.readline().startswith("watching "):  # the watcher is up
            assert proc.poll() is None, proc.stderr.read()
        with (root / "textwrap.py").open("a", encoding="utf-8") as fh:
            fh.write("\n\ndef frobnicate_widgets(count):\n    return count * 2\n")
        (root / "json" / "extra.py").write_text("def quux_handler(request):\n    return request\n", encoding="utf-8")
        (root / "shlex.py").unlink()
        lines = [json.loads(proc.stdout.readline())]  # one line per refresh that changed the index
        while not {"json/extra.py", "shlex.py", "textwrap.py"} <= {p for r in lines for k in ("added", "updated",
                                                                                               "removed") for p in r[k]}:
            lines.append(json.loads(proc.stdout.readline()))
        assert {p for r in lines for p in r["added"]} == {"json/extra.py"}
        assert {p for r in lines for p in r["removed"]} == {"shlex.py"}
        _eventually(lambda: ("textwrap.py", "frobnicate_widgets") in _search(db, "frobnicate_widgets"), "the edit")
        assert ("json/extra.py", "quux_handler") in _search(db, "quux_handler request")
        assert all(p != "shlex.py" for p, _ in _search(db, "shlex split posix punctuation_chars"))
    finally:
        proc.send_signal(stop)
        try:
            _out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, err
    assert "stopped watching" in err and "Traceback" not in err


def _read_json_object(proc: subprocess.Popen) -> str:
    """The first pretty-printed JSON object on the command's stdout (its summary)."""
    text = ""
    while True:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        text += line
        if line.rstrip() == "}":
            return text
