"""The code-search benchmark harness (benchmarks/codesearch*.py): Semble's scorer on hand-worked cases, the dev-split
guard, the index cache key, and an end-to-end run on a tiny benchmark snapshot and mirror written by the test (git
repositories made here; no fetched data, no model, no Semble)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

from benchmarks import codesearch as C  # noqa: E402
from benchmarks import codesearch_data as D  # noqa: E402
from llmc_splitters.errors import ConfigurationError  # noqa: E402

L2, L3 = 1 / math.log2(3), 1 / math.log2(4)  # the discounts of ranks 2 and 3


def _task(relevant: list, secondary: list = (), category: str = "semantic", repo: str = "flask") -> D.Task:
    return D.Task(repo, "python", "q", tuple(D.Target(*t) for t in relevant), tuple(D.Target(*t) for t in secondary),
                  category)


def test_relevant_and_secondary_targets_count_alike() -> None:
    task = _task([("a.py",)], [("pkg/b.py", 10, 20)])
    hits = [("x.py", 1, 5), ("src/pkg/b.py", 15, 30), ("a.py", 1, 2)]
    value, ranks = D.score_hits(task, hits)
    assert ranks == [3, 2]
    assert value == pytest.approx((L2 + L3) / (1 + L2))


def test_lines_must_overlap_a_target_with_lines() -> None:
    task = _task([("b.py", 10, 20)])
    assert D.score_hits(task, [("b.py", 21, 30), ("b.py", 1, 9)]) == (0.0, [None])
    assert D.score_hits(task, [("b.py", 21, 30), ("b.py", 20, 25)])[1] == [2]  # touching line 20 overlaps


def test_two_targets_found_by_one_hit_count_once() -> None:
    task = _task([("a.py",), ("a.py", 1, 5)])
    value, ranks = D.score_hits(task, [("a.py", 1, 3), ("c.py", 1, 3)])
    assert ranks == [1, 1]
    assert value == pytest.approx(1 / (1 + L2))


def test_a_target_counts_at_its_first_hit_only() -> None:
    task = _task([("a.py",), ("b.py",)])
    value, ranks = D.score_hits(task, [("a.py", 1, 3), ("a.py", 4, 9), ("b.py", 1, 3)])
    assert ranks == [1, 3]
    assert value == pytest.approx((1 + L3) / (1 + L2))


def test_only_the_top_ten_hits_count() -> None:
    task = _task([("a.py",)])
    hits = [(f"x{i}.py", 1, 1) for i in range(10)] + [("a.py", 1, 1)]
    assert D.score_hits(task, hits) == (0.0, [None])
    assert D.score_hits(task, hits[1:])[0] == pytest.approx(1 / math.log2(11))


def test_ideal_list_stops_at_ten() -> None:
    task = _task([(f"f{i}.py",) for i in range(12)])
    hits = [(f"f{i}.py", 1, 1) for i in range(10)]
    assert D.score_hits(task, hits)[0] == pytest.approx(1.0)


def test_path_suffix_matching() -> None:
    assert D.path_matches("src/flask/app.py", "flask/app.py")
    assert D.path_matches("app.py", "src/flask/app.py")
    assert D.path_matches("src\\flask\\app.py", "flask/app.py")
    assert not D.path_matches("myapp.py", "app.py")
    assert not D.path_matches("flask/app.py", "other/app.py")


def test_file_scores_use_distinct_gold_paths() -> None:
    task = _task([("a.py", 1, 5), ("a.py", 30, 40)], [("b.py",)])
    hits = [("a.py", 50, 60), ("a.py", 1, 2), ("c.py", 1, 1), ("b.py", 1, 1)]
    assert D.distinct_files(hits) == ["a.py", "c.py", "b.py"]
    assert D.score_files(task, D.distinct_files(hits)) == pytest.approx((1 + L3) / (1 + L2))


def test_infer_category() -> None:
    assert D.infer_category("parse_headers") == "symbol"
    assert D.infer_category("How does routing work") == "architecture"
    assert D.infer_category("where are cookies parsed") == "semantic"


def test_means_per_repository_then_over_repositories() -> None:
    rows = [{"repo": "a", "language": "python", "category": "symbol", "ndcg10": 1.0},
            {"repo": "b", "language": "go", "category": "symbol", "ndcg10": 0.0},
            {"repo": "b", "language": "go", "category": "semantic", "ndcg10": 0.5},
            {"repo": "b", "language": "go", "category": "semantic", "ndcg10": 0.5}]
    s = D.summarize(rows, ("ndcg10",))
    assert s["repos"]["b"]["ndcg10"] == pytest.approx(1 / 3)
    assert s["overall"] == {"repos": 2, "ndcg10": pytest.approx((1 + 1 / 3) / 2)}  # not the question mean 0.5
    assert s["by_language"]["go"]["ndcg10"] == pytest.approx(1 / 3)
    assert s["by_category"]["symbol"] == {"repos": 2, "ndcg10": pytest.approx(0.5)}
    assert s["by_category"]["semantic"] == {"repos": 1, "ndcg10": pytest.approx(0.5)}


def test_held_out_repositories_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="django.*held out"):
        D.check_dev(["flask", "django"])
    nowhere = tmp_path / "no-snapshot"
    for call in (lambda: D.load_specs(nowhere, ["django"]), lambda: D.published(nowhere, ["django"]),
                 lambda: C.run(["django"], cfg=C.Config(semble=nowhere))):
        with pytest.raises(ConfigurationError, match="django"):
            call()
    with pytest.raises(SystemExit, match="django"):
        C.main(["--repos", "flask,django", "--semble", str(nowhere)])


# --------------------------------------------------------------------------------------------- end to end


def _git_repo(path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), *env, "commit", "-qm", "c"], check=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


PKG = {
    "src/pkg/config.py": "def load_settings(path):\n    '''Read the settings file.'''\n    return open(path).read()\n",
    "src/pkg/net.py": "class RetryPolicy:\n    def backoff_delay(self, attempt):\n        return 2 ** attempt\n",
    "docs/notes.md": "# Notes\nload_settings reads settings.\n",
}


@pytest.fixture()
def bench(tmp_path: Path) -> C.Config:
    """A Semble-like snapshot with two dev repositories (flask: a tiny mirror; click: no mirror) and a held-out
    row in the published results, and the flask mirror."""
    commit = _git_repo(tmp_path / "mirrors" / "pallets+flask" / "repo", PKG)
    repos = [{"name": "flask", "language": "python", "url": "https://github.com/pallets/flask.git",
              "revision": commit, "benchmark_root": "src/pkg"},
             {"name": "click", "language": "python", "url": "https://github.com/pallets/click.git",
              "revision": commit, "benchmark_root": None}]
    annotations = [
        {"query": "load_settings", "category": "symbol", "relevant": [{"path": "src/pkg/config.py", "start_line": 1,
                                                                       "end_line": 3}], "secondary": []},
        {"query": "how is the retry backoff delay computed", "relevant": ["pkg/net.py"],
         "secondary": [{"path": "pkg/missing.py"}]},
    ]
    published = {"repos": [{"repo": "flask", "language": "python", "ndcg10": 0.9, "by_category": {"symbol": 1.0}},
                           {"repo": "django", "language": "python", "ndcg10": 0.1, "by_category": {}}]}
    _git_repo(tmp_path / "semble", {"benchmarks/repos.json": json.dumps(repos),
                                    "benchmarks/annotations/flask.json": json.dumps(annotations),
                                    "benchmarks/annotations/click.json": json.dumps(annotations[:1]),
                                    "benchmarks/results/semble-hybrid-abc.json": json.dumps(published)})
    return C.Config(semble=tmp_path / "semble", mirrors=tmp_path / "mirrors", cache=tmp_path / "cache",
                    log=lambda _: None)


def test_run_scores_the_tiny_benchmark_and_reuses_its_index(bench: C.Config) -> None:
    from llmc_splitters.retrieval import Ranking

    out = C.run(["flask", "click"], "lexical", cfg=bench)
    assert set(out["skipped"]) == {"click"}
    assert "no mirror" in out["skipped"]["click"]
    first, second = out["rows"]
    assert (first["category"], first["ranks"], first["ndcg10"]) == ("symbol", [1], 1.0)
    assert second["category"] == "architecture"  # inferred: the annotation has none
    assert second["ranks"] == [1, None]  # the secondary target does not exist
    assert second["ndcg10"] == pytest.approx(1 / (1 + L2))
    assert out["summary"]["overall"]["ndcg10"] == pytest.approx((1 + 1 / (1 + L2)) / 2)
    assert out["index_seconds"]["flask"] is not None
    # only benchmark_root is indexed: the docs outside it are not among the hits
    assert all(h[0] in ("config.py", "net.py") for got in out["returned"] for h in got["hits"])

    again = C.run(["flask"], "lexical", Ranking().without("noise"), cfg=bench)
    assert again["index_seconds"] == {"flask": None}
    assert again["ranking"].startswith("Ranking(") and [r["ranks"] for r in again["rows"]] == [[1], [1, None]]


def test_a_mirror_without_the_pinned_commit_is_skipped_with_its_reason(bench: C.Config) -> None:
    specs = json.loads(D.show(bench.semble, "benchmarks/repos.json"))
    specs[0]["revision"] = "0" * 40
    _git_repo(bench.semble, {"benchmarks/repos.json": json.dumps(specs)})
    out = C.run(["flask"], "lexical", cfg=bench)
    assert out["rows"] == [] and "lacks the pinned commit 000000000000" in out["skipped"]["flask"]


def test_published_rows_keep_only_dev_repositories(bench: C.Config) -> None:
    pub = D.published(bench.semble, ["flask", "click"])
    assert pub == {"semble-hybrid (published)": {"file": "semble-hybrid-abc.json", "repos": {
        "flask": {"language": "python", "ndcg10": 0.9, "by_category": {"symbol": {"ndcg10": 1.0}}}}}}


def test_the_index_key_follows_indexing_code_not_ranking_code(tmp_path: Path) -> None:
    files = {"chunking/chunker.py": "a", "retrieval/index.py": "b", "retrieval/search/ranking.py": "c",
             "retrieval/embeddings/minilm.py": "d"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def keys() -> tuple[str, str]:
        return C.index_digest("lexical", 512, tmp_path), C.index_digest("hybrid", 512, tmp_path)

    base = keys()
    assert C.index_digest("lexical", 256, tmp_path) != base[0]
    (tmp_path / "retrieval/search/ranking.py").write_text("c2")
    assert keys() == base
    (tmp_path / "retrieval/embeddings/minilm.py").write_text("d2")
    assert keys()[0] == base[0] and keys()[1] != base[1]
    (tmp_path / "chunking/chunker.py").write_text("a2")
    assert keys()[0] != base[0]


def test_a_hybrid_index_key_follows_its_own_model_only(tmp_path: Path) -> None:
    """Adding a backend or changing which one is the default leaves another model's hybrid indexes valid."""
    emb = tmp_path / "retrieval/embeddings"
    for name in ("minilm.py", "onnx.py", "base.py", "code_static.py", "resolve.py", "__init__.py"):
        (emb / name).parent.mkdir(parents=True, exist_ok=True)
        (emb / name).write_text(name)
    (emb / "data").mkdir()
    (emb / "data/code-static.npz").write_bytes(b"table")

    def keys() -> dict[str, str]:
        return {m: C.index_digest("hybrid", 512, tmp_path, embedding=m) for m in ("minilm", "code-static")}

    base = keys()
    assert base["minilm"] != base["code-static"]
    for name in ("resolve.py", "__init__.py", "data/code-static.npz"):
        (emb / name).write_text("changed")
    assert keys() == base
    (emb / "code_static.py").write_text("changed")
    assert keys()["minilm"] == base["minilm"] and keys()["code-static"] != base["code-static"]
    changed = keys()
    (emb / "onnx.py").write_text("changed")
    assert keys()["minilm"] != base["minilm"] and keys()["code-static"] == changed["code-static"]
    before = keys()
    (emb / "base.py").write_text("changed")  # shared by every model
    assert all(keys()[m] != before[m] for m in before)


def test_the_semble_peer_is_scored_with_the_same_scorer(bench: C.Config, tmp_path: Path) -> None:
    """The driver's answer (here a stand-in script printing a fixed one) goes through the same scorer."""
    answer = {"semble_version": "9.9", "model_dir": "m", "repos": {"flask": {
        "chunks": 3, "index_s": 0.1, "warnings": [],
        "hits": [[["other.py", 1, 2], ["config.py", 1, 1]], [["pkg/net.py", 1, 3]]]}}}
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\necho '{json.dumps(answer)}'\n")
    fake.chmod(0o755)
    prepared = C.prepare(["flask"], bench)
    peer = C.run_semble(prepared, bench, fake)
    assert peer["version"] == "9.9"
    assert [r["ndcg10"] for r in peer["rows"]] == [pytest.approx(L2), pytest.approx(1 / (1 + L2))]
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    with pytest.raises(RuntimeError, match="broken"):
        C.run_semble(prepared, bench, fake)
