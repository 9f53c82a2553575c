"""Registry stand-ins for dev repositories of the code-search benchmark whose pinned commit no mirror holds.

Three dev repositories are pinned to commits newer than the git snapshots ``fetch`` gives. For each, the release
closest to the pinned commit comes from a package registry instead, the way the SWE-bench harness takes Django from
its PyPI sdist, laid out at the repository's own paths (npm's ``package/lib`` -> ``lib``, the wheel's ``httpx`` ->
``httpx``, Debian's ``/usr/share/php/GuzzleHttp`` -> ``src``) so that the benchmark's gold paths resolve.

``python -m benchmarks.codesearch --prepare-standins`` downloads them with the registries' own clients (``npm pack``,
``pip download``, ``apt-get download``) into ``$LLMC_BENCH_CACHE/codesearch/standins/<name>@<version>`` and checks the
gold of each (:func:`check_gold`): the only step of the benchmark that downloads. A run takes a stand-in only for a
repository whose mirror lacks the pinned commit, and only when the stand-in is there and its gold check passes.

How the versions were chosen: the pinned commits are in Semble's ``repos.json`` from its first commit of the
benchmark (2026-04-15) on. Semble's published results give each repository's chunk count under Semble's chunker of
then (its ``src/semble/index/chunker.py`` at 2018720: chonkie 1.6.2, ``chunk_size=1500``; run with
tree-sitter-language-pack 0.13.0, whose grammars ship in the wheel); that chunker gives the published count exactly
on flask, click, requests, express and nvm (pinned trees from their mirrors), so it fingerprints a tree. The counts per candidate are
in :data:`STANDINS` (``why``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import codesearch_data as D

MARKER = ".standin.json"


@dataclass(frozen=True)
class Standin:
    """One registry release standing in for a pinned repository: ``member`` (a folder of the unpacked package)
    becomes ``root`` (the repository's ``benchmark_root``), less the files ``drop`` (paths under ``member``) that the
    packager added."""

    repo: str
    registry: str  # "npm", "pypi" or "debian"
    package: str
    version: str
    member: str
    root: str
    why: str
    drop: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.package}@{self.version}"

    def record(self, pinned: str) -> dict[str, str]:
        """What a result says about this stand-in."""
        return {"standin": f"{self.registry} {self.label}", "registry": self.registry, "package": self.package,
                "version": self.version, "pinned": pinned, "why": self.why}


STANDINS = {s.repo: s for s in (
    Standin("axios", "npm", "axios", "1.15.1", "package/lib", "lib",
            "pinned by 2026-04-15, between 1.15.0 (2026-04-08) and 1.15.1 (2026-04-19); Semble's chunker gives "
            "164 and 167 chunks on their lib/ against the published 166; the related range lib/core/Axios.js:179-239 "
            "is one of its chunks in 1.15.x only"),
    Standin("httpx", "pypi", "httpx", "0.29.0", "httpx", "httpx",
            "its httpx/ is the newest master of the mirror (2025-12-10, older than the pin) but for __version__.py, "
            "while 0.28.1 differs in 8 files; 248 chunks, as published"),
    Standin("guzzle", "debian", "php-guzzlehttp-guzzle", "7.4.5-1", "usr/share/php/GuzzleHttp", "src",
            "the only version in the Debian suite here, older than the pin: upstream 7.4.5's src/ (as its git tag) "
            "plus Debian's generated autoload.php, dropped; 198 chunks against the published 206 (the mirror's "
            "newest tag 7.8.1: 202); the gold is whole files, all present", drop=("autoload.php",)),
)}


class StandinError(RuntimeError):
    """A registry client could not download or unpack a stand-in (the message has its error)."""


def standin_dir(cache: Path, s: Standin) -> Path:
    """Where the stand-in ``s`` lives: ``<cache>/standins/<repo>@<version>`` with its files under ``s.root``."""
    return cache / "standins" / f"{s.repo}@{s.version}"


def check_gold(tree: Path, tasks: Sequence[D.Task]) -> list[str]:
    """What of the questions' gold ``tree`` (files at their repository paths) lacks: a target path that is not a file
    there, or a line range past its file's end. Empty when every gold path and range exists."""
    problems: dict[str, None] = {}
    for task in tasks:
        for t in task.all_relevant:
            f = tree / t.path
            if not f.is_file():
                problems[f"{t.path}: no such file"] = None
            elif t.has_span:
                n = len(f.read_text(encoding="utf-8", errors="replace").splitlines())
                if not 1 <= t.start_line <= t.end_line <= n:  # type: ignore[operator]
                    problems[f"{t}: the file has {n} lines"] = None
    return list(problems)


def gold_summary(tasks: Sequence[D.Task]) -> str:
    """How much gold :func:`check_gold` looks at: distinct paths and line ranges."""
    targets = {t for task in tasks for t in task.all_relevant}
    return f"{len({t.path for t in targets})} gold paths, {sum(t.has_span for t in targets)} line ranges"


def locate(s: Standin, spec: D.RepoSpec, tasks: Sequence[D.Task], cache: Path) -> tuple[Path | None, str]:
    """The folder to index for ``spec`` from its stand-in, or ``None`` and why it cannot be used (not downloaded,
    another root, gold missing). Downloads nothing."""
    tree = standin_dir(cache, s)
    if s.root != spec.benchmark_root:
        return None, f"the stand-in {s.label} lays out {s.root!r}, the benchmark indexes {spec.benchmark_root!r}"
    if not (tree / MARKER).is_file():
        return None, (f"the stand-in {s.label} is not downloaded "
                      "(python -m benchmarks.codesearch --prepare-standins)")
    problems = check_gold(tree, tasks)
    if problems:
        return None, f"the stand-in {s.label} lacks gold: {'; '.join(problems[:5])}"
    return tree / s.root, ""


def install(s: Standin, unpacked: Path, dest: Path, archive: Path) -> Path:
    """Lay out the unpacked package ``unpacked`` as the stand-in ``dest``: ``s.member`` copied to ``s.root`` less
    ``s.drop``, and the marker naming the archive and its digest. Written beside ``dest`` first, then renamed, so a
    killed run leaves no half tree."""
    member = unpacked / s.member
    if not member.is_dir():
        msg = f"{archive.name} has no folder {s.member!r}"
        raise StandinError(msg)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".standin-"))
    try:
        shutil.copytree(member, tmp / s.root)
        for rel in s.drop:
            (tmp / s.root / rel).unlink()
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        (tmp / MARKER).write_text(json.dumps({"registry": s.registry, "package": s.package, "version": s.version,
                                              "archive": archive.name, "sha256": digest}) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def _client(cmd: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        msg = f"{cmd[0]} is not installed; it downloads this stand-in"
        raise StandinError(msg) from None
    if done.returncode != 0:
        msg = f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[-800:]}"
        raise StandinError(msg)


def _fetch(s: Standin, work: Path) -> Path:
    """The package archive of ``s``, downloaded into ``work`` by its registry's client."""
    if s.registry == "npm":
        _client(["npm", "pack", f"{s.package}@{s.version}", "--silent"], work)
    elif s.registry == "pypi":
        _client([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                 f"{s.package}=={s.version}", "-d", str(work)], work)
    elif s.registry == "debian":
        work.chmod(0o755)  # apt-get hands the download to its own user when it can write here
        _client(["apt-get", "download", f"{s.package}={s.version}"], work)
    else:
        msg = f"unknown registry {s.registry!r}"
        raise StandinError(msg)
    got = [p for p in work.iterdir() if p.is_file()]
    if len(got) != 1:
        msg = f"expected one archive of {s.label} from {s.registry}, got {[p.name for p in got]}"
        raise StandinError(msg)
    return got[0]


def _unpack(archive: Path, into: Path) -> None:
    if archive.suffix == ".deb":
        _client(["dpkg-deb", "-x", str(archive), str(into)], into)
    elif archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            z.extractall(into)
    else:
        with tarfile.open(archive) as t:
            t.extractall(into, filter="data")


def download(s: Standin, cache: Path) -> Path:
    """The stand-in ``s`` in ``cache``, downloaded and laid out unless it is there already."""
    dest = standin_dir(cache, s)
    if (dest / MARKER).is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="standin-") as work:
        fetched, unpacked = Path(work) / "fetched", Path(work) / "unpacked"
        fetched.mkdir()
        unpacked.mkdir()
        archive = _fetch(s, fetched)
        _unpack(archive, unpacked)
        return install(s, unpacked, dest, archive)


def prepare_standins(semble: Path, names: Sequence[str], cache: Path, log: Callable[[str], None] = print) -> bool:
    """Download the stand-ins of the dev repositories ``names`` that have one and print each one's gold check;
    whether every check passed."""
    ok = True
    for spec in D.load_specs(semble, [n for n in D.check_dev(names) if n in STANDINS]):
        s = STANDINS[spec.name]
        tree = download(s, cache)
        tasks = D.load_tasks(semble, spec)
        problems = check_gold(tree, tasks)
        if s.root != spec.benchmark_root:
            problems.insert(0, f"laid out at {s.root!r}, the benchmark indexes {spec.benchmark_root!r}")
        ok = ok and not problems
        log(f"stand-in {spec.name:8} {s.registry} {s.label} for {spec.revision[:12]} in {tree}")
        log(f"  gold check ({len(tasks)} questions, {gold_summary(tasks)}): "
            + ("every path and line range present" if not problems else f"{len(problems)} missing"))
        for p in problems:
            log(f"    missing {p}")
    return ok
