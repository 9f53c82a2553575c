"""The pre-fix source trees of :mod:`benchmarks.swebench` and their cached indexes.

* **sympy**: the instance's ``base_commit`` exported with ``git archive`` from the snapshot
  (``$LLMC_TUNE_MIRRORS/sympy+sympy/repo``, by default under ``/work/.mirror``) into
  ``$LLMC_BENCH_CACHE/swebench/src/sympy+sympy@<commit>``. The whole tree is indexed.
* **django**: the release sdist (``Django-X.Y.Z.tar.gz``) of the instance's ``version``, extracted into
  ``.../src/django+django@<release>``; the whole sdist tree (``django/``, ``tests/``, ``docs/``, ...) is indexed,
  as a user who indexes the project would. The candidate releases are ``X.Y`` then ``X.Y.1``; the first whose
  source the gold patch applies to (``git apply --check``) is taken: forward (the sdist predates the fix: its files
  are the pre-fix state), or in reverse (it has the fix: the patch reversed gives the pre-fix files, which replace
  the sdist's in a copy of the release's index). An instance neither fits is skipped with the reason.
  Only ``--prepare`` downloads (``pip download django==R --no-binary :all: --no-deps`` into ``.../sdist``); a run
  reads the cache and stops with a message when a release is missing.

Indexes live in ``.../swebench/index/<tree>-<mode>`` (``<tree>+<instance>-<mode>`` for a reversed patch) and are
reused across runs once complete (a ``.done`` file beside them). A tree index starts from a copy of the
repository's last completed one in the same mode when there is one (in a run, the previous tree's: instances go by
creation date), brought up to date incrementally: only changed files are chunked again, and unchanged spans keep
their cached vectors, so only what changed is embedded (a fresh sympy index embeds ~45,000 spans). Between two
sympy commits of the subset 10 to 1,200 files differ, of ~1,400.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .swebench_data import FilePatch, Instance

CACHE = Path(os.environ.get("LLMC_BENCH_CACHE", Path.home() / ".cache" / "llmc-bench")) / "swebench"
MIRRORS = Path(os.environ.get("LLMC_TUNE_MIRRORS", "/work/.mirror"))
DATA_MIRROR = "ivan4722+csvtransfer"
DATA_FILE = "swe-bench-lite.json"


def data_text() -> str:
    """The SWE-bench Lite JSON: ``$LLMC_SWEBENCH_DATA`` when set, else ``swe-bench-lite.json`` at the head of the
    snapshot ``$LLMC_TUNE_MIRRORS/ivan4722+csvtransfer/repo``."""
    given = os.environ.get("LLMC_SWEBENCH_DATA")
    if given:
        return Path(given).read_text(encoding="utf-8")
    mirror = MIRRORS / DATA_MIRROR / "repo"
    if not mirror.is_dir():
        msg = f"no SWE-bench Lite data: set LLMC_SWEBENCH_DATA to {DATA_FILE} or fetch it into {mirror}"
        raise SystemExit(msg)
    return subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{DATA_FILE}"], capture_output=True, check=True,
                          text=True).stdout


# ------------------------------------------------------------------------------------------------------- trees


def _fresh_dir(dest: Path, fill: Callable[[Path], None]) -> Path:
    """``dest``, made by ``fill`` in a temporary directory beside it and renamed (a killed run leaves no half)."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".tmp-"))
    try:
        fill(tmp)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def commit_tree(repo: str, commit: str) -> Path:
    """The repository's files at ``commit``, exported from its snapshot into the cache."""
    key = repo.replace("/", "+")
    mirror = MIRRORS / key / "repo"

    def fill(tmp: Path) -> None:
        if not mirror.is_dir():
            msg = f"no snapshot of {repo} in {mirror} (fetch github:{repo})"
            raise SystemExit(msg)
        archive = subprocess.run(["git", "-C", str(mirror), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)

    return _fresh_dir(CACHE / "src" / f"{key}@{commit[:12]}", fill)


def releases(version: str) -> list[str]:
    """The candidate Django releases of a series, in the order they are tried."""
    return [version, f"{version}.1"]


def sdist(release: str) -> Path:
    return CACHE / "sdist" / f"Django-{release}.tar.gz"


def prepare(instances: Sequence[Instance], log: Callable[[str], None] = print) -> None:
    """Download the Django sdists the instances may need (the only step that downloads) and export the sympy
    trees."""
    wanted = sorted({r for i in instances if i.repo == "django/django" for r in releases(i.version)})
    for r in wanted:
        if sdist(r).is_file():
            continue
        sdist(r).parent.mkdir(parents=True, exist_ok=True)
        log(f"downloading Django {r} (sdist)")
        subprocess.run([sys.executable, "-m", "pip", "download", f"django=={r}", "--no-binary", ":all:",
                        "--no-deps", "--quiet", "-d", str(sdist(r).parent)], check=True)
    for i in instances:
        if i.repo == "sympy/sympy":
            commit_tree(i.repo, i.base_commit)


def release_tree(release: str) -> Path:
    """The extracted sdist of a Django release (its top directory stripped)."""
    archive = sdist(release)

    def fill(tmp: Path) -> None:
        if not archive.is_file():
            msg = f"{archive} is missing: run `python -m benchmarks.swebench --prepare` first (it downloads)"
            raise SystemExit(msg)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = list(tmp.iterdir())
        for child in top.iterdir():
            child.rename(tmp / child.name)
        top.rmdir()

    return _fresh_dir(CACHE / "src" / f"django+django@{release}", fill)


# --------------------------------------------------------------------------------------------------- sources


@dataclass
class Source:
    tree: Path
    tree_key: str
    how: str
    pre_fix: dict[str, str]  # the patched files' pre-fix texts (by old path)
    overrides: dict[str, str | None] = field(default_factory=dict)  # pre-fix texts that replace the tree's
    instance: str | None = None  # set when overrides make the index the instance's own


def _git_apply(tree: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)}  # never a repository above the tree
    return subprocess.run(["git", "apply", *args, "-"], cwd=tree, input=patch, capture_output=True, text=True,
                          env=env)


