"""The span store on its own: bad files give our error with the remedy, reads never create, the outbox replays."""

from __future__ import annotations

import contextlib
import sqlite3
import threading

import pytest

pytest.importorskip("tantivy")

from llmc_splitters.retrieval import CodeIndex, IndexNotFoundError, SpanStore, StoreError  # noqa: E402
from llmc_splitters.retrieval.storage.span_store import LEXICAL  # noqa: E402
from llmc_splitters.retrieval.indexing import indexer as indexing  # noqa: E402

SRC = {
    "pkg/client.py": "import os\n\n\nclass Client:\n    def send(self, data):\n        return os.write(1, data)\n",
    "pkg/util.py": "def slug(text):\n    return text.lower().replace(' ', '-')\n",
}


def test_opening_to_read_never_creates_an_index(tmp_path):
    where = tmp_path / "typo" / ".llmc"
    with pytest.raises(IndexNotFoundError, match="no index at .*directory does not exist"):
        SpanStore(where, create=False)
    with pytest.raises(IndexNotFoundError):
        CodeIndex(where, create=False)
    assert not where.exists() and not (tmp_path / "typo").exists()


def test_an_index_not_written_yet_reports_itself_empty(tmp_path):
    idx = CodeIndex(tmp_path / "db")  # created by its first write
    assert idx.status()["files"] == 0 and idx.status()["pending"] == [] and "files=0" in repr(idx)
    assert not (tmp_path / "db").exists()


def test_a_reader_never_sees_the_index_file_before_its_tables(tmp_path, monkeypatch):
    """The first write creates the index. A reader that looks while it is being created (the MCP server's status
    during its first catch-up) finds no index, or a whole one: never a file without its tables."""
    real_connect = sqlite3.connect
    creating, looked = threading.Event(), threading.Event()

    class Pausing(sqlite3.Connection):
        def executescript(self, script):  # the schema is written after the file exists: look then
            if "CREATE TABLE" in script and not creating.is_set():
                creating.set()
                assert looked.wait(30)
            return super().executescript(script)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: real_connect(*a, factory=Pausing, **kw))
    db = tmp_path / "db"
    writer, reader = CodeIndex(db), CodeIndex(db)  # both opened before the index exists
    t = threading.Thread(target=writer.index_texts, args=(SRC,))
    t.start()
    try:
        assert creating.wait(30)
        seen = reader.status()  # while the tables are being created
    finally:
        looked.set()
        t.join(30)
    assert seen["files"] == 0 and seen["pending"] == []
    assert CodeIndex(db, create=False).paths == sorted(SRC)
    assert sorted(p.name for p in db.iterdir() if p.name.startswith(".")) == [".gitignore"]  # no file left behind


def test_a_corrupt_file_is_our_error_with_the_remedy(tmp_path):
    db = tmp_path / "db"
    CodeIndex(db).index_texts(SRC)
    (db / "llmc.sqlite3").write_bytes(b"this is not a database" * 200)
    for name in ("llmc.sqlite3-wal", "llmc.sqlite3-shm"):
        (db / name).unlink(missing_ok=True)
    with pytest.raises(StoreError, match="not a readable llmc index.*--reset"):
        CodeIndex(db)
    # --reset (reset=True) rebuilds it.
    fresh = CodeIndex(db, reset=True)
    assert fresh.paths == []


