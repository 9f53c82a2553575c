"""Ray Data ingestion into Milvus Lite (the real engine), through the driver's one writer: the scenarios of
``test_ray_ingest.py`` (same rows as a local run, idempotent re-runs, incremental updates by blob SHA, deletes, a
driver SIGKILLed part-way that resumes), lexical only, on a real local Ray cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("tantivy")
pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

from tests.fakes import commit, git  # noqa: E402

from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import run_local  # noqa: E402
from llmc_splitters.ingest.ray import run_ray  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, HashingEmbedding, MilvusStore  # noqa: E402
from llmc_splitters.retrieval.milvus.client import unpack_text  # noqa: E402

pytestmark = pytest.mark.slow

S = IngestSettings(max_tokens=128)
STDLIB = Path(sysconfig.get_paths()["stdlib"])
TREE = ("textwrap.py", "shlex.py", "base64.py", "heapq.py", "json/decoder.py", "json/encoder.py", "bisect.py")


@pytest.fixture(scope="module")
def cluster():
    ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    try:
        yield ctx.address_info["address"]
    finally:
        ray.shutdown()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in TREE:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, root / rel)
    git(root, "init", "-q")
    commit(root, "init")
    return root


def _plan(repo: Path, state: ManifestState, *, full: bool = False):
    return state.plan(filter_manifest(git_manifest(repo, repository="demo")), fingerprint=settings_fingerprint(S),
                      full=full)


def _ray(repo: Path, state: ManifestState, db: str, **kw):
    store = MilvusStore(db, collection="ray")
    try:
        return run_ray(_plan(repo, state), index=store, roots=str(repo), settings=S, state=state, files_per_batch=2,
                       chunk_num_cpus=0.5, progress=None, **kw)
    finally:
        store.close()  # Milvus Lite: one process holds the file at a time


def _expected(repo: Path) -> set[tuple]:
    out = set()
    for e in filter_manifest(git_manifest(repo, repository="demo")):
        res = chunk_file("demo", e.path, (repo / e.path).read_bytes(), S)
        if res.prepared is not None:
            out |= {(r.span.id, r.role, r.span.path, None if r.role == "parent" else r.span.text)
                    for r in res.prepared.write.rows}
    return out


def _rows(db: str) -> set[tuple]:
    """Every span row in the collection: ``(id, role, path, text)`` (parents keep no text)."""
    store = MilvusStore(db, collection="ray")
    try:
        CodeIndex(store=store, create=False)
        got = [(r["id"], r["role"], r["path"], None if r["role"] == "parent" else unpack_text(r["text"]))
               for r in store.cols.iterate(store.cols.rows, "", ["id", "role", "path", "text"])]
        assert len(got) == len(set(got)), "one row per id"
        return set(got)
    finally:
        store.close()


@pytest.mark.timeout(300)
def test_ray_into_milvus_equals_a_local_run_and_follows_edits(cluster, repo, tmp_path) -> None:
    db = str(tmp_path / "ray.db")
    state = ManifestState(tmp_path / "state")
    first = _ray(repo, state, db)
    assert first.files_planned == len(TREE)
    expected = _expected(repo)
    assert _rows(db) == expected
    local_db = str(tmp_path / "local.db")
    store = MilvusStore(local_db, collection="ray")
    run_local(_plan(repo, ManifestState(tmp_path / "local-state")), index=store, roots=str(repo), settings=S,
              workers=1, progress=None)
    store.close()
    assert _rows(local_db) == expected
    # Running again plans nothing and changes nothing; with the baseline thrown away it rewrites the same rows.
    again = _ray(repo, state, db)
    assert again.files_planned == 0 and _rows(db) == expected
    assert _ray(repo, ManifestState(tmp_path / "fresh-state"), db).files_planned == len(TREE)
    assert _rows(db) == expected
    # One file changed (a new blob SHA), one deleted: only they are touched.
    p = repo / "textwrap.py"
    p.write_text(p.read_text() + "\n\ndef appended_later():\n    return 'later'\n")
    (repo / "heapq.py").unlink()
    commit(repo, "edit")
    edit = _ray(repo, state, db)
    assert edit.files_planned == 1 and edit.files_deleted == 1
    assert _rows(db) == _expected(repo)
    idx = CodeIndex(store=MilvusStore(db, collection="ray"), create=False)
    assert idx.search("appended_later").hits[0].span.name == "appended_later"
    assert "heapq.py" not in idx.paths
    idx.store.close()


_DRIVER = textwrap.dedent("""
    import sys, time
    import ray
    import llmc_splitters.ingest.writer as writer
    from llmc_splitters.ingest import IngestSettings, settings_fingerprint
    from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest
    from llmc_splitters.ingest.ray import run_ray
    from llmc_splitters.retrieval import MilvusStore
    from llmc_splitters.retrieval.milvus import spans

    address, repo, state_dir, db = sys.argv[1:5]
    writer._GROUP_FILES = 1
    slow = spans.MilvusSpans.write_files
    def write_files(self, writes, pending):
        slow(self, writes, pending=pending)
        time.sleep(0.5)
    spans.MilvusSpans.write_files = write_files
    ray.init(address=address, log_to_driver=False)
    S = IngestSettings(max_tokens=128)
    state = ManifestState(state_dir)
    plan = state.plan(filter_manifest(git_manifest(repo, repository="demo")), fingerprint=settings_fingerprint(S))
    def progress(stage, summary):
        if stage == "write":
            print(f"WRITE {summary.files_done}", flush=True)
    run_ray(plan, index=MilvusStore(db, collection="ray"), roots=repo, settings=S, state=state, files_per_batch=1,
            chunk_num_cpus=0.5, progress=progress)
    print("DONE", flush=True)
""")


@pytest.mark.timeout(300)
def test_a_killed_driver_resumes_with_no_duplicate_and_no_missing_row(cluster, repo, tmp_path) -> None:
    db = str(tmp_path / "kill.db")
    state_dir = tmp_path / "state"
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, cluster, str(repo), str(state_dir), db],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    assert driver.stdout is not None
    lines = []
    try:
        for line in driver.stdout:
            lines.append(line)
            if line.startswith("WRITE"):
                break
        else:
            pytest.fail("the driver ended before writing:\n" + "".join(lines[-50:]))
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    assert driver.returncode == -signal.SIGKILL
    time.sleep(3)
    expected = _expected(repo)
    assert _rows(db) != expected, "the run was killed part-way"
    assert ManifestState(state_dir).pending_keys()
    _ray(repo, ManifestState(state_dir), db)
    assert _rows(db) == expected, "no duplicate, no missing, no stale row"
    assert not (state_dir / "pending.json").exists()


def test_vectors_from_ray_actors_into_milvus_are_refused_with_the_way_on(repo, tmp_path) -> None:
    state = ManifestState(tmp_path / "state")
    with pytest.raises(ConfigurationError, match="run_local"):
        run_ray(_plan(repo, state), index=MilvusStore(str(tmp_path / "x.db")), roots=str(repo), settings=S,
                embedding_factory=lambda: HashingEmbedding(32))
