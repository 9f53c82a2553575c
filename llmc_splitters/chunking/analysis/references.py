"""Identifiers and references: the names a byte range uses, and the calls and attribute chains it makes.

* :func:`identifiers` - the names referenced inside a byte range (what an import or constant must bind to be *used*).
* :func:`references` - the calls and attribute chains inside a byte range (``self.client.send``, ``fetch``).

A compiled tree-sitter query per grammar, restricted to the range, does the work (compiled once, under a lock); a
grammar without one gets a tree walk.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from ._syntax import _JS_LIKE, _PYTHON, Node, _text, _walk

# Identifier-like node types, in every grammar that has them. A query is built from the ones a language defines.
_IDENTIFIER_TYPES = (
    "identifier",
    "type_identifier",
    "shorthand_property_identifier",
    "variable_name",
    "constant",
    "simple_identifier",
)

_query_cache: dict[tuple[str, str], Any] = {}
_query_lock = threading.Lock()


def _query(language: str, kind: str) -> Any | None:
    """A compiled query (``ids``: identifier-like nodes; ``excluded``: names that are not references)."""
    key = (language, kind)
    with _query_lock:
        if key in _query_cache:
            return _query_cache[key]
        try:
            import tree_sitter
            import tree_sitter_language_pack as tlp

            lang = tlp.get_language(language)
        except Exception:  # noqa: BLE001 - an unknown grammar means: use the generic walk
            _query_cache[key] = None
            return None
        types = [t for t in _IDENTIFIER_TYPES if lang.id_for_node_kind(t, True)]
        src = ""
        if kind == "ids" and types:
            src = "[" + " ".join(f"({t})" for t in types) + "] @id"
        elif kind == "excluded" and language == _PYTHON:
            # Attribute names (`x.os`) and keyword-argument names (`f(os=1)`) are not references to a binding.
            src = "(attribute attribute: (identifier) @x) (keyword_argument name: (identifier) @x)"
        elif kind == "calls":
            if language == _PYTHON:
                src = "(call function: (_) @call) (attribute) @attr"
            elif language in _JS_LIKE:
                src = "(call_expression function: (_) @call) (new_expression constructor: (_) @call) " \
                      "(member_expression) @attr"
            elif language == "bash":
                src = "(command_name) @call"
            elif lang.id_for_node_kind("call_expression", True):
                # Not every grammar names the callee: Kotlin's and Swift's call_expression has no `function`
                # field (a query naming it does not compile); there the callee is the first named child.
                if lang.field_id_for_name("function") is not None:
                    src = "(call_expression function: (_) @call)"
                else:
                    src = "(call_expression . (_) @call)"
        q = tree_sitter.Query(lang, src) if src else None
        _query_cache[key] = q
        return q


def _captured(language: str | None, kind: str, root: Node, start_byte: int, end_byte: int) -> list[Node] | None:
    """All nodes captured by query ``kind`` within the byte range, or ``None`` when no query applies."""
    if language is None:
        return None
    q = _query(language, kind)
    if q is None:
        return None
    import tree_sitter

    cursor = tree_sitter.QueryCursor(q)
    cursor.set_byte_range(start_byte, end_byte)
    out: list[Node] = []
    for nodes in cursor.captures(root).values():
        out.extend(n for n in nodes if n.start_byte >= start_byte and n.end_byte <= end_byte)
    return out


def identifiers(
    root: Node, data: bytes, start_byte: int, end_byte: int, language: str | None = None
) -> set[str]:
    """The names referenced in ``data[start_byte:end_byte]``: every identifier-like node lying inside the range.

    Attribute names (``os`` in ``self.os``) and keyword-argument names are not references to a binding and are
    left out in Python (in JS/TS they are ``property_identifier`` nodes, never captured). Type names
    (``type_identifier``) count, so a TS type-only import is *used* by code that mentions the type.

    Args:
        root: Any node whose subtree covers the range (normally the tree's root).
        data: The exact bytes the tree was parsed from.
        start_byte: Start of the range (inclusive).
        end_byte: End of the range (exclusive).
        language: The grammar name; with it a compiled tree-sitter query restricted to the range does the work
            (fast), without it a tree walk does.

    Returns:
        The set of names.
    """
    nodes = _captured(language, "ids", root, start_byte, end_byte)
    if nodes is None:
        start = root.descendant_for_byte_range(start_byte, max(start_byte, end_byte - 1)) or root
        while start.parent is not None and not (start.start_byte <= start_byte and start.end_byte >= end_byte):
            start = start.parent
        nodes = [
            n
            for n in _walk(start)
            if n.type in _IDENTIFIER_TYPES and n.start_byte >= start_byte and n.end_byte <= end_byte
        ]
        excluded: set[tuple[int, int]] = set()
        if language == _PYTHON:
            for n in nodes:
                p = n.parent
                if p is not None and (
                    p.type == "attribute" and p.child_by_field_name("attribute") == n
                    or p.type == "keyword_argument" and p.child_by_field_name("name") == n
                ):
                    excluded.add((n.start_byte, n.end_byte))
    else:
        excluded = {(n.start_byte, n.end_byte) for n in _captured(language, "excluded", root, start_byte, end_byte) or ()}
    return {_text(n, data) for n in nodes if (n.start_byte, n.end_byte) not in excluded}


_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\s*(?:\.|\?\.)\s*[A-Za-z_$][\w$]*)*")


def references(
    root: Node, data: bytes, start_byte: int, end_byte: int, language: str | None = None
) -> set[str]:
    """Calls and attribute chains in ``data[start_byte:end_byte]``, as dotted names.

    ``self.client.send(x)`` gives ``self.client.send`` and ``self.client``; ``fetch(url)`` gives ``fetch``; a
    Bash command gives its command name. Chains that are not plain dotted names (``f(x).y``) are skipped.

    Args:
        root: Any node whose subtree covers the range (normally the tree's root).
        data: The exact bytes the tree was parsed from.
        start_byte: Start of the range (inclusive).
        end_byte: End of the range (exclusive).
        language: The grammar name (without it only generic ``call_expression`` callees are found).

    Returns:
        The set of dotted names.
    """
    nodes = _captured(language, "calls", root, start_byte, end_byte)
    if nodes is None:
        nodes = [
            fn
            for n in _walk(root)
            if n.type in ("call_expression", "call") and n.start_byte >= start_byte and n.end_byte <= end_byte
            for fn in [n.child_by_field_name("function")]
            if fn is not None
        ]
    out: set[str] = set()
    for n in nodes:
        text = _text(n, data)
        if _DOTTED.fullmatch(text):
            out.add(re.sub(r"\s+", "", text).replace("?.", "."))
    return out