def _read(tree: Path, paths: Sequence[str]) -> dict[str, str]:
    return {p: (tree / p).read_text(encoding="utf-8") for p in paths}


def reversed_files(tree: Path, patch: str, patches: Sequence[FilePatch]) -> dict[str, str | None]:
    """The pre-fix text of every file the patch touches, by reverse-applying it to copies of the tree's files
    (``None`` for a file the patch adds)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "t"
        for f in patches:
            if f.new_path:
                (work / f.new_path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tree / f.new_path, work / f.new_path)
        work.mkdir(exist_ok=True)
        done = _git_apply(work, patch, "-R")
        if done.returncode:
            msg = f"the patch no longer reverses on a copy: {done.stderr.strip()}"
            raise RuntimeError(msg)
        out: dict[str, str | None] = {f.new_path: None for f in patches if f.new_path and not f.old_path}
        out.update(_read(work, [f.old_path for f in patches if f.old_path]))
        return out


def resolve(inst: Instance, patches: Sequence[FilePatch]) -> Source | str:
    """The pre-fix source of an instance, or why there is none (the reason an instance is skipped)."""
    olds = [f.old_path for f in patches if f.old_path]
    if inst.repo == "sympy/sympy":
        tree = commit_tree(inst.repo, inst.base_commit)
        return Source(tree, f"{inst.key}@{inst.base_commit[:12]}", f"base commit {inst.base_commit[:12]}",
                      _read(tree, olds))
    tried = []
    for r in releases(inst.version):
        tree = release_tree(r)
        if _git_apply(tree, inst.patch, "--check").returncode == 0:
            return Source(tree, f"{inst.key}@{r}", f"Django {r} sdist (predates the fix)", _read(tree, olds))
        if _git_apply(tree, inst.patch, "--check", "-R").returncode == 0:
            texts = reversed_files(tree, inst.patch, patches)
            return Source(tree, f"{inst.key}@{r}", f"Django {r} sdist, gold patch reversed",
                          {p: t for p, t in texts.items() if t is not None}, texts, inst.id)
        tried.append(r)
    return f"the gold patch applies to none of the sdists {', '.join(tried)}, forward or reversed"


# ---------------------------------------------------------------------------------------------------- indexes


def _done(index_dir: Path) -> Path:
    return index_dir.with_name(index_dir.name + ".done")


def open_retriever(index_dir: Path, embedding: Any, ranking: Any = None) -> Any:
    from llmc_splitters.retrieval import CodeRetriever

    return CodeRetriever(path=index_dir, embedding=embedding, ranking=ranking)


def latest_index(repo_key: str, mode: str) -> Path | None:
    """The tree index of a repository in ``mode`` completed last, if any."""
    done = sorted((CACHE / "index").glob(f"{repo_key}@*-{mode}.done"), key=lambda p: p.stat().st_mtime)
    trees = [p.with_name(p.name[:-len(".done")]) for p in done if "+" not in p.name.split("@", 1)[1]]
    return trees[-1] if trees else None


def index_path(src: Source, mode: str) -> Path:
    """Where the index a source is searched in lives: its tree's, or its own when files replace the tree's."""
    key = f"{src.tree_key}+{src.instance}" if src.overrides else src.tree_key
    return CACHE / "index" / f"{key}-{mode}"


def is_built(src: Source, mode: str) -> bool:
    return _done(index_path(src, mode)).exists()


def build_index(src: Source, mode: str, embedding: Any,
                log: Callable[[str], None] = print) -> tuple[Path, float]:
    """The index of a source (built when missing) and the seconds spent building. A tree index starts from a copy
    of the repository's last completed one in the same mode, when there is one."""
    t0 = time.perf_counter()
    base = CACHE / "index" / f"{src.tree_key}-{mode}"
    if not _done(base).exists():
        seed = latest_index(src.tree_key.split("@")[0], mode)
        if not base.exists() and seed is not None:
            shutil.copytree(seed, base)
            log(f"{mode:7} {src.tree_key}: starting from a copy of {seed.name}")
        r = open_retriever(base, embedding)
        report = r.index_directory(src.tree)
        r.index.close()
        _done(base).touch()
        log(f"{mode:7} indexed {src.tree_key}: {len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged in {time.perf_counter() - t0:.0f} s")
    if not src.overrides:
        return base, time.perf_counter() - t0
    own = index_path(src, mode)
    if not _done(own).exists():
        if own.exists():
            shutil.rmtree(own)
        shutil.copytree(base, own)
        r = open_retriever(own, embedding)
        r.index_texts({p: t for p, t in src.overrides.items() if t is not None})
        for p, t in src.overrides.items():
            if t is None:
                r.remove(p)
        r.index.close()
        _done(own).touch()
    return own, time.perf_counter() - t0
