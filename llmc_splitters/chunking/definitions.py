"""Definition discovery: the classes, functions, methods and sections of one parsed region, and their names.

The language's tags-style query finds them (``@definition.<kind>`` with its ``@name``; ``@wrapper`` around an
``@inner`` definition for decorators and ``export``; ``@import`` for import statements). A language without a query,
or a tree whose syntax errors would make queries slow (:func:`wide_error`), is searched by node kind instead. The
nesting of definitions gives qualified names (``Client.send``) and makes a function inside a class a method; so does
a receiver (Go's ``func (p *Program) eventLoop()`` is the method ``Program.eventLoop``).
Pure functions over a tree and the bytes it was parsed from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._grammar import load_query
from .languages import LanguageSpec, generic_definition_kind

_DEFINITION_PREFIX = len("definition.")  # a capture `definition.<kind>`
_CLASS_LIKE = frozenset({"class", "interface", "enum", "module", "struct", "trait", "impl", "namespace", "type"})
# Past these, a tree with syntax errors is chunked without queries (see wide_error).
_WIDE_ERROR_CHILDREN = 2000
_WIDE_ERROR_VISITS = 500_000


@dataclass(slots=True)
class DefInfo:
    """A definition found by the language's query (or by node kind on the generic path)."""

    kind: str
    name: str
    qname: str
    start: int
    end: int
    start_line: int
    end_line: int
    node: Any  # the inner definition node (decorators/export excluded)
    outer: Any  # the node that is the span (the wrapper when there is one)


@dataclass(slots=True)
class Context:
    """Per-language state for one parsed region (the file, or an injected fence/script)."""

    spec: LanguageSpec
    defs: dict[int, DefInfo]
    wrapped: set[int]
    imports: set[int]
    ordered: list[DefInfo] = field(default_factory=list)  # every definition once, in file order


def find_definitions(spec: LanguageSpec, root: Any, data: bytes, *, use_query: bool = True) -> Context:
    """Find definitions, wrappers and imports under ``root`` with the language's query (or by node kind, when the
    language has none or ``use_query`` is false). ``data`` is what the tree was parsed from."""
    defs: dict[int, DefInfo] = {}
    wrapped: set[int] = set()
    imports: set[int] = set()
    if use_query and spec.query is not None and spec.grammar is not None:
        import tree_sitter

        query = load_query(spec.grammar, spec.query)
        cursor = tree_sitter.QueryCursor(query)
        cursor.set_byte_range(root.start_byte, root.end_byte)
        wrappers: list[tuple[Any, Any]] = []
        for _, caps in cursor.matches(root):
            for cap, nodes in caps.items():
                if cap.startswith("definition."):
                    node = nodes[0]
                    name_nodes = caps.get("name")
                    name = _node_name(name_nodes[0], data) if name_nodes else node.type
                    defs[node.id] = _info(cap[_DEFINITION_PREFIX:], name, node)
                elif cap == "wrapper":
                    wrappers.append((nodes[0], caps["inner"][0]))
                elif cap == "import":
                    imports.add(nodes[0].id)
        # Innermost wrappers first, so `export @dec class` resolves through both layers.
        wrappers.sort(key=lambda w: w[0].end_byte - w[0].start_byte)
        for outer, inner in wrappers:
            info = defs.get(inner.id)
            if info is not None:
                wrapped.add(inner.id)
                info.outer = outer
                defs[outer.id] = info
    else:
        _generic_defs(root, defs, data)
    return Context(spec, defs, wrapped, imports, _qualify(defs, spec.separator))


def _info(kind: str, name: str, node: Any) -> DefInfo:
    row, column = node.end_point
    return DefInfo(
        kind=kind,
        name=name,
        qname=name,
        start=node.start_byte,
        end=node.end_byte,
        start_line=node.start_point[0] + 1,
        end_line=row + (1 if column > 0 else 0) or 1,
        node=node,
        outer=node,
    )


def _node_name(node: Any, data: bytes) -> str:
    name = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
    return " ".join(name.split())[:200]


def _generic_defs(root: Any, defs: dict[int, DefInfo], data: bytes) -> None:
    cursor = root.walk()
    visited_children = False
    while True:
        if not visited_children:
            node = cursor.node
            if node.is_named and node.child_count:
                kind = generic_definition_kind(node.type)
                if kind is not None:
                    name_node = node.child_by_field_name("name")
                    if name_node is None:
                        name_node = next(
                            (c for c in node.named_children if c.type.endswith(("identifier", "name", "constant"))),
                            None,
                        )
                    if name_node is not None:
                        info = _info(kind, _node_name(name_node, data), node)
                        owner = _receiver_type(node, data)
                        if owner is not None:
                            # A method declared outside its type (Go's `func (p *Program) eventLoop()`).
                            info.kind, info.qname = "method", f"{owner}.{info.name}"
                        defs[node.id] = info
            if cursor.goto_first_child():
                continue
            visited_children = True
        if cursor.goto_next_sibling():
            visited_children = False
        elif not cursor.goto_parent():
            break


def _receiver_type(node: Any, data: bytes) -> str | None:
    """The type named by a definition's ``receiver`` field (``Program`` in ``func (p *Program[T]) run()``), or
    ``None`` when it has none."""
    receiver = node.child_by_field_name("receiver")
    stack = [receiver] if receiver is not None else []
    while stack:
        n = stack.pop()
        if n.type.endswith("type_identifier"):
            return _node_name(n, data)
        stack.extend(reversed(n.named_children))
    return None


def _qualify(defs: dict[int, DefInfo], sep: str) -> list[DefInfo]:
    """Qualified names (``Client.send``) and ``method`` kinds from the nesting of definitions; every definition
    once, in file order (outer first)."""
    infos = sorted(
        {id(i): i for i in defs.values()}.values(), key=lambda i: (i.outer.start_byte, -i.outer.end_byte)
    )
    stack: list[DefInfo] = []
    for info in infos:
        start, end = info.outer.start_byte, info.outer.end_byte
        info.start, info.end = start, end
        info.start_line = info.outer.start_point[0] + 1
        while stack and stack[-1].end <= start:
            stack.pop()
        if stack:
            parent = stack[-1]
            info.qname = f"{parent.qname}{sep}{info.name}"
            if info.kind == "function" and parent.kind in _CLASS_LIKE:
                info.kind = "method"
        stack.append(info)
    return infos


def wide_error(root: Any) -> bool:
    """Whether the tree holds an ERROR node with very many direct children.

    tree-sitter recovers a file of unbalanced punctuation into one flat ERROR node, and query cursors are
    quadratic in such a node's width (minutes for 100 KB). Only subtrees that contain an error are visited.
    """
    if not root.has_error:
        return False
    stack = [root]
    visits = 0
    while stack:
        node = stack.pop()
        visits += 1
        if node.type == "ERROR" and node.child_count > _WIDE_ERROR_CHILDREN:
            return True
        if visits > _WIDE_ERROR_VISITS:
            return True
        stack.extend(c for c in node.children if c.has_error)
    return False
