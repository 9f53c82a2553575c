"""Pure analyses over tree-sitter trees: imports, module names, identifiers, references, skeletons, headers."""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess

import pytest

tlp = pytest.importorskip("tree_sitter_language_pack")

from llmc_splitters.chunking.analysis import (  # noqa: E402
    body_placeholder,
    file_imports,
    header_end,
    identifiers,
    module_names,
    references,
    skeleton,
)

PY = b'''"""Module doc."""
import os, a.b as c
import x.y
from .z import (q as r, s)
from m import *
try:
    import ujson as json
except ImportError:
    import json
X: int = 3
__all__ = ["A"]
A1, B1 = 1, 2

def top():
    import inner_only
    return inner_only

@dec
class A(Base, metaclass=M):
    """Doc line one.

    More."""
    k = 1
    j: int

    @property
    def foo(self, a: int = 3) -> int:
        """First.
        Second."""
        return os.path.join(a, X, r.value)

    async def bar(self): pass

    def baz(
        self,
        x,
    ):
        return self.os(x, json=1)

    class Inner:
        def z(self): ...
'''

JS = b'''// header comment
import d, {a as b, c} from "m";
import * as ns from "n";
import "side-effect";
const x = require("m"), {y, z: w} = require("q");
const LIMIT = 10;
const helper = (a) => { return a * 2; };
export class A extends B {
  static k = 1;
  /**
   * Sends things.
   * More.
   */
  async foo(a, q) { return ns.call(b(a), LIMIT, q.other); }
  get bar() { return 1 }
  handler = (e) => {
    console.log(e);
  };
}
export function top(q) {
  return new A(q);
}
'''


def parse(lang: str, data: bytes):
    return tlp.get_parser(lang).parse(data).root_node


def test_python_imports() -> None:
    root = parse("python", PY)
    imps = file_imports(root, PY, "python")
    assert [i.names for i in imps] == [("os", "c"), ("x",), ("r", "s"), ("*",), ("json",), ("json",)]
    assert PY[imps[0].start_byte : imps[0].end_byte] == b"import os, a.b as c"
    assert all(i.kind == "import" for i in imps)


def test_python_module_names() -> None:
    root = parse("python", PY)
    names = module_names(root, PY, "python")
    assert [(n.names, n.kind) for n in names] == [(("X",), "constant"), (("A1", "B1"), "constant")]
    assert PY[names[0].start_byte : names[0].end_byte] == b"X: int = 3"
    src = b"type Z = list[int]\n"  # Python 3.12 syntax; tree-sitter parses it on any interpreter
    assert [(n.names, n.kind) for n in module_names(parse("python", src), src, "python")] == [(("Z",), "type")]


@pytest.mark.parametrize("lang", ["javascript", "typescript", "tsx"])
def test_js_imports_and_names(lang: str) -> None:
    root = parse(lang, JS)
    assert [i.names for i in file_imports(root, JS, lang)] == [("d", "b", "c"), ("ns",), (), ("x", "y", "w")]
    assert [n.names for n in module_names(root, JS, lang)] == [("LIMIT",)]


def test_ts_type_imports_aliases_and_require_clause() -> None:
    src = b'import type { T } from "t";\nimport e = require("x");\ntype Alias = string;\ninterface I { a(): T }\n'
    root = parse("typescript", src)
    assert [i.names for i in file_imports(root, src, "typescript")] == [("T",), ("e",)]
    assert [(n.names, n.kind) for n in module_names(root, src, "typescript")] == [(("Alias",), "type"), (("I",), "type")]
    assert "T" in identifiers(root, src, src.index(b"interface"), len(src), language="typescript")


def test_python_identifiers_skip_attribute_and_keyword_names() -> None:
    root = parse("python", PY)
    start, end = PY.index(b"    @property"), PY.index(b"    async def")
    assert identifiers(root, PY, start, end, language="python") == {"property", "foo", "self", "a", "int", "os", "X", "r"}
    start, end = PY.index(b"    def baz"), PY.index(b"    class Inner")
    ids = identifiers(root, PY, start, end, language="python")
    assert "os" not in ids and "json" not in ids  # self.os(...) and json=1 do not use the imports


def test_identifiers_without_language_walk_the_tree() -> None:
    root = parse("python", PY)
    start, end = PY.index(b"    @property"), PY.index(b"    async def")
    assert {"os", "X", "r"} <= identifiers(root, PY, start, end)


def test_js_identifiers_and_references() -> None:
    root = parse("javascript", JS)
    start, end = JS.index(b"  async foo"), JS.index(b"  get bar")
    assert identifiers(root, JS, start, end, language="javascript") == {"a", "q", "ns", "b", "LIMIT"}
    assert references(root, JS, start, end, language="javascript") == {"ns.call", "b", "q.other"}


