"""Registry stand-ins of the code-search benchmark (benchmarks/codesearch_standins.py): the gold check, the layout of
an unpacked package, when a run takes a stand-in and what it records. A tiny Semble-like snapshot, mirrors and
unpacked packages are written by the tests; nothing is downloaded."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

from benchmarks import codesearch as C  # noqa: E402
from benchmarks import codesearch_data as D  # noqa: E402
from benchmarks import codesearch_standins as S  # noqa: E402
from benchmarks.codesearch_report import render  # noqa: E402

CLIENT = "def send_request(url):\n    '''Send one HTTP request.'''\n    return url\n\n\nclass Client:\n    pass\n"
AUTH = "class BasicAuth:\n    def auth_flow(self, request):\n        return request\n"


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


def _task(*targets: D.Target) -> D.Task:
    return D.Task("httpx", "python", "q", targets, (), "semantic")


def _unpacked(tmp: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """An unpacked package (as a registry client leaves it) and the archive it came from."""
    for name, text in files.items():
        (tmp / "unpacked" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "unpacked" / name).write_text(text)
    archive = tmp / "pkg.whl"
    archive.write_bytes(b"archive bytes")
    return tmp / "unpacked", archive


@pytest.fixture()
def bench(tmp_path: Path) -> C.Config:
    """A snapshot pinning flask to a commit its mirror holds and httpx to one its mirror lacks, both with httpx's
    layout and gold, so only the mirror decides between git and the stand-in."""
    flask_commit = _git_repo(tmp_path / "mirrors" / "pallets+flask" / "repo",
                             {"httpx/_client.py": CLIENT, "httpx/_auth.py": AUTH})
    _git_repo(tmp_path / "mirrors" / "encode+httpx" / "repo", {"httpx/_client.py": "OLD = 1\n"})
    repos = [{"name": "flask", "language": "python", "url": "https://github.com/pallets/flask.git",
              "revision": flask_commit, "benchmark_root": "httpx"},
             {"name": "httpx", "language": "python", "url": "https://github.com/encode/httpx.git",
              "revision": "b" * 40, "benchmark_root": "httpx"}]
    annotations = [{"query": "send_request", "category": "symbol",
                    "relevant": [{"path": "httpx/_client.py", "start_line": 1, "end_line": 3}], "secondary": []},
                   {"query": "basic authentication flow", "relevant": ["httpx/_auth.py"], "secondary": []}]
    _git_repo(tmp_path / "semble", {"benchmarks/repos.json": json.dumps(repos),
                                    "benchmarks/annotations/flask.json": json.dumps(annotations),
                                    "benchmarks/annotations/httpx.json": json.dumps(annotations)})
    return C.Config(semble=tmp_path / "semble", mirrors=tmp_path / "mirrors", cache=tmp_path / "cache",
                    log=lambda _: None)


def _install_httpx(cfg: C.Config, tmp: Path, files: dict[str, str]) -> Path:
    unpacked, archive = _unpacked(tmp, files)
    return S.install(S.STANDINS["httpx"], unpacked, S.standin_dir(cfg.cache, S.STANDINS["httpx"]), archive)


def test_the_gold_check_names_missing_paths_and_ranges_past_the_end(tmp_path: Path) -> None:
    (tmp_path / "httpx").mkdir()
    (tmp_path / "httpx" / "_client.py").write_text(CLIENT)  # 7 lines
    tasks = [_task(D.Target("httpx/_client.py", 6, 7)), _task(D.Target("httpx/_client.py"))]
    assert S.check_gold(tmp_path, tasks) == []
    tasks.append(_task(D.Target("httpx/_client.py", 6, 8), D.Target("httpx/_auth.py")))
    tasks.append(_task(D.Target("httpx/_auth.py")))  # a missing path is named once
    assert S.check_gold(tmp_path, tasks) == ["httpx/_client.py:6-8: the file has 7 lines",
                                             "httpx/_auth.py: no such file"]
    assert S.gold_summary(tasks) == "2 gold paths, 2 line ranges"


def test_install_maps_the_member_to_the_root_and_drops_the_packagers_files(tmp_path: Path) -> None:
    s = S.Standin("guzzle", "debian", "php-guzzlehttp-guzzle", "7.4.5-1", "usr/share/php/GuzzleHttp", "src", "test",
                  drop=("autoload.php",))
    unpacked, archive = _unpacked(tmp_path, {"usr/share/php/GuzzleHttp/Client.php": "<?php class Client {}\n",
                                             "usr/share/php/GuzzleHttp/Cookie/CookieJar.php": "<?php\n",
                                             "usr/share/php/GuzzleHttp/autoload.php": "<?php // generated\n",
                                             "usr/share/doc/changelog": "x\n"})
    dest = S.install(s, unpacked, tmp_path / "cache" / "guzzle@7.4.5-1", archive)
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == [S.MARKER, "src/Client.php", "src/Cookie/CookieJar.php"]
    assert json.loads((dest / S.MARKER).read_text())["version"] == "7.4.5-1"
    assert [p.name for p in dest.parent.iterdir()] == ["guzzle@7.4.5-1"]  # no staging folder left
    wrong = S.Standin("guzzle", "debian", "php-guzzlehttp-guzzle", "1", "usr/share/php/Other", "src", "test")
    with pytest.raises(S.StandinError, match="no folder 'usr/share/php/Other'"):
        S.install(wrong, unpacked, tmp_path / "cache" / "other", archive)


def test_a_mirror_lacking_the_commit_without_a_stand_in_downloaded_is_skipped(bench: C.Config) -> None:
    p = {q.spec.name: q for q in C.prepare(["flask", "httpx"], bench)}
    assert p["flask"].root is not None and p["flask"].standin is None
    assert p["httpx"].root is None
    assert "lacks the pinned commit bbbbbbbbbbbb" in p["httpx"].skip
    assert "httpx@0.29.0 is not downloaded" in p["httpx"].skip and "--prepare-standins" in p["httpx"].skip


def test_the_stand_in_is_used_only_when_the_mirror_lacks_the_commit(bench: C.Config, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _install_httpx(bench, tmp_path, {"httpx/_client.py": CLIENT, "httpx/_auth.py": AUTH})
    flask_standin = replace(S.STANDINS["httpx"], repo="flask")  # a stand-in for flask too, installed
    monkeypatch.setitem(S.STANDINS, "flask", flask_standin)
    unpacked, archive = _unpacked(tmp_path / "flask-pkg", {"httpx/_client.py": CLIENT, "httpx/_auth.py": AUTH})
    S.install(flask_standin, unpacked, S.standin_dir(bench.cache, flask_standin), archive)
    p = {q.spec.name: q for q in C.prepare(["flask", "httpx"], bench)}
    assert p["httpx"].skip is None and p["httpx"].root == tree / "httpx"
    assert p["httpx"].key == "httpx@pypi-0.29.0"
    assert p["flask"].standin is None  # its mirror holds the pinned commit: the git export, not the stand-in
    assert p["flask"].root == bench.cache / "src" / p["flask"].key / "httpx"
    record = C.standins(p.values())
    assert list(record) == ["httpx"]
    assert record["httpx"]["standin"] == "pypi httpx@0.29.0" and record["httpx"]["pinned"] == "b" * 40
    assert "lacks the pinned commit" in record["httpx"]["because"]


def test_a_stand_in_that_lacks_gold_is_not_used(bench: C.Config, tmp_path: Path) -> None:
    _install_httpx(bench, tmp_path, {"httpx/_client.py": "x = 1\n"})
    (p,) = C.prepare(["httpx"], bench)
    assert p.root is None
    assert "lacks gold: httpx/_client.py:1-3: the file has 1 lines; httpx/_auth.py: no such file" in p.skip


def test_prepare_standins_checks_an_installed_stand_in_without_downloading(bench: C.Config, tmp_path: Path) -> None:
    _install_httpx(bench, tmp_path, {"httpx/_client.py": CLIENT, "httpx/_auth.py": AUTH})
    said: list[str] = []
    assert S.prepare_standins(bench.semble, ["flask", "httpx"], bench.cache, said.append)  # flask has none
    assert said[0].startswith("stand-in httpx    pypi httpx@0.29.0 for bbbbbbbbbbbb")
    assert said[1] == "  gold check (2 questions, 2 gold paths, 1 line ranges): every path and line range present"
    (S.standin_dir(bench.cache, S.STANDINS["httpx"]) / "httpx" / "_auth.py").unlink()
    said.clear()
    assert not S.prepare_standins(bench.semble, ["httpx"], bench.cache, said.append)
    assert said[-1] == "    missing httpx/_auth.py: no such file"


def test_a_run_on_a_stand_in_scores_it_and_says_so(bench: C.Config, tmp_path: Path) -> None:
    _install_httpx(bench, tmp_path, {"httpx/_client.py": CLIENT, "httpx/_auth.py": AUTH})
    out = C.run(["httpx"], "lexical", cfg=bench)
    assert out["skipped"] == {} and out["standins"]["httpx"]["version"] == "0.29.0"
    assert [r["query"] for r in out["rows"]] == ["send_request", "basic authentication flow"]
    assert out["rows"][0]["ndcg10"] == 1.0  # the stand-in's _client.py is what was indexed
    assert any(p.name.startswith("httpx@pypi-0.29.0-lexical-") for p in (bench.cache / "index").iterdir())
    results = {"date": "d", "command": "c", "machine": "m", "wall_seconds": 1.0, "semble_snapshot": "0" * 40,
               "repos": ["httpx"], "scored_repos": ["httpx"], "skipped": {}, "ranking": "default",
               "standins": out["standins"], "systems": {"ours-lexical": out}}
    md = render(results)
    assert "- httpx: **stand-in pypi httpx@0.29.0** for bbbbbbbbbbbb; the mirror" in md
    assert "| httpx (stand-in pypi httpx@0.29.0) | python | 2 |" in md
