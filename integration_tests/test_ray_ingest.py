"""Ray Data ingestion on a real local Ray cluster, vectors into a real Chroma server on localhost, the index into a
directory written by the driver.

One Ray cluster (``num_cpus=2``; chunking tasks, embed actors and vector writers ask for fractions of a CPU so every
stage can run at once) and one ``chroma run`` server serve the whole module. Trees are a few standard-library
modules, so each Ray run takes seconds. Every test has a hard timeout.

What is shown:

* the Ray run and a plain local run (process pool) write the same index (every column of every span row, every
  file marker) and the same vector records (ids, metadata, vectors); a lexical Ray run writes the index the serial
  ``CodeIndex`` writes;
* running again (plain, and with the baseline thrown away) leaves the index and the collection exactly as they
  were, every vector from the cache;
* changing one file re-embeds only that file's new texts (the embedding records its calls in a file, since the
  actors run in other processes);
* deleting a file removes every record of it;
* a driver SIGKILLed part-way and restarted ends with exactly the expected rows and exactly their vectors: no
  duplicate, none missing, no stale version;
* a LangChain ``VectorStore`` (``langchain_chroma.Chroma`` on the server), built inside each worker from a picklable
  factory, receives the searched rows and is searchable with ``code_index(vectorstore, path=index)``.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.helpers import chroma_server as running_chroma
from tests.helpers import index_contents, index_rows, index_sql, searched_ids

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no usage report is sent anywhere
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local test cluster: no token file in the home directory
# The workers must import the counting embedding (this directory) and this checkout of the library.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

from tests.fakes import commit, git  # noqa: E402
from _ray_helpers import CountingEmbedding, chroma_vectorstore, embedded_texts, kill_at_first_write  # noqa: E402

from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import ChromaSink, LangChainSink, run_local  # noqa: E402
from llmc_splitters.ingest.ray import run_ray  # noqa: E402
from llmc_splitters.retrieval import CodeIndex  # noqa: E402

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


def _ray_run(repo: Path, state: ManifestState, index: Path, sink, log: Path | None, *, full: bool = False, **kw):
    factory = functools.partial(CountingEmbedding, str(log), 32) if log is not None else None
    return run_ray(
        _plan(repo, state, full=full), sink, index=index, roots=str(repo), settings=S, embedding_factory=factory,
        state=state, files_per_batch=2, chunk_num_cpus=0.5, embed_num_cpus=0.5, write_num_cpus=0.25,
        embed_batch_size=64, write_batch_size=64, progress=None, **kw,
    )


def _local_run(repo: Path, state: ManifestState, index: Path, sink, log: Path):
    return run_local(_plan(repo, state), sink, index=index, roots=str(repo), settings=S,
                     embedding_factory=functools.partial(CountingEmbedding, str(log), 32), state=state, workers=2,
                     files_per_batch=2, progress=None)


def _expected(repo: Path) -> set[tuple]:
    """Span-store rows ``(id, role, path, text)`` of the committed tree, straight from chunk_file (no engine)."""
    out = set()
    for e in filter_manifest(git_manifest(repo, repository="demo")):
        res = chunk_file("demo", e.path, (repo / e.path).read_bytes(), S)
        if res.prepared is not None:
            out |= {(r.span.id, r.role, r.span.path, None if r.role == "parent" else r.span.text)
                    for r in res.prepared.write.rows}
    return out


def _vectors(sink: ChromaSink) -> dict[str, dict]:
    """Every record of the sink's collections (leaves, summaries): ``id -> {meta, vector}``."""
    client = sink.vectors().store.client
    out: dict[str, dict] = {}
    for name in (sink.collection, f"{sink.collection}_summaries"):
        got = client.get_collection(name).get(include=["metadatas", "embeddings"])
        for i, rid in enumerate(got["ids"]):
            assert rid not in out, "one record per id"
            out[rid] = {"meta": got["metadatas"][i], "vector": [round(float(x), 5) for x in got["embeddings"][i]]}
    return out


# ---------------------------------------------------------------------------------------------------- tests


