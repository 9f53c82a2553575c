"""Manifests from git (no file reads), the streaming diff, and the run state (baseline, pending, commit)."""

from __future__ import annotations

import gzip
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest

from llmc_splitters.ingest import git_blob_sha
from llmc_splitters.ingest.manifest import (
    ManifestEntry,
    ManifestError,
    ManifestState,
    diff_manifests,
    filter_manifest,
    git_manifest,
    read_manifest,
    write_manifest,
)

FP = "v1-test"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True, capture_output=True, text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("def a():\n    return 1\n")
    (root / "src" / "b.py").write_text("import os\n")
    (root / "README.md").write_text("# Title\n\nText.\n")
    (root / "weird name\twith tab.py").write_text("x = 1\n")
    (root / "ünïcode.py").write_text("y = 'é'\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    (root / "link.py").symlink_to("src/b.py")
    _git(root, "add", "link.py")
    _git(root, "commit", "-qm", "init")
    return root


def _key(e: ManifestEntry) -> tuple[str, str]:
    return e.key


def test_git_manifest_lists_blob_shas_and_sizes_without_reading_files(repo: Path, monkeypatch) -> None:
    # Reading a file through Python would go through open(); forbid it while the manifest is built.
    import builtins

    real_open = builtins.open

    def guarded(file, *a, **k):  # noqa: ANN001, ANN002, ANN003
        if str(file).startswith(str(repo)):
            raise AssertionError(f"the manifest read {file}")
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded)
    entries = list(git_manifest(repo, repository="r"))
    monkeypatch.setattr(builtins, "open", real_open)
    paths = [e.path for e in entries]
    assert paths == sorted(paths), "git lists paths in byte order"
    assert "link.py" not in paths, "symbolic links have no text of their own"
    assert set(paths) == {"README.md", "logo.png", "src/b.py", "src/pkg/a.py", "weird name\twith tab.py", "ünïcode.py"}
    for e in entries:
        data = (repo / e.path).read_bytes()
        assert e.repository == "r"
        assert e.blob_sha == git_blob_sha(data)
        assert e.size == len(data)


def test_git_manifest_without_sizes_reads_only_trees(repo: Path) -> None:
    with_sizes = list(git_manifest(repo))
    without = list(git_manifest(repo, sizes=False))
    assert [(e.path, e.blob_sha) for e in without] == [(e.path, e.blob_sha) for e in with_sizes]
    assert {e.size for e in without} == {-1}


def test_git_manifest_of_the_index_sees_staged_files(repo: Path) -> None:
    (repo / "new.py").write_text("z = 3\n")
    _git(repo, "add", "new.py")
    head = {e.path for e in git_manifest(repo)}
    index = {e.path: e for e in git_manifest(repo, ref=None)}
    assert "new.py" not in head
    assert index["new.py"].blob_sha == git_blob_sha(b"z = 3\n")
    assert index["new.py"].size == -1


def test_git_manifest_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="ls-tree"):
        list(git_manifest(tmp_path))


def test_filter_manifest_by_name_and_size() -> None:
    es = [ManifestEntry("", p, "0" * 40, s) for p, s in
          [("a.py", 10), ("img/logo.png", 10), ("big.py", 10_000), ("docs/x.md", 5)]]
    assert [e.path for e in filter_manifest(es)] == ["a.py", "big.py", "docs/x.md"]
    assert [e.path for e in filter_manifest(es, include=["*.py"], max_size=1000)] == ["a.py"]
    assert [e.path for e in filter_manifest(es, include=["docs/*"], exclude=())] == ["docs/x.md"]


def test_manifest_file_round_trips_awkward_paths(tmp_path: Path) -> None:
    es = sorted([
        ManifestEntry("", "tab\there.py", "a" * 40, 1),
        ManifestEntry("", 'quote"start.py', "b" * 40, 2),
        ManifestEntry("", '"quoted.py', "c" * 40, 3),
        ManifestEntry("", "new\nline.py", "d" * 40, -1),
        ManifestEntry("repo b", "ünï/cödé.py", "e" * 40, 5),
        ManifestEntry("", "back\\slash.py", "f" * 40, 6),
    ], key=_key)
    f = tmp_path / "m.tsv.gz"
    assert write_manifest(f, es, header={"fingerprint": FP}) == len(es)
    assert list(read_manifest(f)) == es
    with pytest.raises(ManifestError, match="sorted"):
        write_manifest(f, list(reversed(es)))


def _m(*rows: tuple[str, str]) -> list[ManifestEntry]:
    return [ManifestEntry("", p, sha, 1) for p, sha in rows]


def test_diff_gives_added_changed_deleted_and_counts_unchanged() -> None:
    old = _m(("a", "1"), ("b", "2"), ("c", "3"), ("e", "5"))
    new = _m(("a", "1"), ("b", "9"), ("d", "4"), ("e", "5"), ("f", "6"))
    seen: list[ManifestEntry] = []
    plan = diff_manifests(old, new, on_new=seen.append)
    assert [e.path for e in plan.added] == ["d", "f"]
    assert [(e.path, e.blob_sha) for e in plan.changed] == [("b", "9")]
    assert [e.path for e in plan.deleted] == ["c"]
    assert plan.unchanged == 2
    assert plan.total == 5
    assert seen == new


