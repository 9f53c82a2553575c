"""Directory indexing survives bad files and failing writes: each failure is reported with its reason, the rest is
indexed, and the index stays consistent (embedded Chroma, real files).

The kill-and-resume tests (a real subprocess killed with SIGKILL) are in ``integration_tests/test_index_interrupt.py``.
"""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

from fakes import stored_rows  # noqa: E402

from llmc_splitters import ASTChunker, ConfigurationError  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, StoreError  # noqa: E402

pytestmark = pytest.mark.timeout(300)

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ("textwrap.py", "shlex.py", "heapq.py", "json/decoder.py", "json/encoder.py", "base64.py")


def _tree(root: Path) -> Path:
    for rel in FILES:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, dest)
    return root


class PickyChunker(ASTChunker):
    """An ASTChunker that fails (with a bug, not our error type) on one file name."""

    def chunk_tree(self, text, *, language=None, path=None):
        if path and path.endswith("heapq.py"):
            raise RuntimeError("simulated chunker bug")
        return super().chunk_tree(text, language=language, path=path)


def test_bad_files_are_reported_and_the_rest_is_indexed(tmp_path):
    root = _tree(tmp_path / "src")
    (root / "blob.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    (root / "latin1.py").write_bytes("# caf\u00e9\nname = 'M\u00fcller'\n".encode("latin-1"))
    (root / "empty.py").write_text("")
    idx = CodeIndex(tmp_path / "db", chunker=PickyChunker(max_tokens=128, analyze=True))
    report = idx.index_directory(root)
    assert set(report.failed) == {"blob.py", "heapq.py"}
    assert "binary" in report.failed["blob.py"] and "PNG image" in report.failed["blob.py"]
    assert "RuntimeError: simulated chunker bug" in report.failed["heapq.py"]
    assert sorted(report.added) == sorted({*FILES, "latin1.py", "empty.py"} - {"heapq.py"})
    # Bytes that are not UTF-8 are decoded by the documented fallback (cp1252), not replaced: nothing is lost.
    assert idx.get_lines("latin1.py", 1, 2).text == "# caf\u00e9\nname = 'M\u00fcller'\n"
    for path in report.added:
        text = (root / path).read_bytes().decode("cp1252" if path == "latin1.py" else "utf-8")
        assert "".join(s.text for s in idx.spans(path)) == text
    assert idx.search("dedent common leading whitespace", k=3).hits[0].span.path == "textwrap.py"
    # A file given explicitly that cannot be read is reported too (a directory here).
    (root / "dir.py").mkdir()
    again = idx.index_files([root / "dir.py", root / "shlex.py"], root=root)
    assert "IsADirectoryError" in again.failed["dir.py"] and again.unchanged == ["shlex.py"]


def test_a_file_that_turns_bad_keeps_its_last_good_version(tmp_path):
    root = _tree(tmp_path / "src")
    idx = CodeIndex(tmp_path / "db", max_tokens=128)
    idx.index_directory(root)
    before = [s.id for s in idx.spans("base64.py")]
    (root / "base64.py").write_bytes(b"\x00" * 100)
    report = idx.index_directory(root)
    assert list(report.failed) == ["base64.py"] and not report.removed
    assert [s.id for s in idx.spans("base64.py")] == before
    assert idx.search("b64encode", k=1).hits[0].span.path == "base64.py"


def test_a_failed_write_is_reported_and_redone_without_duplicates(tmp_path, monkeypatch):
    root = _tree(tmp_path / "src")
    clean = CodeIndex(tmp_path / "clean", max_tokens=128)
    clean.index_directory(root)

    idx = CodeIndex(tmp_path / "db", max_tokens=128)
    idx.index_files([root / "textwrap.py"], root=root)
    store = idx.span_store
    real = store.write_files

    def broken(writes, pending):  # noqa: ANN001, ANN202
        raise StoreError("simulated: the disk is full")

    monkeypatch.setattr(store, "write_files", broken)
    (root / "textwrap.py").write_text((root / "textwrap.py").read_text() + "\n\ndef late():\n    return 1\n")
    report = idx.index_directory(root)
    # The whole write group failed in its transaction: nothing of it is stored, the old version stays whole.
    assert set(report.failed) == set(FILES) and all("disk is full" in r for r in report.failed.values())
    assert idx.paths == ["textwrap.py"] and idx.search("dedent", k=3).hits[0].span.path == "textwrap.py"
    assert "late" not in {h.span.name for h in idx.search("late", k=5).hits}
    # A fresh process sees the same.
    reopened = CodeIndex(tmp_path / "db", max_tokens=128)
    assert reopened.paths == ["textwrap.py"]
    monkeypatch.setattr(store, "write_files", real)
    report = idx.index_directory(root)
    assert sorted(report.added) == sorted(set(FILES) - {"textwrap.py"}) and report.updated == ["textwrap.py"]
    (root / "textwrap.py").write_text((root / "textwrap.py").read_text().removesuffix("\n\ndef late():\n    return 1\n"))
    idx.index_directory(root)
    assert stored_rows(idx) == stored_rows(clean)


def test_workers_setting_is_validated(tmp_path):
    idx = CodeIndex(tmp_path / "db", max_tokens=64)
    for bad in (0, -1, 1.5, "2", "Auto", True):
        with pytest.raises(ConfigurationError, match=f"workers must be a positive integer.*{bad!r}"):
            idx.index_texts({"a.py": "x = 1\n"}, workers=bad)
    lam = CodeIndex(tmp_path / "db2", chunker=ASTChunker(tokenizer=lambda s: len(s)))
    with pytest.raises(ConfigurationError, match="pickled"):
        lam.index_texts({"a.py": "x = 1\n"}, workers=2)
