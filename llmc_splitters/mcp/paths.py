"""Paths an agent sends: relative to the indexed root, in the form the index stores, never outside the root.

The server reads file text from the index only (``get_lines``, ``get_symbol``); the one place where a path an agent
gives touches the disk is ``reindex(paths)``, and :func:`inside_root` checks that place. Both functions refuse with a
:class:`~llmc_splitters.errors.RequestError` whose message tells the agent what to send instead.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from ..errors import RequestError

__all__ = ["inside_root", "relative_path", "scrub"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_MAX_PATH = 4096


def relative_path(value: str, *, what: str = "path", allow_root: bool = False) -> str:
    """``value`` as the POSIX path relative to the indexed root that the index stores, or a refusal.

    ``./pkg//mod.py`` and ``pkg\\mod.py`` become ``pkg/mod.py``; ``.`` (with ``allow_root``) becomes ``""``, the root
    itself. Absolute paths (``/etc/passwd``, ``C:\\x``, ``\\\\host\\share``), home-relative ones (``~/x``) and any
    ``..`` component are refused, whether or not they would end up inside the root: the server never resolves a
    path that an agent wrote against the file system to find out.

    Args:
        value: The path as the agent sent it.
        what: The argument's name, for the message.
        allow_root: Accept the root itself (``.`` or ``""``).

    Raises:
        RequestError: The path is empty, absolute, climbs out with ``..``, or holds a NUL byte.

    Example:
        >>> relative_path("./json//decoder.py")
        'json/decoder.py'
        >>> relative_path("../../etc/passwd")
        Traceback (most recent call last):
        ...
        llmc_splitters.errors.RequestError: path '../../etc/passwd' leaves the indexed root; give a path relative to it, as search_code reports paths (for example 'pkg/module.py')
    """
    if not isinstance(value, str):
        msg = f"{what} must be a string path relative to the indexed root, got {type(value).__name__}"
        raise RequestError(msg)
    if "\x00" in value or len(value) > _MAX_PATH:
        msg = f"{what} is not a usable path; give a path relative to the indexed root (for example 'pkg/module.py')"
        raise RequestError(msg)
    text = value.strip().replace("\\", "/")
    if text.startswith(("/", "~")) or _DRIVE.match(text):
        msg = (
            f"{what} {value!r} is absolute; give it relative to the indexed root, as search_code reports paths "
            "(for example 'pkg/module.py')"
        )
        raise RequestError(msg)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        msg = (
            f"{what} {value!r} leaves the indexed root; give a path relative to it, as search_code reports paths "
            "(for example 'pkg/module.py')"
        )
        raise RequestError(msg)
    if not parts and not allow_root:
        msg = f"{what} is empty; give a file path relative to the indexed root (for example 'pkg/module.py')"
        raise RequestError(msg)
    return str(PurePosixPath(*parts)) if parts else ""


def inside_root(root: Path, rel: str) -> Path:
    """``root / rel``, after checking that it resolves (symlinks followed) inside ``root``.

    Args:
        root: The indexed root.
        rel: A path from :func:`relative_path`.

    Raises:
        RequestError: The path (or a directory on the way) is a symlink that points outside the root.
    """
    p = root / rel
    base = root.resolve()
    real = p.resolve()
    if real != base and base not in real.parents:
        msg = f"{rel!r} is a link that points outside the indexed root; only files inside the root can be indexed"
        raise RequestError(msg)
    return p


def scrub(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each absolute local path in ``replacements`` (a prefix) replaced by its stand-in.

    Longest prefixes first, so that the root's ``.llmc`` directory becomes ``<root>/.llmc`` rather than a path with
    the root's parent in it.
    """
    for prefix in sorted((p for p in replacements if len(p) > 1), key=len, reverse=True):
        text = text.replace(prefix, replacements[prefix])
    return text
