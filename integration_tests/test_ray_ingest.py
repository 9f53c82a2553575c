"""Ray Data ingestion on a real local Ray cluster into a real Chroma server on localhost.

One Ray cluster (``num_cpus=2``; chunking tasks, embed actors and writer actors ask for fractions of a CPU so every
stage can run at once) and one ``chroma run`` server serve the whole module. Trees are a few standard-library
modules, so each Ray run takes seconds. Every test has a hard timeout.

What is shown:

* the Ray run and a plain local run (process pool) write the same ids, texts, metadata and vectors;
* running again (plain, and with the baseline thrown away) leaves the collection exactly as it was;
* changing one file re-embeds only that file's new texts (the embedding records its calls in a file, since the
  actors run in other processes);
* deleting a file removes every record of it;
* a driver SIGKILLed part-way and restarted ends with exactly the expected records: no duplicate, none missing,
  no stale version;
* a LangChain ``VectorStore`` (``langchain_chroma.Chroma`` on the server) plus a file docstore, built inside each
  worker from picklable factories, receives the same records and is searchable with ``code_index``.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.helpers import chroma_server as running_chroma

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("chromadb")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no usage report is sent anywhere
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local test cluster: no token file in the home directory
# The workers must import the counting embedding (this directory) and this checkout of the library.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

from tests.fakes import commit, git  # noqa: E402
from _ray_helpers import CountingEmbedding, chroma_vectorstore, embedded_texts, file_docstore  # noqa: E402

from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import ChromaSink, LangChainSink, run_local  # noqa: E402
from llmc_splitters.ingest.ray import run_ray  # noqa: E402

pytestmark = pytest.mark.slow

S = IngestSettings(max_tokens=128)
STDLIB = Path(sysconfig.get_paths()["stdlib"])
TREE = ("textwrap.py", "shlex.py", "base64.py", "heapq.py", "json/decoder.py", "json/encoder.py", "bisect.py",
        "colorsys.py")


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory):
    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address


@pytest.fixture(scope="module")
def cluster():
    """A real local Ray cluster with two CPUs and no dashboard; its address, for driver subprocesses."""
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
    (root / "assets").mkdir()
    (root / "assets" / "blob.raw").write_bytes(b"\x00\x01\x02 binary")  # not excluded by name: skipped as binary
    git(root, "init", "-q")
    commit(root, "init")
    return root


@pytest.fixture
def collection(request) -> str:
    return f"t_{request.node.name[:40]}_{os.getpid()}".replace("[", "_").replace("]", "_")


# -------------------------------------------------------------------------------------------------- helpers


def _plan(repo: Path, state: ManifestState, *, full: bool = False):
    return state.plan(filter_manifest(git_manifest(repo, repository="demo")), fingerprint=settings_fingerprint(S),
                      full=full)


def _ray_run(repo: Path, state: ManifestState, sink, log: Path, *, full: bool = False, **kw):
    return run_ray(
        _plan(repo, state, full=full), sink, roots=str(repo), settings=S,
        embedding_factory=functools.partial(CountingEmbedding, str(log), 32), state=state, files_per_batch=2,
        chunk_num_cpus=0.5, embed_num_cpus=0.5, write_num_cpus=0.25, embed_batch_size=64, write_batch_size=64,
        progress=None, **kw,
    )


def _local_run(repo: Path, state: ManifestState, sink, log: Path):
    return run_local(_plan(repo, state), sink, roots=str(repo), settings=S,
                     embedding_factory=functools.partial(CountingEmbedding, str(log), 32), state=state, workers=2,
                     files_per_batch=2, progress=None)


def _expected(repo: Path) -> dict[str, tuple[str, str]]:
    """Record id -> (role, text) for the committed tree, straight from chunk_file (no engine)."""
    out = {}
    for e in filter_manifest(git_manifest(repo, repository="demo")):
        res = chunk_file("demo", e.path, (repo / e.path).read_bytes(), S)
        out.update({r["id"]: (r["role"], r["text"]) for r in res.rows})
    return out


def _stored(sink: ChromaSink, *, embeddings: bool = False) -> dict[str, dict]:
    conn = sink.connect(None)
    got = conn._get(include=["documents", "metadatas", *(["embeddings"] if embeddings else [])])  # noqa: SLF001
    assert len(got["ids"]) == len(set(got["ids"]))
    out = {}
    for i, rid in enumerate(got["ids"]):
        rec = {"text": got["documents"][i], "meta": got["metadatas"][i]}
        if embeddings:
            rec["vector"] = [round(float(x), 5) for x in got["embeddings"][i]]
        out[rid] = rec
    return out


def _as_expected(stored: dict[str, dict]) -> dict[str, tuple[str, str]]:
    return {rid: (r["meta"]["role"], r["text"]) for rid, r in stored.items()}


def _no_duplicate_spans(stored: dict[str, dict]) -> None:
    keys = [(r["meta"]["path"], r["meta"]["role"], r["meta"].get("kind"), r["meta"].get("start_byte"),
             r["meta"].get("end_byte"), r["meta"].get("target_id")) for r in stored.values()]
    assert len(keys) == len(set(keys)), "one record per span: no span stored under two ids"


# ---------------------------------------------------------------------------------------------------- tests


@pytest.mark.timeout(300)
def test_ray_and_local_runs_write_the_same_records(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    a = ChromaSink(host=host, port=port, collection=collection + "_ray")
    b = ChromaSink(host=host, port=port, collection=collection + "_local")
    t = time.perf_counter()
    summary = _ray_run(repo, ManifestState(tmp_path / "sa"), a, tmp_path / "a.log")
    ray_seconds = time.perf_counter() - t
    _local_run(repo, ManifestState(tmp_path / "sb"), b, tmp_path / "b.log")
    ray_records, local_records = _stored(a, embeddings=True), _stored(b, embeddings=True)
    assert ray_records == local_records, "same ids, texts, metadata and vectors"
    assert _as_expected(ray_records) == _expected(repo)
    _no_duplicate_spans(ray_records)
    assert (summary.files_planned, summary.files_chunked, summary.files_skipped) == (9, 8, 1)
    assert summary.reasons == {"skipped: binary": 1}
    assert summary.spans_written == len(ray_records)
    assert summary.spans_embedded == len(embedded_texts(str(tmp_path / "a.log")))
    print(f"\n{summary}\nray run: {ray_seconds:.1f} s")


@pytest.mark.timeout(240)
def test_running_again_changes_nothing(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    log = tmp_path / "embed.log"
    _ray_run(repo, state, sink, log)
    before = _stored(sink, embeddings=True)
    n_embedded = len(embedded_texts(str(log)))
    again = _ray_run(repo, state, sink, log)
    assert (again.files_planned, again.spans_written) == (0, 0)
    # Even with the last run's manifest thrown away, the same ids are upserted: nothing is duplicated.
    full = _ray_run(repo, state, sink, log, full=True)
    assert full.files_planned == 9 and full.spans_written == len(before)
    assert full.spans_embedded == 0 and full.spans_cached > 0, "every vector comes from the cache"
    assert len(embedded_texts(str(log))) == n_embedded
    after = _stored(sink, embeddings=True)
    assert after == before
    assert sink.connect(None).count() == len(before)


@pytest.mark.timeout(240)
def test_changing_one_file_reembeds_only_its_spans(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    _local_run(repo, state, sink, tmp_path / "first.log")  # same records as a Ray run (see the first test)
    before = _stored(sink)
    old_hashes = {r["meta"].get("content_hash") for r in before.values()}
    path = repo / "textwrap.py"
    path.write_text(path.read_text().replace("def dedent(text):", "def dedent(text):\n    # edited", 1))
    commit(repo, "edit")
    log = tmp_path / "edit.log"
    summary = _ray_run(repo, state, sink, log)
    assert (summary.files_planned, summary.files_changed, summary.files_deleted) == (1, 1, 0)
    texts = embedded_texts(str(log))
    assert texts, "the edited span is embedded"
    assert all(t.startswith(("demo/textwrap.py", "File: demo/textwrap.py")) for t in texts), texts
    after = _stored(sink)
    # The texts of the edited file that the store held no vector for (the edited span, and the file summary,
    # whose symbol list shows the edited signature line).
    fresh = {r["meta"]["content_hash"] for r in after.values()
             if r["meta"]["path"] == "demo/textwrap.py" and r["meta"]["role"] in ("leaf", "summary")
             and r["meta"]["content_hash"] not in old_hashes}
    assert len(texts) == summary.spans_embedded == len(fresh), "exactly the texts the store had no vector for"
    assert summary.spans_cached > 0
    assert _as_expected(after) == _expected(repo)
    unchanged = {rid: r for rid, r in before.items() if r["meta"]["path"] != "demo/textwrap.py"}
    assert {rid: after[rid] for rid in unchanged} == unchanged, "other files' records are untouched"


@pytest.mark.timeout(240)
def test_deleting_a_file_removes_its_spans(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    _local_run(repo, state, sink, tmp_path / "first.log")
    n_shlex = sum(1 for r in _stored(sink).values() if r["meta"]["path"] == "demo/shlex.py")
    assert n_shlex > 0
    (repo / "shlex.py").unlink()
    commit(repo, "delete")
    log = tmp_path / "delete.log"
    summary = _ray_run(repo, state, sink, log)
    assert (summary.files_planned, summary.files_deleted, summary.spans_deleted) == (0, 1, n_shlex)
    after = _stored(sink)
    assert not [r for r in after.values() if "shlex" in r["meta"]["path"]]
    assert _as_expected(after) == _expected(repo)
    assert embedded_texts(str(log)) == []


@pytest.mark.timeout(300)
def test_a_killed_run_restarts_with_no_duplicate_and_no_missing_span(
    cluster, chroma_server, repo, collection, tmp_path
) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state_dir = tmp_path / "state"
    _local_run(repo, ManifestState(state_dir), sink, tmp_path / "first.log")
    # A run that changes, adds and deletes files...
    for rel in ("textwrap.py", "base64.py", "json/decoder.py"):
        p = repo / rel
        p.write_text(p.read_text() + "\n\ndef appended_later():\n    return 'later'\n")
    (repo / "extra.py").write_text("def extra():\n    return 1\n")
    (repo / "heapq.py").unlink()
    commit(repo, "edit")
    expected = _expected(repo)
    log = tmp_path / "killed.log"
    # ... driven by its own process, with a slow model, killed once some batches are written.
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "_ray_driver.py"), cluster, str(repo), str(state_dir), host, str(port),
         collection, str(log), "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
    )
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
    time.sleep(3)  # let Ray reap the dead job's workers
    partial = _stored(sink)
    assert _as_expected(partial) != expected, "the run was killed part-way"
    assert ManifestState(state_dir).pending_keys(), "the dead run's paths are on record"
    done = _ray_run(repo, ManifestState(state_dir), sink, tmp_path / "restart.log")
    assert done.files_planned == 4 and done.files_deleted == 1
    final = _stored(sink)
    assert _as_expected(final) == expected, "no duplicate, no missing, no stale record"
    _no_duplicate_spans(final)
    assert not (state_dir / "pending.json").exists()


@pytest.mark.timeout(240)
def test_langchain_vectorstore_sink_built_in_the_workers(cluster, chroma_server, repo, collection, tmp_path) -> None:
    pytest.importorskip("langchain_chroma")
    pytest.importorskip("langchain_classic")
    from llmc_splitters.retrieval import CodeRetriever
    from llmc_splitters.retrieval.vectorstore import code_index

    host, port = chroma_server
    docs = tmp_path / "docstore"
    sink = LangChainSink(functools.partial(chroma_vectorstore, host, port, collection),
                         functools.partial(file_docstore, str(docs)))
    state = ManifestState(tmp_path / "state")
    summary = run_ray(_plan(repo, state), sink, roots=str(repo), settings=S, state=state, files_per_batch=2,
                      chunk_num_cpus=0.5, write_num_cpus=0.5, write_batch_size=64, progress=None)
    assert summary.files_chunked == 8 and summary.spans_written == len(_expected(repo))
    vs, ds = chroma_vectorstore(host, port, collection), file_docstore(str(docs))
    keys = list(ds.yield_keys(prefix="llmc/r/"))
    stored = {k.rsplit("/", 1)[1]: (d.metadata["role"], d.page_content) for k, d in zip(keys, ds.mget(keys))}
    assert stored == _expected(repo)
    n_searched = sum(1 for role, _ in stored.values() if role in ("leaf", "summary"))
    assert vs._collection.count() == n_searched == summary.spans_embedded  # noqa: SLF001
    r = CodeRetriever(index=code_index(vs, ds, max_tokens=128), k=1)
    hit = r.search("split a string using shell-like syntax", k=1).hits[0].span
    assert hit.path == "demo/shlex.py"
