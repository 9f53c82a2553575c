"""The SWE-bench Lite dev harness: patch parsing, gold definitions, the held-out filter, the metrics, and a run on
a tiny sympy snapshot and a tiny Django sdist the tests write (no network, no model)."""

from __future__ import annotations

import difflib
import io
import json
import subprocess
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("tree_sitter_language_pack")

from benchmarks import swebench, swebench_sources  # noqa: E402
from benchmarks.ranking import Gold  # noqa: E402
from benchmarks.swebench_data import (  # noqa: E402
    Instance,
    gold_definitions,
    gold_files,
    is_test_path,
    load_dev,
    locate,
    parse_patch,
    subset,
)
from llmc_splitters.errors import ConfigurationError, UnsupportedInputError  # noqa: E402

PRE = textwrap.dedent("""\
    import os


    class Box:
        size = 1

        def grow(self, n):
            total = self.size + n
            return total

        def shrink(self):
            return self.size - 1


    def helper(x):
        y = x + 1
        return y
""")


def diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))


def symbols(new: str, path: str = "pkg/box.py") -> tuple[list[str | None], int]:
    got = gold_definitions(parse_patch(diff(path, PRE, new)), {path: PRE})
    return [g.symbol for g in got.gold], got.module_level


def record(repo: str, n: int, **kw: Any) -> dict[str, Any]:
    base = {"repo": repo, "instance_id": f"{repo.split('/')[1]}__{repo.split('/')[1]}-{n}", "version": "1.0",
            "base_commit": "0" * 40, "created_at": f"2020-01-{n % 28 + 1:02d}", "problem_statement": "q",
            "patch": diff("pkg/box.py", PRE, PRE.replace("+ n", "+ abs(n)"))}
    return {**base, **kw}


# -------------------------------------------------------------------------------------------------- patches


def test_parse_patch_reads_files_hunks_and_line_numbers() -> None:
    patch = textwrap.dedent("""\
        diff --git a/pkg/box.py b/pkg/box.py
        index 1111111..2222222 100644
        --- a/pkg/box.py
        +++ b/pkg/box.py
        @@ -7,3 +7,4 @@ class Box:
             def grow(self, n):
        -        total = self.size + n
        +        total = self.size + abs(n)
        +        total += 0
                 return total
        diff --git a/pkg/new.py b/pkg/new.py
        new file mode 100644
        --- /dev/null
        +++ b/pkg/new.py
        @@ -0,0 +1 @@
        +x = 1
        \\ No newline at end of file
        diff --git a/pkg/tests/test_box.py b/pkg/tests/test_box.py
        --- a/pkg/tests/test_box.py
        +++ b/pkg/tests/test_box.py
        @@ -1 +1 @@
        -a = 1
        +a = 2
    """)
    files = parse_patch(patch)
    assert [(f.old_path, f.new_path) for f in files] == [("pkg/box.py", "pkg/box.py"), (None, "pkg/new.py"),
                                                         ("pkg/tests/test_box.py", "pkg/tests/test_box.py")]
    (h,) = files[0].hunks
    assert h.old_start == 7
    assert [tag for tag, _ in h.lines] == [" ", "-", "+", "+", " "]
    assert h.old_text == ["    def grow(self, n):", "        total = self.size + n", "        return total"]
    assert files[1].hunks[0].lines == [("+", "x = 1")]
    # gold files: not the test file, not the file the patch creates
    assert gold_files(files) == ["pkg/box.py"]


def test_a_patch_file_without_hunks_is_refused() -> None:
    with pytest.raises(UnsupportedInputError, match="no hunk"):
        parse_patch("--- a/x.py\n+++ b/x.py\n")


@pytest.mark.parametrize(("path", "test"), [("sympy/core/tests/test_mul.py", True), ("tests/a/models.py", True),
                                            ("pkg/conftest.py", True), ("pkg/box_test.py", True),
                                            ("django/test/utils.py", True), ("sympy/core/mul.py", False),
                                            ("django/contrib/contest.py", False), ("pkg/latest.py", False)])
