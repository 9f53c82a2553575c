"""The package's import graph: no circles (type-only and function-level imports included), and the parts the index
composes never import the index.

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import`` anywhere in a module
(module level, inside functions, under ``if TYPE_CHECKING:``), relative imports resolved. An edge goes to the module
named, and for ``from a.b import c`` to ``a.b.c`` too when that is a module; never to the packages above the module
named, nor to the importing module's own packages (Python initialises a package before its children, so a child
importing from its package, ``from . import x``, is no circle).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import llmc_splitters

PACKAGE = "llmc_splitters"
ROOT = Path(llmc_splitters.__file__).parent

# Circles another branch removes; the test ignores these edges until it lands.
# What stands above the index and may import it: the faces, the ingestion pipeline, the CLI and the MCP server, and in
# retrieval/ the package itself, the retriever and code_index(). The parts the index composes (the write path, the
# search, the stores, context and expansion, the records) stand below it and are handed what they need as
# collaborators (llmc_splitters.retrieval.storage.parts): none of them imports it.
ABOVE_THE_INDEX = ("llmc_splitters.cli", "llmc_splitters.mcp", "llmc_splitters.ingest", "llmc_splitters.langchain",
                   "llmc_splitters.llama_index")
ABOVE_THE_INDEX_IN_RETRIEVAL = {"llmc_splitters.retrieval", "llmc_splitters.retrieval.retriever",
                                "llmc_splitters.retrieval.vectorstore"}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its ``__init__.py``)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` (at ``path``) imports, anywhere in its source (not its own
    packages)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name and not name.startswith(m + ".")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that reach each other by imports (strongly connected components, by
    Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest circle through a group's first module (breadth first, inside the group)."""
    start = min(group)
    paths = {w: [start, w] for w in sorted(graph[start] & group)}
    frontier = list(paths)
    while start not in paths:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return paths[start]


def _report(graph: dict[str, set[str]]) -> list[str]:
    """One line per group of modules in import circles: a circle, and the group when it holds more."""
    lines = []
    for group in _groups(graph):
        circle = _circle(graph, group)
        rest = sorted(group - set(circle))
        lines.append(" -> ".join(circle) + (f"  (in circles with these too: {', '.join(rest)})" if rest else ""))
    return sorted(lines)


