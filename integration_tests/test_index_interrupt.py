"""An indexing run killed part-way (SIGKILL, a real subprocess) leaves an index the next run completes exactly; a
run stopped by SIGINT or SIGTERM keeps every file it had finished, and its vectors.

The tests index real trees (copies of standard-library packages: about 200 files, or about 20 for the tests that
kill at chosen points, each plus a binary file named ``.py``, a Latin-1 file and a broken file) into an index
directory from a driver script run with ``sys.executable``. The driver counts the index's low-level writes (span-store
transactions, vector-cache writes, lexical-index commits, vector upserts and deletes, outbox clears) in a progress
file and can kill itself with SIGKILL right before a chosen one, which puts the kill exactly in the windows that
matter (between two groups, after a group's transaction but before the lexical index or the vectors followed it,
before the stale vectors of an update are deleted); other tests SIGKILL it from outside at whatever point it has
reached, or kill only the parent of a ``workers=2`` run. A fresh process then runs the same indexing again and reads
everything back with plain SQL, the lexical index's and Chroma's own listings. The result must equal a clean,
uninterrupted index of the same tree: the same rows with the same texts (nothing missing, nothing duplicated or
stale), every file's leaves tiling its text, every marker carrying the hash of its current text and its row count,
the lexical index and the vector store holding exactly the searched rows, and the same failure (the binary file).

Every test has a hard timeout, and every subprocess wait has its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time

import pytest

pytest.importorskip("tantivy")

pytestmark = pytest.mark.timeout(420)

STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])
# Whole packages, copied in this order until the tree has at least MIN_FILES Python files.
PACKAGES = ("lib2to3", "email", "json", "concurrent", "ctypes", "xml", "importlib", "logging", "unittest", "asyncio")
MIN_FILES = 200
RUN_TIMEOUT = 240  # seconds, one indexing run

DRIVER = textwrap.dedent(
    '''
    """Index a tree; count (and optionally die before) the index's low-level writes."""
    import json
    import os
    import signal
    import sqlite3
    import sys

    from llmc_splitters.retrieval import CodeIndex, HashingEmbedding, IndexInterrupted
    from llmc_splitters.retrieval.indexing import indexer as indexing
    from llmc_splitters.retrieval.storage import chroma_vectors as store_module, lexical_tantivy as lexical_index, span_store as spanstore

    _COUNTS = {}
    _PROGRESS = os.environ["LLMC_PROGRESS"]
    _KILL = os.environ.get("LLMC_KILL_AT")  # e.g. "write:2": die right before the second span-store transaction


    def counted(label, fn, files=lambda *a, **k: 0):
        def call(*args, **kwargs):
            n = _COUNTS[label] = _COUNTS.get(label, 0) + 1
            if _KILL == f"{label}:{n}":
                os.kill(os.getpid(), signal.SIGKILL)
            out = fn(*args, **kwargs)
            _COUNTS["files"] = _COUNTS.get("files", 0) + files(*args, **kwargs)
            with open(_PROGRESS, "a") as fh:
                fh.write(json.dumps(_COUNTS) + "\\n")
            return out
        return call


    class Counting(HashingEmbedding):
        def embed_documents(self, texts):
            _COUNTS["embedded"] = _COUNTS.get("embedded", 0) + len(texts)
            return super().embed_documents(texts)


    S = spanstore.SpanStore
    S.write_files = counted("write", S.write_files, lambda self, writes, **k: len(writes))
    S.cache_vectors = counted("cache", S.cache_vectors)
    S.done = counted("done", S.done)
    L = lexical_index.LexicalIndex
    L.replace = counted("lexical", L.replace)
    C = store_module.ChromaStore
    C.upsert = counted("vectors", C.upsert)
    C.delete = counted("delete", C.delete)


    def dump(idx):
        """Everything the index holds, read back from its files (not from the index object)."""
        conn = sqlite3.connect(idx.span_store.file)
        rows = [dict(zip(("id", "role", "path", "text", "start_byte", "end_byte"), r)) for r in
                conn.execute("SELECT id, role, path, text, start_byte, end_byte FROM spans")]
        files = {p: {"hash": h, "n_spans": n} for p, h, n in conn.execute("SELECT path, hash, n_spans FROM files")}
        pending = [r[0] for r in conn.execute("SELECT path FROM pending")]
        stale = [r[0] for r in conn.execute("SELECT id FROM stale")]
        conn.close()
        out = {"rows": rows, "files": files, "pending": pending, "stale": stale,
               "lexical": sorted(idx.lexical("leaf").ids() | idx.lexical("summary").ids())}
        if idx.dense:
            out["vectors"] = sorted(i for role in ("leaf", "summary")
                                    for i in idx.vectors.collection_of(role).get(include=[])["ids"])
        return out


    def main():
        db, out, tree = sys.argv[1:4]
        embedding = Counting(64) if os.environ.get("LLMC_EMBED") == "1" else None
        if os.environ.get("LLMC_GROUP"):
            indexing._GROUP_FILES = int(os.environ["LLMC_GROUP"])  # smaller write groups: more kill points
            indexing._FIRST_GROUP_FILES = indexing._GROUP_FILES  # all of one size: the kill points below
            indexing._LEXICAL_COMMIT_SECONDS = 0.0  # and a lexical commit per group: kill points that do not move
            indexing._WRITE_BATCH_SECONDS = 0.0  # and each group written on its own
        idx = CodeIndex(db, embedding=embedding, max_tokens=256)
        at_open = {"paths": len(idx.paths), "pending": idx.span_store.pending(3)}
        result = {"at_open": at_open}
        try:
            report = idx.index_directory(tree, workers=int(os.environ.get("LLMC_WORKERS", "1")))
        except IndexInterrupted as exc:
            report = exc.report
            result["interrupted"] = exc.signal_name
        result.update(added=report.added, updated=report.updated, unchanged=report.unchanged,
                      removed=report.removed, failed=report.failed, embedded=report.embedded, reused=report.reused,
                      dump=dump(idx))
        with open(out, "w") as fh:
            json.dump(result, fh)
        if "interrupted" in result:
            sys.exit(130)


    if __name__ == "__main__":
        main()
    '''
)


# ------------------------------------------------------------------------------------------------------- fixtures


def _copy_tree(dest: pathlib.Path, min_files: int, packages: tuple[str, ...] = PACKAGES) -> pathlib.Path:
    n = 0
    for pkg in packages:
        src = STDLIB / pkg
        if not src.is_dir():
            continue
        shutil.copytree(src, dest / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        n += sum(1 for _ in (dest / pkg).rglob("*.py"))
        if n >= min_files:
            break
    bad = dest / "zz_bad"
    bad.mkdir()
    (bad / "blob.py").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)  # binary with a .py name
    (bad / "latin1.py").write_bytes("# caf\u00e9, na\u00efve\nname = 'M\u00fcller'\n".encode("latin-1"))
    (bad / "broken.py").write_text("def f(:\n    return (((\nclass C\n    x = '''never closed\n" * 20)
    return dest


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("interrupt")
    (d / "driver.py").write_text(DRIVER)
    return d