def test_test_paths(path: str, test: bool) -> None:
    assert is_test_path(path) is test


# ---------------------------------------------------------------------------------------------- definitions


def test_a_changed_line_names_its_innermost_definition() -> None:
    assert symbols(PRE.replace("+ n", "+ abs(n)")) == (["Box.grow"], 0)


def test_an_import_change_is_module_level() -> None:
    assert symbols(PRE.replace("import os", "import sys")) == ([], 1)


def test_added_lines_name_the_definition_holding_the_insertion_point() -> None:
    # inside a body: the function
    assert symbols(PRE.replace("    y = x + 1\n", "    y = x + 1\n    y *= 2\n")) == (["helper"], 0)
    # after a function's last line, indented into its body: the function (the file ends there)
    assert symbols(PRE + "    y += 1\n") == (["helper"], 0)
    # a new method after the class's last line: the class, not the method before it
    assert symbols(PRE.replace("        return self.size - 1\n",
                               "        return self.size - 1\n\n    def empty(self):\n        return 0\n"
                               )) == (["Box"], 0)
    # a new function at the top level: no definition, a module-level hunk
    assert symbols(PRE + "\n\ndef other():\n    pass\n") == ([], 1)


def test_blank_and_comment_lines_name_nothing() -> None:
    assert symbols(PRE.replace("    def shrink", "    # shrinks the box\n    def shrink")) == ([], 0)
    assert symbols(PRE.replace("        return total\n\n", "        return total\n")) == ([], 0)


def test_hunks_are_located_where_their_lines_are() -> None:
    path = "pkg/box.py"
    patch = diff(path, PRE, PRE.replace("+ n", "+ abs(n)"))
    moved = "# a\n# b\n# c\n" + PRE  # the file gained three lines above the hunk since the patch was made
    got = gold_definitions(parse_patch(patch), {path: moved})
    assert [(g.symbol, g.start_line, g.end_line) for g in got.gold] == [("Box.grow", 10, 12)]
    with pytest.raises(UnsupportedInputError, match="does not match"):
        locate(parse_patch(patch)[0].hunks[0], PRE.replace("total", "sum").splitlines())


def test_a_file_python_cannot_parse_is_reported() -> None:
    path = "pkg/old.py"
    old = "print 'hi'\n"
    got = gold_definitions(parse_patch(diff(path, old, "print('hi')\n")), {path: old})
    assert got.gold == [] and got.unparsed == [path]


# ----------------------------------------------------------------------------------------------- held out


