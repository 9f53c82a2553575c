"""Pure analyses over an already-parsed tree-sitter tree: imports, module-level names, references, skeletons.

Nothing here parses: every function takes the tree (or one of its nodes) and the exact UTF-8 bytes it was parsed
from, so the chunker can call them on the tree it already built. Every result is located by half-open byte offsets
into ``data``; nothing is found by searching text.

* :func:`file_imports` - the import statements of a file and the names each binds (``import a.b as c`` binds ``c``).
* :func:`module_names` - module-level constants and type aliases, with the names they bind.
* :func:`identifiers` - the names referenced inside a byte range (what an import or constant must bind to be *used*).
* :func:`references` - the calls and attribute chains inside a byte range (``self.client.send``, ``fetch``).
* :func:`skeleton` - a class or module rendered as valid code: header, docstring, attributes, every method's
  signature and first docstring line, with bodies elided (``...`` in Python, ``{ /* … */ }`` in JS/TS).
* :func:`header_end` - where a class/function header ends (the ``class A(B):`` line), for a one-line context.

Python and JavaScript/TypeScript (``javascript``, ``typescript``, ``tsx``) get careful rules; any other grammar gets a
generic version driven by node-type names (``*identifier``, ``*import*``, function-like nodes with a ``body``).

Example:
    >>> import tree_sitter_language_pack as tlp
    >>> data = b"import os\\nfrom a import b as c\\n\\ndef f():\\n    return c(os.sep)\\n"
    >>> root = tlp.get_parser("python").parse(data).root_node
    >>> [i.names for i in file_imports(root, data, "python")]
    [('os',), ('c',)]
    >>> sorted(identifiers(root, data, 20 + 12, len(data), language="python"))
    ['c', 'f', 'os']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ImportInfo",
    "file_imports",
    "module_names",
    "identifiers",
    "references",
    "skeleton",
    "header_end",
    "body_placeholder",
]

Node = Any  # tree_sitter.Node; kept as Any so this module imports without tree_sitter installed.

_JS_LIKE = frozenset({"javascript", "typescript", "tsx", "jsx"})
_PYTHON = "python"

# Identifier-like node types, in every grammar that has them. A query is built from the ones a language defines.
_IDENTIFIER_TYPES = (
    "identifier",
    "type_identifier",
    "shorthand_property_identifier",
    "variable_name",
    "constant",
    "simple_identifier",
)

_PLACEHOLDERS = {
    "python": "...",
    "javascript": "{ /* … */ }",
    "typescript": "{ /* … */ }",
    "tsx": "{ /* … */ }",
    "jsx": "{ /* … */ }",
    "bash": "{ :; }",
}
_DEFAULT_PLACEHOLDER = "{ /* … */ }"


@dataclass(frozen=True, slots=True)
class ImportInfo:
    """A statement that binds module-level names: an import, a constant or a type alias.

    Attributes:
        start_byte: UTF-8 offset of the statement's first byte.
        end_byte: UTF-8 offset one past its last byte.
        names: The names the statement binds, in source order (``("*",)`` for a wildcard import).
        kind: ``"import"``, ``"constant"`` or ``"type"``.
    """

    start_byte: int
    end_byte: int
    names: tuple[str, ...]
    kind: str = "import"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (used in span metadata)."""
        return {"start_byte": self.start_byte, "end_byte": self.end_byte, "names": list(self.names), "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ImportInfo:
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["start_byte"]), int(d["end_byte"]), tuple(d.get("names") or ()), d.get("kind", "import"))


def body_placeholder(language: str | None) -> str:
    """The text that stands for an elided body in ``language`` (``...`` for Python, ``{ /* … */ }`` for JS/TS)."""
    return _PLACEHOLDERS.get(language or "", _DEFAULT_PLACEHOLDER)


# ----------------------------------------------------------------------------------------------------------- helpers


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


def _pattern_names(node: Node, data: bytes) -> list[str]:
    """Names bound by a binding pattern (identifier, tuple/list/object/array pattern)."""
    if node is None:
        return []
    if node.type in ("identifier", "shorthand_property_identifier_pattern", "type_identifier"):
        return [_text(node, data)]
    if node.type == "pair_pattern":
        return _pattern_names(node.child_by_field_name("value"), data)
    if node.type in ("assignment_pattern", "object_assignment_pattern"):
        return _pattern_names(node.child_by_field_name("left") or node.named_child(0), data)
    if node.type == "rest_pattern":
        return [n for c in node.named_children for n in _pattern_names(c, data)]
    if node.type in (
        "pattern_list",
        "tuple_pattern",
        "list_pattern",
        "object_pattern",
        "array_pattern",
        "list_splat_pattern",
    ):
        return [n for c in node.named_children for n in _pattern_names(c, data)]
    return []


