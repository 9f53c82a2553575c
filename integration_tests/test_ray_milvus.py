"""Ray Data ingestion into Milvus (the real engine), on a real local Ray cluster: the scenarios of
``test_ray_ingest.py`` (same rows as a local run, idempotent re-runs, incremental updates by blob SHA, deletes, a
driver SIGKILLed part-way that resumes)

* into a Milvus Lite file, through the driver's one writer, lexical only;
* into a Milvus server (Milvus Lite's gRPC server, ``python -m milvus_lite server``, in its own process on a free
  localhost port), written by the Ray workers: lexical, and with vectors computed by the embed actors. The driver
  of these runs is this test process, with ``Collections.upsert`` recorded: it never writes a span row.
"""

from __future__ import annotations

import functools
import os
import shutil
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

from _ray_helpers import CountingEmbedding, embedded_texts, kill_at_first_write  # noqa: E402
from tests.fakes import commit, git  # noqa: E402
from tests.helpers import milvus_server  # noqa: E402

from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import run_local  # noqa: E402
from llmc_splitters.ingest.ray import run_ray  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, HashingEmbedding, MilvusStore  # noqa: E402
from llmc_splitters.retrieval.storage.milvus.client import unpack_text  # noqa: E402

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


def _rows(db: str, collection: str = "ray", fields: tuple[str, ...] = ()) -> set[tuple]:
    """Every span row in the collection: ``(id, role, path, text, *fields)`` (parents keep no text)."""
    store = MilvusStore(db, collection=collection)
    try:
        store.open("none", None, create=False)
        got = [(r["id"], r["role"], r["path"], None if r["role"] == "parent" else unpack_text(r["text"]),
                *(tuple(r[f]) if isinstance(r[f], list) else r[f] for f in fields))
               for r in store.cols.iterate(store.cols.rows, "", ["id", "role", "path", "text", *fields])]
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
    from llmc_splitters.retrieval.storage.milvus import spans

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
    kill_at_first_write([sys.executable, "-c", _DRIVER, cluster, str(repo), str(state_dir), db])
    expected = _expected(repo)
    assert _rows(db) != expected, "the run was killed part-way"
    assert ManifestState(state_dir).pending_keys()
    _ray(repo, ManifestState(state_dir), db)
    assert _rows(db) == expected, "no duplicate, no missing, no stale row"
    assert not (state_dir / "pending.json").exists()


def test_vectors_from_ray_actors_into_a_milvus_lite_file_are_refused_with_the_way_on(repo, tmp_path) -> None:
    state = ManifestState(tmp_path / "state")
    with pytest.raises(ConfigurationError, match="run_local"):
        run_ray(_plan(repo, state), index=MilvusStore(str(tmp_path / "x.db")), roots=str(repo), settings=S,
                embedding_factory=lambda: HashingEmbedding(32))


# ------------------------------------------------------------------------------------------- into a Milvus server

ROW_FIELDS = ("file", "dirs", "kind", "language", "name", "tail", "parent_id", "embed_hash", "start_byte", "end_byte",
              "start_line", "end_line", "token_count", "metadata", "terms")
QUESTIONS = ("how is text wrapped to a width", "split a shell command line into tokens", "decode base64 data",
             "insert into a sorted list", "parse a JSON document")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with milvus_server(tmp_path_factory.mktemp("milvus")) as uri:
        yield uri


@pytest.fixture
def driver_writes(monkeypatch):
    """The collections this process (the driver) upserts into, in order."""
    from llmc_splitters.retrieval.storage.milvus.client import Collections

    seen: list[str] = []
    real = Collections.upsert

    def upsert(self, collection, rows):
        seen.append(collection)
        return real(self, collection, rows)

    monkeypatch.setattr(Collections, "upsert", upsert)
    return seen


def _ray_server(repo: Path, state: ManifestState, uri: str, collection: str, **kw):
    store = MilvusStore(uri, collection=collection)
    try:
        return run_ray(_plan(repo, state), index=store, roots=str(repo), settings=S, state=state, files_per_batch=2,
                       chunk_num_cpus=0.5, embed_num_cpus=0.5, write_batch_size=40, progress=None, **kw)
    finally:
        store.close()


def _local_server(repo: Path, tmp_path: Path, uri: str, collection: str, **kw):
    store = MilvusStore(uri, collection=collection)
    try:
        return run_local(_plan(repo, ManifestState(tmp_path / f"{collection}-state")), index=store, roots=str(repo),
                         settings=S, workers=1, progress=None, **kw)
    finally:
        store.close()


def _leaves(uri: str, collection: str, embedding=None) -> list[list[tuple[str, int, int]]]:
    """The leaves a retriever on the collection returns for :data:`QUESTIONS`."""
    from llmc_splitters.retrieval import CodeRetriever

    store = MilvusStore(uri, collection=collection)
    try:
        r = CodeRetriever(store=store, embedding=embedding, max_tokens=128, k=4)
        return [[(h.span.path, h.span.start_line, h.span.end_line) for h in r.retrieve(q).hits] for q in QUESTIONS]
    finally:
        store.close()


def _same_answers(leaves: list[list[tuple[str, int, int]]], local: list[list[tuple[str, int, int]]]) -> None:
    """The same rows answer the same: the best hit, and all but one of the page. Milvus keeps BM25's statistics per
    segment, and rows the workers wrote in batches of 40 lie in other segments than one writer's, so near-ties below
    the best hit may come in another order (1 run in 3 of the dense test did)."""
    assert all(leaves) and len(leaves) == len(local)
    for mine, theirs in zip(leaves, local):
        assert mine[0] == theirs[0] and len(set(mine) & set(theirs)) >= len(theirs) - 1, (mine, theirs)