def test_an_index_of_version_0_1_is_recognised(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    sqlite3.connect(old / "chroma.sqlite3").execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(StoreError, match="written by llmc-splitters 0.1.*--reset"):
        CodeIndex(old)
    rebuilt = CodeIndex(old, reset=True)
    rebuilt.index_texts(SRC)
    assert rebuilt.paths == sorted(SRC) and not (old / "chroma.sqlite3").exists()


def test_a_write_locked_by_another_process_fails_with_our_error(tmp_path):
    db = tmp_path / "db"
    CodeIndex(db).index_texts({"a.py": "x = 1\n"})
    other = sqlite3.connect(db / "llmc.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of its write
    try:
        idx = CodeIndex(db)
        idx.span_store.timeout = 0.2
        idx.span_store.close()  # reconnect with the short timeout
        with pytest.raises(StoreError, match="locked by another process .*try again when that run ends"):
            idx.index_texts({"b.py": "y = 2\n"})
        # Reading is not blocked by a writer (WAL mode).
        assert idx.paths == ["a.py"]
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_another_format_is_refused(tmp_path):
    db = tmp_path / "db"
    SpanStore(db).set_meta("format", "llmc-index/99")
    with pytest.raises(StoreError, match="format 'llmc-index/99'.*--reset"):
        SpanStore(db)


def test_the_lexical_index_catches_up_after_a_crash_between_the_commit_and_its_write(tmp_path, monkeypatch):
    db = tmp_path / "db"
    idx = CodeIndex(db)
    lex = idx.lexical("leaf")

    def crash(files, docs, commit=True):  # noqa: ANN001, ANN202
        raise RuntimeError("killed right after the span store's commit")

    monkeypatch.setattr(lex, "replace", crash)
    monkeypatch.setattr(indexing, "_FIRST_GROUP_FILES", indexing._GROUP_FILES)  # both files in one group
    with pytest.raises(RuntimeError):
        idx.index_texts(SRC)
    monkeypatch.undo()
    # The files are complete in the span store (the transaction committed); the lexical index lags behind...
    assert idx.paths == sorted(SRC) and idx.span_store.pending(LEXICAL) == sorted(SRC)
    assert idx.lexical("leaf").search("slug text lower", 5) == []
    # ... until the next writer replays the outbox.
    reopened = CodeIndex(db)
    assert reopened.index_texts(SRC).unchanged == sorted(SRC)
    assert reopened.span_store.pending(LEXICAL) == []
    assert reopened.search("slug text lower", k=1).hits[0].span.name == "slug"


def test_readers_in_threads_see_only_complete_files_while_one_writes(tmp_path):
    db = tmp_path / "db"
    idx = CodeIndex(db, max_tokens=64)
    files = {f"m{i:03d}.py": f"def handler_{i}(request):\n    return request.reply({i})\n" for i in range(120)}
    done = threading.Event()
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        r = CodeIndex(db, max_tokens=64)
        try:
            while not done.is_set():
                for h in r.search("handler request reply", k=20).hits:
                    # Every hit's file is complete: its marker is there and its leaves tile its text.
                    text = "".join(s.text for s in r.spans(h.span.path or ""))
                    seen.append((len(text), len(files[h.span.path or ""])))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    idx.index_texts(dict(list(files.items())[:10]))  # the index exists before anyone reads it
    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        for i in range(10, 120, 10):
            idx.index_texts(dict(list(files.items())[i : i + 10]))
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert seen and all(a == b for a, b in seen)


OLD = "import os\nimport sys\n\n\nclass Widget:\n    def frobnicate(self):\n        return os.getcwd()\n\n    def other(self):\n        return sys.argv\n"
NEW = "import json\n# two lines that move\n# everything down\nimport os\n\n\nclass Widget:\n    size = 3\n\n    def frobnicate(self):\n        return os.getcwd()\n\n    def other(self):\n        return sys.argv\n"


def _rewritten_between_search_and_context(db, *, snapshot: bool):
    """Search in one thread; rewrite the file in another before the hit's context is read; return that context."""
    idx = CodeIndex(db, max_tokens=16)
    idx.index_texts({"w.py": OLD})
    searched, written = threading.Event(), threading.Event()
    out = {}

    def query() -> None:
        reader = CodeIndex(db, max_tokens=16)
        with reader.span_store.snapshot() if snapshot else contextlib.nullcontext():
            hit = reader.search("frobnicate getcwd", k=1).hits[0]
            searched.set()
            written.wait(30)
            out["hit"], out["context"] = hit, reader.hit_context(hit.span)
        out["after"] = reader.hit_context(hit.span)  # outside the block: the latest commit

    t = threading.Thread(target=query)
    t.start()
    assert searched.wait(30)
    idx.index_texts({"w.py": NEW})
    written.set()
    t.join(30)
    return out


def test_a_query_in_a_snapshot_sees_one_version_of_a_file_rewritten_meanwhile(tmp_path):
    # Without a snapshot, the hit of the old version gets the import bindings of the new one: `import json`, which
    # the method does not use, instead of `import os`, which it does.
    mixed = _rewritten_between_search_and_context(tmp_path / "a", snapshot=False)
    assert mixed["hit"].span.text in OLD
    assert "import json\n" in [s.text for s in mixed["context"].imports]

    got = _rewritten_between_search_and_context(tmp_path / "b", snapshot=True)
    ctx = got["context"]
    assert ctx.hit.text == "    def frobnicate(self):\n        return os.getcwd()\n\n"
    assert [s.text for s in ctx.imports] == ["import os\n"]
    assert [sc.snippet.text for sc in ctx.scopes] == [OLD[OLD.index("class Widget"):]]
    assert "import json\n" in [s.text for s in got["after"].imports]  # the block ended: the latest commit


def test_a_snapshot_refuses_a_write_of_its_own_thread_and_nests(tmp_path):
    idx = CodeIndex(tmp_path / "db")
    idx.index_texts(SRC)
    with idx.span_store.snapshot(), idx.span_store.snapshot():
        assert idx.paths == sorted(SRC)
        with pytest.raises(StoreError, match="inside a read snapshot"):
            idx.index_texts({"pkg/new.py": "X = 1\n"})
    idx.index_texts({"pkg/new.py": "X = 1\n"})  # after the block: writes again
    assert "pkg/new.py" in idx.paths
