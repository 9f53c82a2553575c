"""Imports and module-level bindings: the statements of a file that bind names, and the names each binds.

* :func:`file_imports` - the import statements of a file (``import a.b as c`` binds ``c``).
* :func:`module_names` - module-level constants and type aliases, with the names they bind.

Python and JavaScript/TypeScript get careful rules; any other grammar gets a generic version driven by node-type
names (``*import*``, ``*include*``, ``*identifier``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._syntax import _JS_LIKE, _PYTHON, Node, _text, _unwrap, _walk


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
