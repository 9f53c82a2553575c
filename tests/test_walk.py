"""``llmc_splitters.ingest.walk``: which files of a tree are indexed, and the reason recorded for every other one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pathspec")

from llmc_splitters.errors import ConfigurationError  # noqa: E402
from llmc_splitters.ingest.walk import DEFAULT_SKIP_DIRS, WalkOptions, generated_marker, walk  # noqa: E402


def put(root: Path, rel: str, content: str | bytes = "x = 1\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


def kinds(result) -> dict[str, str]:
    return {s.path: s.kind for s in result.skipped}


def test_selects_source_and_docs_and_says_why_for_the_rest(tmp_path):
    for rel in ("pkg/a.py", "pkg/b.ts", "docs/guide.md", "tool.sh", "lib/x.go"):
        put(tmp_path, rel)
    put(tmp_path, "data.json", "{}\n")
    put(tmp_path, "node_modules/dep/index.js")
    put(tmp_path, "build/out.py")
    put(tmp_path, "pkg/__pycache__/a.cpython-311.pyc", b"\x00\x01")
    put(tmp_path, "thing.egg-info/PKG-INFO", "Name: thing\n")
    put(tmp_path, ".env.py")
    put(tmp_path, ".config/settings.py")
    put(tmp_path, ".github/workflows/ci.sh", "echo hi\n")
    got = walk(tmp_path)
    assert got.files == [".github/workflows/ci.sh", "docs/guide.md", "lib/x.go", "pkg/a.py", "pkg/b.ts", "tool.sh"]
    assert kinds(got) == {
        ".config/": "hidden",
        ".env.py": "hidden",
        "build/": "skip_dir",
        "data.json": "unsupported",
        "node_modules/": "skip_dir",
        "pkg/__pycache__/": "skip_dir",
        "thing.egg-info/": "skip_dir",
    }
    assert got.paths[0] == tmp_path.resolve() / ".github/workflows/ci.sh"
    assert got.skipped_by_kind()["skip_dir"] == 4


def test_gitignore_precedence_negation_and_nesting(tmp_path):
    put(tmp_path, ".gitignore", "*.gen.py\nlogs/\n!keep.gen.py\n/top_only.py\n")
    put(tmp_path, "a.gen.py")
    put(tmp_path, "keep.gen.py")
    put(tmp_path, "top_only.py")
    put(tmp_path, "sub/top_only.py")  # "/top_only.py" is anchored to the .gitignore's directory
    put(tmp_path, "logs/x.py")
    put(tmp_path, "sub/.gitignore", "!again.gen.py\nlocal.py\n")
    put(tmp_path, "sub/again.gen.py")  # re-included by the deeper file
    put(tmp_path, "sub/other.gen.py")
    put(tmp_path, "sub/local.py")
    put(tmp_path, "local.py")  # sub/.gitignore does not apply above sub/
    got = walk(tmp_path)
    assert got.files == ["keep.gen.py", "local.py", "sub/again.gen.py", "sub/top_only.py"]
    k = kinds(got)
    assert k["a.gen.py"] == k["logs/"] == k["top_only.py"] == k["sub/other.gen.py"] == k["sub/local.py"] == "gitignored"
    reason = {s.path: s.detail for s in got.skipped}
    assert reason["logs/"].startswith("ignored by logs/ (") and reason["logs/"].endswith(".gitignore)")
    assert "local.py" in reason["sub/local.py"] and "sub" in reason["sub/local.py"]
    # Off: everything with a source extension is taken.
    every = walk(tmp_path, WalkOptions(gitignore=False))
    assert {"a.gen.py", "logs/x.py", "top_only.py", "sub/local.py"} <= set(every.files)


def test_gitignore_of_the_repository_above_applies_and_info_exclude(tmp_path):
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("secret.py\n", encoding="utf-8")
    put(tmp_path, ".gitignore", "*.tmp.py\n")
    put(tmp_path, "src/mod.py")
    put(tmp_path, "src/scratch.tmp.py")
    put(tmp_path, "src/secret.py")
    got = walk(tmp_path / "src")
    assert got.files == ["mod.py"]
    assert kinds(got) == {"scratch.tmp.py": "gitignored", "secret.py": "gitignored"}
    assert "(.git/info/exclude)" in {s.path: s.detail for s in got.skipped}["secret.py"]


def test_a_directory_asked_for_is_walked_even_if_its_repository_ignores_it(tmp_path):
    # Like a Python installed inside a pyenv checkout whose .gitignore has "/versions".
    (tmp_path / ".git").mkdir()
    put(tmp_path, ".gitignore", "/versions\n")
    put(tmp_path, "versions/3.11/lib/json/decoder.py")
    got = walk(tmp_path / "versions" / "3.11" / "lib")
    assert got.files == ["json/decoder.py"]


def test_include_exclude_patterns(tmp_path):
    for rel in ("src/a.py", "src/b.py", "src/c.txt", "tests/test_a.py", "docs/x.md"):
        put(tmp_path, rel)
    got = walk(tmp_path, WalkOptions(include=("*.py", "*.txt"), exclude=("tests/", "/src/b.py")))
    assert got.files == ["src/a.py", "src/c.txt"]
    k = kinds(got)
    assert k["tests/"] == "excluded" and k["src/b.py"] == "excluded" and k["docs/x.md"] == "unsupported"
    anchored = walk(tmp_path, WalkOptions(include=("src/**/*.py",)))
    assert anchored.files == ["src/a.py", "src/b.py"]


def test_generated_minified_binary_empty_and_large_files(tmp_path):
    put(tmp_path, "ok.py", "def f():\n    return 1\n")
    put(tmp_path, "api_pb2.py", "# -*- coding: utf-8 -*-\n# Generated by the protocol buffer compiler.  DO NOT EDIT!\n")
    put(tmp_path, "gen.go", "// Code generated by stringer; DO NOT EDIT.\n\npackage x\n")
    put(tmp_path, "lib.min.js", "var a=1;\n")
    put(tmp_path, "bundle.js", "var a=1;" * 300 + "\n")  # one 2400-character line: minified by content
    put(tmp_path, "blob.py", b"\x00\x00\x01binary")
    put(tmp_path, "empty.py", "")
    put(tmp_path, "blank.py", "\n\n   \n")
    put(tmp_path, "big.py", "x = 1\n" * 600)  # 3600 bytes
    got = walk(tmp_path, WalkOptions(max_file_bytes=3000))
    assert got.files == ["ok.py"]
    assert kinds(got) == {
        "api_pb2.py": "generated",
        "big.py": "too_large",
        "blank.py": "empty",
        "blob.py": "binary",
        "bundle.js": "minified",
        "empty.py": "empty",
        "gen.go": "generated",
        "lib.min.js": "minified",
    }
    loose = walk(tmp_path, WalkOptions(max_file_bytes=None, skip_generated=False, skip_minified=False))
    assert loose.files == ["api_pb2.py", "big.py", "bundle.js", "gen.go", "lib.min.js", "ok.py"]


@pytest.mark.parametrize(
    ("head", "marked"),
    [
        ("# Code generated by protoc-gen-go. DO NOT EDIT.\n", True),
        ("// @generated by relay-compiler\n", True),
        ('"""This file is automatically generated; please don\'t muck it up!\n', True),
        ("# Auto-generated by Tools/scripts/generate_token.py\n", True),
        ("# Autogenerated by Sphinx on Mon Dec  4 17:55:07 2023\n", True),
        ("/* Generated automatically from ./Modules/config.c.in by makesetup. */\n", True),
        ("<!-- DO NOT EDIT: rendered from docs/src -->\n", True),
        ("#!/usr/bin/env python\n" + "# x\n" * 8 + "# DO NOT EDIT\n", True),  # the 10th line counts
        ("#!/usr/bin/env python\n" + "# x\n" * 9 + "# DO NOT EDIT\n", False),  # the 11th does not
        ('"""An abstract syntax tree can be generated by passing ast.PyCF_ONLY_AST."""\n', False),
        ("# This module maps names for pickle streams\n# generated with Python 2 loadable by Python 3.\n", False),
        ('"""Parser engine for the grammar tables generated by pgen."""\n', False),
        ("def generated_by(x):\n    return x\n", False),
    ],
)
def test_generated_marker(head, marked):
    assert (generated_marker(head) is not None) is marked