def test_python_references() -> None:
    root = parse("python", PY)
    start, end = PY.index(b"    @property"), PY.index(b"    async def")
    assert references(root, PY, start, end, language="python") == {"os.path", "os.path.join", "r.value"}


def test_bash_references_are_commands() -> None:
    src = b"deploy() {\n  rsync -a src/ dst/\n  echo done\n}\n"
    root = parse("bash", src)
    assert references(root, src, 0, len(src), language="bash") == {"rsync", "echo"}


def test_python_class_skeleton_exact() -> None:
    root = parse("python", PY)
    cls = root.named_children[-1]
    assert skeleton(cls, PY, "python") == (
        "@dec\n"
        "class A(Base, metaclass=M):\n"
        '    """Doc line one.\n'
        "\n"
        '    More."""\n'
        "    k = 1\n"
        "    j: int\n"
        "    @property\n"
        "    def foo(self, a: int = 3) -> int:\n"
        '        """First."""\n'
        "        ...\n"
        "    async def bar(self): ...\n"
        "    def baz(\n"
        "        self,\n"
        "        x,\n"
        "    ):\n"
        "        ...\n"
        "    class Inner:\n"
        "        def z(self): ...\n"
    )


def test_python_module_skeleton_is_valid_python() -> None:
    root = parse("python", PY)
    sk = skeleton(root, PY, "python")
    ast.parse(sk)
    assert "def top():\n    ...\n" in sk and "import inner_only" not in sk


def _classes(node):
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "class_definition":
            yield n.parent if n.parent is not None and n.parent.type == "decorated_definition" else n
        stack.extend(n.named_children)


@pytest.mark.parametrize("module", ["argparse", "json.decoder", "collections", "dataclasses", "inspect"])
def test_every_stdlib_class_skeleton_parses(module: str) -> None:
    import importlib

    data = inspect.getsource(importlib.import_module(module)).encode()
    root = parse("python", data)
    classes = list(_classes(root))
    assert classes
    for cls in classes:
        sk = skeleton(cls, data, "python")
        # Nested classes keep their indentation: dedent by the class line's own indent.
        import textwrap

        ast.parse(textwrap.dedent(sk))
        assert len(sk) <= len(data[cls.start_byte : cls.end_byte]) + 200


def test_js_class_skeleton_exact_and_valid() -> None:
    root = parse("javascript", JS)
    cls = next(c for c in root.named_children if c.type == "export_statement")
    sk = skeleton(cls, JS, "javascript")
    assert sk == (
        "export class A extends B {\n"
        "  static k = 1;\n"
        "  /** Sends things. */\n"
        "  async foo(a, q) { /* … */ }\n"
        "  get bar() { /* … */ }\n"
        "  handler = (e) => { /* … */ };\n"
        "}\n"
    )
    assert not parse("javascript", sk.encode()).has_error
    assert body_placeholder("javascript") in sk


@pytest.mark.parametrize("lang", ["javascript", "typescript", "tsx"])
def test_js_module_skeleton_reparses_cleanly(lang: str) -> None:
    root = parse(lang, JS)
    sk = skeleton(root, JS, lang)
    assert not parse(lang, sk.encode()).has_error
    assert "export function top(q) { /* … */ }" in sk and "return new A" not in sk
    if shutil.which("node") and lang == "javascript":
        done = subprocess.run(["node", "--input-type=module", "--check"], input=sk, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_typescript_class_skeleton() -> None:
    src = (
        b"export default abstract class Repo<T> implements Store {\n"
        b"  private items: T[] = [];\n"
        b"  constructor(private readonly db: Db) { super(); }\n"
        b"  public async get(id: string): Promise<T | undefined> {\n    return this.items[0];\n  }\n"
        b"  abstract name(): string;\n"
        b"}\n"
    )
    root = parse("typescript", src)
    sk = skeleton(root.named_children[0], src, "typescript")
    assert "public async get(id: string): Promise<T | undefined> { /* … */ }" in sk
    assert "abstract name(): string;" in sk and "private items: T[] = [];" in sk
    assert not parse("typescript", sk.encode()).has_error


def test_generic_skeleton_for_bash() -> None:
    src = b"#!/bin/bash\nset -e\ndeploy() {\n  rsync -a src/ dst/\n}\nmain() {\n  deploy\n}\n"
    root = parse("bash", src)
    sk = skeleton(root, src, "bash")
    assert sk == "#!/bin/bash\nset -e\ndeploy() { :; }\nmain() { :; }\n"
    assert not parse("bash", sk.encode()).has_error


def test_header_end() -> None:
    root = parse("python", PY)
    cls = root.named_children[-1]
    assert PY[cls.start_byte : header_end(cls, PY)] == b"@dec\nclass A(Base, metaclass=M):\n"
    jroot = parse("javascript", JS)
    jcls = next(c for c in jroot.named_children if c.type == "export_statement")
    assert JS[jcls.start_byte : header_end(jcls, JS)] == b"export class A extends B {\n"
