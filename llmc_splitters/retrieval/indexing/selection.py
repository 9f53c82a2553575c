"""Which files :meth:`~llmc_splitters.retrieval.CodeIndex.index_directory` indexes under a directory.

Every file kind the chunker parses, matched by name or relative path, and extensionless ``#!`` scripts in a language
it parses; vendored, build, cache and VCS directories are never entered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ...chunking.languages import INDEXED_PATTERNS

__all__ = ["DEFAULT_INCLUDE", "select_files"]

DEFAULT_INCLUDE = INDEXED_PATTERNS
"""File patterns :meth:`CodeIndex.index_directory` indexes by default: every file kind the chunker parses
(:data:`~llmc_splitters.chunking.languages.INDEXED_PATTERNS`, as the CLI and the MCP server select them), and
extensionless ``#!`` scripts in a language the chunker parses. ``llmc-splitters index`` and the framework faces also
honour ``.gitignore`` and leave out generated and minified files (:func:`llmc_splitters.ingest.walk.walk`)."""

# Vendored, build, cache and VCS directories, never entered (the walker's default list, by name).
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "bower_components", "__pycache__", ".venv", "venv", ".tox", ".nox",
     ".mypy_cache", "dist", "build", "vendor", "third_party", "site-packages", ".eggs"}
)


def select_files(base: Path, include: Sequence[str], exclude: Sequence[str]) -> list[Path]:
    """The files under ``base`` matching ``include`` and not ``exclude`` (globs on names or relative paths), in
    walk order (directories and names sorted), never entering :data:`_SKIP_DIRS` or hidden directories other than
    ``.github``."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".") or d == ".github")
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            rel = p.relative_to(base)
            if any(rel.match(g) for g in exclude):
                continue
            if any(rel.match(g) or Path(fn).match(g) for g in include) or "." not in fn and _script(p):
                found.append(p)
    return found


def _script(path: Path) -> bool:
    """Whether an extensionless file starts with a ``#!`` line naming an interpreter whose language we parse."""
    from ...chunking.languages import language_from_shebang

    try:
        with path.open("rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return language_from_shebang(head.decode("utf-8", "replace")) is not None
