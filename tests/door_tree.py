"""A small real source tree holding every kind of input that must get the same treatment through every door.

``build_door_tree(root)`` writes the tree and returns its inputs, each as a loader hands it over (a ``str``) with the
path it is given under (``None`` for the Python file passed without a path) and the treatment every door must give
it. Tests of the chunker, the framework faces, the walker, the index and the CLI use the same tree, so that "every
door treats a file kind the same way" is checked on the same inputs everywhere.

The tree:

====================  =============================================================  ===============
file                  what it is                                                     expected
====================  =============================================================  ===============
``tides.ipynb``       a notebook: markdown, code (a function), empty, raw, ``%%bash``   ``notebook``
                      and a code cell with a stream output
``bin/deploy``        an extensionless ``#!/usr/bin/env bash`` script with functions    ``bash``
``bin/bootstrap``     an extensionless ``#!/bin/sh`` script with a function             ``bash``
``assets/logo.png``   a real 4x4 PNG (read as text with ``errors="replace"``)           ``binary``
``pkg/blob.py``       a ``.py`` full of NUL bytes                                       ``binary``
``pkg/legacy.py``     Latin-1 Python, read with ``errors="surrogateescape"``            ``python``
``pkg/util.py``       Python with imports and functions, passed with **no path**        ``python``
====================  =============================================================  ===============
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

NOTEBOOK_CELLS = [
    {"cell_type": "markdown", "id": "c0", "metadata": {},
     "source": ["# Tide tools\n", "\n", "Helpers for reading tide gauges.\n"]},
    {"cell_type": "code", "id": "c1", "execution_count": 1, "metadata": {}, "outputs": [],
     "source": ["import statistics\n", "\n", "\n", "def daily_range(levels):\n",
                "    \"\"\"Highest minus lowest water level of one day.\"\"\"\n",
                "    return max(levels) - min(levels)\n"]},
    {"cell_type": "code", "id": "c2", "execution_count": None, "metadata": {}, "outputs": [], "source": []},
    {"cell_type": "raw", "id": "c3", "metadata": {}, "source": "Raw notes: gauge 8443970, Boston.\n"},
    {"cell_type": "code", "id": "c4", "execution_count": 2, "metadata": {}, "outputs": [],
     "source": ["%%bash\n", "echo \"gauge ready\"\n"]},
    {"cell_type": "markdown", "id": "c5", "metadata": {}, "source": "## Daily range\n\nOne number per day.\n"},
    {"cell_type": "code", "id": "c6", "execution_count": 3, "metadata": {},
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["2\n"]}],
     "source": "print(daily_range([1, 3, 2]))\n"},
]
"""The notebook's cells (cell 2 is empty, so it gives no span)."""

DEPLOY = """#!/usr/bin/env bash
# Deploy the built site to a host.
set -euo pipefail

log() {
  echo "[deploy] $*" >&2
}

deploy_site() {
  log "deploying to $1"
  rsync -a dist/ "$1:/srv/site/"
}

deploy_site "${1:-localhost}"
"""

BOOTSTRAP = """#!/bin/sh
# Install the tools the build needs.
set -e

install_tools() {
  apt-get install -y jq curl
}

install_tools
"""

UTIL = '''"""Small helpers for tide readings."""

import statistics
from datetime import date


def mean_level(levels):
    """The mean water level of a series of readings."""
    return statistics.fmean(levels)


def label(day: date) -> str:
    return day.isoformat()
'''

LEGACY = b"# Caf\xe9 prices (a Latin-1 file)\nPRICES = {'caf\xe9': 2.5, 'th\xe9': 2.0}\n\n\ndef price(item):\n" \
         b"    return PRICES[item]\n"


def png_bytes(width: int = 4, height: int = 4) -> bytes:
    """A real, valid PNG image (a grey gradient), built with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes((x * 60 + y * 3) % 256 for x in range(width)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@dataclass(frozen=True)
class DoorInput:
    """One input of the tree, as a loader hands it over.

    Attributes:
        name: A short name for test ids.
        file: The file it was read from, relative to the tree's root.
        path: The path it is given under (``None``: passed without a path).
        text: Its text, decoded as a loader would.
        expect: ``notebook``, ``bash``, ``python`` or ``binary`` (refused by the chunker, skipped by the splitters
            and the walker).
    """

    name: str
    file: str
    path: str | None
    text: str
    expect: str


@dataclass(frozen=True)
class DoorTree:
    """The written tree and its inputs."""

    root: Path
    inputs: tuple[DoorInput, ...]

    def __getitem__(self, name: str) -> DoorInput:
        return next(i for i in self.inputs if i.name == name)


def build_door_tree(root: Path) -> DoorTree:
    """Write the tree under ``root`` (created if needed) and return its inputs (see the module docstring)."""
    notebook = {"nbformat": 4, "nbformat_minor": 5, "cells": NOTEBOOK_CELLS,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                             "language_info": {"name": "python"}}}
    files: dict[str, bytes] = {
        "tides.ipynb": json.dumps(notebook, indent=1).encode("utf-8"),
        "bin/deploy": DEPLOY.encode("utf-8"),
        "bin/bootstrap": BOOTSTRAP.encode("utf-8"),
        "assets/logo.png": png_bytes(),
        "pkg/blob.py": b"def f():\n    return 1\n" + b"\x00" * 200 + b"\x01\x02tail\n",
        "pkg/legacy.py": LEGACY,
        "pkg/util.py": UTIL.encode("utf-8"),
    }
    for rel, data in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    (root / "bin/deploy").chmod(0o755)
    (root / "bin/bootstrap").chmod(0o755)

    def read(rel: str, errors: str = "strict") -> str:
        return (root / rel).read_bytes().decode("utf-8", errors)

    inputs = (
        DoorInput("notebook", "tides.ipynb", "tides.ipynb", read("tides.ipynb"), "notebook"),
        DoorInput("env-bash", "bin/deploy", "bin/deploy", read("bin/deploy"), "bash"),
        DoorInput("bin-sh", "bin/bootstrap", "bin/bootstrap", read("bin/bootstrap"), "bash"),
        DoorInput("png", "assets/logo.png", "assets/logo.png", read("assets/logo.png", "replace"), "binary"),
        DoorInput("nul-py", "pkg/blob.py", "pkg/blob.py", read("pkg/blob.py"), "binary"),
        DoorInput("surrogates", "pkg/legacy.py", "pkg/legacy.py", read("pkg/legacy.py", "surrogateescape"), "python"),
        DoorInput("no-path", "pkg/util.py", None, read("pkg/util.py"), "python"),
    )
    return DoorTree(root, inputs)