# ----------------------------------------------------------------------------------------------------------- imports

_PY_SCOPES = frozenset({"function_definition", "class_definition", "decorated_definition", "lambda"})


def _py_top_statements(root: Node) -> Iterator[Node]:
    """Statements at module level, including those nested in top-level ``if``/``try``/``with`` blocks."""
    stack = list(reversed(root.named_children))
    while stack:
        node = stack.pop()
        if node.type in _PY_SCOPES:
            yield node
            continue
        if node.type in (
            "if_statement",
            "try_statement",
            "with_statement",
            "block",
            "else_clause",
            "elif_clause",
            "except_clause",
            "finally_clause",
            "except_group_clause",
        ):
            stack.extend(reversed(node.named_children))
            continue
        yield node


def _py_imports(root: Node, data: bytes) -> list[ImportInfo]:
    out: list[ImportInfo] = []
    for node in _py_top_statements(root):
        names: list[str] = []
        if node.type == "import_statement":
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    names.append(_text(child.child_by_field_name("alias"), data))
                else:  # `import a.b` binds `a`
                    first = child.named_child(0) if child.type == "dotted_name" else child
                    names.append(_text(first, data))
        elif node.type in ("import_from_statement", "future_import_statement"):
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    names.append(_text(child.child_by_field_name("alias"), data))
                else:
                    names.append(_text(child, data).split(".")[-1])
            if any(c.type == "wildcard_import" for c in node.named_children):
                names.append("*")
        else:
            continue
        out.append(ImportInfo(node.start_byte, node.end_byte, tuple(names), "import"))
    return out


def _is_require_call(node: Node, data: bytes) -> bool:
    """``require("m")``, ``require("m").x`` or ``await import("m")``."""
    while node is not None and node.type in ("member_expression", "await_expression", "subscript_expression"):
        node = node.child_by_field_name("object") or node.named_child(0)
    if node is None or node.type != "call_expression":
        return False
    fn = node.child_by_field_name("function")
    return fn is not None and (fn.type == "import" or fn.type == "identifier" and _text(fn, data) == "require")


def _js_imports(root: Node, data: bytes) -> list[ImportInfo]:
    out: list[ImportInfo] = []
    for node in root.named_children:
        names: list[str] = []
        if node.type == "import_statement":
            for clause in node.named_children:
                if clause.type == "import_clause":
                    for part in clause.named_children:
                        if part.type == "identifier":
                            names.append(_text(part, data))
                        elif part.type == "namespace_import":
                            names.extend(_text(c, data) for c in part.named_children if c.type == "identifier")
                        elif part.type == "named_imports":
                            for spec in part.named_children:
                                if spec.type != "import_specifier":
                                    continue
                                bound = spec.child_by_field_name("alias") or spec.child_by_field_name("name")
                                names.append(_text(bound, data))
                elif clause.type == "import_require_clause":
                    names.extend(_text(c, data) for c in clause.named_children if c.type == "identifier")
            out.append(ImportInfo(node.start_byte, node.end_byte, tuple(names), "import"))
        elif node.type in ("lexical_declaration", "variable_declaration"):
            declarators = [c for c in node.named_children if c.type == "variable_declarator"]
            if declarators and all(_is_require_call(d.child_by_field_name("value"), data) for d in declarators):
                for d in declarators:
                    names.extend(_pattern_names(d.child_by_field_name("name"), data))
                out.append(ImportInfo(node.start_byte, node.end_byte, tuple(names), "import"))
    return out


def _generic_imports(root: Node, data: bytes) -> list[ImportInfo]:
    out: list[ImportInfo] = []
    for node in root.named_children:
        t = node.type
        if not ("import" in t or "include" in t or t == "use_declaration" or t == "using_directive"):
            continue
        names: list[str] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type.endswith("identifier"):
                names.append(_text(n, data))
            elif n.type in ("string", "interpreted_string_literal", "string_literal", "system_lib_string"):
                m = re.search(r"([A-Za-z_]\w*)\W*$", _text(n, data))
                if m:
                    names.append(m.group(1))
            else:
                stack.extend(reversed(n.named_children))
        out.append(ImportInfo(node.start_byte, node.end_byte, tuple(dict.fromkeys(names)), "import"))
    return out