@pytest.mark.timeout(300)
def test_ray_and_local_runs_write_the_same_records(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    a = ChromaSink(host=host, port=port, collection=collection + "_ray")
    b = ChromaSink(host=host, port=port, collection=collection + "_local")
    t = time.perf_counter()
    summary = _ray_run(repo, ManifestState(tmp_path / "sa"), tmp_path / "ia", a, tmp_path / "a.log")
    ray_seconds = time.perf_counter() - t
    _local_run(repo, ManifestState(tmp_path / "sb"), tmp_path / "ib", b, tmp_path / "b.log")
    assert index_contents(tmp_path / "ia") == index_contents(tmp_path / "ib"), "same rows, metadata, views and markers"
    assert index_rows(tmp_path / "ia") == _expected(repo)
    ray_vectors = _vectors(a)
    assert ray_vectors == _vectors(b), "same vector ids, metadata and vectors"
    assert set(ray_vectors) == searched_ids(tmp_path / "ia"), "a vector per searched row, nothing else"
    assert (summary.files_planned, summary.files_chunked, summary.files_skipped) == (9, 8, 1)
    assert summary.reasons == {"skipped: binary": 1}
    assert summary.spans_written == len(index_rows(tmp_path / "ia"))
    assert summary.spans_embedded == len(embedded_texts(str(tmp_path / "a.log")))
    # Lexical only: the index the serial CodeIndex writes.
    _ray_run(repo, ManifestState(tmp_path / "sl"), tmp_path / "lex", None, None)
    serial = CodeIndex(tmp_path / "serial", max_tokens=128)
    serial.index_texts({f"demo/{rel}": (repo / rel).read_text() for rel in TREE})
    serial.close()
    assert index_contents(tmp_path / "lex") == index_contents(tmp_path / "serial")
    print(f"\n{summary}\nray run: {ray_seconds:.1f} s")


@pytest.mark.timeout(240)
def test_running_again_changes_nothing(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    index = tmp_path / "index"
    log = tmp_path / "embed.log"
    _ray_run(repo, state, index, sink, log)
    before, vectors = index_contents(index), _vectors(sink)
    n_embedded = len(embedded_texts(str(log)))
    again = _ray_run(repo, state, index, sink, log)
    assert (again.files_planned, again.spans_written) == (0, 0)
    # Even with the last run's manifest thrown away, the same ids are written: nothing is duplicated.
    full = _ray_run(repo, state, index, sink, log, full=True)
    assert full.files_planned == 9 and full.spans_written == len(before[0])
    assert full.spans_embedded == 0 and full.spans_cached > 0, "every vector comes from the cache"
    assert len(embedded_texts(str(log))) == n_embedded
    assert index_contents(index) == before
    assert _vectors(sink) == vectors


@pytest.mark.timeout(240)
def test_changing_one_file_reembeds_only_its_spans(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    index = tmp_path / "index"
    _local_run(repo, state, index, sink, tmp_path / "first.log")  # the same index as a Ray run (see the first test)
    before = index_sql(index, "SELECT id, path, text, metadata, embed_hash FROM spans")
    old_hashes = {r[4] for r in before if r[4]}
    path = repo / "textwrap.py"
    path.write_text(path.read_text().replace("def dedent(text):", "def dedent(text):\n    # edited", 1))
    commit(repo, "edit")
    log = tmp_path / "edit.log"
    summary = _ray_run(repo, state, index, sink, log)
    assert (summary.files_planned, summary.files_changed, summary.files_deleted) == (1, 1, 0)
    texts = embedded_texts(str(log))
    assert texts, "the edited span is embedded"
    assert all(t.startswith(("demo/textwrap.py", "File: demo/textwrap.py")) for t in texts), texts
    # The texts of the edited file that no vector was cached for (the edited span, and the file summary, whose
    # symbol list shows the edited signature line).
    fresh = {h for (h,) in index_sql(index, "SELECT embed_hash FROM spans WHERE embed_hash IS NOT NULL")} - old_hashes
    assert len(texts) == summary.spans_embedded == len(fresh), "exactly the texts the cache had no vector for"
    assert summary.spans_cached > 0
    assert index_rows(index) == _expected(repo)
    assert set(_vectors(sink)) == searched_ids(index)
    after = index_sql(index, "SELECT id, path, text, metadata, embed_hash FROM spans")
    assert {r for r in after if r[1] != "demo/textwrap.py"} == {r for r in before if r[1] != "demo/textwrap.py"}, \
        "other files' rows are untouched"


@pytest.mark.timeout(240)
def test_deleting_a_file_removes_its_spans(cluster, chroma_server, repo, collection, tmp_path) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state = ManifestState(tmp_path / "state")
    index = tmp_path / "index"
    _local_run(repo, state, index, sink, tmp_path / "first.log")
    n_shlex = sum(1 for r in index_rows(index) if r[2] == "demo/shlex.py")
    assert n_shlex > 0
    (repo / "shlex.py").unlink()
    commit(repo, "delete")
    log = tmp_path / "delete.log"
    summary = _ray_run(repo, state, index, sink, log)
    assert (summary.files_planned, summary.files_deleted, summary.spans_deleted) == (0, 1, n_shlex)
    assert not [r for r in index_rows(index) if "shlex" in r[2]]
    assert not [v for v in _vectors(sink).values() if "shlex" in v["meta"]["file"]]
    assert index_rows(index) == _expected(repo)
    assert embedded_texts(str(log)) == []


@pytest.mark.timeout(300)
def test_a_killed_run_restarts_with_no_duplicate_and_no_missing_span(
    cluster, chroma_server, repo, collection, tmp_path
) -> None:
    host, port = chroma_server
    sink = ChromaSink(host=host, port=port, collection=collection)
    state_dir = tmp_path / "state"
    index = tmp_path / "index"
    _local_run(repo, ManifestState(state_dir), index, sink, tmp_path / "first.log")
    # A run that changes, adds and deletes files...
    for rel in ("textwrap.py", "base64.py", "json/decoder.py"):
        p = repo / rel
        p.write_text(p.read_text() + "\n\ndef appended_later():\n    return 'later'\n")
    (repo / "extra.py").write_text("def extra():\n    return 1\n")
    (repo / "heapq.py").unlink()
    commit(repo, "edit")
    expected = _expected(repo)
    log = tmp_path / "killed.log"
    # ... driven by its own process, with a slow model, killed once some files are written.
    kill_at_first_write([sys.executable, str(HERE / "_ray_driver.py"), cluster, str(repo), str(state_dir),
                         str(index), host, str(port), collection, str(log), "0.2"])
    assert index_rows(index) != expected, "the run was killed part-way"
    assert ManifestState(state_dir).pending_keys(), "the dead run's paths are on record"
    done = _ray_run(repo, ManifestState(state_dir), index, sink, tmp_path / "restart.log")
    assert done.files_planned == 4 and done.files_deleted == 1
    assert index_rows(index) == expected, "no duplicate, no missing, no stale row"
    assert set(_vectors(sink)) == searched_ids(index), "no duplicate, no missing, no stale vector"
    assert not (state_dir / "pending.json").exists()
    assert index_sql(index, "SELECT * FROM pending") == set() and index_sql(index, "SELECT * FROM stale") == set()


@pytest.mark.timeout(240)
def test_langchain_vectorstore_sink_built_in_the_workers(cluster, chroma_server, repo, collection, tmp_path) -> None:
    pytest.importorskip("langchain_chroma")
    from llmc_splitters.retrieval import CodeRetriever
    from llmc_splitters.retrieval.vectorstore import code_index

    host, port = chroma_server
    index = tmp_path / "index"
    sink = LangChainSink(functools.partial(chroma_vectorstore, host, port, collection))
    state = ManifestState(tmp_path / "state")
    summary = run_ray(_plan(repo, state), sink, index=index, roots=str(repo), settings=S, state=state,
                      files_per_batch=2, chunk_num_cpus=0.5, write_num_cpus=0.5, write_batch_size=64, progress=None)
    assert summary.files_chunked == 8 and summary.spans_written == len(_expected(repo))
    assert index_rows(index) == _expected(repo)
    vs = chroma_vectorstore(host, port, collection)
    stored = vs._collection.get(include=[])["ids"]  # noqa: SLF001
    assert set(stored) == searched_ids(index) and len(stored) == summary.spans_embedded
    r = CodeRetriever(index=code_index(vs, path=str(index), max_tokens=128), k=3)
    assert r.get_symbol("split")[0].path == "demo/shlex.py"
    # It answers as an index built serially over the same kind of store does. (The ranking itself is the
    # adapter's: langchain_chroma reports distances where VectorStoreAdapter expects similarities.)
    serial = CodeRetriever(index=code_index(chroma_vectorstore(host, port, collection + "_serial"),
                                            path=str(tmp_path / "serial"), max_tokens=128), k=3)
    serial.index_texts({f"demo/{rel}": (repo / rel).read_text() for rel in TREE})
    for q in ("split a string using shell-like syntax", "encode bytes to base85", "bisect insort"):
        assert [(h.span.id, h.rank) for h in r.search(q).hits] == [(h.span.id, h.rank) for h in serial.search(q).hits]


def test_bad_arguments_are_configuration_errors(repo, tmp_path) -> None:
    from llmc_splitters.errors import ConfigurationError

    state = ManifestState(tmp_path / "state")
    factory = functools.partial(CountingEmbedding, str(tmp_path / "e.log"), 32)
    with pytest.raises(ConfigurationError, match="index=DIR"):
        run_ray(_plan(repo, state), None, roots=str(repo), settings=S)
    with pytest.raises(ConfigurationError, match="needs a vector sink"):
        run_ray(_plan(repo, state), None, index=tmp_path / "i", roots=str(repo), settings=S, embedding_factory=factory)
    with pytest.raises(ConfigurationError, match="several processes"):
        run_ray(_plan(repo, state), ChromaSink(path=str(tmp_path / "c")), index=tmp_path / "i", roots=str(repo),
                settings=S, embedding_factory=factory)
    run_local(_plan(repo, state), index=tmp_path / "lex", roots=str(repo), settings=S, state=state, workers=0,
              progress=None)
    with pytest.raises(ConfigurationError, match="lexical-only"):
        run_ray(_plan(repo, state, full=True), ChromaSink(host="localhost", port=1), index=tmp_path / "lex",
                roots=str(repo), settings=S, embedding_factory=factory)
    assert not (tmp_path / "i").exists()
