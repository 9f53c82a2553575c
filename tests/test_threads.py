"""Concurrency: one chunker and one retriever shared by 8 threads give exactly what one thread gets, and indexing
with chunking worker processes (``workers=2``) stores exactly what ``workers=1`` stores.

The thread tests start from cold caches (grammars, compiled queries, the analysis query cache, the lazily resolved
tokenizer, the retriever's BM25 state), start every thread at once behind a barrier, and compare full span dicts
(text, offsets, lines, ids, metadata) and full retrieval results, on real files: standard-library modules and the
checked-in corpus in ``tests/data``.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import sysconfig
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import corpus_files

from llmc_splitters import ASTChunker

pytestmark = pytest.mark.timeout(300)

THREADS = 8
STDLIB = Path(sysconfig.get_paths()["stdlib"])
STDLIB_FILES = (
    "textwrap.py", "argparse.py", "shlex.py", "heapq.py", "base64.py", "json/decoder.py", "json/encoder.py",
    "email/_header_value_parser.py", "asyncio/base_events.py", "dataclasses.py", "string.py", "tomllib/_parser.py",
)


def _inputs() -> list[tuple[str, str]]:
    out = [(f"stdlib/{rel}", (STDLIB / rel).read_text(encoding="utf-8")) for rel in STDLIB_FILES]
    for p in corpus_files():
        out.append((p.relative_to(p.parents[1]).as_posix(), p.read_bytes().decode("utf-8", "replace")))
    return out


def _outcome(chunker: ASTChunker, path: str, text: str):
    """Everything a chunk_tree call produces: all span dicts and the leaf ids (or the error it raised)."""
    try:
        tree = chunker.chunk_tree(text, path=path)
    except Exception as exc:  # noqa: BLE001 - an error must be the same error in every thread
        return ("error", type(exc).__name__, str(exc))
    return ([s.to_dict() for s in tree.spans], [s.id for s in tree.leaves])


def _cold_caches() -> None:
    from llmc_splitters.chunking import _grammar, analysis, languages

    _grammar.load_language.cache_clear()
    _grammar.has_grammar.cache_clear()
    _grammar.load_query.cache_clear()
    with analysis._query_lock:
        analysis._query_cache.clear()
    languages._generic_cache.clear()


def _run_threads(work, n_jobs: int) -> list:
    """Run ``work(thread_index)`` in THREADS threads that start together; return their results."""
    barrier = threading.Barrier(THREADS)

    def job(i: int):
        barrier.wait(timeout=60)
        return work(i)

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(job, range(n_jobs)))


def _first_difference(a, b, where: str = "") -> str:
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{where}.{k}")
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: {a!r:.200} != {b!r:.200}"


@pytest.mark.parametrize("analyze", [True, False])
def test_one_chunker_shared_by_eight_threads_gives_single_thread_results(analyze):
    inputs = _inputs()
    assert len(inputs) >= 25
    reference = {path: _outcome(ASTChunker(max_tokens=200, analyze=analyze), path, text) for path, text in inputs}
    assert sum(1 for o in reference.values() if o[0] != "error") >= 25
    _cold_caches()
    shared = ASTChunker(max_tokens=200, analyze=analyze)  # tokenizer not resolved yet: the threads race for it

    def work(i: int):
        order = list(inputs)
        random.Random(i).shuffle(order)  # every thread in another order: different files at the same moment
        return {path: _outcome(shared, path, text) for path, text in order}

    for i, got in enumerate(_run_threads(work, THREADS)):
        for path, want in reference.items():
            assert got[path] == want, f"thread {i}, {path}: {_first_difference(got[path], want)}"


def test_many_chunkers_with_different_budgets_in_parallel():
    """Threads with their own chunkers (other budgets, token counters) at once: each equals its own serial run."""
    small = {"stdlib/textwrap.py", "stdlib/shlex.py", "stdlib/heapq.py", "stdlib/json/decoder.py", "stdlib/string.py"}
    inputs = [(path, text) for path, text in _inputs() if path in small or path.startswith("data/")]
    specs = [(64, None), (128, len), (300, None), (1000, "cl100k_base")] * 2

    def run(i: int):
        budget, tok = specs[i]
        c = ASTChunker(max_tokens=budget, tokenizer=tok, analyze=True)
        return [_outcome(c, path, text) for path, text in inputs]

    serial = [run(i) for i in range(len(specs))]
    _cold_caches()
    parallel = _run_threads(run, len(specs))
    for i, (a, b) in enumerate(zip(parallel, serial)):
        assert a == b, f"chunker {specs[i]}: {_first_difference(a, b)}"


# ------------------------------------------------------------------------------------------------- retrieval

QUERIES = [
    "dedent common leading whitespace", "wrap text to width", "parse command line arguments", "add_argument",
    "split shell words posix", "heap push pop", "base64 encode bytes", "JSONDecoder raw_decode", "scanstring",
    "encode json float", "run_until_complete event loop", "create_connection socket", "dataclass field default",
    "Template substitute", "parse toml table", "header value parser quoted string", "retry backoff",
    "how are errors reported", "class HelpFormatter", "def shuffle",
]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    pytest.importorskip("chromadb")
    pytest.importorskip("tantivy")
    from llmc_splitters.retrieval import CodeRetriever, HashingEmbedding

    db = tmp_path_factory.mktemp("threads-db")
    r = CodeRetriever(path=db, embedding=HashingEmbedding(128), max_tokens=200, k=4, max_context_tokens=1200)
    report = r.index_texts(dict(_inputs()))
    assert len(report.added) >= 25
    return r


def _result(r, query: str, multi_stage: bool):
    res = r.retrieve(query, multi_stage=multi_stage)
    return (
        res.context, res.token_count, res.confidence, res.dropped,
        [(h.span.id, h.score, h.rank, dict(h.ranks)) for h in res.hits],
        [(p.path, p.start_line, p.end_line, p.kind, p.text) for p in res.pieces],
    )


@pytest.mark.parametrize("multi_stage", [False, True])
def test_one_retriever_shared_by_eight_threads_gives_single_thread_results(retriever, multi_stage):
    reference = {q: _result(retriever, q, multi_stage) for q in QUERIES}
    assert sum(1 for v in reference.values() if v[4]) >= len(QUERIES) - 2
    retriever.index.close()  # every thread opens its own connection to the span store

    def work(i: int):
        order = list(QUERIES) * 2
        random.Random(i).shuffle(order)
        return [(q, _result(retriever, q, multi_stage)) for q in order]

    for i, got in enumerate(_run_threads(work, THREADS)):
        for q, res in got:
            assert res == reference[q], f"thread {i}, {q!r}: {_first_difference(res, reference[q])}"


# ------------------------------------------------------------------------------------------ worker processes

TREE_FILES = (
    "textwrap.py", "shlex.py", "heapq.py", "base64.py", "json/__init__.py", "json/decoder.py", "json/encoder.py",
    "json/scanner.py", "json/tool.py", "tomllib/__init__.py", "tomllib/_parser.py", "tomllib/_re.py", "string.py",
    "email/_header_value_parser.py",
)


def _tree(root: Path) -> Path:
    for rel in TREE_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, root / rel)
    for p in corpus_files():
        if p.suffix in (".py", ".js", ".ts", ".sh"):
            dest = root / "data" / p.relative_to(p.parents[1])
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
    return root


class CrashingChunker(ASTChunker):
    """Kills its own process (as a segfault in native code would) on ``boom.py``, but only in a worker process."""

    def chunk_tree(self, text, *, language=None, path=None):
        if path == "boom.py" and multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().chunk_tree(text, language=language, path=path)


def test_workers_store_exactly_what_one_process_stores(tmp_path):
    from fakes import stored_rows

    from llmc_splitters.retrieval import CodeIndex

    root = _tree(tmp_path / "src")
    one = CodeIndex(tmp_path / "one", max_tokens=200)
    two = CodeIndex(tmp_path / "two", max_tokens=200)
    r1 = one.index_directory(root)
    r2 = two.index_directory(root, workers=2)
    assert r1.added == r2.added and len(r1.added) >= len(TREE_FILES) and r1.failed == r2.failed == {}
    assert r1.spans == r2.spans
    assert stored_rows(one) == stored_rows(two)
    assert {s.id for s in one.spans()} == {s.id for s in two.spans()}
    # Unchanged files are recognised before any chunking is sent to the workers.
    again = two.index_directory(root, workers=2)
    assert sorted(again.unchanged) == sorted(r1.added) and not again.added


def test_auto_workers_chunk_in_a_pool_only_for_many_files_and_no_neural_model(tmp_path, monkeypatch):
    from fakes import stored_rows

    from llmc_splitters.retrieval import CodeIndex, HashingEmbedding
    from llmc_splitters.retrieval.indexing import indexer as indexing

    pools = []
    real = indexing.chunk_in_processes
    monkeypatch.setattr(indexing, "chunk_in_processes",
                        lambda payload, items, workers: pools.append(workers) or real(payload, items, workers))
    monkeypatch.setattr(indexing.os, "cpu_count", lambda: 2)
    root = _tree(tmp_path / "src")
    n_files = len(list(root.rglob("*.*")))
    monkeypatch.setattr(indexing, "AUTO_MIN_FILES", n_files)  # exactly enough files to chunk
    one = CodeIndex(tmp_path / "one", max_tokens=200)
    auto = CodeIndex(tmp_path / "auto", max_tokens=200)
    r1 = one.index_directory(root)
    r2 = auto.index_directory(root, workers="auto")
    assert pools == [2]  # one worker per core
    assert r1.added == r2.added and stored_rows(one) == stored_rows(auto)
    # One file changed: too few to start a pool, chunked in this process.
    (root / "textwrap.py").write_text((root / "textwrap.py").read_text() + "\n\ndef late():\n    return 1\n")
    assert auto.index_directory(root, workers="auto").updated == ["textwrap.py"]
    assert pools == [2]
    # A static model (light: a table lookup per piece) leaves the cores to chunking: a pool, whose workers lay the
    # files out with the model's view too; the index is the one a single process makes, vectors and all.
    single = CodeIndex(tmp_path / "single", max_tokens=200, embedding=HashingEmbedding(32))
    single.index_directory(root)
    static = CodeIndex(tmp_path / "static", max_tokens=200, embedding=HashingEmbedding(32))
    assert sorted(static.index_directory(root, workers="auto").added) == sorted(r1.added)
    assert pools == [2, 2]
    assert stored_rows(single) == stored_rows(static)

    def vectors(idx):
        got = idx.vectors.collection_of("leaf").get(include=["embeddings"])
        return {i: [round(float(x), 6) for x in v] for i, v in zip(got["ids"], got["embeddings"])}

    assert vectors(single) == vectors(static) and len(vectors(static)) >= len(r1.added)

    # With a neural model the cores are the model's: no pool, whatever the number of files.
    class Neural(HashingEmbedding):
        light = False

    dense = CodeIndex(tmp_path / "dense", max_tokens=200, embedding=Neural(32))
    assert sorted(dense.index_directory(root, workers="auto").added) == sorted(r1.added)
    assert pools == [2, 2]


def test_a_worker_that_dies_fails_only_its_file(tmp_path):
    from fakes import stored_rows

    from llmc_splitters.retrieval import CodeIndex

    root = _tree(tmp_path / "src")
    (root / "boom.py").write_text("def boom():\n    return 'the chunking process dies here'\n")
    idx = CodeIndex(tmp_path / "db", chunker=CrashingChunker(max_tokens=200, analyze=True))
    report = idx.index_directory(root, workers=2)
    assert list(report.failed) == ["boom.py"] and "process died" in report.failed["boom.py"]
    ref = CodeIndex(tmp_path / "ref", max_tokens=200)
    ref.index_directory(root, exclude=["boom.py"])
    assert sorted(report.added) == sorted(ref.paths)
    assert stored_rows(idx) == stored_rows(ref)
