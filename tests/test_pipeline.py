"""The engine-free pipeline run locally: embedded Chroma and LangChain sinks, incremental runs, interruptions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("bm25s")

from fakes import CountingEmbedding, commit, git  # noqa: E402
from helpers import DATA  # noqa: E402
from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.ingest import IngestSettings, chunk_file, settings_fingerprint  # noqa: E402
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest  # noqa: E402
from llmc_splitters.ingest.pipeline import ChromaSink, LangChainSink, run_local  # noqa: E402
from llmc_splitters.retrieval import CodeRetriever, HashingEmbedding  # noqa: E402

pytestmark = pytest.mark.slow

S = IngestSettings(max_tokens=128)
SOURCES = {
    "pkg/textwrap.py": DATA / "python" / "textwrap.py",
    "pkg/decoder.py": DATA / "python" / "json_decoder.py",
    "web/events.js": DATA / "javascript" / "events.js",
    "docs/guide.md": DATA / "markdown" / "guide.md",
    "scripts/deploy.sh": DATA / "bash" / "deploy.sh",
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


def _expected(root: Path) -> dict[str, str]:
    """Record id -> text, straight from chunk_file over the committed tree (no pipeline involved)."""
    out = {}
    for e in filter_manifest(git_manifest(root, repository="demo"), exclude=()):
        res = chunk_file("demo", e.path, (root / e.path).read_bytes(), S)
        out.update({r["id"]: r["text"] for r in res.rows})
    return out


def _stored(sink: ChromaSink) -> dict[str, str]:
    conn = sink.connect(None)
    got = conn.store.collection.get(include=["documents"])
    assert len(got["ids"]) == len(set(got["ids"]))
    return dict(zip(got["ids"], got["documents"]))


def _run(root: Path, state: ManifestState, sink, model=None, *, full: bool = False, workers: int = 0,
         files_per_batch: int = 2):
    plan = state.plan(filter_manifest(git_manifest(root, repository="demo"), exclude=()),
                      fingerprint=settings_fingerprint(S), full=full)
    factory = (lambda: model) if model is not None else None
    return run_local(plan, sink, roots=str(root), settings=S, embedding_factory=factory, state=state,
                     workers=workers, files_per_batch=files_per_batch, progress=None)


def test_local_run_is_idempotent_and_incremental(repo: Path, tmp_path: Path) -> None:
    sink = ChromaSink(path=str(tmp_path / "chroma"))
    state = ManifestState(tmp_path / "state")
    model = CountingEmbedding()
    first = _run(repo, state, sink, model)
    expected = _expected(repo)
    assert _stored(sink) == expected
    assert (first.files_chunked, first.files_skipped, first.files_failed) == (5, 1, 0)
    assert first.reasons == {"skipped: binary": 1}
    assert first.spans_written == len(expected)
    assert first.spans_embedded == len(set(model.calls)) > 0
    assert "chunk:" in str(first) and "embed:" in str(first) and "write:" in str(first)

    # Nothing changed: nothing read, nothing embedded, the same records.
    model.calls.clear()
    again = _run(repo, state, sink, model)
    assert (again.files_planned, again.spans_written, model.calls) == (0, 0, [])
    assert _stored(sink) == expected

    # A full re-run over the populated store rewrites the same ids; every vector comes from the cache.
    full = _run(repo, state, sink, model, full=True)
    assert full.files_planned == 6 and full.spans_embedded == 0 and full.spans_cached > 0
    assert model.calls == []
    assert _stored(sink) == expected

    # One file edited, one deleted: only the edited file's new texts are embedded; old versions go.
    path = repo / "pkg" / "textwrap.py"
    path.write_text(path.read_text().replace("def dedent(text):", "def dedent(text):\n    # edited"))
    (repo / "web" / "events.js").unlink()
    commit(repo, "edit")
    edit = _run(repo, state, sink, model)
    assert (edit.files_planned, edit.files_deleted) == (1, 1)
    assert model.calls and all("demo/pkg/textwrap.py" in t for t in model.calls)
    assert len(model.calls) <= 3, "spans whose text did not change keep their vectors"
    assert edit.spans_deleted > 0
    assert _stored(sink) == _expected(repo)
    assert not any("events.js" in t for t in _stored(sink).values() if t.startswith("File:"))

    # The records are CodeIndex records: the retriever searches them as they are.
    r = CodeRetriever(path=str(tmp_path / "chroma"), embedding=HashingEmbedding(64), max_tokens=128)
    assert sorted(r.index.paths) == ["demo/docs/guide.md", "demo/pkg/decoder.py", "demo/pkg/textwrap.py",
                                     "demo/scripts/deploy.sh"]
    hit = r.search("dedent common leading whitespace", k=1).hits[0].span
    assert (hit.path, hit.name) == ("demo/pkg/textwrap.py", "dedent")
    assert "# edited" in r.get_symbol("dedent")[0].text


def test_an_interrupted_run_is_completed_by_the_next(repo: Path, tmp_path: Path) -> None:
    sink = ChromaSink(path=str(tmp_path / "chroma"))
    state = ManifestState(tmp_path / "state")
    _run(repo, state, sink, CountingEmbedding())
    path = repo / "pkg" / "decoder.py"
    path.write_text(path.read_text() + "\n\ndef added_later():\n    return 42\n")
    (repo / "docs" / "guide.md").unlink()
    (repo / "pkg" / "new.py").write_text("def brand_new():\n    return 'new'\n")
    commit(repo, "edit")

    class Dies(CountingEmbedding):
        def embed_documents(self, texts):
            if self.calls:
                raise KeyboardInterrupt  # the process is killed after its first write batch
            return super().embed_documents(texts)

    with pytest.raises(KeyboardInterrupt):
        _run(repo, state, sink, Dies(), files_per_batch=1)
    partial = _stored(sink)
    assert partial != _expected(repo), "the dead run left the store half-updated"
    assert state.pending_keys()
    done = _run(repo, state, sink, CountingEmbedding())
    assert done.files_planned == 2 and done.files_deleted == 1
    assert _stored(sink) == _expected(repo), "no duplicate, no missing, no stale record"
    assert not state.pending.exists()


def test_process_pool_and_serial_runs_write_the_same_records(repo: Path, tmp_path: Path) -> None:
    a = ChromaSink(path=str(tmp_path / "a"))
    b = ChromaSink(path=str(tmp_path / "b"))
    _run(repo, ManifestState(tmp_path / "sa"), a, CountingEmbedding(), workers=0)
    _run(repo, ManifestState(tmp_path / "sb"), b, CountingEmbedding(), workers=2)
    assert _stored(a) == _stored(b) == _expected(repo)


def test_plan_and_settings_must_match(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    plan = state.plan(git_manifest(repo), fingerprint=settings_fingerprint(IngestSettings(max_tokens=64)))
    with pytest.raises(ConfigurationError, match="settings"):
        run_local(plan, ChromaSink(path=str(tmp_path / "c")), roots=str(repo), settings=S, progress=None)
    with pytest.raises(ConfigurationError, match="exactly one"):
        ChromaSink()
    plan = state.plan(git_manifest(repo), fingerprint=settings_fingerprint(S))
    with pytest.raises(ConfigurationError, match="embeds what it stores"):
        run_local(plan, LangChainSink(_vectorstore, _docstore), roots=str(repo), settings=S,
                  embedding_factory=CountingEmbedding, progress=None)


# ------------------------------------------------------------------------------------- LangChain vector store

_STORES: dict[str, object] = {}


def _vectorstore():
    from langchain_core.vectorstores import InMemoryVectorStore

    return _STORES.setdefault("vs", InMemoryVectorStore(HashingEmbedding(64)))


def _docstore():
    from langchain_core.stores import InMemoryStore

    return _STORES.setdefault("ds", InMemoryStore())


def test_langchain_sink_feeds_a_retriever_over_the_same_stores(repo: Path, tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from llmc_splitters.retrieval.vectorstore import code_index

    _STORES.clear()
    sink = LangChainSink(_vectorstore, _docstore)
    state = ManifestState(tmp_path / "state")
    first = _run(repo, state, sink)
    expected = _expected(repo)
    vs, ds = _vectorstore(), _docstore()
    stored = {k.split("/", 2)[2]: v.page_content for k, v in zip(list(ds.yield_keys(prefix="llmc/r/")),
                                                                  ds.mget(list(ds.yield_keys(prefix="llmc/r/"))))}
    assert stored == expected
    searched = [i for i, t in expected.items() if i in vs.store]
    assert first.spans_embedded == len(searched) == len(vs.store)
    r = CodeRetriever(index=code_index(vs, ds, max_tokens=128), k=1)
    hit = r.search("dedent common leading whitespace", k=1).hits[0].span
    assert (hit.path, hit.name) == ("demo/pkg/textwrap.py", "dedent")
    (repo / "web" / "events.js").unlink()
    commit(repo, "drop")
    _run(repo, state, sink)
    assert not any("events.js" in (d.metadata.get("path") or "") for d in ds.mget(list(ds.yield_keys())) if d)
    assert not any("events.js" in v["metadata"].get("path", "") for v in vs.store.values())
    _STORES.clear()


def test_ray_is_an_optional_extra(monkeypatch, repo: Path, tmp_path: Path) -> None:
    import sys

    import llmc_splitters.ingest.ray as ray_ingest
    from llmc_splitters.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    plan = ManifestState(tmp_path / "state").plan(git_manifest(repo), fingerprint=settings_fingerprint(S))
    with pytest.raises(MissingDependencyError, match=r"llmc-splitters\[ray\]"):
        ray_ingest.run_ray(plan, ChromaSink(host="localhost"), roots=str(repo), settings=S)
    out = subprocess.run(
        [sys.executable, "-c", "import sys, llmc_splitters.ingest.ray, llmc_splitters.ingest.pipeline, "
         "llmc_splitters.ingest, llmc_splitters.ingest.manifest; print('ray' in sys.modules)"],
        check=True, capture_output=True, text=True,
    )
    assert out.stdout.strip() == "False", "importing the ingestion modules does not import Ray"


def test_ingested_files_count_as_unchanged_for_codeindex(repo: Path, tmp_path: Path) -> None:
    from llmc_splitters.retrieval import CodeIndex
    from llmc_splitters.retrieval.store import ChromaStore

    sink = ChromaSink(path=str(tmp_path / "chroma"))
    _run(repo, ManifestState(tmp_path / "state"), sink, CountingEmbedding())
    idx = CodeIndex(ChromaStore(str(tmp_path / "chroma")), embedding=CountingEmbedding(), max_tokens=128)
    text = (repo / "pkg" / "textwrap.py").read_text()
    report = idx.index_texts({"demo/pkg/textwrap.py": text})
    assert report.unchanged == ["demo/pkg/textwrap.py"], "same content hash and settings as CodeIndex's own"
