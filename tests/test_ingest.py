"""The engine-free ingestion functions: one file -> span rows, the columnar batch form, ids, reading from git."""

from __future__ import annotations

import hashlib
import pickle
import subprocess
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from helpers import DATA, assert_valid_spans
from llmc_splitters.ingest import (
    BATCH_COLUMNS,
    SPARK_SCHEMA,
    IngestSettings,
    chunk_batch,
    chunk_file,
    file_version,
    git_blob_sha,
    read_chunk_batch,
    settings_fingerprint,
)
from llmc_splitters.chunking.span import Span

S = IngestSettings(max_tokens=128)
TEXTWRAP = (DATA / "python" / "textwrap.py").read_bytes()
FILES = [DATA / "python" / "textwrap.py", DATA / "javascript" / "events.js", DATA / "markdown" / "guide.md",
         DATA / "python" / "crlf_tabs.py", DATA / "python" / "empty.py", DATA / "bash" / "deploy.sh"]


def _leaves(rows):
    return sorted((r for r in rows if r["role"] == "leaf"), key=lambda r: r["metadata"]["start_byte"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_rows_are_lossless_linked_and_uuid_keyed(path: Path) -> None:
    data = path.read_bytes()
    res = chunk_file("repo", path.name, data, S)
    assert res.status == "chunked", res.reason
    assert res.blob_sha == git_blob_sha(data)
    text = data.decode("utf-8")
    leaves = _leaves(res.rows)
    assert "".join(r["text"] for r in leaves) == text
    spans = []
    for r in leaves:
        meta = r["metadata"]
        import json

        d = json.loads(meta["span_json"])
        d["text"] = r["text"]
        spans.append(Span.from_dict(d))
    assert_valid_spans(text, spans)
    ids = [r["id"] for r in res.rows]
    assert len(set(ids)) == len(ids)
    for r in res.rows:
        assert str(uuid.UUID(r["id"])) == r["id"], "ids are UUID strings (Qdrant takes only integers or UUIDs)"
        for v in r["metadata"].values():
            assert isinstance(v, (str, int, float, bool)), "flat metadata, accepted by every vector store"
        assert r["file_version"] == res.file_version
        assert r["metadata"]["path"] == f"repo/{path.name}"
    by_id = {r["id"]: r for r in res.rows}
    roots = [r for r in res.rows if r["metadata"].get("is_root")]
    assert len(roots) == 1 and roots[0]["metadata"]["n_records"] == len(res.rows)
    for r in res.rows:
        if r["role"] in ("leaf", "parent") and r is not roots[0]:
            assert r["parent_id"] in by_id, "every span links to a parent row of the same file"
            assert by_id[r["parent_id"]]["role"] == "parent"
        if r["role"] in ("leaf", "summary"):
            assert r["content_hash"] == hashlib.sha256(r["embed_text"].encode()).hexdigest()
        else:
            assert r["embed_text"] == "" and r["content_hash"] == ""


def test_split_classes_carry_their_skeleton_and_get_a_summary() -> None:
    res = chunk_file("", "textwrap.py", TEXTWRAP, S)
    parents = [r for r in res.rows if r["role"] == "parent" and r["metadata"]["kind"] == "class"]
    assert parents and all("def wrap" in r["skeleton"] or r["skeleton"] for r in parents)
    wrapper = next(r for r in parents if r["metadata"].get("symbol") == "TextWrapper")
    assert "def wrap(self, text)" in wrapper["skeleton"]
    summaries = [r for r in res.rows if r["role"] == "summary"]
    assert {r["metadata"]["kind"] for r in summaries} == {"file", "class"}
    assert any(r["parent_id"] == wrapper["id"] for r in summaries)


def test_same_input_same_rows_any_process() -> None:
    a = chunk_file("r", "textwrap.py", TEXTWRAP, S)
    with ProcessPoolExecutor(1) as pool:
        b = pool.submit(chunk_file, "r", "textwrap.py", TEXTWRAP, S).result()
    assert [(r["id"], r["text"], r["content_hash"]) for r in a.rows] == \
        [(r["id"], r["text"], r["content_hash"]) for r in b.rows]


def _span_ids(res) -> set[str]:
    # The file summary keeps one id per path (CodeIndex's layout): each version overwrites it.
    return {r["id"] for r in res.rows if not (r["role"] == "summary" and r["metadata"]["kind"] == "file")}


def test_ids_depend_on_repository_path_content_and_settings() -> None:
    base = _span_ids(chunk_file("r", "a.py", TEXTWRAP, S))
    assert base == _span_ids(chunk_file("r", "a.py", TEXTWRAP, IngestSettings(max_tokens=128)))
    for other in (
        chunk_file("r2", "a.py", TEXTWRAP, S),
        chunk_file("r", "b.py", TEXTWRAP, S),
        chunk_file("r", "a.py", TEXTWRAP + b"\n# edit\n", S),
        chunk_file("r", "a.py", TEXTWRAP, IngestSettings(max_tokens=129)),
    ):
        assert not base & _span_ids(other)


def test_content_hash_survives_an_edit_elsewhere_in_the_file() -> None:
    before = chunk_file("r", "a.py", TEXTWRAP, S)
    edited = TEXTWRAP.replace(b"def dedent(text):", b"def dedent(text):\n    # edited", 1)
    after = chunk_file("r", "a.py", edited, S)
    h_before = {r["content_hash"]: r["id"] for r in before.rows if r["role"] == "leaf"}
    h_after = {r["content_hash"]: r["id"] for r in after.rows if r["role"] == "leaf"}
    kept = set(h_before) & set(h_after)
    assert len(kept) >= len(h_before) - 3, "only the edited spans get new text"
    assert all(h_before[h] != h_after[h] for h in kept), "ids change with the blob, the cache key does not"


def test_statuses_instead_of_exceptions() -> None:
    assert chunk_file("", "x.bin", b"\x00\x01\x02" * 10, S).status == "skipped"
    assert chunk_file("", "x.bin", b"\x00\x01", S).reason.startswith("binary")
    strict = IngestSettings(max_tokens=64, errors="strict")
    res = chunk_file("", "latin.py", "x = 'é'\n".encode("latin-1"), strict)
    assert (res.status, res.reason.split(":")[0]) == ("skipped", "undecodable")
    lenient = chunk_file("", "latin.py", "x = 'é'\n".encode("latin-1"), S)
    assert lenient.status == "chunked"
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


def _batch(paths):
    return {"repository": ["r"] * len(paths), "path": [p.name for p in paths], "data": [p.read_bytes() for p in paths]}


def test_chunk_batch_columns_rows_out_differ_from_rows_in() -> None:
    paths = FILES[:3]
    out = chunk_batch(_batch(paths), S)
    assert list(out) == list(BATCH_COLUMNS)
    n = len(out["id"])
    assert all(len(v) == n for v in out.values())
    assert n > len(paths)
    assert all(isinstance(v, str) for col in out.values() for v in col), "string columns: Arrow/pandas/Spark-ready"
    status = [i for i in range(n) if out["role"][i] == "file"]
    assert len(status) == len(paths) and {out["status"][i] for i in status} == {"chunked"}
    assert SPARK_SCHEMA.split(", ")[0] == "id string"
    expected = []
    for p in paths:
        expected += [r["id"] for r in chunk_file("r", p.name, p.read_bytes(), S).rows]
    assert [out["id"][i] for i in range(n) if out["role"][i] != "file"] == expected


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
