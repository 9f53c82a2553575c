"""Node helpers the analysis passes share: a node's text, line bounds, unwrapping, a pre-order walk.

Nothing here parses: every function takes nodes of an already-parsed tree and the exact UTF-8 bytes it was parsed
from.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Node = Any  # tree_sitter.Node; kept as Any so this module imports without tree_sitter installed.

_JS_LIKE = frozenset({"javascript", "typescript", "tsx", "jsx"})
_PYTHON = "python"


def _text(node: Node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _line_start(data: bytes, pos: int) -> int:
    """Byte offset of the start of the line holding ``pos``."""
    return data.rfind(b"\n", 0, pos) + 1


def _line_end(data: bytes, pos: int) -> int:
    """Byte offset just past the ``\\n`` ending the line holding ``pos`` (or ``len(data)``)."""
    i = data.find(b"\n", pos)
    return len(data) if i < 0 else i + 1


def _unwrap(node: Node) -> Node:
    """Strip wrappers that hold one definition: decorators, ``export``, expression statements."""
    while node is not None and node.type in ("decorated_definition", "export_statement", "expression_statement"):
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        if inner is None:
            named = [c for c in node.named_children if c.type not in ("decorator", "comment")]
            if len(named) != 1:
                return node
            inner = named[0]
        node = inner
    return node


def _walk(node: Node) -> Iterator[Node]:
    """Pre-order walk of ``node``'s subtree."""
    cursor = node.walk()
    visited_children = False
    while True:
        if not visited_children:
            yield cursor.node
            if cursor.goto_first_child():
                continue
        if cursor.goto_next_sibling():
            visited_children = False
        elif cursor.goto_parent():
            visited_children = True
        else:
            return