def file_imports(root: Node, data: bytes, language: str | None) -> list[ImportInfo]:
    """The import statements of a file, in file order, each with the names it binds.

    Python: ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c``; ``from x import y as z`` binds ``z``;
    ``from x import *`` binds ``"*"``. Imports inside top-level ``if``/``try`` blocks count; imports inside
    functions and classes do not (they belong to that scope's own text). JS/TS: ``import d, {a as b}, * as ns from
    "m"`` binds ``d, b, ns``; ``import x = require("m")`` and ``const x = require("m")`` (destructuring too) bind
    their names; side-effect imports bind nothing. Other languages: top-level nodes whose type mentions ``import``
    or ``include`` (or ``use_declaration``), binding every identifier in them and the last word of any path string.

    Args:
        root: The tree's root node.
        data: The exact bytes the tree was parsed from.
        language: The grammar name (``python``, ``javascript``, ``typescript``, ``tsx``, ...).

    Returns:
        One :class:`ImportInfo` (kind ``"import"``) per statement, in file order.
    """
    if language == _PYTHON:
        return _py_imports(root, data)
    if language in _JS_LIKE:
        return _js_imports(root, data)
    return _generic_imports(root, data)


# ------------------------------------------------------------------------------------------------------ module names

_JS_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function", "function_expression", "generator_function", "class", "class_expression"}
)


def module_names(root: Node, data: bytes, language: str | None) -> list[ImportInfo]:
    """Module-level constants and type aliases, with the names each statement binds.

    Python: top-level assignments (``X = 3``, ``X: int = 3``, ``A, B = 1, 2``; dunder names such as ``__all__``
    skipped) are ``"constant"``; ``type Z = int`` is ``"type"``. JS/TS: top-level ``const``/``let``/``var``
    declarations whose values are not functions, classes or ``require`` calls are ``"constant"``; ``type``
    aliases, interfaces and enums are ``"type"`` (``export`` is looked through). Other languages: none.

    Args:
        root: The tree's root node.
        data: The exact bytes the tree was parsed from.
        language: The grammar name.

    Returns:
        One :class:`ImportInfo` per statement, in file order.
    """
    out: list[ImportInfo] = []
    if language == _PYTHON:
        for stmt in _py_top_statements(root):
            node = stmt.named_child(0) if stmt.type == "expression_statement" and stmt.named_child_count else stmt
            if node.type == "assignment":
                names = [n for n in _pattern_names(node.child_by_field_name("left"), data) if not n.startswith("__")]
                if names:
                    out.append(ImportInfo(stmt.start_byte, stmt.end_byte, tuple(names), "constant"))
            elif node.type == "type_alias_statement":
                left = node.child_by_field_name("left")
                names = [_text(n, data) for n in _walk(left) if n.type == "identifier"][:1] if left else []
                if names:
                    out.append(ImportInfo(stmt.start_byte, stmt.end_byte, tuple(names), "type"))
        return out
    if language in _JS_LIKE:
        for stmt in root.named_children:
            node = _unwrap(stmt)
            if node.type in ("lexical_declaration", "variable_declaration"):
                names = []
                for d in node.named_children:
                    if d.type != "variable_declarator":
                        continue
                    value = d.child_by_field_name("value")
                    if value is not None and (value.type in _JS_FUNCTION_VALUES or _is_require_call(value, data)):
                        continue
                    names.extend(_pattern_names(d.child_by_field_name("name"), data))
                if names:
                    out.append(ImportInfo(stmt.start_byte, stmt.end_byte, tuple(names), "constant"))
            elif node.type in ("type_alias_declaration", "interface_declaration", "enum_declaration"):
                name = node.child_by_field_name("name")
                if name is not None:
                    out.append(ImportInfo(stmt.start_byte, stmt.end_byte, (_text(name, data),), "type"))
    return out


# ------------------------------------------------------------------------------------------ identifiers, references


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
                src = "(call_expression function: (_) @call)"
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


# ---------------------------------------------------------------------------------------------------------- headers

_BODY_FIELDS = ("body", "block")


def _body(node: Node) -> Node | None:
    node = _unwrap(node)
    for f in _BODY_FIELDS:
        b = node.child_by_field_name(f)
        if b is not None:
            return b
    return None