@pytest.fixture(scope="module")
def big_tree(workdir) -> pathlib.Path:
    return _copy_tree(workdir / "big", MIN_FILES)


@pytest.fixture(scope="module")
def small_tree(workdir) -> pathlib.Path:
    return _copy_tree(workdir / "small", 25, ("json", "email/mime", "dbm", "sqlite3", "tomllib", "zoneinfo"))


# Small write groups: the tree is written in several transactions, each followed by its lexical and vector writes,
# so a kill can land between any two of them.
SMALL = {"LLMC_GROUP": "6"}


@pytest.fixture(scope="module")
def small_reference(workdir, small_tree) -> dict:
    """A clean, uninterrupted index of the small tree: its report and records."""
    return _run(workdir, workdir / "small-clean", small_tree, **SMALL)  # type: ignore[return-value]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["ANONYMIZED_TELEMETRY"] = "False"
    for k in ("LLMC_KILL_AT", "LLMC_WORKERS", "LLMC_EMBED", "LLMC_GROUP"):
        env.pop(k, None)
    env.update(extra)
    return env


def _run(workdir: pathlib.Path, store: pathlib.Path, tree: pathlib.Path, *, expect_kill: bool = False,
         expect_rc: int = 0, **env: str) -> dict | None:
    """Run the driver to completion (or to its own SIGKILL); return its report and a dump of the index read back
    after the run, or ``None`` when it was killed."""
    out = workdir / f"out-{time.monotonic_ns()}.json"
    progress = workdir / f"progress-{time.monotonic_ns()}.jsonl"
    args = [sys.executable, str(workdir / "driver.py"), str(store), str(out), str(tree)]
    proc = subprocess.Popen(args, env=_env(LLMC_PROGRESS=str(progress), **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if expect_kill:
        assert proc.returncode == -signal.SIGKILL, f"the run was not killed (rc={proc.returncode}): {err.decode()[-2000:]}"
        _kill_leftovers(proc.pid)
        return None
    assert proc.returncode == expect_rc, err.decode()[-3000:]
    return json.loads(out.read_text())


def _kill_leftovers(pgid: int) -> None:
    """Kill what is left of a process group this test started (a killed run's pool workers)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_and_signal_after(workdir: pathlib.Path, store: pathlib.Path, tree: pathlib.Path, files: int, *,
                          sig: int = signal.SIGKILL, **env: str) -> tuple[dict, subprocess.Popen, pathlib.Path]:
    """Start an indexing run and send ``sig`` to its whole process group once ``files`` files are written."""
    out = workdir / f"out-{time.monotonic_ns()}.json"
    progress = workdir / f"progress-{time.monotonic_ns()}.jsonl"
    progress.touch()
    args = [sys.executable, str(workdir / "driver.py"), str(store), str(out), str(tree)]
    proc = subprocess.Popen(args, env=_env(LLMC_PROGRESS=str(progress), **env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + RUN_TIMEOUT
    last: dict = {}
    try:
        while time.monotonic() < deadline:
            last = _last_progress(progress) or last
            if last.get("files", 0) >= files:
                break
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be signalled: rc={proc.returncode} "
                            f"{proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.01)
        else:
            pytest.fail("the run did not reach the kill point in time")
        os.killpg(proc.pid, sig)
        proc.wait(timeout=120)
    finally:
        if sig == signal.SIGKILL:
            _kill_leftovers(proc.pid)
        proc.stderr.close()
    return last, proc, out


def _run_and_kill_after(workdir: pathlib.Path, store: pathlib.Path, tree: pathlib.Path, files: int,
                        **env: str) -> dict:
    """Start an indexing run and SIGKILL it (its whole process group) once ``files`` files are written."""
    last, proc, out = _run_and_signal_after(workdir, store, tree, files, **env)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists(), "the killed run finished anyway"
    return last


def _last_progress(progress: pathlib.Path) -> dict | None:
    """The last complete line of a progress file being appended to."""
    lines = progress.read_text().split("\n")[:-1]
    return json.loads(lines[-1]) if lines else None


# ------------------------------------------------------------------------------------------------------- checks


def _texts(tree: pathlib.Path) -> dict[str, str]:
    """What the index must hold: the decoded text of every file of a kind the chunker parses and of every
    extensionless #! script (the binary file excluded), as ``index_directory`` selects them."""
    from fnmatch import fnmatchcase

    from llmc_splitters.chunking.inputs import binary_reason, decode
    from llmc_splitters.retrieval.indexing.selection import DEFAULT_INCLUDE, _script

    def selected(q: pathlib.Path) -> bool:
        return any(fnmatchcase(q.name, g) for g in DEFAULT_INCLUDE) or "." not in q.name and _script(q)

    out = {}
    for p in sorted(q for q in tree.rglob("*") if q.is_file() and selected(q)):
        data = p.read_bytes()
        if binary_reason(data):
            continue
        out[p.relative_to(tree).as_posix()] = decode(data).text
    return out


def _check_complete(dump: dict, tree: pathlib.Path, reference: dict) -> None:
    rows = dump["rows"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate row ids"
    assert dump["pending"] == [] and dump["stale"] == [], "the lexical index or the vectors did not catch up"
    texts = _texts(tree)
    assert sorted(dump["files"]) == sorted(texts), "indexed files differ from the tree"
    # Same rows, same texts as a clean single run: nothing missing, nothing stale, nothing duplicated.
    got = {(r["id"], r["text"]) for r in rows}
    want = {(r["id"], r["text"]) for r in reference["rows"]}
    assert got == want, f"{len(want - got)} rows missing, {len(got - want)} extra"
    searched = sorted(r["id"] for r in rows if r["role"] != "parent")
    assert dump["lexical"] == searched, "the lexical index holds other ids than the searched rows"
    if "vectors" in dump:
        assert dump["vectors"] == searched, "the vector store holds other ids than the searched rows"
    by_path: dict[str, list[dict]] = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(r)
    for path, text in texts.items():
        recs = by_path[path]
        marker = dump["files"][path]
        assert marker["hash"] == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), path
        assert marker["n_spans"] == len(recs), f"{path}: marker counts {marker['n_spans']}, {len(recs)} stored"
        leaves = sorted((r for r in recs if r["role"] == "leaf"), key=lambda r: r["start_byte"])
        assert "".join(r["text"] for r in leaves) == text, f"{path}: leaves do not tile the file"
        assert all(a["end_byte"] == b["start_byte"] for a, b in zip(leaves, leaves[1:])), f"{path}: leaves overlap"


@pytest.fixture(scope="module")
def big_reference(workdir, big_tree) -> dict:
    """A clean, uninterrupted index of the big tree: its report and records."""
    ref = _run(workdir, workdir / "big-clean", big_tree)
    assert ref is not None
    assert list(ref["failed"]) == ["zz_bad/blob.py"] and "binary" in ref["failed"]["zz_bad/blob.py"]
    assert len(ref["added"]) == len(_texts(big_tree)) >= MIN_FILES
    assert ref["dump"]["pending"] == []
    return ref


# ------------------------------------------------------------------------------------------------------- tests


def test_killed_from_outside_then_resumed(workdir, big_tree, big_reference):
    """SIGKILL at an arbitrary point after 40 files are written; the next run completes the index exactly."""
    store = workdir / "big-killed"
    reached = _run_and_kill_after(workdir, store, big_tree, files=40)
    assert reached["files"] >= 40
    resumed = _run(workdir, store, big_tree)
    assert resumed is not None
    n_files = len(_texts(big_tree))
    # The files written before the kill are skipped as unchanged (on their stat), the rest are indexed now. The kill
    # lands wherever the run is when the test sees 40 files written: on a loaded machine the writer may have written
    # every file's rows by then (the outbox replays their lexical documents), and nothing is left to add.
    assert len(resumed["unchanged"]) >= 40, resumed["at_open"]
    assert resumed["added"] or resumed["at_open"]["paths"] == n_files, resumed["at_open"]
    assert len(resumed["unchanged"]) + len(resumed["added"]) == n_files
    assert list(resumed["failed"]) == ["zz_bad/blob.py"]
    _check_complete(resumed["dump"], big_tree, big_reference["dump"])


@pytest.mark.parametrize(
    "kill_at",
    [
        "write:2",  # the first group complete everywhere, the second not written at all
        "lexical:3",  # the second group's transaction committed, its lexical documents not yet written
        "done:2",  # the second group written everywhere, its outbox rows not yet cleared
    ],
)
def test_killed_between_writes_of_one_group(workdir, small_tree, small_reference, kill_at):
    """Die right before a chosen write; the next run completes the index exactly."""
    store = workdir / f"small-killed-{kill_at.replace(':', '-')}"
    _run(workdir, store, small_tree, expect_kill=True, LLMC_KILL_AT=kill_at, **SMALL)
    resumed = _run(workdir, store, small_tree, **SMALL)
    assert resumed is not None
    if kill_at != "write:2":
        # The killed group was committed: its files are complete (and unchanged now); the outbox replayed them.
        assert resumed["at_open"]["pending"], "the kill should have left outbox rows"
        assert len(resumed["unchanged"]) == 12, resumed["unchanged"]
    else:
        assert len(resumed["unchanged"]) == 6 and not resumed["at_open"]["pending"]
    assert sorted(resumed["added"] + resumed["unchanged"]) == sorted(small_reference["added"])
    _check_complete(resumed["dump"], small_tree, small_reference["dump"])


def test_update_killed_before_stale_vectors_were_deleted(workdir, small_tree, tmp_path):
    """Index with vectors, then edit, add and delete files; kill the update right before the stale vectors of the
    first group are deleted (the new rows committed, the new vectors written); resume. The index then equals a
    clean index of the edited tree: no row, lexical document or vector of an old version is left."""
    tree = tmp_path / "tree"
    shutil.copytree(small_tree, tree)
    store = workdir / "update-killed"
    env = {"LLMC_EMBED": "1", "LLMC_GROUP": "6"}
    _run(workdir, store, tree, **env)
    py = sorted(p for p in tree.rglob("*.py") if "zz_bad" not in p.parts and p.stat().st_size > 2000)
    for i, p in enumerate(py[:6]):
        text = p.read_text()
        if i % 2:
            p.write_text(text[: len(text) // 2] + "\n\ndef added_function(x):\n    return x * 2\n")
        else:
            p.write_text("import os\n\n\nclass Inserted:\n    def m(self):\n        return os.sep\n\n\n" + text)
    py[6].unlink()
    (tree / "new_module.py").write_text("def fresh():\n    return 'new'\n")
    _run(workdir, store, tree, expect_kill=True, LLMC_KILL_AT="delete:1", **env)
    resumed = _run(workdir, store, tree, **env)
    assert resumed is not None
    assert resumed["at_open"]["pending"], "the kill should have left the group in the outbox"
    assert py[6].relative_to(tree).as_posix() in resumed["removed"]
    clean = _run(workdir, workdir / "update-clean", tree, **env)
    assert clean is not None
    _check_complete(resumed["dump"], tree, clean["dump"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_keeps_every_prepared_file_and_its_vectors(workdir, small_tree, small_reference, sig):
    """SIGINT/SIGTERM after some files are written (vectors from a counting embedding): the run writes every file
    it finished (chunked and embedded), says so and exits 130; the next run embeds only the files that were not
    written, and completes the index exactly."""
    store = workdir / f"signalled-{sig.name}"
    env = {"LLMC_EMBED": "1", "LLMC_GROUP": "3"}
    reached, proc, out = _run_and_signal_after(workdir, store, small_tree, files=3, sig=sig, **env)
    assert proc.returncode == 130, proc.returncode
    stopped = json.loads(out.read_text())
    assert stopped["interrupted"] == sig.name
    kept = stopped["added"]
    assert len(kept) >= 3 and reached["files"] >= 3
    assert sorted(stopped["dump"]["files"]) == sorted(kept), "every file the run reported is in the index"
    assert stopped["dump"]["pending"] == []
    texts = _texts(small_tree)
    resumed = _run(workdir, store, small_tree, **env)
    assert resumed is not None
    assert sorted(resumed["unchanged"]) == sorted(kept)
    assert sorted(resumed["added"]) == sorted(set(texts) - set(kept))
    # The kept files' texts are not embedded again (their vectors are cached); the rest are.
    assert 0 < resumed["embedded"] < resumed["embedded"] + stopped["embedded"]
    clean = _run(workdir, workdir / f"signalled-clean-{sig.name}", small_tree, **env)
    assert clean is not None
    assert resumed["embedded"] + stopped["embedded"] <= clean["embedded"] + stopped["reused"] + resumed["reused"]
    _check_complete(resumed["dump"], small_tree, clean["dump"])


def _children(pid: int) -> list[int]:
    out = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.extend(int(x) for x in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(not pathlib.Path("/proc/self/task").exists(), reason="needs /proc to find the pool workers")
def test_killed_with_chunking_workers_then_resumed(workdir, big_tree, big_reference):
    """workers=2: SIGKILL only the indexing process; its chunking workers notice and exit; the next run (with
    workers) completes the index exactly."""
    store = workdir / "big-killed-workers"
    out = workdir / "workers-out.json"
    progress = workdir / "workers-progress.jsonl"
    progress.touch()
    args = [sys.executable, str(workdir / "driver.py"), str(store), str(out), str(big_tree)]
    proc = subprocess.Popen(args, env=_env(LLMC_PROGRESS=str(progress), LLMC_WORKERS="2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        workers: list[int] = []
        # Files written, and the pool still chunking: the spawn pool (and its resource tracker) are children. (At
        # a fixed count of files written, a fast pool may already have chunked them all and ended.)
        while time.monotonic() < deadline and proc.poll() is None:
            if (_last_progress(progress) or {}).get("files", 0) >= 1:
                workers = _children(proc.pid)
                if len(workers) >= 2:
                    break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        assert len(workers) >= 2, workers
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: the workers are orphaned
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        leftovers = [w for w in workers if _alive(w)]
    finally:
        _kill_leftovers(proc.pid)
    # Pool workers exit on their own once their parent is gone (the resource tracker exits with its pipe).
    assert not leftovers, f"processes still running after their parent was killed: {leftovers}"
    resumed = _run(workdir, store, big_tree, LLMC_WORKERS="2")
    assert resumed is not None and resumed["unchanged"] and resumed["added"]
    _check_complete(resumed["dump"], big_tree, big_reference["dump"])
