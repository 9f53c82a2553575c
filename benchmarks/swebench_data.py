"""SWE-bench Lite's dev split for :mod:`benchmarks.swebench`: the instances, the fixed subset, the gold patch's
files and the definitions its hunks touch.

Only the instances of :data:`DEV_REPOS` are read: :func:`load_dev` drops every other record on its ``repo`` field
before it looks at anything else of it, and :meth:`Instance.from_record` refuses one (the other repositories are
held out; nothing of them is printed, stored or indexed).

Gold files are the non-test files the patch edits that exist before the fix. Gold definitions are the innermost
functions, methods and classes (Python's :mod:`ast`, decorators included) of the pre-fix file that a hunk touches:
the old lines it removes, and for lines it adds, the definition that holds the insertion point (between two of its
lines, or after its last one when indented deeper than its header). Blank and comment-only lines name nothing. A
change outside every definition names none (its hunk is counted as module-level).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmc_splitters.errors import ConfigurationError, UnsupportedInputError

from .ranking import Gold

DEV_REPOS = ("sympy/sympy", "django/django")
FIELDS = ("instance_id", "repo", "version", "base_commit", "created_at", "problem_statement", "patch")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)(?:test_[^/]*|[^/]*_tests?\.py|conftest\.py)$")


@dataclass(frozen=True)
class Instance:
    id: str
    repo: str
    version: str
    base_commit: str
    created_at: str
    question: str
    patch: str

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Instance:
        """One instance of a dev repository; any other repository's is refused before any other field is read."""
        repo = rec.get("repo")
        if repo not in DEV_REPOS:
            msg = f"only the dev repositories ({', '.join(DEV_REPOS)}) are read; this record is held out"
            raise ConfigurationError(msg)
        missing = [f for f in FIELDS if not isinstance(rec.get(f), str)]
        if missing:
            msg = f"a {repo} instance lacks the field(s) {', '.join(missing)}"
            raise UnsupportedInputError(msg)
        return cls(rec["instance_id"], repo, rec["version"], rec["base_commit"], rec["created_at"],
                   rec["problem_statement"], rec["patch"])

    @property
    def key(self) -> str:
        return self.repo.replace("/", "+")


def load_dev(text: str) -> list[Instance]:
    """The dev instances of a SWE-bench JSON list (or JSON lines), in file order."""
    stripped = text.lstrip()
    records = json.loads(stripped) if stripped.startswith("[") else [json.loads(x) for x in text.splitlines()
                                                                       if x.strip()]
    return [Instance.from_record(r) for r in records if isinstance(r, dict) and r.get("repo") in DEV_REPOS]


def subset(instances: Iterable[Instance], limit: int | None = 30) -> list[Instance]:
    """The ``limit`` instances of each repository with the smallest sha1(instance_id) (all with ``None``), in
    repository order, then by creation date (neighbouring base commits share the most)."""
    by_repo: dict[str, list[Instance]] = {}
    for i in instances:
        by_repo.setdefault(i.repo, []).append(i)
    out = []
    for repo in DEV_REPOS:
        chosen = sorted(by_repo.get(repo, []), key=lambda i: hashlib.sha1(i.id.encode()).hexdigest())
        out += sorted(chosen if limit is None else chosen[:limit], key=lambda i: (i.created_at, i.id))
    return out


# ------------------------------------------------------------------------------------------------------- patches


@dataclass
class Hunk:
    old_start: int
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text without the newline)

    @property
    def old_text(self) -> list[str]:
        """The hunk's lines of the old file (context and removed), in order."""
        return [t for tag, t in self.lines if tag != "+"]


@dataclass
class FilePatch:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes it
    hunks: list[Hunk] = field(default_factory=list)


def _path(spec: str) -> str | None:
    spec = spec.split("\t")[0].strip()
    if spec == "/dev/null":
        return None
    return spec[2:] if spec[:2] in ("a/", "b/") else spec