def test_symlinks_database_and_special_files(tmp_path):
    put(tmp_path, "real/mod.py")
    outside = put(tmp_path.parent / f"{tmp_path.name}-outside", "ext.py")
    (tmp_path / "link_dir").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "inside_link.py").symlink_to(tmp_path / "real" / "mod.py")
    (tmp_path / "outside_link.py").symlink_to(outside)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    os.mkfifo(tmp_path / "fifo.py")
    put(tmp_path, "index_db/chroma.py")
    got = walk(tmp_path, WalkOptions(never_enter=(str(tmp_path / "index_db"),)))
    assert got.files == ["inside_link.py", "real/mod.py"]
    assert kinds(got) == {
        "dangling.py": "special",
        "fifo.py": "special",
        "index_db/": "database",
        "link_dir/": "special",
        "outside_link.py": "special",
    }
    assert got.unreadable == []


def test_hidden_and_default_excludes_can_be_turned_off(tmp_path):
    put(tmp_path, ".tools/a.py")
    put(tmp_path, "vendor/lib.py")
    put(tmp_path, ".git/hooks/pre-commit.py")
    got = walk(tmp_path, WalkOptions(hidden=True, skip_dirs=frozenset()))
    assert got.files == [".git/hooks/pre-commit.py", ".tools/a.py", "vendor/lib.py"]
    got = walk(tmp_path, WalkOptions(hidden=True))
    assert got.files == [".tools/a.py"]
    assert kinds(got) == {".git/": "skip_dir", "vendor/": "skip_dir"}
    assert {"node_modules", "vendor", "third_party", ".venv", "venv", "dist", "build"} <= DEFAULT_SKIP_DIRS


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        walk(tmp_path / "missing")
    put(tmp_path, "f.py")
    with pytest.raises(NotADirectoryError):
        walk(tmp_path / "f.py")
    with pytest.raises(ConfigurationError, match="max_file_bytes"):
        WalkOptions(max_file_bytes=0)
    with pytest.raises(ConfigurationError, match="include"):
        WalkOptions(include=())


