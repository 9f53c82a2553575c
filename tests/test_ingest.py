"""The engine-free ingestion functions: one file -> the index's own layout as plain rows and back, the columnar
batch form, the embed stage, ids, reading from git."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DATA, assert_valid_spans
from llmc_splitters.errors import LlmcError
from llmc_splitters.ingest import (
    BATCH_COLUMNS,
    INT_COLUMNS,
    SPARK_SCHEMA,
    IngestSettings,
    chunk_batch,
    chunk_file,
    file_version,
    git_blob_sha,
    prepared_file,
    read_chunk_batch,
    row_span,
    rows_to_columns,
    settings_fingerprint,
)
from llmc_splitters.ingest.pipeline import EmbedStage
from llmc_splitters.retrieval import CodeIndex, HashingEmbedding
from llmc_splitters.retrieval.storage.file_rows import build_file, embedding_view, sha

S = IngestSettings(max_tokens=128)
TEXTWRAP = (DATA / "python" / "textwrap.py").read_bytes()
FILES = [DATA / "python" / "textwrap.py", DATA / "javascript" / "events.js", DATA / "markdown" / "guide.md",
         DATA / "python" / "crlf_tabs.py", DATA / "python" / "empty.py", DATA / "bash" / "deploy.sh"]


def _leaves(rows):
    return sorted((r for r in rows if r["role"] == "leaf"), key=lambda r: r["start_byte"])


def _layout(prepared):
    """Everything a PreparedFile makes the index write, except the time it was written."""
    m = prepared.write.marker
    return (
        [(r.span.to_dict() | {"text": r.span.text if r.role != "parent" else ""}, r.role, r.file, r.embed_hash)
         for r in prepared.write.rows],
        prepared.leaves, prepared.summaries, prepared.views, prepared.write.bindings,
        (m.path, m.hash, m.settings, m.language, m.size, m.mtime_ns, m.n_spans, m.n_leaves),
    )


def _split(columns):
    """Columns -> (status row, span rows) of the one file they hold."""
    rows = [{c: columns[c][i] for c in columns} for i in range(len(columns["id"]))]
    return next(r for r in rows if r["role"] == "file"), [r for r in rows if r["role"] != "file"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_rows_are_the_index_layout_lossless_linked_and_uuid_keyed(path: Path) -> None:
    data = path.read_bytes()
    res = chunk_file("repo", path.name, data, S)
    assert res.status == "chunked", res.reason
    assert res.blob_sha == git_blob_sha(data)
    text = data.decode("utf-8")
    leaves = _leaves(res.rows)
    assert_valid_spans(text, [row_span(r) for r in leaves])
    # The same layout the serial index builds from the same tree (records.build_file).
    tree = CodeIndex(max_tokens=128).chunker.chunk_tree(text, path=f"repo/{path.name}")
    serial = build_file(f"repo/{path.name}", text, tree, file_hash=sha(text), settings=res.prepared.write.marker.settings)
    assert _layout(serial) == _layout(res.prepared)
    ids = [r["id"] for r in res.rows]
    assert len(set(ids)) == len(ids)
    by_id = {r["id"]: r for r in res.rows}
    for r in res.rows:
        assert str(uuid.UUID(r["id"])) == r["id"], "ids are UUID strings (Qdrant takes only integers or UUIDs)"
        assert r["file"] == f"repo/{path.name}" and r["path"] == path.name and r["file_version"] == res.file_version
        if r["role"] == "parent":
            assert r["text"] == "" and r["terms"] == "", "parents are rebuilt from the leaves, never searched"
        else:
            assert r["terms"], "searched rows carry their lexical terms"
        if r["role"] in ("leaf", "parent") and r["parent_id"]:
            assert by_id[r["parent_id"]]["role"] == "parent", "every span links to a parent row of the same file"
        assert r["embed_text"] == r["embed_hash"] == "", "the embed stage fills these"
    assert sum(1 for r in res.rows if r["role"] == "parent" and not r["parent_id"]) == 1, "one root"


def test_split_classes_carry_their_skeleton_and_get_a_summary() -> None:
    res = chunk_file("", "textwrap.py", TEXTWRAP, S)
    wrapper = next(r for r in res.rows if r["role"] == "parent" and r["name"] == "TextWrapper")
    assert "def wrap(self, text)" in wrapper["metadata"]["skeleton"]
    summaries = [r for r in res.rows if r["role"] == "summary"]
    assert {r["kind"] for r in summaries} == {"file", "class"}
    assert any(r["parent_id"] == wrapper["id"] for r in summaries)
    bare = chunk_file("", "textwrap.py", TEXTWRAP, IngestSettings(max_tokens=128, summaries=False))
    assert not [r for r in bare.rows if r["role"] == "summary"]
    assert bare.prepared.write.marker.settings != res.prepared.write.marker.settings, \
        "an index with summaries re-lays such a file out whole"


def test_same_input_same_rows_any_process() -> None:
    a = chunk_file("r", "textwrap.py", TEXTWRAP, S)
    with ProcessPoolExecutor(1) as pool:
        b = pool.submit(chunk_file, "r", "textwrap.py", TEXTWRAP, S).result()
    assert a.rows == b.rows


def test_ids_are_deterministic_and_distinct_per_stored_path() -> None:
    base = {r["id"] for r in chunk_file("r", "a.py", TEXTWRAP, S).rows}
    assert base == {r["id"] for r in chunk_file("r", "a.py", TEXTWRAP, IngestSettings(max_tokens=128)).rows}
    for other in (chunk_file("r2", "a.py", TEXTWRAP, S), chunk_file("r", "b.py", TEXTWRAP, S)):
        assert not base & {r["id"] for r in other.rows}, "repositories and paths never share an id"


def test_an_edit_keeps_the_ids_it_did_not_move_and_the_cache_keys_of_texts_it_did_not_touch() -> None:
    stage = EmbedStage(lambda: HashingEmbedding(16))
    before = _split(stage(chunk_batch({"path": ["a.py"], "data": [TEXTWRAP]}, S)))[1]
    edited = TEXTWRAP.replace(b"def dedent(text):", b"def dedent(text):\n    # edited", 1)
    after = _split(stage(chunk_batch({"path": ["a.py"], "data": [edited]}, S)))[1]
    cut = TEXTWRAP.index(b"def dedent(text):")
    kept_ids = {r["id"] for r in before if r["role"] == "leaf" and r["end_byte"] <= cut}
    assert kept_ids and kept_ids <= {r["id"] for r in after}, "spans above the edit keep their ids"
    h_before = {r["embed_hash"]: r["id"] for r in before if r["role"] == "leaf"}
    h_after = {r["embed_hash"]: r["id"] for r in after if r["role"] == "leaf"}
    kept = set(h_before) & set(h_after)
    assert len(kept) >= len(h_before) - 3, "only the edited spans get a new text to embed"
    assert any(h_before[h] != h_after[h] for h in kept), "spans the edit moved get new ids, not new vectors"


def test_statuses_instead_of_exceptions() -> None:
    assert chunk_file("", "x.bin", b"\x00\x01\x02" * 10, S).status == "skipped"
    assert chunk_file("", "x.bin", b"\x00\x01", S).reason.startswith("binary")
    strict = IngestSettings(max_tokens=64, errors="strict")
    res = chunk_file("", "latin.py", "x = 'é'\n".encode("latin-1"), strict)
    assert (res.status, res.reason.split(":")[0]) == ("skipped", "undecodable")
    lenient = chunk_file("", "latin.py", "x = 'é'\n".encode("latin-1"), S)
    assert lenient.status == "chunked" and "".join(r["text"] for r in _leaves(lenient.rows)) == "x = 'é'\n"
    stale = chunk_file("", "a.py", b"x = 1\n", S, blob_sha=git_blob_sha(b"x = 2\n"))
    assert stale.status == "failed" and "changed since it was planned" in stale.reason
    assert chunk_file("", "a.py", b"x = 1\n", S, blob_sha=git_blob_sha(b"x = 1\n")).status == "chunked"


def test_settings_are_validated_and_fingerprinted() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        IngestSettings(max_tokens=0)
    with pytest.raises(ValueError, match="tokenizer"):
        IngestSettings(tokenizer=len)  # type: ignore[arg-type]
    fp = settings_fingerprint(S)
    assert fp == settings_fingerprint(IngestSettings(max_tokens=128))
    assert fp != settings_fingerprint(IngestSettings(max_tokens=128, tokenizer="o200k_base"))
    assert fp != settings_fingerprint(IngestSettings(max_tokens=128, overlap=0.0))
    assert file_version("r", "a", "x", fp) != file_version("r", "a", "y", fp)
    assert pickle.loads(pickle.dumps(S)) == S


def test_file_markers_are_the_ones_codeindex_writes() -> None:
    res = chunk_file("", "textwrap.py", TEXTWRAP, S)
    assert res.prepared.write.marker.settings == CodeIndex(max_tokens=128).settings_fingerprint
    assert res.prepared.write.marker.hash == sha(TEXTWRAP.decode())


def _batch(paths):
    return {"repository": ["r"] * len(paths), "path": [p.name for p in paths], "data": [p.read_bytes() for p in paths]}


def test_chunk_batch_columns_rows_out_differ_from_rows_in() -> None:
    paths = FILES[:3]
    out = chunk_batch(_batch(paths), S)
    assert list(out) == list(BATCH_COLUMNS)
    n = len(out["id"])
    assert all(len(v) == n for v in out.values())
    assert n > len(paths)
    for c, col in out.items():
        assert all(isinstance(v, int if c in INT_COLUMNS else str) for v in col), f"{c}: plain str/int columns"
    status = [i for i in range(n) if out["role"][i] == "file"]
    assert len(status) == len(paths) and {out["status"][i] for i in status} == {"chunked"}
    assert SPARK_SCHEMA.split(", ")[:7] == ["id string", "role string", "repository string", "path string",
                                            "file string", "document string", "seq bigint"]
    expected = []
    for p in paths:
        expected += [r["id"] for r in chunk_file("r", p.name, p.read_bytes(), S).rows]
    assert [out["id"][i] for i in range(n) if out["role"][i] != "file"] == expected


def test_columns_come_back_as_the_prepared_file_in_any_order_through_arrow() -> None:
    pa = pytest.importorskip("pyarrow")
    for p in FILES:
        res = chunk_file("r", p.name, p.read_bytes(), S)
        table = pa.table(rows_to_columns([res]))  # what a Ray block or a Spark partition holds
        status, rows = _split(table.to_pydict())
        random.Random(p.name).shuffle(rows)
        assert _layout(prepared_file(status, rows)) == _layout(res.prepared), p.name
        if rows:
            with pytest.raises(LlmcError, match="rows arrived"):
                prepared_file(status, rows[1:])


def test_a_notebook_is_one_document_per_cell_and_round_trips() -> None:
    pa = pytest.importorskip("pyarrow")
    nb = DATA / "notebooks" / "tide-analysis.ipynb"
    res = chunk_file("", "nb/tide.ipynb", nb.read_bytes(), S)
    assert res.status == "chunked", res.reason
    docs = {r["document"] for r in res.rows if r["role"] == "leaf"}
    assert docs and all(d.startswith("nb/tide.ipynb#cell") for d in docs), docs
    assert {r["file"] for r in res.rows} == {"nb/tide.ipynb"}
    text = nb.read_text()
    tree = CodeIndex(max_tokens=128).chunker.chunk_tree(text, path="nb/tide.ipynb")
    serial = build_file("nb/tide.ipynb", text, tree, file_hash=sha(text), settings=res.prepared.write.marker.settings)
    assert _layout(serial) == _layout(res.prepared), "the serial index's layout, bindings per cell included"
    status, rows = _split(pa.table(rows_to_columns([res])).to_pydict())
    assert _layout(prepared_file(status, rows[::-1])) == _layout(res.prepared)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["def f(x):\n", "    return x\n", "class A:\n", "    '''doc'''\n", "\n", "# é\n",
                                 "import os\n", "x = [\n", "]\n", "    def m(self):\n", "        pass\n"]),
                max_size=40))
def test_the_row_round_trip_is_exact_for_any_python(lines: list[str]) -> None:
    text = "".join(lines)
    res = chunk_file("", "m.py", text.encode(), IngestSettings(max_tokens=24))
    assert res.status == "chunked"
    status, rows = _split(rows_to_columns([res]))
    back = prepared_file(status, rows[::-1])
    assert _layout(back) == _layout(res.prepared)
    assert "".join(r.span.text for r in back.write.rows if r.role == "leaf") == text


def test_chunk_batch_takes_numpy_and_pandas_batches_and_a_settings_dict() -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    b = _batch(FILES[:2])
    ref = chunk_batch(b, S)
    as_np = {k: np.asarray(v, dtype=object) for k, v in b.items()}
    assert chunk_batch(as_np, {"max_tokens": 128}) == ref
    # Spark's mapInPandas hands the function an iterator of DataFrames and wants DataFrames back.
    def map_in_pandas(frames):
        for df in frames:
            yield pd.DataFrame(chunk_batch({c: df[c] for c in df.columns}, {"max_tokens": 128}))

    frames = list(map_in_pandas(iter([pd.DataFrame(b)])))
    assert frames[0]["id"].tolist() == ref["id"]
    assert list(frames[0].columns) == list(BATCH_COLUMNS)


def test_chunk_batch_in_a_process_pool_equals_serial() -> None:
    batches = [_batch([p]) for p in FILES]
    serial = [chunk_batch(b, S) for b in batches]
    with ProcessPoolExecutor(2) as pool:
        pooled = list(pool.map(chunk_batch, batches, [S] * len(batches)))
    assert pooled == serial
    pickle.dumps(chunk_batch)


def test_chunk_batch_reports_skipped_files() -> None:
    out = chunk_batch({"path": ["a.py", "b.bin", "c.py"], "data": [b"x = 1\n", b"\x00\x00", None]}, S)
    status = {out["path"][i]: (out["status"][i], out["reason"][i]) for i in range(len(out["id"]))
              if out["role"][i] == "file"}
    assert status["a.py"] == ("chunked", "")
    assert status["b.bin"][0] == "skipped"
    assert status["c.py"] == ("failed", "no data")


class _Bounded(HashingEmbedding):
    """A model with an input limit of 12 words, so that views get cut."""

    max_input_tokens = 12

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_embed_stage_views_are_the_serial_index_views() -> None:
    out = EmbedStage(lambda: _Bounded(16))(chunk_batch({"path": ["textwrap.py"], "data": [TEXTWRAP]}, S))
    status, rows = _split(out)
    index = CodeIndex(embedding=_Bounded(16), max_tokens=128)
    text = TEXTWRAP.decode()
    serial = build_file("textwrap.py", text, index.chunker.chunk_tree(text, path="textwrap.py"), file_hash=sha(text),
                        settings=index.settings_fingerprint, view=index._view)
    assert _layout(prepared_file(status, rows)) == _layout(serial)
    assert {json.loads(r["metadata"])["embedded_view"] for r in rows if r["embed_hash"]} == {"full", "truncated"}
    # The one view function, as CodeIndex makes it.
    a, b = {}, {}
    assert embedding_view(index.embedding, index.embedding_name)("x " * 40, a) == index._view("x " * 40, b)
    assert a == b


def test_embed_stage_embeds_each_distinct_view_once() -> None:
    calls: list[str] = []

    class Counting(HashingEmbedding):
        def embed_documents(self, texts):
            calls.extend(texts)
            return super().embed_documents(texts)

    same = b"def f():\n    return 1\n"
    out = EmbedStage(lambda: Counting(8))(chunk_batch({"path": ["a.py", "a.py"], "data": [same, same]}, S))
    flags = [f for f, role in zip(out["embedded"], out["role"]) if role in ("leaf", "summary")]
    assert sorted(flags) == [0, 0, 1, 1] and len(calls) == 2, "a repeated view is embedded once"
    assert all(len(v) == 8 * 4 for v, f in zip(out["vector"], out["embedded"]) if f >= 0), "float32 bytes"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                   capture_output=True)


def test_read_chunk_batch_reads_blobs_from_git_or_the_work_tree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_bytes(TEXTWRAP)
    (root / "b.py").write_text("y = 2\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "x")
    from llmc_splitters.ingest.manifest import git_manifest

    entries = list(git_manifest(root))
    batch = {"root": [str(root)] * 2, "repository": ["", ""], "path": [e.path for e in entries],
             "blob_sha": [e.blob_sha for e in entries]}
    (root / "b.py").write_text("y = 3  # edited, not committed\n")
    from_git = read_chunk_batch(batch, S, source="git")
    from_tree = read_chunk_batch(batch, S, source="worktree")
    direct = chunk_batch({"path": ["a.py", "b.py"], "data": [TEXTWRAP, b"y = 2\n"]}, S)
    assert from_git["id"] == direct["id"], "git source: exactly the planned blobs"
    status = {from_tree["path"][i]: from_tree["status"][i] for i in range(len(from_tree["id"]))
              if from_tree["role"][i] == "file"}
    assert status == {"a.py": "chunked", "b.py": "failed"}, "a work-tree file edited after planning is retried"
    missing = dict(batch, blob_sha=["0" * 40, entries[1].blob_sha])
    got = read_chunk_batch(missing, S, source="git")
    reasons = [got["reason"][i] for i in range(len(got["id"])) if got["role"][i] == "file"]
    assert "not found" in reasons[0]