def _markers(uri: str, collection: str) -> set[str]:
    store = MilvusStore(uri, collection=collection)
    try:
        store.open("none", None, create=False)
        return set(store.spans.markers())
    finally:
        store.close()


@pytest.mark.timeout(300)
def test_ray_workers_write_into_a_milvus_server_and_follow_edits(cluster, server, repo, tmp_path,
                                                                driver_writes) -> None:
    state = ManifestState(tmp_path / "state")
    first = _ray_server(repo, state, server, "srv")
    assert first.files_planned == len(TREE) and first.files_done == len(TREE)
    assert "srv" not in driver_writes, "the workers write the span rows, the driver only the markers"
    assert "srv_files" in driver_writes
    expected = _expected(repo)
    assert _rows(server, "srv") == expected
    _local_server(repo, tmp_path, server, "srv_local")
    # Every field of every row is what the local run writes; a retriever returns the same leaves.
    assert _rows(server, "srv", ROW_FIELDS) == _rows(server, "srv_local", ROW_FIELDS)
    assert _markers(server, "srv") == _markers(server, "srv_local") == {
        f"demo/{p}" for p in TREE}
    _same_answers(_leaves(server, "srv"), _leaves(server, "srv_local"))
    # Running again plans nothing and writes nothing; with the baseline thrown away it rewrites the same rows.
    driver_writes.clear()
    again = _ray_server(repo, state, server, "srv")
    assert again.files_planned == 0 and _rows(server, "srv") == expected
    assert driver_writes == []
    assert _ray_server(repo, ManifestState(tmp_path / "fresh-state"), server, "srv").files_planned == len(TREE)
    assert _rows(server, "srv") == expected
    # One file changed (a new blob SHA), one deleted: only they are touched, and no row of the old version is left.
    p = repo / "textwrap.py"
    p.write_text(p.read_text() + "\n\ndef appended_later():\n    return 'later'\n")
    (repo / "heapq.py").unlink()
    commit(repo, "edit")
    edit = _ray_server(repo, state, server, "srv")
    assert edit.files_planned == 1 and edit.files_deleted == 1
    assert _rows(server, "srv") == _expected(repo)
    assert "demo/heapq.py" not in _markers(server, "srv")
    store = MilvusStore(server, collection="srv")
    idx = CodeIndex(store=store, create=False)
    assert idx.search("appended_later").hits[0].span.name == "appended_later"
    store.close()


@pytest.mark.timeout(300)
def test_vectors_from_the_embed_actors_go_into_the_server_rows(cluster, server, repo, tmp_path,
                                                               driver_writes) -> None:
    log = tmp_path / "embedded.log"
    factory = functools.partial(CountingEmbedding, str(log), 32)
    state = ManifestState(tmp_path / "state")
    first = _ray_server(repo, state, server, "dense", embedding_factory=factory, embed_concurrency=1)
    assert first.files_done == len(TREE) and first.embedding == "counting:32"
    assert not {"dense", "dense_vectors"} & set(driver_writes), "rows and vectors are written by the workers"
    _local_server(repo, tmp_path, server, "dense_local", embedding_factory=functools.partial(CountingEmbedding,
                                                                                            str(tmp_path / "l.log"), 32))
    fields = (*ROW_FIELDS, "dense")
    assert _rows(server, "dense", fields) == _rows(server, "dense_local", fields)
    assert first.spans_embedded == len(set(embedded_texts(str(tmp_path / "l.log"))))
    model = CountingEmbedding(str(tmp_path / "q.log"), 32)
    _same_answers(_leaves(server, "dense", model), _leaves(server, "dense_local", model))
    # A full re-run embeds nothing: the embed actors find every vector in the server's cache.
    n = len(embedded_texts(str(log)))
    again = _ray_server(repo, ManifestState(tmp_path / "fresh"), server, "dense", embedding_factory=factory)
    assert again.files_done == len(TREE) and again.spans_embedded == 0
    assert len(embedded_texts(str(log))) == n
    assert _rows(server, "dense", fields) == _rows(server, "dense_local", fields)


def test_a_lexical_run_into_a_collection_with_vectors_is_refused(cluster, server, repo, tmp_path) -> None:
    store = MilvusStore(server, collection="dense_refused")
    CodeIndex(store=store, embedding=CountingEmbedding(str(tmp_path / "x.log"), 32))
    store.close()
    with pytest.raises(ConfigurationError, match="embedding_factory"):
        _ray_server(repo, ManifestState(tmp_path / "state"), server, "dense_refused")


@pytest.mark.timeout(300)
def test_a_killed_driver_resumes_into_the_server_with_no_duplicate_and_no_missing_row(cluster, server, repo,
                                                                                      tmp_path) -> None:
    state_dir = tmp_path / "state"
    kill_at_first_write([sys.executable, "-c", _DRIVER.replace('collection="ray"', 'collection="killed"'),
                         cluster, str(repo), str(state_dir), server])
    # The workers may have written every row; the driver committed only some files (markers) and no manifest.
    assert len(_markers(server, "killed")) < len(TREE), "the run was killed part-way"
    assert ManifestState(state_dir).pending_keys()
    _ray_server(repo, ManifestState(state_dir), server, "killed")
    assert _rows(server, "killed") == _expected(repo), "no duplicate, no missing, no stale row"
    assert _markers(server, "killed") == {f"demo/{p}" for p in TREE}
    assert not (state_dir / "pending.json").exists()
