"""Outlines of definitions: where a header ends, and skeletons (a class or module with every body elided).

* :func:`skeleton` - a class or module rendered as valid code: header, docstring, attributes, every method's
  signature and first docstring line, with bodies elided (``...`` in Python, ``{ /* … */ }`` in JS/TS).
* :func:`header_end` - where a class/function header ends (the ``class A(B):`` line), for a one-line context.
* :func:`body_placeholder` - the text that stands for an elided body in a language.
* :func:`skeleton_entries` - a skeleton's lines grouped into its header, its members (each whole: a multi-line
  signature, its doc line, its decorators) and its closing line, for a reader that leaves members out.
* :func:`skeleton_for` - a skeleton cut down to the members a piece of code reaches (``this.retry(...)``), still
  balanced.

Python and JavaScript/TypeScript get their own renderings; any other grammar gets a generic one (the node's text
with the body of every function-like descendant elided).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._syntax import _JS_LIKE, _PYTHON, Node, _line_end, _line_start, _text, _unwrap

_PLACEHOLDERS = {
    "python": "...",
    "javascript": "{ /* … */ }",
    "typescript": "{ /* … */ }",
    "tsx": "{ /* … */ }",
    "jsx": "{ /* … */ }",
    "bash": "{ :; }",
}
_DEFAULT_PLACEHOLDER = "{ /* … */ }"


def body_placeholder(language: str | None) -> str:
    """The text that stands for an elided body in ``language`` (``...`` for Python, ``{ /* … */ }`` for JS/TS)."""
    return _PLACEHOLDERS.get(language or "", _DEFAULT_PLACEHOLDER)


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


_STRINGS = re.compile(r"""'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`""")
_COMMENT_TAIL = re.compile(r"//.*|(?:^|\s)#\s.*")
_ATTACHED = ("/*", "//", "*", "# ", "@")  # a doc line or a decorator: part of the member below it


def _depth_change(line: str) -> int:
    code = _COMMENT_TAIL.sub("", _STRINGS.sub("", line))
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _indent_width(line: str) -> int:
    return len(line) - len(line.lstrip())


@dataclass(frozen=True)
class SkeletonEntry:
    """One entry of a skeleton (see :func:`skeleton_entries`).

    Attributes:
        role: ``header``, ``member``, ``blank`` or ``close``.
        lines: Its lines, with their line ends.
        signature: Its lines that state the signature (stripped), without generated doc lines or the body lines
            under a Python signature: a member is shown elsewhere when all of these are (a line holding a
            placeholder never is, so a JS/TS member stays listed).
    """

    role: str
    lines: tuple[str, ...]
    signature: tuple[str, ...]


def skeleton_entries(text: str) -> list[SkeletonEntry]:
    """Group the lines of a :func:`skeleton` into its header, its members and its closing line.

    Brackets (outside strings and comments) decide how far a line continues: a member whose parameters, return
    type or type literal run over several lines is one entry, with the doc comment and decorators above it and (in
    Python) the docstring and ``...`` indented under it. Leaving out whole entries keeps a skeleton balanced,
    where leaving out lines would cut a signature (a lost parameter, a dangling ``): T => { /* … */ }``, a lost
    closing brace).

    Example:
        >>> ents = skeleton_entries("class A {\n  f = (\n    a: T,\n  ): U => { /* … */ }\n}\n")
        >>> [(e.role, len(e.lines)) for e in ents]
        [('header', 1), ('member', 3), ('close', 1)]
        >>> ents[1].signature[-1]
        '): U => { /* … */ }'
    """
    lines = text.splitlines(keepends=True)
    out: list[SkeletonEntry] = []
    i = depth = 0
    while i < len(lines):  # the header: up to the line that opens the body (`{` or `:` at its end)
        depth += _depth_change(lines[i])
        i += 1
        if lines[i - 1].rstrip().endswith(("{", ":")) and depth <= 1:
            break
    out.append(SkeletonEntry("header", tuple(lines[:i]), tuple(line.strip() for line in lines[:i])))
    base = depth
    while i < len(lines):
        first = lines[i]
        if not first.strip():
            out.append(SkeletonEntry("blank", (first,), ()))
            i += 1
            continue
        entry, signature, d = [first], [], base + _depth_change(first)
        if not first.lstrip().startswith(_ATTACHED):
            signature.append(first.strip())
        i += 1
        if d < base:
            out.append(SkeletonEntry("close", (first,), ()))
            depth = d
            continue
        while i < len(lines):
            line = lines[i]
            attached = all(x.lstrip().startswith(_ATTACHED) for x in entry)
            if d > base or attached and line.strip():
                if not line.lstrip().startswith(_ATTACHED) or d > base:
                    signature.append(line.strip())
            elif not (line.strip() and _indent_width(line) > _indent_width(first)):
                break
            entry.append(line)
            d += _depth_change(line)
            i += 1
        out.append(SkeletonEntry("member", tuple(entry), tuple(signature)))
    return out


# What may come before a member's name on its signature line: modifiers (TS/JS, Python's `def`), a generator's `*`.
_MEMBER_NAME = re.compile(
    r"(?:(?:export|default|public|private|protected|static|readonly|abstract|override|declare|async|get|set|accessor"
    r"|def|class)\s+)*[*#]?\s*([A-Za-z_$][\w$]*)"
)
# Names a piece of code reaches through an attribute: `this.retry(...)`, `self.calculate_delay()`, `this.#count`.
_ATTRIBUTE = re.compile(r"\.\s*#?([A-Za-z_$][\w$]*)")
# ... and through the instance itself (`this.baseUrl`, `self.hooks`): one no member declares is set in the constructor.
_OWN_ATTRIBUTE = re.compile(r"\b(?:this|self)\s*\.\s*#?([A-Za-z_$][\w$]*)")
_CONSTRUCTORS = frozenset({"constructor", "__init__"})


def member_name(entry: SkeletonEntry) -> str | None:
    """The name a skeleton member defines (``calculateDelay`` for ``protected calculateDelay(): number { … }``,
    ``retry_count`` for ``retry_count: int = 0``), or ``None``."""
    if entry.role != "member" or not entry.signature:
        return None
    m = _MEMBER_NAME.match(entry.signature[0])
    return m.group(1) if m else None


def skeleton_for(text: str, code: str) -> str | None:
    """A skeleton cut down to what ``code`` (a method of the class, shown beside it) reaches through an attribute
    (``this.retry(...)``, ``self.hooks``): the header, those members whole (signature, doc line, decorators,
    placeholder) and the closing line, so that it stays balanced code. When ``code`` reaches an attribute of the
    instance (``this.x``, ``self.x``) that no member declares, the constructor is kept too (where ``this.x``/``self.x`` is set, or declared as a parameter
    property). ``None`` when it would hold no member and has no closing line (a Python header alone says no more
    than the header line)."""
    used = set(_ATTRIBUTE.findall(code))
    entries = skeleton_entries(text)
    if set(_OWN_ATTRIBUTE.findall(code)) - {member_name(e) for e in entries}:
        used |= _CONSTRUCTORS
    kept = [e for e in entries if e.role in ("header", "close") or e.role == "member" and member_name(e) in used]
    if not any(e.role == "member" for e in kept) and not any(e.role == "close" for e in kept):
        return None
    return "".join(line for e in kept for line in e.lines)


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
