"""An indexing run killed part-way (SIGKILL, a real subprocess) leaves an index the next run completes exactly.

The tests index real trees (copies of standard-library packages: about 200 files, or about 20 for the tests that
kill at chosen points, each plus a binary file named ``.py``, a Latin-1 file and a broken file) into an embedded
Chroma (``PersistentClient``) from a driver script run with ``sys.executable``. The driver counts the store's
low-level writes (``collection.upsert`` / ``delete`` calls) in a progress file and can kill itself with SIGKILL
right before a chosen write, which puts the kill exactly in the windows that matter (between two batches of one
group of files, between the records and the completion markers, before the stale records of an update are
deleted); other tests SIGKILL it from outside at whatever point it has reached, or kill only the parent of a
``workers=2`` run. A fresh process then runs the same indexing again and reads every record back from Chroma. The
result must equal a clean, uninterrupted index of the same tree: the same record ids with the same texts (nothing
missing, nothing duplicated or stale), every file's leaves tiling its text, every file's completion marker carrying
the hash of its current text and the number of its records, and the same failure (the binary file) reported.

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

pytest.importorskip("chromadb")
pytest.importorskip("bm25s")

pytestmark = pytest.mark.timeout(420)

STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])
# Whole packages, copied in this order until the tree has at least MIN_FILES Python files.
PACKAGES = ("lib2to3", "email", "json", "concurrent", "ctypes", "xml", "importlib", "logging", "unittest", "asyncio")
MIN_FILES = 200
RUN_TIMEOUT = 240  # seconds, one indexing run

DRIVER = textwrap.dedent(
    '''
    """Index a tree into an embedded Chroma; count (and optionally die before) the store's low-level writes."""
    import json
    import os
    import signal
    import sys

    from llmc_splitters.retrieval import ChromaStore, CodeIndex, HashingEmbedding
    from llmc_splitters.retrieval import index as index_module


    class _Counted:
        """The Chroma collection, with every upsert/delete counted in the progress file (and maybe fatal)."""

        def __init__(self, col, progress, kill_at):
            self._col, self._progress, self._kill_at = col, progress, kill_at

        def __getattr__(self, name):
            return getattr(self._col, name)

        def _step(self, kind, fn, kw):
            markers = sum(1 for m in kw.get("metadatas") or () if m.get("is_root"))
            label = f"{kind}-marker" if markers else kind
            counts = _COUNTS
            counts[label] = counts.get(label, 0) + 1
            if self._kill_at and self._kill_at == (label, counts[label]):
                os.kill(os.getpid(), signal.SIGKILL)  # dies right before this write
            out = fn(**kw)
            counts["markers"] = counts.get("markers", 0) + markers
            with open(self._progress, "a") as fh:
                fh.write(json.dumps(counts) + "\\n")
            return out

        def upsert(self, **kw):
            return self._step("upsert", self._col.upsert, kw)

        def delete(self, **kw):
            return self._step("delete", self._col.delete, kw)


    _COUNTS = {}


    class CountedStore(ChromaStore):
        progress = None
        kill_at = None
        batch = 0

        @property
        def collection(self):
            return _Counted(ChromaStore.collection.fget(self), self.progress, self.kill_at)

        def _batch_size(self):
            return self.batch or super()._batch_size()


    def dump(idx, store):
        """Every record, read back from Chroma (not from the index's memory)."""
        records = [
            {"id": r.id, "document": r.document, "path": r.metadata.get("path"), "role": r.metadata.get("role"),
             "is_root": bool(r.metadata.get("is_root")), "file_hash": r.metadata.get("file_hash"),
             "n_records": r.metadata.get("n_records"), "start_byte": r.metadata.get("start_byte"),
             "end_byte": r.metadata.get("end_byte"), "has_vector": r.embedding is not None}
            for r in store.records(embeddings=True)
        ]
        return {"records": records, "paths": idx.paths, "incomplete": sorted(idx._incomplete)}


    def main():
        store_path, out, tree = sys.argv[1:4]
        embedding = HashingEmbedding(64) if os.environ.get("LLMC_EMBED") == "1" else None
        store = CountedStore(path=store_path)
        if os.environ.get("LLMC_GROUP"):
            index_module._GROUP_FILES = int(os.environ["LLMC_GROUP"])  # smaller write groups: more kill points
        store.progress = os.environ["LLMC_PROGRESS"]
        kill = os.environ.get("LLMC_KILL_AT")  # e.g. "upsert-marker:2"
        if kill:
            label, n = kill.rsplit(":", 1)
            store.kill_at = (label, int(n))
        store.batch = int(os.environ.get("LLMC_BATCH", "0"))
        idx = CodeIndex(store, embedding=embedding, max_tokens=256)
        at_open = {"paths": len(idx.paths), "incomplete": sorted(idx._incomplete),
                   "incomplete_leaves": sum(len(idx.spans(p)) for p in idx._incomplete)}
        report = idx.index_directory(tree, workers=int(os.environ.get("LLMC_WORKERS", "1")))
        with open(out, "w") as fh:
            json.dump({"at_open": at_open, "added": report.added, "updated": report.updated,
                       "unchanged": report.unchanged, "removed": report.removed, "failed": report.failed,
                       "dump": dump(idx, store)}, fh)


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