def test_every_kind_of_import_is_an_edge(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        import top.pkg.a
        from . import b, not_a_module
        from .c import name
        from .sub import d
        from .. import top_level_name
        if TYPE_CHECKING:
            from .e import E

        def f():
            from top.pkg.g import G
        """), encoding="utf-8")
    names = ["top", "top.pkg", "top.pkg.a", "top.pkg.b", "top.pkg.c", "top.pkg.sub", "top.pkg.sub.d", "top.pkg.e",
             "top.pkg.g", "top.pkg.mod"]
    got = _imported("top.pkg.mod", src, dict.fromkeys(names, src))
    # Not to its own packages (top, top.pkg), nor to a name that is not a module.
    assert got == {"top.pkg.a", "top.pkg.b", "top.pkg.c", "top.pkg.sub", "top.pkg.sub.d", "top.pkg.e", "top.pkg.g"}


def test_the_graph_reads_the_package():
    graph = _graph()
    assert "llmc_splitters.retrieval.index" in graph["llmc_splitters.retrieval.retriever"]  # from .index import
    assert "llmc_splitters.retrieval.index" in graph["llmc_splitters.ingest.writer"]  # under TYPE_CHECKING
    assert "llmc_splitters.retrieval.indexing.indexer" in graph["llmc_splitters.ingest.writer"]  # inside a function
    assert "llmc_splitters.retrieval" in graph["llmc_splitters.langchain.retriever"]  # another package's __init__


def test_the_cycle_finder_finds_every_circle():
    graph = {"a": {"b", "e"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}, "x": {"y"}, "y": {"x"}}
    assert _report(graph) == ["a -> e -> a  (in circles with these too: b, c)", "x -> y -> x"]
    assert _report({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    graph = _graph()
    circles = _report(graph)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_only_what_stands_above_the_index_imports_it():
    def above(name: str) -> bool:
        return name in ABOVE_THE_INDEX_IN_RETRIEVAL or any(name == p or name.startswith(p + ".") for p in ABOVE_THE_INDEX)

    graph = _graph()
    importers = {name for name, targets in graph.items() if "llmc_splitters.retrieval.index" in targets}
    below = sorted(name for name in importers if not above(name))
    assert not below, f"imports retrieval.index from below it: {below}"
    assert "llmc_splitters.retrieval.retriever" in importers  # the test sees the index's importers
    composed = graph["llmc_splitters.retrieval.index"]
    assert {"llmc_splitters.retrieval.indexing.indexer", "llmc_splitters.retrieval.search.hits"} <= composed
    assert not any(above(name) for name in composed), sorted(filter(above, composed))


# The rooms of retrieval/ by job, and the rooms each may import (besides itself). Imports flow one way: context
# uses search and storage; search uses storage; the write path uses storage; storage uses nothing above it. Every
# room may use the embeddings, which use no other room, and the base modules, which use nothing of retrieval/: the
# terms (how text becomes search terms: the lexical index, the question and the hashing embedding read text alike)
# and the message phrases (the word pairs of string templates: the lexical index holds them, a question's quoted
# messages are read as them). The other modules
# at the top of retrieval/ (the index, the retriever, code_index(), the package) stand above every room.
RETRIEVAL = "llmc_splitters.retrieval"
BASE = frozenset({f"{RETRIEVAL}.terms", f"{RETRIEVAL}.phrases"})
ROOMS = {
    "embeddings": frozenset(),
    "storage": frozenset({"embeddings"}),
    "indexing": frozenset({"storage", "embeddings"}),
    "search": frozenset({"storage", "embeddings"}),
    "context": frozenset({"search", "storage", "embeddings"}),
}


def _room(module: str) -> str | None:
    """The room of retrieval/ a module is in, ``"top"`` for retrieval/'s own modules, ``None`` outside retrieval/."""
    if module in BASE:
        return "base"
    if module == RETRIEVAL:
        return "top"
    if not module.startswith(RETRIEVAL + "."):
        return None
    first = module[len(RETRIEVAL) + 1:].split(".", 1)[0]
    return first if first in ROOMS else "top"


def _back_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a room of retrieval/ to a room it may not use, or to the modules above the rooms."""
    out = []
    for name, targets in graph.items():
        room = _room(name)
        if room is None or room == "top":
            continue
        if room == "base":
            out += [f"{name} -> {t} (the base modules import nothing of retrieval/)" for t in sorted(targets) if _room(t)]
            continue
        for target in sorted(targets):
            other = _room(target)
            if other is not None and other not in (room, "base") and other not in ROOMS[room]:
                out.append(f"{name} -> {target} ({room} may not import {other})")
    return sorted(out)


def _parent_imports(name: str, path: Path) -> set[str]:
    """``from .. import x`` in a room names retrieval/ itself (its ``__init__``), which the graph leaves out as the
    importing module's own package: such an import reaches the top of retrieval/ all the same."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level and not node.module:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            if base == RETRIEVAL:
                found.add(base)
    return found


def test_the_room_finder_finds_a_back_arrow():
    graph = {
        f"{RETRIEVAL}.storage.span_store": {f"{RETRIEVAL}.search.ranking"},  # storage -> search: back
        f"{RETRIEVAL}.search.hits": {f"{RETRIEVAL}.storage.span_store", f"{RETRIEVAL}.index"},  # -> the top: back
        f"{RETRIEVAL}.context.expand": {f"{RETRIEVAL}.search.ranking", "llmc_splitters.errors"},  # down: fine
        f"{RETRIEVAL}.indexing.indexer": {f"{RETRIEVAL}.search.question"},  # write path -> search: back
        f"{RETRIEVAL}.index": {f"{RETRIEVAL}.search.hits"},  # the top uses every room
        f"{RETRIEVAL}.embeddings.hashing": {f"{RETRIEVAL}.terms"},  # every room uses the terms
        f"{RETRIEVAL}.terms": {f"{RETRIEVAL}.storage.filters"},  # which use nothing of retrieval/
    }
    assert _back_arrows(graph) == [
        f"{RETRIEVAL}.indexing.indexer -> {RETRIEVAL}.search.question (indexing may not import search)",
        f"{RETRIEVAL}.search.hits -> {RETRIEVAL}.index (search may not import top)",
        f"{RETRIEVAL}.storage.span_store -> {RETRIEVAL}.search.ranking (storage may not import search)",
        f"{RETRIEVAL}.terms -> {RETRIEVAL}.storage.filters (the base modules import nothing of retrieval/)",
    ]


def test_imports_between_the_rooms_of_retrieval_flow_one_way():
    modules = _modules()
    graph = _graph()
    for name, path in modules.items():
        if _room(name) in ROOMS:
            graph[name] |= _parent_imports(name, path)
    assert {_room(m) for m in modules} >= {*ROOMS, "top", "base"}  # the rooms exist and are read
    arrows = _back_arrows(graph)
    assert not arrows, "imports that run back up between the rooms of retrieval/:\n" + "\n".join(arrows)
