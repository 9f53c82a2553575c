"""Source trees at a pinned commit, read from a bare git mirror (the tool's ``fetch`` puts them under
``/work/.mirror/<owner>+<name>/repo``). Nothing is downloaded here: the mirror must already hold the commit.

Shared by the benchmarks that index pinned repositories (:mod:`benchmarks.ranking`, :mod:`benchmarks.codesearch`).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def mirror_key(url: str) -> str:
    """``owner+name`` of a GitHub URL (``https://github.com/pallets/flask.git`` -> ``pallets+flask``), the folder
    name ``fetch`` gives its mirror."""
    owner, name = url.rstrip("/").removesuffix(".git").split("/")[-2:]
    return f"{owner}+{name}"


def has_commit(mirror: Path, commit: str) -> bool:
    """Whether the git directory ``mirror`` holds ``commit``."""
    done = subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return done.returncode == 0


def show(repo: Path, path: str, rev: str = "HEAD") -> str:
    """The text of ``path`` at ``rev`` in the git directory ``repo`` (:class:`FileNotFoundError` when git has none)."""
    done = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, text=True)
    if done.returncode != 0:
        msg = f"no {path} at {rev} in the git directory {repo}: {done.stderr.strip()}"
        raise FileNotFoundError(msg)
    return done.stdout


def list_dir(repo: Path, folder: str, rev: str = "HEAD") -> list[str]:
    """The file names directly in ``folder`` at ``rev``."""
    out = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", f"{rev}:{folder}"], capture_output=True,
                         check=True, text=True).stdout
    return out.split()


class ExportError(RuntimeError):
    """``git archive`` could not export the tree (a snapshot lacks the files of 4 MiB and more, say)."""


def export_commit(mirror: Path, commit: str, dest: Path, paths: tuple[str, ...] = ()) -> Path:
    """The files of ``commit`` (``git archive``; only under ``paths`` when given, at their own relative paths) in
    ``dest``, exported once: an existing ``dest`` is kept. The export goes to a temporary folder beside ``dest``
    first, so a killed run leaves no half tree.

    Raises:
        ExportError: git could not write the archive; the message has git's first error line.
    """
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".export-"))
    try:
        archive = subprocess.run(["git", "-C", str(mirror), "archive", commit, "--", *paths], capture_output=True)
        if archive.returncode != 0:
            first = (archive.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
            msg = f"git archive {commit[:12]} in {mirror} failed: {first}"
            raise ExportError(msg)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest
