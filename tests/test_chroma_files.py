"""The read path of an embedded Chroma store without chromadb (:mod:`llmc_splitters.retrieval.storage.chroma_files`): it
answers as Chroma does, over the persisted graph and the write-ahead log, and a query process never imports
chromadb."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("chromadb")
pytest.importorskip("numpy")

from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402
from llmc_splitters.retrieval.storage.chroma_files import ChromaFiles, _label_to_id  # noqa: E402
from llmc_splitters.retrieval.storage.filters import SearchFilter  # noqa: E402
from llmc_splitters.retrieval.storage.chroma_vectors import ChromaStore, Record, vector_metadata  # noqa: E402

DIM = 16


def _vectors(n: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(n)]


def _write(path: Path, ids: list[str], vecs: list[list[float]]) -> None:
    """Upsert through chromadb (its writes are what the reader must understand)."""
    store = ChromaStore(str(path))
    store.open("test-model")
    files = ["a/x.py", "b/y.py"]
    store.upsert([Record(i, "", vector_metadata(files[n % 2], "leaf", "python", "function"), v)
                  for n, (i, v) in enumerate(zip(ids, vecs))])


def _chroma_answer(path: Path, q: list[float], n: int) -> list[tuple[str, float]]:
    """What chromadb itself answers, in a fresh process (its client holds the whole store in memory)."""
    code = ("import json, sys; import chromadb; from chromadb.config import Settings\n"
            "c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))\n"
            "col = c.get_collection('llmc_spans'); q = json.loads(sys.argv[2])\n"
            "got = col.query(query_embeddings=[q], n_results=min(int(sys.argv[3]), col.count()), include=['distances'])\n"
            "print(json.dumps([col.count(), list(zip(got['ids'][0], got['distances'][0]))]))")
    out = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(q), str(n)], capture_output=True,
                         text=True, check=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    count, pairs = json.loads(out.stdout)
    return count, [(i, d) for i, d in pairs]


@pytest.mark.parametrize("n", [300, 2500])
def test_the_reader_answers_as_chroma_does(tmp_path: Path, n: int) -> None:
    # 300 vectors live only in the write-ahead log; 2,500 are persisted as an HNSW graph (Chroma's sync threshold is
    # 1,000) with a log tail. Then some are deleted and some rewritten: the log overrides the graph.
    ids = [f"id-{i:05d}" for i in range(n)]
    _write(tmp_path, ids, _vectors(n, 1))
    store = ChromaStore(str(tmp_path))
    store.open("test-model")
    store.delete(ids=ids[:40])
    store.upsert([Record(i, "", {"file": "a/x.py", "role": "leaf"}, v) for i, v in zip(ids[40:80], _vectors(40, 2))])
    reader = ChromaFiles.open(str(tmp_path), "llmc_spans")
    assert reader is not None
    for q in _vectors(4, 3):
        count, theirs = _chroma_answer(tmp_path, q, 30)
        mine = reader.query(q, 30)
        assert reader.count() == count == n - 40
        assert [i for i, _ in mine] == [i for i, _ in theirs]
        assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(mine, theirs))
        assert not {i for i, _ in mine} & set(ids[:40])


def test_a_reopened_store_searches_from_its_files_and_loads_chromadb_to_write(tmp_path: Path) -> None:
    ids = [f"id-{i:05d}" for i in range(1200)]
    vecs = _vectors(1200, 4)
    _write(tmp_path, ids, vecs)
    store = ChromaStore(str(tmp_path))
    store.open("test-model")
    assert store._client is None  # noqa: SLF001 - nothing of chromadb's is loaded to search
    assert store.count() == 1200
    assert store.query(vecs[7], 3)[0][0] == "id-00007"
    # A filter is Chroma's where: the client answers it.
    got = store.query(vecs[7], 3, filt=SearchFilter.of("b/"))
    assert got and all(int(i[3:]) % 2 == 1 for i, _ in got)
    store.upsert([Record("new", "", {"file": "a/x.py", "role": "leaf"}, vecs[7])])
    assert {i for i, _ in store.query(vecs[7], 2)} == {"id-00007", "new"}
    # Another model's vectors are refused from the files as from the client.
    with pytest.raises(Exception, match="holds vectors from 'test-model'"):
        ChromaStore(str(tmp_path)).open("another-model")


def test_a_change_on_disk_is_seen_by_an_open_reader(tmp_path: Path) -> None:
    vecs = _vectors(50, 5)
    _write(tmp_path, [f"id-{i}" for i in range(50)], vecs)
    reader_side = ChromaStore(str(tmp_path))
    reader_side.open("test-model")
    assert reader_side.query(vecs[3], 1)[0][0] == "id-3"
    _write(tmp_path, ["moved"], [vecs[3]])  # another writer (another store object, as another process would be)
    assert {i for i, _ in reader_side.query(vecs[3], 2)} == {"id-3", "moved"}
    assert reader_side.count() == 51


def test_a_hybrid_query_process_does_not_import_chromadb(tmp_path: Path) -> None:
    idx = CodeIndex(tmp_path / "db", embedding=HashingEmbedding(64))
    idx.index_texts({"net/http.py": "def fetch(url):\n    return urlopen(url).read()\n",
                     "text/wrap.py": "def wrap(paragraph, width):\n    return textwrap.fill(paragraph, width)\n"})
    idx.close()
    code = ("import sys\nfrom llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding\n"
            "idx = CodeIndex(sys.argv[1], embedding=HashingEmbedding(64), create=False)\n"
            "r = CodeRetriever(index=idx, k=1, max_context_tokens=200)\n"
            "res = r.search('wrap a paragraph')\n"
            "import json; print(json.dumps([res.hits[0].span.name, sorted(res.hits[0].ranks), 'chromadb' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], capture_output=True, text=True,
                         check=True).stdout
    name, channels, chromadb_loaded = json.loads(out)
    assert name == "wrap"
    assert "dense" in channels  # the dense search ran, from the store's files
    assert chromadb_loaded is False


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 2**31 - 1), st.uuids().map(str), max_size=2500),
       st.sampled_from([2, 3, 4, 5]))
def test_label_to_id_reads_any_pickle_of_the_map(mapping: dict[int, str], protocol: int) -> None:
    meta = {"dimensionality": None, "total_elements_added": len(mapping), "max_seq_id": None,
            "id_to_label": {v: k for k, v in mapping.items()}, "label_to_id": mapping,
            "id_to_seq_id": {v: 1 for v in mapping.values()}}
    labels, ids = _label_to_id(pickle.dumps(meta, protocol=protocol))
    assert dict(zip(labels.tolist(), (i.decode() for i in ids))) == mapping
    assert labels.tolist() == sorted(labels.tolist())


def test_label_to_id_reads_chromadb_layout(tmp_path: Path) -> None:
    # chromadb 1.x writes BININT labels and BINUNICODE ids in MARK ... SETITEMS batches: the arrays path.
    ids = [f"{i:036d}" for i in range(2100)]
    _write(tmp_path, ids, _vectors(2100, 6))
    seg = next(p for p in tmp_path.iterdir() if (p / "index_metadata.pickle").is_file())
    data = (seg / "index_metadata.pickle").read_bytes()
    labels, got = _label_to_id(data)
    assert sorted(i.decode() for i in got) == sorted(pickle.loads(data)["label_to_id"].values())  # noqa: S301
    assert dict(zip(labels.tolist(), (i.decode() for i in got))) == pickle.loads(data)["label_to_id"]  # noqa: S301


def test_retriever_over_a_reopened_hybrid_index_matches_a_fresh_chromadb_client(tmp_path: Path) -> None:
    files = {f"pkg{i}/m{i}.py": f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(60)}
    idx = CodeIndex(tmp_path / "db", embedding=HashingEmbedding(64))
    idx.index_texts(files)
    before = [h.span.id for h in idx.search("respond to the request handler 17", k=10).hits]
    idx.close()
    again = CodeIndex(tmp_path / "db", embedding=HashingEmbedding(64), create=False)
    r = CodeRetriever(index=again, k=10, max_context_tokens=2000)
    assert [h.span.id for h in r.search("respond to the request handler 17").hits] == before