# Small write groups and batches: a group of 6 files is written in many store calls (bodies, then markers in two
# batches), so a kill can land between any two of them.
SMALL = {"LLMC_GROUP": "6", "LLMC_BATCH": "4"}


@pytest.fixture(scope="module")
def small_reference(workdir, small_tree) -> dict:
    """A clean, uninterrupted index of the small tree: its report and records."""
    return _run(workdir, workdir / "small-clean", small_tree, **SMALL)  # type: ignore[return-value]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["ANONYMIZED_TELEMETRY"] = "False"
    for k in ("LLMC_KILL_AT", "LLMC_BATCH", "LLMC_WORKERS", "LLMC_EMBED", "LLMC_GROUP"):
        env.pop(k, None)
    env.update(extra)
    return env


def _run(workdir: pathlib.Path, store: pathlib.Path, tree: pathlib.Path, *, expect_kill: bool = False,
         **env: str) -> dict | None:
    """Run the driver to completion (or to its own SIGKILL); return its report and a dump of the store read back
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
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.read_text())


def _kill_leftovers(pgid: int) -> None:
    """Kill what is left of a process group this test started (a killed run's pool workers)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_and_kill_after(workdir: pathlib.Path, store: pathlib.Path, tree: pathlib.Path, markers: int,
                        **env: str) -> dict:
    """Start an indexing run and SIGKILL it (its whole process group) once ``markers`` files are stored."""
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
            if last.get("markers", 0) >= markers:
                break
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be killed: rc={proc.returncode} "
                            f"{proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.01)
        else:
            pytest.fail("the run did not reach the kill point in time")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        _kill_leftovers(proc.pid)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists(), "the killed run finished anyway"
    return last


def _last_progress(progress: pathlib.Path) -> dict | None:
    """The last complete line of a progress file being appended to."""
    lines = progress.read_text().split("\n")[:-1]
    return json.loads(lines[-1]) if lines else None


# ------------------------------------------------------------------------------------------------------- checks


def _texts(tree: pathlib.Path) -> dict[str, str]:
    """What the index must hold: every .py file's decoded text (the binary file excluded)."""
    from llmc_splitters.chunking.inputs import binary_reason, decode

    out = {}
    for p in sorted(tree.rglob("*.py")):
        data = p.read_bytes()
        if binary_reason(data):
            continue
        out[p.relative_to(tree).as_posix()] = decode(data).text
    return out


def _check_complete(dump: dict, tree: pathlib.Path, reference: dict) -> None:
    records = dump["records"]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "duplicate record ids"
    assert dump["incomplete"] == [], f"files left incomplete: {dump['incomplete'][:5]}"
    texts = _texts(tree)
    assert sorted(dump["paths"]) == sorted(texts), "indexed files differ from the tree"
    # Same records, same texts as a clean single run: nothing missing, nothing stale, nothing duplicated.
    got = {(r["id"], r["document"]) for r in records}
    want = {(r["id"], r["document"]) for r in reference["records"]}
    assert got == want, f"{len(want - got)} records missing, {len(got - want)} extra"
    by_path: dict[str, list[dict]] = {}
    for r in records:
        by_path.setdefault(r["path"], []).append(r)
    for path, text in texts.items():
        recs = by_path[path]
        roots = [r for r in recs if r["is_root"]]
        assert len(roots) == 1, f"{path}: {len(roots)} completion markers"
        assert roots[0]["file_hash"] == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), path
        assert roots[0]["n_records"] == len(recs), f"{path}: marker counts {roots[0]['n_records']}, {len(recs)} stored"
        leaves = sorted((r for r in recs if r["role"] == "leaf"), key=lambda r: r["start_byte"])
        assert "".join(r["document"] for r in leaves) == text, f"{path}: leaves do not tile the file"
        assert all(a["end_byte"] == b["start_byte"] for a, b in zip(leaves, leaves[1:])), f"{path}: leaves overlap"
    assert all(r["has_vector"] for r in records)


