"""``llmc-splitters index`` on more than 1,000 real source files: the standard library of the running interpreter.

The tree is indexed in place (the index goes to a temporary directory), lexical-only (``--embedding none``) to keep
the time on the chunker and the store. ``test/test_*.py`` (the biggest files) is excluded to keep the run near two
minutes on two cores; what is left is still well over 1,000 files (1,356 on CPython 3.11: the library itself, its
test helpers and the test sub-packages). A second run with no change must write and embed nothing.

Measured wall times are printed (``-s`` shows them) and written to the test's summary JSON files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import STDLIB

pytestmark = pytest.mark.slow

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")
pytest.importorskip("pathspec")

MIN_FILES = 1000


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(ANONYMIZED_TELEMETRY="False", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def index(db, *extra: str) -> tuple[dict, str, float]:
    t = time.monotonic()
    got = subprocess.run(
        [sys.executable, "-m", "llmc_splitters", "index", str(STDLIB), "--db", str(db), "--embedding", "none",
         "--exclude", "/test/test_*.py", "--json", *extra],
        env=_env(), capture_output=True, text=True, timeout=1800, check=False,
    )
    wall = time.monotonic() - t
    assert got.returncode == 0, got.stderr[-3000:]
    return json.loads(got.stdout), got.stderr, wall


def test_index_over_1000_stdlib_files_then_rerun_embeds_nothing(tmp_path):
    db = tmp_path / "index"
    first, progress, wall1 = index(db)
    print(f"\nfirst run: {first['files']} files, {first['leaf_spans']} leaf spans, {first['records_written']} records "
          f"in {wall1:.1f} s wall (index {first['index_seconds']:.1f} s, {first['files_per_second']} files/s)")
    assert first["files"] >= MIN_FILES
    assert first["added"] == first["files"] == first["indexed_files"]
    assert first["failed"] == 0, first["failed_paths"]
    assert first["languages"]["python"] >= MIN_FILES
    assert first["leaf_spans"] > 10 * MIN_FILES
    # Everything skipped has a reason, and the standard library's generated modules are among them.
    assert first["skipped"] == len(first["skipped_paths"]) > 0
    assert all(s["reason"] for s in first["skipped_paths"])
    generated = {s["path"] for s in first["skipped_paths"] if s["kind"] == "generated"}
    assert "pydoc_data/topics.py" in generated
    # Progress on stderr (a pipe here, so lines rather than a bar), with files/s, ending at 100%.
    lines = [ln for ln in progress.splitlines() if ln.startswith("indexing: ")]
    assert len(lines) >= 10
    assert lines[-1].startswith(f"indexing: {first['files']}/{first['files']} files (100%)")
    assert all("files/s" in ln for ln in lines)

    second, _, wall2 = index(db)
    print(f"second run: {second['unchanged']} unchanged, {second['embedded']} embedded, "
          f"{second['records_written']} records written in {wall2:.1f} s wall")
    assert second["files"] == first["files"]
    assert second["unchanged"] == first["files"]
    assert (second["added"], second["updated"], second["removed"], second["failed"]) == (0, 0, 0, 0)
    assert second["embedded"] == 0 and second["records_written"] == 0
    (tmp_path / "timings.json").write_text(json.dumps(
        {"files": first["files"], "first_wall_s": wall1, "first_index_s": first["index_seconds"],
         "files_per_s": first["files_per_second"], "second_wall_s": wall2}, indent=2))