def test_diff_forced_keys_and_settings_change() -> None:
    old = _m(("a", "1"), ("b", "2"))
    new = _m(("a", "1"), ("b", "2"))
    plan = diff_manifests(old, new, force=[("", "a"), ("", "ghost")])
    assert [e.path for e in plan.changed] == ["a"]
    assert plan.reasons[("", "a")] == "interrupted run"
    assert [e.path for e in plan.deleted] == ["ghost"], "a path a dead run touched that no longer exists is deleted"
    plan = diff_manifests(old, new, rechunk_all=True)
    assert [e.path for e in plan.changed] == ["a", "b"]
    assert plan.reasons[("", "b")] == "settings changed"


def test_diff_rejects_unsorted_manifests() -> None:
    with pytest.raises(ManifestError, match="not sorted"):
        diff_manifests([], _m(("b", "1"), ("a", "2")))


def test_diff_is_streaming_memory_follows_the_change_set() -> None:
    n = 50_000

    def gen(changed: bool):
        for i in range(n):
            sha = f"{i:040x}"
            if changed and i % 100 == 0:
                sha = f"{i + 1:040x}"  # 1% modified
            yield ManifestEntry("", f"src/{i // 1000:04d}/file_{i:07d}.py", sha, 100)

    tracemalloc.start()
    t = time.perf_counter()
    plan = diff_manifests(gen(False), gen(True))
    elapsed = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(plan.changed) == n // 100
    assert plan.unchanged == n - n // 100
    # Holding either manifest would take ~15 MB; the diff holds the 500 changed entries only.
    assert peak < 1024 * 1024, f"peak {peak / 1e6:.1f} MB"
    assert elapsed < 60


def _state_plan(state: ManifestState, repo: Path, fp: str = FP, **kw):
    return state.plan(git_manifest(repo), fingerprint=fp, **kw)


def test_state_plans_incrementally_and_commits(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    p1 = _state_plan(state, repo)
    assert p1.full and len(p1.added) == 6 and not p1.changed
    assert state.pending_keys(), "the touched paths are recorded before anything is written"
    state.commit(p1)
    assert not state.pending.exists()
    header = gzip.open(state.baseline, "rt").readline()
    assert FP in header
    p2 = _state_plan(state, repo)
    assert (len(p2.added), len(p2.changed), len(p2.deleted), p2.unchanged) == (0, 0, 0, 6)
    state.commit(p2)
    (repo / "src" / "b.py").write_text("import sys\n")
    (repo / "README.md").unlink()
    (repo / "c.py").write_text("c = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "edit")
    p3 = _state_plan(state, repo)
    assert [e.path for e in p3.added] == ["c.py"]
    assert [e.path for e in p3.changed] == ["src/b.py"]
    assert [e.path for e in p3.deleted] == ["README.md"]
    assert p3.unchanged == 4


def test_state_new_settings_rechunk_everything(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    state.commit(_state_plan(state, repo))
    p = _state_plan(state, repo, fp="v1-other")
    assert len(p.changed) == 6 and set(p.reasons.values()) == {"settings changed"}


def test_state_after_a_dead_run_reprocesses_what_it_touched(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    state.commit(_state_plan(state, repo))
    (repo / "src" / "b.py").write_text("import sys\n")
    (repo / "tmp.py").write_text("t = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "edit")
    dead = _state_plan(state, repo)  # ... and the run dies before commit()
    assert {e.path for e in dead.to_chunk} == {"src/b.py", "tmp.py"}
    # Meanwhile tmp.py is deleted again: the dead run may have written spans for it, so they must go.
    (repo / "tmp.py").unlink()
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "drop tmp")
    again = _state_plan(state, repo)
    assert [e.path for e in again.changed] == ["src/b.py"]
    assert [e.path for e in again.deleted] == ["tmp.py"]
    assert again.reasons[("", "tmp.py")] == "interrupted run"


def test_state_commit_keeps_failed_files_for_the_next_run(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    state.commit(_state_plan(state, repo))
    (repo / "src" / "b.py").write_text("import sys\n")
    _git(repo, "commit", "-qam", "edit")
    p = _state_plan(state, repo)
    state.commit(p, failed=[("", "src/b.py")])
    assert state.pending_keys() == [("", "src/b.py")]
    retry = _state_plan(state, repo)
    assert [e.path for e in retry.changed] == ["src/b.py"], "a failed file is planned again"
    state.commit(retry)
    assert not _state_plan(state, repo).to_chunk


def test_full_plan_ignores_the_baseline(repo: Path, tmp_path: Path) -> None:
    state = ManifestState(tmp_path / "state")
    state.commit(_state_plan(state, repo))
    p = _state_plan(state, repo, full=True)
    assert len(p.added) == 6 and p.full