@pytest.fixture(scope="module")
def big_reference(workdir, big_tree) -> dict:
    """A clean, uninterrupted index of the big tree: its report and records."""
    ref = _run(workdir, workdir / "big-clean", big_tree)
    assert ref is not None
    assert list(ref["failed"]) == ["zz_bad/blob.py"] and "binary" in ref["failed"]["zz_bad/blob.py"]
    assert len(ref["added"]) == len(_texts(big_tree)) >= MIN_FILES
    assert ref["dump"]["incomplete"] == []
    return ref


# ------------------------------------------------------------------------------------------------------- tests


def test_killed_from_outside_then_resumed(workdir, big_tree, big_reference):
    """SIGKILL at an arbitrary point after 40 files are stored; the next run completes the index exactly."""
    store = workdir / "big-killed"
    reached = _run_and_kill_after(workdir, store, big_tree, markers=40)
    assert reached["markers"] >= 40
    resumed = _run(workdir, store, big_tree)
    assert resumed is not None
    n_files = len(_texts(big_tree))
    # The files stored before the kill are skipped as unchanged, the rest are indexed now.
    assert len(resumed["unchanged"]) >= 40 and resumed["added"], resumed["at_open"]
    assert len(resumed["unchanged"]) + len(resumed["added"]) == n_files
    assert list(resumed["failed"]) == ["zz_bad/blob.py"]
    _check_complete(resumed["dump"], big_tree, big_reference["dump"])


@pytest.mark.parametrize(
    "kill_at",
    [
        "upsert:3",  # between two batches of the records of the first group of files (no marker yet)
        "upsert-marker:2",  # the group's records stored, 4 of its 6 completion markers written
        "upsert-marker:3",  # the first group complete, the second group's records stored, no marker of it yet
    ],
)
def test_killed_between_writes_of_one_group(workdir, small_tree, small_reference, kill_at):
    """Die right before a chosen store write; the next run completes the index exactly."""
    store = workdir / f"small-killed-{kill_at.replace(':', '-')}"
    _run(workdir, store, small_tree, expect_kill=True, LLMC_KILL_AT=kill_at, **SMALL)
    resumed = _run(workdir, store, small_tree, **SMALL)
    assert resumed is not None
    if kill_at.startswith("upsert-marker"):
        # Files with records but no marker were hidden from search at open, and redone; the others were kept.
        assert resumed["at_open"]["incomplete"] and resumed["at_open"]["incomplete_leaves"] == 0
        assert len(resumed["unchanged"]) in (4, 6), resumed["unchanged"]
    assert sorted(resumed["added"] + resumed["unchanged"]) == sorted(small_reference["added"])
    _check_complete(resumed["dump"], small_tree, small_reference["dump"])


def test_update_killed_after_stale_records_were_deleted(workdir, small_tree, tmp_path):
    """Index, then edit, add and delete files; kill the update right before the stale records of the first group
    are deleted (old markers already withdrawn, new records stored); resume. With a deterministic embedding, so
    vectors are written too. The index then equals a clean index of the edited tree: no record of an old version
    is left."""
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
    _run(workdir, store, tree, expect_kill=True, LLMC_KILL_AT="delete:2", **env)
    resumed = _run(workdir, store, tree, **env)
    assert resumed is not None
    assert resumed["at_open"]["incomplete"], "the kill should have left files incomplete"
    assert py[6].relative_to(tree).as_posix() in resumed["removed"]
    clean = _run(workdir, workdir / "update-clean", tree, **env)
    assert clean is not None
    _check_complete(resumed["dump"], tree, clean["dump"])


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
        while time.monotonic() < deadline and proc.poll() is None:
            if (_last_progress(progress) or {}).get("markers", 0) >= 40:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        workers = _children(proc.pid)
        assert len(workers) >= 2, workers  # the spawn pool (and its resource tracker)
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
