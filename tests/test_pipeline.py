"""The engine-free pipeline run locally into an index directory: embedded Chroma and LangChain sinks, incremental
runs, interruptions, and the same index as ``CodeIndex`` writes."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

from fakes import CountingEmbedding, commit, git  # noqa: E402
from helpers import DATA, index_contents, index_rows, index_sql, searched_ids  # noqa: E402
from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.ingest import IngestSettings, chunk_batch, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import ChromaSink, LangChainSink, open_index, run_local  # noqa: E402
from llmc_splitters.ingest.summary import IngestSummary  # noqa: E402
from llmc_splitters.ingest.writer import IndexWriter  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402

pytestmark = pytest.mark.slow

S = IngestSettings(max_tokens=128)
SOURCES = {
    "pkg/textwrap.py": DATA / "python" / "textwrap.py",
    "pkg/decoder.py": DATA / "python" / "json_decoder.py",
    "web/events.js": DATA / "javascript" / "events.js",
    "docs/guide.md": DATA / "markdown" / "guide.md",
    "scripts/deploy.sh": DATA / "bash" / "deploy.sh",
    "notebooks/tide.ipynb": DATA / "notebooks" / "tide-analysis.ipynb",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, src in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, root / rel)
    (root / "data.bin").write_bytes(b"\x00\x01\x02binary")
    git(root, "init", "-q")
    commit(root, "init")
    return root


def _expected(root: Path, repository: str = "demo") -> set[tuple]:
    """Span-store rows ``(id, role, path, text)`` of the committed tree, straight from chunk_file (no pipeline)."""
    out = set()
    for e in filter_manifest(git_manifest(root, repository=repository), exclude=()):
        res = chunk_file(repository, e.path, (root / e.path).read_bytes(), S)
        if res.prepared is not None:
            out |= {(r.span.id, r.role, r.span.path, None if r.role == "parent" else r.span.text)
                    for r in res.prepared.write.rows}
    return out


def _vector_ids(index: Path) -> set[str]:
    """The ids embedded Chroma holds in ``index/chroma`` (where CodeIndex(path=index) keeps vectors)."""
    from llmc_splitters.retrieval.storage.chroma_vectors import ChromaStore

    client = ChromaStore(str(index / "chroma")).client
    ids = [i for name in ("llmc_spans", "llmc_spans_summaries")
           for i in client.get_collection(name).get(include=[])["ids"]]
    assert len(ids) == len(set(ids))
    return set(ids)


def _plan(root: Path, state: ManifestState, *, full: bool = False, repository: str = "demo"):
    return state.plan(filter_manifest(git_manifest(root, repository=repository), exclude=()),
                      fingerprint=settings_fingerprint(S), full=full)


def _run(root: Path, state: ManifestState, index: Path, model=None, *, sink=None, full: bool = False,
         workers: int = 0, files_per_batch: int = 2, repository: str = "demo", source: str = "git"):
    factory = (lambda: model) if model is not None else None
    return run_local(_plan(root, state, full=full, repository=repository), sink, index=index, roots=str(root),
                     settings=S, embedding_factory=factory, state=state, workers=workers,
                     files_per_batch=files_per_batch, source=source, progress=None)


def test_local_run_is_idempotent_and_incremental(repo: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    state = ManifestState(tmp_path / "state")
    model = CountingEmbedding()
    first = _run(repo, state, index, model)
    expected = _expected(repo)
    assert index_rows(index) == expected
    assert (first.files_chunked, first.files_skipped, first.files_failed) == (6, 1, 0)
    assert first.reasons == {"skipped: binary": 1}
    assert first.spans_written == len(expected)
    assert first.spans_embedded == len(set(model.calls)) > 0
    assert _vector_ids(index) == searched_ids(index), "a vector per searched row, nothing else"
    assert index_sql(index, "SELECT * FROM pending") == set(), "the lexical index and the vectors are settled"
    assert "chunk:" in str(first) and "embed:" in str(first) and "write:" in str(first)

    # Nothing changed: nothing read, nothing embedded, the same records.
    model.calls.clear()
    again = _run(repo, state, index, model)
    assert (again.files_planned, again.spans_written, model.calls) == (0, 0, [])
    assert index_rows(index) == expected

    # A full re-run over the populated index rewrites the same ids; every vector comes from the cache.
    full = _run(repo, state, index, model, full=True)
    assert full.files_planned == 7 and full.spans_written == len(expected)
    assert full.spans_embedded == 0 and full.spans_cached > 0 and model.calls == []
    assert index_rows(index) == expected and _vector_ids(index) == searched_ids(index)

    # One file edited, one deleted: only the edited file's new texts are embedded; the deleted one's rows go.
    path = repo / "pkg" / "textwrap.py"
    path.write_text(path.read_text().replace("def dedent(text):", "def dedent(text):\n    # edited"))
    n_events = sum(1 for r in expected if r[2] == "demo/web/events.js")
    (repo / "web" / "events.js").unlink()
    commit(repo, "edit")
    edit = _run(repo, state, index, model)
    assert (edit.files_planned, edit.files_deleted, edit.spans_deleted) == (1, 1, n_events)
    assert model.calls and all("demo/pkg/textwrap.py" in t for t in model.calls)
    assert len(model.calls) <= 3, "spans whose text did not change keep their vectors"
    assert index_rows(index) == _expected(repo)
    assert _vector_ids(index) == searched_ids(index), "the vectors of replaced and removed rows are deleted"

    # The index is a CodeIndex: the retriever searches it as it is.
    r = CodeRetriever(path=str(index), embedding=HashingEmbedding(64), max_tokens=128)
    assert sorted(r.index.paths) == ["demo/docs/guide.md", "demo/notebooks/tide.ipynb", "demo/pkg/decoder.py",
                                     "demo/pkg/textwrap.py", "demo/scripts/deploy.sh"]
    hit = r.search("dedent common leading whitespace", k=1).hits[0].span
    assert (hit.path, hit.name) == ("demo/pkg/textwrap.py", "dedent")
    assert "# edited" in r.get_symbol("dedent")[0].text


def test_an_interrupted_run_is_completed_by_the_next(repo: Path, tmp_path: Path, monkeypatch) -> None:
    import llmc_splitters.ingest.writer as writer

    index = tmp_path / "index"
    state = ManifestState(tmp_path / "state")
    _run(repo, state, index, CountingEmbedding())
    path = repo / "pkg" / "decoder.py"
    path.write_text(path.read_text() + "\n\ndef added_later():\n    return 42\n")
    (repo / "docs" / "guide.md").unlink()
    (repo / "pkg" / "new.py").write_text("def brand_new():\n    return 'new'\n")
    commit(repo, "edit")

    class Dies(CountingEmbedding):
        def embed_documents(self, texts):
            if self.calls:
                raise KeyboardInterrupt  # the process is stopped after its first group was written
            return super().embed_documents(texts)

    monkeypatch.setattr(writer, "_GROUP_FILES", 1)  # one file per transaction, so the run dies between two
    with pytest.raises(KeyboardInterrupt):
        _run(repo, state, index, Dies(), files_per_batch=1)
    assert index_rows(index) != _expected(repo), "the dead run left the index part-way"
    assert state.pending_keys()
    done = _run(repo, state, index, CountingEmbedding())
    assert done.files_planned == 2 and done.files_deleted == 1
    assert index_rows(index) == _expected(repo), "no duplicate, no missing, no stale record"
    assert _vector_ids(index) == searched_ids(index)
    assert not state.pending.exists()
    assert CodeIndex(index, embedding=HashingEmbedding(64), max_tokens=128).status()["pending"] == []


def test_process_pool_and_serial_chunking_write_the_same_index(repo: Path, tmp_path: Path) -> None:
    _run(repo, ManifestState(tmp_path / "sa"), tmp_path / "a", CountingEmbedding(), workers=0)
    _run(repo, ManifestState(tmp_path / "sb"), tmp_path / "b", CountingEmbedding(), workers=2)
    assert index_contents(tmp_path / "a") == index_contents(tmp_path / "b")
    assert index_rows(tmp_path / "a") == _expected(repo)
    assert _vector_ids(tmp_path / "a") == _vector_ids(tmp_path / "b")


def test_the_pipeline_writes_the_index_codeindex_writes(repo: Path, tmp_path: Path) -> None:
    ingested, serial = tmp_path / "ingested", tmp_path / "serial"
    _run(repo, ManifestState(tmp_path / "state"), ingested, CountingEmbedding(), repository="")
    idx = CodeIndex(serial, embedding=HashingEmbedding(64), max_tokens=128)
    idx.index_directory(repo, include=("*",))
    idx.close()
    assert index_contents(ingested) == index_contents(serial), "same rows, metadata, views, cache keys and markers"
    assert _vector_ids(ingested) == _vector_ids(serial)
    # CodeIndex over the ingested index finds nothing to do: same content hashes, same settings.
    model = CountingEmbedding()
    again = CodeIndex(ingested, embedding=model, max_tokens=128).index_directory(repo, include=("*",))
    assert sorted(again.unchanged) == sorted(SOURCES) and again.written == 0 and model.calls == []


def test_a_skipped_file_loses_its_old_version_and_a_failed_one_keeps_it(repo: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    state = ManifestState(tmp_path / "state")
    _run(repo, state, index, source="worktree")
    before = {r for r in index_rows(index) if r[2] == "demo/scripts/deploy.sh"}
    (repo / "pkg" / "decoder.py").write_bytes(b"\x00\x01 now a binary file")
    deploy = repo / "scripts" / "deploy.sh"
    deploy.write_text(deploy.read_text() + "\necho committed\n")
    commit(repo, "edit")
    deploy.write_text(deploy.read_text() + "\necho edited after the commit\n")  # read != planned: failed
    run = _run(repo, state, index, source="worktree")
    assert (run.files_skipped, run.files_failed) == (1, 1)
    assert [f[1] for f in run.failed] == ["scripts/deploy.sh"]
    rows = index_rows(index)
    assert not [r for r in rows if r[2] == "demo/pkg/decoder.py"], "skipped for good: its old version is gone"
    assert {r for r in rows if r[2] == "demo/scripts/deploy.sh"} == before, "failed: the old version stays"
    failed = CodeIndex(index, max_tokens=128).status()["failed"]
    assert set(failed) == {"demo/data.bin", "demo/pkg/decoder.py", "demo/scripts/deploy.sh"}
    assert failed["demo/pkg/decoder.py"].startswith("skipped: binary")
    assert _plan(repo, state).to_chunk[0].path == "scripts/deploy.sh", "the failed file is retried"


def test_the_writer_reassembles_files_from_rows_in_any_order_and_batching(tmp_path: Path) -> None:
    paths = list(SOURCES)
    cols = chunk_batch({"path": paths, "data": [SOURCES[p].read_bytes() for p in paths]}, S)
    n = len(cols["id"])
    order = list(range(n))
    random.Random(7).shuffle(order)

    def write(batches, where: Path) -> None:
        w = IndexWriter(lambda _: open_index(where, S, None, None), embedding="none", recorded=None,
                        summary=IngestSummary())
        for b in batches:
            w.feed(b)
        w.finish()
        w.close()
        assert w.summary.files_chunked == len(paths)

    write([cols], tmp_path / "whole")
    write([{c: [cols[c][i] for i in order[j : j + 3]] for c in cols} for j in range(0, n, 3)], tmp_path / "shuffled")
    assert index_contents(tmp_path / "whole") == index_contents(tmp_path / "shuffled")


def test_the_writer_refuses_rows_of_another_model_before_writing_any(repo: Path, tmp_path: Path) -> None:
    from llmc_splitters.ingest.pipeline import EmbedStage, embedding_name
    from llmc_splitters.ingest.writer import WorkerModel, WrittenByWorkers, recorded_embedding

    index = tmp_path / "index"
    _run(repo, ManifestState(tmp_path / "state"), index, CountingEmbedding())
    before = index_contents(index)
    sink = ChromaSink(path=str(index / "chroma"))
    recorded = recorded_embedding(index)
    assert recorded == embedding_name(CountingEmbedding())
    w = IndexWriter(lambda name: open_index(index, S, WrittenByWorkers(sink.vectors()), WorkerModel(name)),
                    embedding=None, recorded=recorded, summary=IngestSummary())
    rows = EmbedStage(lambda: HashingEmbedding(32))(chunk_batch({"path": ["demo/x.py"], "data": [b"x = 1\n"]}, S))
    with pytest.raises(ConfigurationError, match="hashing:32"):
        w.feed(rows)
    w.close()
    assert index_contents(index) == before


def test_the_wrapped_vector_stores_still_say_where_they_live() -> None:
    from types import SimpleNamespace

    from llmc_splitters.ingest.sinks import ChromaVectors
    from llmc_splitters.ingest.writer import WrittenByWorkers

    inner = SimpleNamespace(describe=lambda: {"kind": "chroma", "host": "h", "port": 1, "collection": "c"})
    assert WrittenByWorkers(ChromaVectors(inner)).describe() == inner.describe(), "the index records it"
    assert not hasattr(WrittenByWorkers(ChromaVectors(SimpleNamespace())), "describe")


def test_bad_arguments_are_configuration_errors(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    index = tmp_path / "index"
    plan = state.plan(git_manifest(repo), fingerprint=settings_fingerprint(IngestSettings(max_tokens=64)))
    with pytest.raises(ConfigurationError, match="settings"):
        run_local(plan, index=index, roots=str(repo), settings=S, progress=None)
    with pytest.raises(ConfigurationError, match="exactly one"):
        ChromaSink()
    plan = state.plan(git_manifest(repo), fingerprint=settings_fingerprint(S))
    with pytest.raises(ConfigurationError, match="index=DIR"):
        run_local(plan, roots=str(repo), settings=S, progress=None)
    with pytest.raises(ConfigurationError, match="embeds what it stores"):
        run_local(plan, LangChainSink(_vectorstore), index=index, roots=str(repo), settings=S,
                  embedding_factory=CountingEmbedding, progress=None)
    with pytest.raises(ConfigurationError, match="holds vectors"):
        run_local(plan, ChromaSink(path=str(tmp_path / "c")), index=index, roots=str(repo), settings=S,
                  progress=None)
    with pytest.raises(ConfigurationError, match="embed_batch_size"):
        run_local(plan, index=index, roots=str(repo), settings=S, embed_batch_size=32, progress=None)
    with pytest.raises(ConfigurationError, match="docstore"):
        LangChainSink(_vectorstore, _vectorstore)
    assert not index.exists(), "nothing was written"
    _run(repo, state, index)  # a lexical index...
    with pytest.raises(ConfigurationError, match="'none'"):
        _run(repo, state, index, CountingEmbedding(), full=True)  # ... refuses vectors


# ------------------------------------------------------------------------------------- LangChain vector store

_STORES: dict[str, object] = {}


def _vectorstore():
    from langchain_core.vectorstores import InMemoryVectorStore

    return _STORES.setdefault("vs", InMemoryVectorStore(HashingEmbedding(64)))


def test_langchain_sink_feeds_a_retriever_over_the_same_index(repo: Path, tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from llmc_splitters.retrieval.vectorstore import code_index

    _STORES.clear()
    index = tmp_path / "index"
    state = ManifestState(tmp_path / "state")
    first = _run(repo, state, index, sink=LangChainSink(_vectorstore))
    vs = _vectorstore()
    assert index_rows(index) == _expected(repo)
    assert set(vs.store) == searched_ids(index), "the vector store holds the searched rows, nothing else"
    assert first.spans_embedded == len(vs.store)
    r = CodeRetriever(index=code_index(vs, path=str(index), max_tokens=128), k=1)
    hit = r.search("dedent common leading whitespace", k=1).hits[0].span
    assert (hit.path, hit.name) == ("demo/pkg/textwrap.py", "dedent")
    r.index.close()
    (repo / "web" / "events.js").unlink()
    commit(repo, "drop")
    _run(repo, state, index, sink=LangChainSink(_vectorstore))
    assert not any("events.js" in v["metadata"]["file"] for v in vs.store.values())
    assert set(vs.store) == searched_ids(index)
    _STORES.clear()


def test_ray_is_an_optional_extra(monkeypatch, repo: Path, tmp_path: Path) -> None:
    import sys

    import llmc_splitters.ingest.ray as ray_ingest
    from llmc_splitters.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    plan = ManifestState(tmp_path / "state").plan(git_manifest(repo), fingerprint=settings_fingerprint(S))
    with pytest.raises(MissingDependencyError, match=r"llmc-splitters\[ray\]"):
        ray_ingest.run_ray(plan, ChromaSink(host="localhost"), index=tmp_path / "index", roots=str(repo), settings=S)
    out = subprocess.run(
        [sys.executable, "-c", "import sys, llmc_splitters.ingest.ray, llmc_splitters.ingest.pipeline, "
         "llmc_splitters.ingest, llmc_splitters.ingest.manifest; print('ray' in sys.modules, 'chromadb' in sys.modules)"],
        check=True, capture_output=True, text=True,
    )
    assert out.stdout.strip() == "False False", "importing the ingestion modules imports neither Ray nor Chroma"


def test_ingested_files_count_as_unchanged_for_codeindex(repo: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    _run(repo, ManifestState(tmp_path / "state"), index, CountingEmbedding())
    model = CountingEmbedding()
    idx = CodeIndex(index, embedding=model, max_tokens=128)
    text = (repo / "pkg" / "textwrap.py").read_text()
    report = idx.index_texts({"demo/pkg/textwrap.py": text})
    assert report.unchanged == ["demo/pkg/textwrap.py"], "same content hash and settings as CodeIndex's own"
    assert model.calls == []