def test_extensionless_scripts_are_selected_by_their_shebang_and_notebooks_by_extension(tmp_path):
    put(tmp_path, "bin/deploy", "#!/usr/bin/env bash\nset -e\n")
    put(tmp_path, "bin/sync", "#!/bin/sh\necho sync\n")
    put(tmp_path, "bin/report", "#!/usr/bin/env -S python3 -u\nprint(1)\n")
    put(tmp_path, "bin/legacy", "#!/usr/bin/awk -f\n{ print }\n")  # an interpreter we do not parse
    put(tmp_path, "LICENSE", "MIT License\n")
    put(tmp_path, "run.cgi", "#!/bin/sh\necho cgi\n")  # has an extension: the include patterns decide
    put(tmp_path, "nb.ipynb", '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    got = walk(tmp_path)
    assert got.files == ["bin/deploy", "bin/report", "bin/sync", "nb.ipynb"]
    assert got.languages == {"bin/deploy": "bash", "bin/sync": "bash", "bin/report": "python", "nb.ipynb": "notebook"}
    assert {k: v for k, v in kinds(got).items()} == {"bin/legacy": "unsupported", "LICENSE": "unsupported",
                                                      "run.cgi": "unsupported"}
    assert "no #! line" in next(s.detail for s in got.skipped if s.path == "LICENSE")
    assert walk(tmp_path, WalkOptions(scripts=False)).files == ["nb.ipynb"]


def test_notebooks_have_their_own_size_limit(tmp_path):
    big = '{"cells": [], "metadata": {"blob": "' + "x" * 3000 + '"}, "nbformat": 4, "nbformat_minor": 5}\n'
    put(tmp_path, "nb.ipynb", big)
    put(tmp_path, "big.py", "x = 1\n" * 600)
    got = walk(tmp_path, WalkOptions(max_file_bytes=2000))
    assert got.files == ["nb.ipynb"], "a notebook's outputs are inline: it gets max_notebook_bytes"
    got = walk(tmp_path, WalkOptions(max_file_bytes=2000, max_notebook_bytes=1000))
    assert kinds(got) == {"nb.ipynb": "too_large", "big.py": "too_large"}
    with pytest.raises(ConfigurationError, match="max_notebook_bytes"):
        WalkOptions(max_notebook_bytes=0)