def header_end(node: Node, data: bytes) -> int:
    """Byte offset just past the line that ends a definition's header.

    For ``@dec\\nclass A(B):\\n    ...`` this is the end of the ``class A(B):`` line; for ``class A extends B {``
    the end of that line (the ``{`` included). Decorators before the header belong to it. A node without a body
    gives the end of its first line.

    Args:
        node: A class/function definition (decorated, exported or not).
        data: The exact bytes the tree was parsed from.
    """
    body = _body(node)
    if body is None:
        return min(node.end_byte, _line_end(data, node.start_byte))
    # The header ends on the line of the last non-blank byte before the body (or the body's opening brace).
    pos = body.start_byte
    if data[pos : pos + 1] in (b"{", b":"):
        pos += 1
    else:
        while pos > node.start_byte and data[pos - 1 : pos] in (b" ", b"\t", b"\n", b"\r"):
            pos -= 1
    return min(node.end_byte, _line_end(data, max(node.start_byte, pos - 1)))


# --------------------------------------------------------------------------------------------------------- skeleton


def _first_doc_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _py_docstring(block: Node | None) -> Node | None:
    """The string node that is the first statement of a block/module, if any."""
    if block is None or not block.named_child_count:
        return None
    first = block.named_children[0]
    if first.type == "comment":
        nxt = [c for c in block.named_children if c.type != "comment"]
        if not nxt:
            return None
        first = nxt[0]
    if first.type == "expression_statement" and first.named_child_count == 1:
        first = first.named_children[0]
    return first if first.type in ("string", "concatenated_string") else None


def _py_doc_first_line(string: Node, data: bytes) -> str:
    """A docstring reduced to its first line, as a valid string literal with the original prefix and quotes."""
    raw = _text(string, data)
    m = re.match(r"([rRbBuUfF]*)(\"\"\"|'''|\"|')", raw)
    if not m:
        return raw.splitlines()[0] if raw else raw
    prefix, quote = m.group(1), m.group(2)
    inner = raw[len(prefix) + len(quote) :]
    if inner.endswith(quote):
        inner = inner[: -len(quote)]
    line = _first_doc_line(inner)
    if line.endswith(quote[0]) or line.endswith("\\"):
        line = line + " "
    return f"{prefix}{quote}{line}{quote}"