def parse_patch(text: str) -> list[FilePatch]:
    """The files and hunks of a unified (git) diff."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    hunk: Hunk | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            cur = FilePatch(_path(line[4:]), _path(lines[i + 1][4:]))
            files.append(cur)
            hunk = None
            i += 2
            continue
        m = _HUNK.match(line)
        if m and cur is not None:
            hunk = Hunk(int(m.group(1)))
            cur.hunks.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            hunk.lines.append((line[0], line[1:]))
        elif hunk is not None and line == "":  # a context line whose single space was stripped
            hunk.lines.append((" ", ""))
        elif not line.startswith("\\"):  # "\ No newline at end of file" belongs to the line before
            hunk = None
        i += 1
    for f in files:
        if not f.hunks:
            msg = f"the patch of {f.new_path or f.old_path} has no hunk"
            raise UnsupportedInputError(msg)
    return files


def is_test_path(path: str) -> bool:
    """Whether a path is a test file or under a test directory."""
    return bool(_TEST_PATH.search(path))


def gold_files(patches: Sequence[FilePatch]) -> list[str]:
    """The non-test files the patch edits that exist before it (sorted)."""
    return sorted({f.old_path for f in patches if f.old_path and not is_test_path(f.old_path)})


# ------------------------------------------------------------------------------------------------- definitions


def locate(hunk: Hunk, old_lines: Sequence[str]) -> int:
    """The 1-based line of the pre-fix file where the hunk's old side starts: the exact match nearest the line
    the hunk names (the patch may have been made on a tree whose lines sit elsewhere)."""
    want = hunk.old_text
    if not want:
        return hunk.old_start + 1  # a hunk that only adds to an empty file ("@@ -0,0 ...")
    first = want[0]
    best: int | None = None
    for p in range(len(old_lines) - len(want) + 1):
        if old_lines[p] == first and list(old_lines[p:p + len(want)]) == want:
            if best is None or abs(p + 1 - hunk.old_start) < abs(best - hunk.old_start):
                best = p + 1
    if best is None:
        msg = f"the hunk at old line {hunk.old_start} does not match the pre-fix file"
        raise UnsupportedInputError(msg)
    return best


def _is_code(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


@dataclass(frozen=True)
class Change:
    """A removed old line (``indent`` is None), or lines added after old line ``line`` (0: at the top), the first
    of them indented by ``indent`` columns. Blank and comment-only lines are no change: they name nothing."""
    line: int
    indent: int | None = None


def touched(hunk: Hunk, start: int) -> list[Change]:
    """What the hunk changes in the old file, its old side starting at line ``start``."""
    out: list[Change] = []
    n = start - 1  # the last old line passed
    added: list[str] = []

    def flush() -> None:
        code = [t for t in added if _is_code(t)]
        if code:
            out.append(Change(n, len(code[0]) - len(code[0].lstrip())))
        added.clear()

    for tag, text in hunk.lines:
        if tag == "+":
            added.append(text)
            continue
        flush()
        n += 1
        if tag == "-" and _is_code(text):
            out.append(Change(n))
    flush()
    return out


@dataclass(frozen=True)
class Definition:
    name: str
    start_line: int
    end_line: int
    indent: int  # the column of its header


def definitions(source: str) -> list[Definition]:
    """Every function, method and class of a Python file (qualified names; decorators included)."""
    tree = ast.parse(source)
    out: list[Definition] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = f"{prefix}{child.name}"
                out.append(Definition(name, start, child.end_lineno or child.lineno, child.col_offset))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def anchored(c: Change, old_lines: Sequence[str]) -> Change:
    """An insertion moved up past the blank and comment lines before it (a diff may put lines added at the end of a
    body after the blank line that follows it)."""
    line = c.line
    if c.indent is not None:
        while line > 0 and not _is_code(old_lines[line - 1]):
            line -= 1
    return Change(line, c.indent)


def holds(d: Definition, c: Change) -> bool:
    """Whether a change falls inside a definition: a removed line of it, or lines added between two of its lines,
    or after its last line and indented deeper than its header (they extend its body)."""
    if c.indent is None:
        return d.start_line <= c.line <= d.end_line
    if not d.start_line <= c.line <= d.end_line:
        return False
    return c.line < d.end_line or c.indent > d.indent


def innermost(defs: Sequence[Definition], change: Change) -> Definition | None:
    """The smallest definition holding a change."""
    inside = [d for d in defs if holds(d, change)]
    return min(inside, key=lambda d: d.end_line - d.start_line, default=None)


@dataclass
class GoldDefs:
    gold: list[Gold]
    module_level: int  # hunks that touch lines outside every definition
    unparsed: list[str]  # gold files Python's ast could not read


def gold_definitions(patches: Sequence[FilePatch], pre_fix: Mapping[str, str]) -> GoldDefs:
    """The definitions the hunks of the gold files touch in the pre-fix sources (``path -> text``); non-Python
    gold files name none."""
    gold: dict[tuple[str, int, int], Gold] = {}
    module_level = 0
    unparsed: list[str] = []
    for f in patches:
        path = f.old_path
        if path is None or is_test_path(path) or not path.endswith(".py"):
            continue
        text = pre_fix[path]
        try:
            defs = definitions(text)
        except SyntaxError:
            unparsed.append(path)
            continue
        old_lines = text.splitlines()
        for h in f.hunks:
            outside = False
            for change in touched(h, locate(h, old_lines)):
                d = innermost(defs, anchored(change, old_lines))
                if d is None:
                    outside = True
                else:
                    gold[(path, d.start_line, d.end_line)] = Gold(path, d.start_line, d.end_line, d.name)
            module_level += outside
    return GoldDefs(sorted(gold.values(), key=lambda g: (g.path, g.start_line)), module_level, unparsed)