class Watched(dict):
    """A record that notes which fields are read."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def test_a_held_out_instance_is_refused_on_its_repo_alone() -> None:
    rec = Watched(record("astropy/astropy", 1))
    with pytest.raises(ConfigurationError, match="held out"):
        Instance.from_record(rec)
    assert rec.read == {"repo"}
    assert Instance.from_record(record("sympy/sympy", 1)).repo == "sympy/sympy"


def test_load_dev_drops_other_repos_before_reading_them() -> None:
    held_out = {"repo": "astropy/astropy", "patch": 3}  # malformed: reading it would fail
    text = json.dumps([record("django/django", 1), held_out, record("sympy/sympy", 2)])
    assert [i.repo for i in load_dev(text)] == ["django/django", "sympy/sympy"]
    lines = "\n".join(json.dumps(r) for r in (held_out, record("sympy/sympy", 3)))
    assert [i.id for i in load_dev(lines)] == ["sympy__sympy-3"]
    with pytest.raises(UnsupportedInputError, match="lacks the field"):
        load_dev(json.dumps([{"repo": "sympy/sympy", "patch": "x"}]))


def test_subset_takes_the_smallest_hashes_per_repo() -> None:
    import hashlib

    insts = [Instance.from_record(record(repo, n)) for repo in ("django/django", "sympy/sympy") for n in range(9)]
    got = subset(insts, 3)
    assert [i.repo for i in got] == ["sympy/sympy"] * 3 + ["django/django"] * 3
    for repo in ("sympy/sympy", "django/django"):
        ids = sorted((i.id for i in insts if i.repo == repo), key=lambda s: hashlib.sha1(s.encode()).hexdigest())
        assert {i.id for i in got if i.repo == repo} == set(ids[:3])
    assert len(subset(insts, None)) == 18
    assert subset(list(reversed(insts)), 3) == got  # the input's order does not matter


# -------------------------------------------------------------------------------------------------- metrics


def hit(path: str) -> SimpleNamespace:
    return SimpleNamespace(span=SimpleNamespace(path=path))


def test_score_hits_files_mrr_and_recall() -> None:
    result = SimpleNamespace(hits=[hit("a.py"), hit("b.py"), hit("a.py"), hit("g.py")],
                             files=[SimpleNamespace(path=p) for p in ("a.py", "g.py", "b.py")])
    defs = [Gold("g.py", 10, 19, "f"), Gold("g.py", 30, 31, "h")]
    pieces = [SimpleNamespace(path="g.py", start_line=1, end_line=14),  # 5 of f's 10 lines: counts
              SimpleNamespace(path="a.py", start_line=30, end_line=31)]  # h's lines, but another file
    s = swebench.score(["g.py"], defs, result, pieces)
    assert s["hits_hit@1"] == 0.0 and s["hits_hit@5"] == 1.0 and s["hits_hit@10"] == 1.0
    assert s["hits_mrr"] == 0.25
    assert s["files_hit@1"] == 0.0 and s["files_hit@5"] == 1.0
    assert s["recall@2048"] == 0.5
    miss = swebench.score(["z.py"], [], result, pieces)
    assert miss["hits_mrr"] == 0.0 and miss["files_hit@10"] == 0.0 and "recall@2048" not in miss


def test_aggregate_counts_skips_and_averages_recall_where_defined() -> None:
    rows = [{"id": "1", "repo": "r/a", "module_level": 1, "hits_hit@1": 1.0, "recall@2048": 0.5},
            {"id": "2", "repo": "r/a", "module_level": 0, "hits_hit@1": 0.0},
            {"id": "3", "repo": "r/b", "skipped": "no sdist fits"}]
    agg = swebench.aggregate(rows)
    assert agg["all"]["n"] == 3 and agg["all"]["scored"] == 2 and agg["all"]["skipped"] == 1
    assert agg["r/a"]["hits_hit@1"] == 0.5 and agg["r/a"]["recall@2048"] == 0.5 and agg["r/a"]["n_recall"] == 1
    assert agg["r/a"]["module_level"] == 1
    assert agg["r/b"]["hits_hit@1"] is None


# ------------------------------------------------------------------------------------------ end to end


FIXED = PRE.replace("+ n", "+ abs(n)")
QUESTION = "Box.grow gives a wrong total for a negative size n: grow(-2) should add 2"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A sympy snapshot with one commit and Django sdists 9.9 (with the fix) and 9.9.1, in a cache of their own."""
    repo = tmp_path / "mirror" / "sympy+sympy" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "box.py").write_text(PRE)
    (repo / "pkg" / "other.py").write_text("def unrelated():\n    return 'nothing to see'\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    cache = tmp_path / "cache"
    for release, text in (("9.9", FIXED), ("9.9.1", FIXED.replace("abs(n)", "max(n, 0)"))):
        (cache / "sdist").mkdir(parents=True, exist_ok=True)
        with tarfile.open(cache / "sdist" / f"Django-{release}.tar.gz", "w:gz") as tar:
            for name, body in ((f"Django-{release}/django/box.py", text),
                               (f"Django-{release}/docs/intro.txt", "Read the code.\n")):
                data = body.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(swebench_sources, "MIRRORS", tmp_path / "mirror")
    monkeypatch.setattr(swebench_sources, "CACHE", cache)
    yield cache


def _instance(repo: str, n: int, patch: str, commit: str = "0" * 40) -> Instance:
    return Instance.from_record(record(repo, n, base_commit=commit, version="9.9", problem_statement=QUESTION,
                                      patch=patch))


def test_run_on_a_snapshot_and_a_reversed_sdist(sources: Path) -> None:
    from llmc_splitters.retrieval import Ranking

    commit = _git(swebench_sources.MIRRORS / "sympy+sympy" / "repo", "rev-parse", "HEAD").strip()
    fix = diff("pkg/box.py", PRE, FIXED)
    insts = [_instance("sympy/sympy", 1, fix, commit),
             _instance("django/django", 2, diff("django/box.py", PRE, FIXED)),
             _instance("django/django", 3, diff("django/box.py", PRE, PRE.replace("1", "2")))]
    logs: list[str] = []
    out = swebench.run("lexical", Ranking().without("noise"), insts, log=logs.append)
    rows = {r["id"]: r for r in out["rows"]}
    for i in ("sympy__sympy-1", "django__django-2"):
        assert rows[i]["hits_hit@1"] == 1.0 and rows[i]["files_hit@1"] == 1.0 and rows[i]["recall@2048"] == 1.0
        assert rows[i]["gold_defs"] == 1 and rows[i]["module_level"] == 0
    assert rows["django__django-2"]["source"] == "Django 9.9 sdist, gold patch reversed"
    assert "applies to none of the sdists 9.9, 9.9.1" in rows["django__django-3"]["skipped"]
    assert any("skip django__django-3" in line for line in logs)
    assert out["summary"]["django/django"]["skipped"] == 1
    # the reversed instance's index holds the pre-fix file; the release's index keeps the sdist's
    own = swebench_sources.open_retriever(sources / "index" / "django+django@9.9+django__django-2-lexical", None)
    base = swebench_sources.open_retriever(sources / "index" / "django+django@9.9-lexical", None)
    try:
        assert "self.size + n\n" in own.get_lines("django/box.py", 8, 8).text
        assert "abs(n)" in base.get_lines("django/box.py", 8, 8).text
    finally:
        own.index.close()
        base.index.close()
    # --cached-only keeps what is built in every mode asked, and what is skipped anyway
    assert swebench.built(insts[0], ("lexical",)) and swebench.built(insts[1], ("lexical",))
    assert not swebench.built(insts[0], ("lexical", "hybrid")) and swebench.built(insts[2], ("hybrid",))
    # a second run reuses the indexes and gives the same scores
    again = swebench.run("lexical", None, insts, log=logs.append)
    assert [r.get("hits_mrr") for r in again["rows"]] == [r.get("hits_mrr") for r in out["rows"]]
    assert sum("indexed" in line for line in logs) == 2  # the snapshot's tree and the release's, once each


def test_a_missing_sdist_asks_for_prepare(sources: Path) -> None:
    (sources / "sdist" / "Django-9.9.tar.gz").unlink()
    inst = _instance("django/django", 4, diff("django/box.py", PRE, FIXED))
    with pytest.raises(SystemExit, match="--prepare"):
        swebench.run("lexical", None, [inst], log=lambda _: None)


def test_only_modes_the_harness_knows() -> None:
    with pytest.raises(SystemExit, match="lexical or hybrid"):
        swebench.run("dense", None, [])


def test_a_hybrid_tree_index_starts_from_the_last_one(sources: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmc_splitters.retrieval import HashingEmbedding

    monkeypatch.setitem(swebench._EMBEDDINGS, "hybrid", HashingEmbedding(64))
    repo = swebench_sources.MIRRORS / "sympy+sympy" / "repo"
    first = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "pkg" / "extra.py").write_text("def extra():\n    return 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "next")
    second = _git(repo, "rev-parse", "HEAD").strip()
    fix = diff("pkg/box.py", PRE, FIXED)
    logs: list[str] = []
    out = swebench.run("hybrid", None, [_instance("sympy/sympy", 1, fix, first),
                                        _instance("sympy/sympy", 2, fix, second)], log=logs.append)
    assert [r["hits_hit@5"] for r in out["rows"]] == [1.0, 1.0]
    assert f"sympy+sympy@{second[:12]}: starting from a copy of sympy+sympy@{first[:12]}-hybrid" in "\n".join(logs)
    # the copy was brought up to the second commit: one file added, the others unchanged
    assert any("1 added, 0 updated, 2 unchanged" in line for line in logs)


def test_the_command_writes_results_and_a_dump_without_held_out_ids(
        sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    commit = _git(swebench_sources.MIRRORS / "sympy+sympy" / "repo", "rev-parse", "HEAD").strip()
    fix = diff("pkg/box.py", PRE, FIXED)
    data = [record("astropy/astropy", 7, patch=fix), record("sympy/sympy", 1, base_commit=commit, patch=fix,
                                                               problem_statement=QUESTION),
            record("django/django", 2, version="9.9", patch=diff("django/box.py", PRE, FIXED),
                   problem_statement=QUESTION)]
    (tmp_path / "lite.json").write_text(json.dumps(data))
    monkeypatch.setenv("LLMC_SWEBENCH_DATA", str(tmp_path / "lite.json"))
    out, dump = tmp_path / "results", tmp_path / "dump.jsonl"
    swebench.main(["--mode", "lexical", "--repos", "sympy/sympy", "--tag", "t", "--out", str(out), "--dump",
                   str(dump), "--ablate", "noise"])
    results = json.loads((out / "swebench-t.json").read_text())
    assert results["repos"] == ["sympy/sympy"] and results["instances"] == 1
    assert set(results["modes"]["lexical"]) == {"default", "-noise", "none"}
    assert results["modes"]["lexical"]["default"]["summary"]["all"]["hits_hit@1"] == 1.0
    details = [json.loads(x) for x in dump.read_text().splitlines()]
    assert {d["id"] for d in details} == {"sympy__sympy-1"} and len(details) == 3
    assert details[0]["gold_defs"] == ["pkg/box.py:7-9 Box.grow"] and details[0]["question"] == [QUESTION]
    printed = capsys.readouterr().out
    assert "| lexical | default | sympy/sympy | 1 |" in (out / "swebench-t.md").read_text()
    for text in (printed, (out / "swebench-t.json").read_text(), (out / "swebench-t.md").read_text(),
                 dump.read_text()):
        assert "astropy" not in text


def test_another_models_hybrid_indexes_are_filed_apart(sources: Path) -> None:
    commit = _git(swebench_sources.MIRRORS / "sympy+sympy" / "repo", "rev-parse", "HEAD").strip()
    inst = _instance("sympy/sympy", 1, diff("pkg/box.py", PRE, FIXED), commit)
    assert swebench.index_kind("hybrid") == "hybrid" and swebench.index_kind("lexical", "hashing") == "lexical"
    out = swebench.run("hybrid", None, [inst], embedding="hashing", log=lambda _: None)
    assert out["embedding"] == "hashing" and out["rows"][0]["files_hit@5"] == 1.0
    tree = f"sympy+sympy@{commit[:12]}"
    assert (sources / "index" / f"{tree}-hybrid-hashing.done").is_file()
    assert not (sources / "index" / f"{tree}-hybrid").exists()  # MiniLM's index is another one, not built here
    assert swebench.built(inst, ("hybrid",), "hashing") and not swebench.built(inst, ("hybrid",))
    from llmc_splitters.retrieval import CodeIndex

    assert CodeIndex.recorded(sources / "index" / f"{tree}-hybrid-hashing")["embedding"].startswith("hashing")


def test_rank_settings_are_json_fields_of_the_ranking() -> None:
    """``--rank NAME=VALUE`` (codesearch and swebench): what a dense-only row is run with."""
    from dataclasses import replace

    from benchmarks.variants import settings_from
    from llmc_splitters.retrieval import Ranking

    values = settings_from(['lexical_weight={"symbol":0,"words":0,"report":0}', "decay=0.5", "noise=false"])
    assert values == {"lexical_weight": {"symbol": 0, "words": 0, "report": 0}, "decay": 0.5, "noise": False}
    dense = replace(Ranking(), **values)
    assert [dense.fusion_weight(s) for s in ("symbol", "words", "report")] == [0, 0, 0] and not dense.noise