class _Emitter:
    """Accumulates byte slices and generated text; slices are always whole lines of ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.parts: list[str] = []

    def raw(self, start: int, end: int) -> None:
        if end > start:
            self.parts.append(self.data[start:end].decode("utf-8", "replace"))

    def text(self, s: str) -> None:
        self.parts.append(s)

    def newline(self) -> None:
        if self.parts and not self.parts[-1].endswith("\n"):
            self.parts.append("\n")

    def result(self) -> str:
        return "".join(self.parts)


def _indent_of(data: bytes, pos: int) -> str:
    ls = _line_start(data, pos)
    prefix = data[ls:pos].decode("utf-8", "replace")
    return prefix if not prefix.strip() else prefix[: len(prefix) - len(prefix.lstrip())]


def _py_def(node: Node, data: bytes, out: _Emitter, placeholder: str) -> None:
    """Emit a function (decorators, signature, first docstring line, ``...``) or a class skeleton."""
    inner = _unwrap(node)
    body = inner.child_by_field_name("body")
    if inner.type == "class_definition":
        _py_class(node, data, out, placeholder)
        return
    start = _line_start(data, node.start_byte)
    if body is None:
        out.raw(start, node.end_byte)
        out.newline()
        return
    doc = _py_docstring(body)
    same_line = data.rfind(b"\n", inner.start_byte, body.start_byte) < 0
    if same_line:  # `def f(self): return 1` -> `def f(self): ...`
        out.raw(start, body.start_byte)
        out.text(placeholder)
        out.newline()
        return
    out.raw(start, data.rfind(b"\n", 0, body.start_byte) + 1)
    indent = _indent_of(data, body.start_byte)
    if doc is not None:
        out.text(f"{indent}{_py_doc_first_line(doc, data)}\n")
    out.text(f"{indent}{placeholder}\n")


def _py_class(node: Node, data: bytes, out: _Emitter, placeholder: str) -> None:
    inner = _unwrap(node)
    body = inner.child_by_field_name("body")
    start = _line_start(data, node.start_byte)
    if body is None or data.rfind(b"\n", inner.start_byte, body.start_byte) < 0:
        # One-line class (`class E(Exception): pass`): short by nature, keep it whole.
        out.raw(start, _line_end(data, node.end_byte - 1))
        out.newline()
        return
    out.raw(start, data.rfind(b"\n", 0, body.start_byte) + 1)
    _py_block(body, data, out, placeholder, docstring_first_line=False)


def _py_block(block: Node, data: bytes, out: _Emitter, placeholder: str, *, docstring_first_line: bool) -> None:
    """Emit the skeleton of a class body or module: docstring, imports, assignments, definitions."""
    doc = _py_docstring(block)
    emitted = 0
    indent = _indent_of(data, block.named_children[0].start_byte) if block.named_child_count else ""
    for child in block.named_children:
        inner = child.named_children[0] if child.type == "expression_statement" and child.named_child_count else child
        if doc is not None and (child == doc or inner == doc):
            if docstring_first_line:
                out.text(f"{indent}{_py_doc_first_line(doc, data)}\n")
            else:
                out.raw(_line_start(data, child.start_byte), _line_end(data, child.end_byte - 1))
            emitted += 1
        elif _unwrap(child).type in ("function_definition", "class_definition"):
            _py_def(child, data, out, placeholder)
            emitted += 1
        elif inner.type in (
            "assignment",
            "augmented_assignment",
            "import_statement",
            "import_from_statement",
            "future_import_statement",
            "type_alias_statement",
        ):
            out.raw(_line_start(data, child.start_byte), _line_end(data, child.end_byte - 1))
            emitted += 1
        out.newline()
    if not emitted:
        out.text(f"{indent}{placeholder}\n")


def _js_doc_comment(member: Node, data: bytes) -> str | None:
    """The first line of a ``/** … */`` comment directly before ``member``, as a one-line comment."""
    prev = member.prev_sibling
    if prev is None or prev.type != "comment":
        return None
    raw = _text(prev, data)
    if not raw.startswith("/**"):
        return None
    body = raw[3:-2] if raw.endswith("*/") else raw[3:]
    for line in body.splitlines():
        line = line.strip().lstrip("*").strip()
        if line:
            return f"/** {line.replace('*/', '* /')} */"
    return None


_JS_FUNCS = frozenset({"function_declaration", "generator_function_declaration", "method_definition", "function"})


def _js_signature(node: Node, data: bytes, out: _Emitter, placeholder: str) -> None:
    """Emit a function/method from its line start to its body, then the placeholder."""
    body = _body(node)
    start = _line_start(data, node.start_byte)
    if body is None:
        out.raw(start, _line_end(data, node.end_byte - 1))
        out.newline()
        return
    out.raw(start, body.start_byte)
    out.text(placeholder)
    after = body.end_byte
    # Keep what follows the body on the same line (`;`, `,`) so the surrounding syntax stays intact.
    line_end = _line_end(data, after)
    tail = data[after:line_end].decode("utf-8", "replace")
    if tail.strip() in (";", ",", ");", ""):
        out.text(tail.rstrip("\n"))
    out.newline()


def _js_class(node: Node, data: bytes, out: _Emitter, placeholder: str) -> None:
    inner = _unwrap(node)
    body = inner.child_by_field_name("body")
    start = _line_start(data, node.start_byte)
    if body is None:
        out.raw(start, _line_end(data, node.end_byte - 1))
        out.newline()
        return
    out.raw(start, body.start_byte + 1)  # through the opening `{`
    out.newline()
    for member in body.named_children:
        t = member.type
        if t == "comment":
            continue
        doc = _js_doc_comment(member, data)
        if doc:
            out.text(f"{_indent_of(data, member.start_byte)}{doc}\n")
        value = member.child_by_field_name("value")
        if t in _JS_FUNCS or t in ("field_definition", "public_field_definition") and value is not None and (
            value.type in ("arrow_function", "function", "function_expression") and _body(value) is not None
        ):
            target = member if t in _JS_FUNCS else value
            b = _body(target)
            if b is not None and b.type == "statement_block":
                out.raw(_line_start(data, member.start_byte), b.start_byte)
                out.text(placeholder)
                tail_end = _line_end(data, member.end_byte - 1)
                tail = data[b.end_byte : tail_end].decode("utf-8", "replace")
                if tail.strip() in (";", ",", ""):
                    out.text(tail.rstrip("\n"))
                else:
                    out.raw(b.end_byte, member.end_byte)
                # A `;` after a field is a sibling token of the member.
                nxt = member.next_sibling
                if nxt is not None and nxt.type == ";" and ";" not in tail:
                    out.text(";")
                out.newline()
                continue
        end = member.end_byte
        nxt = member.next_sibling
        if nxt is not None and nxt.type in (";", ","):
            end = nxt.end_byte
        out.raw(_line_start(data, member.start_byte), end)
        out.newline()
    close = body.end_byte - 1
    out.raw(_line_start(data, close), body.end_byte)
    out.newline()


def _js_module(root: Node, data: bytes, out: _Emitter, placeholder: str) -> None:
    for stmt in root.named_children:
        node = _unwrap(stmt)
        t = node.type
        if t == "comment":
            if stmt.start_byte == root.named_children[0].start_byte:  # a leading file comment
                out.raw(_line_start(data, stmt.start_byte), _line_end(data, stmt.end_byte - 1))
            continue
        if t in ("class_declaration", "abstract_class_declaration", "class"):
            _js_class(stmt, data, out, placeholder)
        elif t in ("function_declaration", "generator_function_declaration"):
            _js_signature(stmt, data, out, placeholder)
        elif t in ("lexical_declaration", "variable_declaration"):
            fn = None
            decls = [d for d in node.named_children if d.type == "variable_declarator"]
            if len(decls) == 1:
                value = decls[0].child_by_field_name("value")
                if value is not None and value.type in ("arrow_function", "function", "function_expression"):
                    b = _body(value)
                    fn = b if b is not None and b.type == "statement_block" else None
            if fn is not None:
                out.raw(_line_start(data, stmt.start_byte), fn.start_byte)
                out.text(placeholder)
                out.raw(fn.end_byte, stmt.end_byte)
            else:
                out.raw(_line_start(data, stmt.start_byte), stmt.end_byte)
        elif t in ("import_statement", "type_alias_declaration", "interface_declaration", "enum_declaration"):
            out.raw(_line_start(data, stmt.start_byte), stmt.end_byte)
        else:
            continue
        out.newline()


_FUNCTION_HINTS = ("function", "method", "constructor", "procedure", "lambda")


def _generic(node: Node, data: bytes, placeholder: str) -> str:
    """Elide the body of every function-like descendant of ``node``; keep everything else verbatim."""
    cuts: list[tuple[int, int]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n is not node and any(h in n.type for h in _FUNCTION_HINTS):
            b = n.child_by_field_name("body")
            if b is not None and b.end_byte > b.start_byte:
                cuts.append((b.start_byte, b.end_byte))
                continue
        stack.extend(n.named_children)
    cuts.sort()
    start = _line_start(data, node.start_byte)
    out: list[str] = []
    pos = start
    for a, b in cuts:
        if a < pos:
            continue
        out.append(data[pos:a].decode("utf-8", "replace"))
        out.append(placeholder)
        pos = b
    out.append(data[pos : node.end_byte].decode("utf-8", "replace"))
    text = "".join(out)
    return text if text.endswith("\n") else text + "\n"


def skeleton(node: Node, data: bytes, language: str | None) -> str:
    """Render a class or module as valid code with every body elided.

    Kept: the header (decorators, ``class A(B):`` / ``class A extends B {``), the docstring, class attributes and
    fields, imports and constants (for a module), and for every method/function its signature plus the first line
    of its docstring (Python) or JSDoc comment (JS/TS). Bodies become :func:`body_placeholder` (``...`` in Python,
    ``{ /* … */ }`` in JS/TS, ``{ :; }`` in Bash). Nested classes are rendered recursively. Every kept piece is a
    byte slice of ``data`` (whole lines, so indentation is preserved); only placeholders and shortened docstrings
    are generated. Other languages get a generic rendering: the node's text with the body of every function-like
    descendant elided.

    Args:
        node: A class (possibly decorated/exported) or the module root.
        data: The exact bytes the tree was parsed from.
        language: The grammar name.

    Returns:
        The skeleton text, ending with a newline.
    """
    placeholder = body_placeholder(language)
    out = _Emitter(data)
    if language == _PYTHON:
        inner = _unwrap(node)
        if inner.type == "module":
            _py_block(inner, data, out, placeholder, docstring_first_line=False)
        elif inner.type in ("class_definition", "function_definition"):
            _py_def(node, data, out, placeholder)
        else:
            return _generic(node, data, placeholder)
        return out.result()
    if language in _JS_LIKE:
        inner = _unwrap(node)
        if inner.type == "program":
            _js_module(inner, data, out, placeholder)
        elif inner.type in ("class_declaration", "abstract_class_declaration", "class"):
            _js_class(node, data, out, placeholder)
        elif inner.type in _JS_FUNCS:
            _js_signature(node, data, out, placeholder)
        else:
            return _generic(node, data, placeholder)
        return out.result()
    return _generic(node, data, placeholder)
