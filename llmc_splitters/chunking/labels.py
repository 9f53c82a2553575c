"""Labels: what each leaf and each split definition says about itself.

A leaf's ``kind`` and ``name`` (the definition it holds, ``imports``, ``comment``, a piece of its scope, the code
of a fence), and in its metadata the definition's ``signature``, ``docstring`` and ``decorators``, the
``breadcrumb`` of enclosing definitions, the ``context`` (their signatures, for a piece of a split body), and
``split``/``part``, ``oversize``, ``fallback`` and ``code_language`` where they apply. Everything is read off the
syntax nodes of the window being chunked.
"""

from __future__ import annotations

from typing import Any

from ._engine import Engine, _string_statement
from .languages import LanguageSpec
from .units import Leaf, Scope


class Labeler:
    """Labels the leaves and scopes of one file (one :class:`~llmc_splitters.chunking._engine.Engine` run)."""

    def __init__(self, engine: Engine, spec: LanguageSpec, budget: int) -> None:
        self.engine = engine
        self.spec = spec  # the file's language (a fence's code has its own, on its scope)
        self.budget = budget

    def label(self, leaves: list[Leaf]) -> None:
        """Set each leaf's ``kind``, ``name`` and metadata (see the module docstring)."""
        parts: dict[int, int] = {}
        bats_test: str | None = None  # the Bats test (`@test "name" {` ... `}`) the leaves are inside
        for leaf in leaves:
            scope = leaf.scope
            spec = scope.spec
            units = leaf.units
            first = units[0]
            if first.role != "def" and len(units) > 1:
                defs = [u for u in units if u.role == "def" and u.info is not None]
                if len(defs) == 1 and not (scope.info is not None and leaf.start == scope.start):
                    first = defs[0]  # a fragment joined to a definition (packing): the leaf is that definition
            if first.role == "def" and first.info is not None:
                info = first.info
                leaf.kind, leaf.name = info.kind, info.qname
                leaf.meta.update(self.def_meta(info))
            elif first.role == "standalone":
                leaf.kind = spec.glue_kinds.get(first.node_type or "", first.node_type or spec.glue_kind)
            else:
                cats = {u.category for u in units}
                if first.role == "piece":
                    leaf.kind = _piece_kind(scope, spec)
                    if first.how not in (None, "whole"):
                        leaf.meta["fallback"] = first.how
                elif "import" in cats and cats <= {"import", "neutral"}:
                    leaf.kind = "imports"
                elif cats == {"neutral"} and {u.node_type for u in units} <= spec.comment_types:
                    leaf.kind = "comment"
                elif len(units) == 1 and first.node_type in spec.injections and self._label_embedded(leaf, first):
                    pass
                elif len(units) == 1 and first.node_type in spec.glue_kinds:
                    leaf.kind = spec.glue_kinds[first.node_type]  # type: ignore[index]
                elif scope.info is not None and leaf.start == scope.start:
                    leaf.kind = scope.kind
                else:
                    leaf.kind = _piece_kind(scope, spec)
                if len(units) > 1 and spec.injections:
                    embedded = [u for u in units if u.node_type in spec.injections and u.node is not None]
                    if len(embedded) == 1:
                        # One <script> or fence packed with markup or prose: say which code it holds.
                        self._label_embedded(leaf, embedded[0], rename=False)
                if leaf.name is None and scope.name is not None:
                    leaf.name = scope.name
            if scope.spec.name == "bash" and scope.info is None:
                bats_test = self._bats(leaf, bats_test)
            if scope.info is not None or scope.kind == "code":
                parts[id(scope)] = parts.get(id(scope), 0) + 1
                leaf.meta["split"] = True
                leaf.meta["part"] = parts[id(scope)]
            if leaf.tokens > self.budget:
                leaf.meta["oversize"] = True
            if scope.kind == "code":
                leaf.meta["code_language"] = scope.meta.get("code_language")
            self._context(leaf)

    def _bats(self, leaf: Leaf, current: str | None) -> str | None:
        """Name a leaf of a Bats test after the test; return the test still open after the leaf.

        Bash parses ``@test "adds two numbers" {`` as a command whose arguments are the name and ``{``, and the
        test's closing ``}`` as a command of its own: a test is the statements from the one to the other (what the
        ``bats`` preprocessor turns into a function).
        """
        data = self.engine.data
        # Only a leaf that begins with a test (or lies inside one) is named after it, not a file that holds tests.
        nameable = current is not None
        code = [u for u in leaf.units if u.category != "neutral"]
        for u in code:
            node = u.node
            if node is None or node.type != "command":
                continue
            head = node.child_by_field_name("name")
            args = node.children_by_field_name("argument")
            word = data[head.start_byte : head.end_byte] if head is not None else b""
            if word == b"@test" and args and data[args[-1].start_byte : args[-1].end_byte] == b"{":
                raw = data[args[0].start_byte : args[0].end_byte].decode("utf-8", "replace")
                current = raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"" else raw
                if leaf.name is None and (nameable or u is code[0]):
                    leaf.kind, leaf.name = "function", current
            elif word == b"}" and not args and current is not None:
                if leaf.name is None and nameable:
                    leaf.kind, leaf.name = "function", current
                current = None
        if nameable and current is not None and leaf.name is None:
            leaf.kind, leaf.name = "function", current
        return current

    def _label_embedded(self, leaf: Leaf, unit: Any, rename: bool = True) -> bool:
        """A whole fence or ``<script>``: record its language, and (``rename``) name the leaf after its single
        top-level definition if it has one."""
        spec = leaf.scope.spec
        parsed = self.engine.parse_injection(unit.node, spec.injections[unit.node_type])
        if parsed is None:
            return False
        sub_spec, content, _tree, ctx = parsed
        leaf.meta["code_language"] = sub_spec.name
        if not rename:
            return True
        leaf.kind = spec.glue_kinds.get(unit.node_type or "", "code")
        tops = {id(i): i for i in ctx.defs.values() if "." not in i.qname and i.qname == i.name}
        if len(tops) == 1:
            info = next(iter(tops.values()))
            leaf.kind, leaf.name = info.kind, info.qname
            leaf.meta.update(self.def_meta(info))
        return True

    def def_meta(self, info: Any) -> dict[str, Any]:
        """The ``signature``, ``docstring`` and ``decorators`` of a definition, those it has."""
        meta: dict[str, Any] = {}
        sig = self.signature(info)
        if sig:
            meta["signature"] = sig
        doc = self._docstring(info)
        if doc:
            meta["docstring"] = doc
        decorators = [
            self.engine.text(c.start_byte, c.end_byte)
            for c in info.outer.children
            if c.type == "decorator"
        ]
        if decorators:
            meta["decorators"] = decorators
        return meta

    def signature(self, info: Any) -> str:
        """A definition's header, up to its body (a section's heading line), in at most 1,000 characters."""
        node = info.node
        data = self.engine.data
        if node.type == "section":
            heading = node.children[0] if node.children else node
            return data[heading.start_byte : heading.end_byte].decode("utf-8", "replace").strip()
        body = _find_body(node)
        end = body.start_byte if body is not None else node.end_byte
        nl = data.find(b"\n", node.start_byte, end) if body is None else -1
        if nl >= 0:
            end = nl
        sig = data[node.start_byte : end].decode("utf-8", "replace").rstrip()
        if body is not None and self.spec.docstring != "body_string":
            sig = sig.rstrip("{ \t")
        return sig[:1000]

    def _docstring(self, info: Any) -> str | None:
        eng = self.engine
        spec = self.spec
        node = info.node
        if spec.docstring == "body_string":
            body = node.child_by_field_name("body")
            if body is not None and body.named_child_count:
                s = _string_statement(body.named_children[0])
                if s is not None:
                    return eng.text(s.start_byte, s.end_byte)
            return None
        comments: list[str] = []
        cur = info.outer.prev_sibling
        nxt_start = info.outer.start_byte
        while cur is not None and cur.type in spec.comment_types:
            if eng.data.count(b"\n", cur.end_byte, nxt_start) > 1:
                break
            comments.append(eng.text(cur.start_byte, cur.end_byte))
            nxt_start = cur.start_byte
            cur = cur.prev_sibling
        return "\n".join(reversed(comments)) or None

    def _context(self, leaf: Leaf) -> None:
        """Breadcrumb and the signatures of the enclosing split definitions (the context prefix of a piece)."""
        chain: list[Scope] = []
        s: Scope | None = leaf.scope
        while s is not None:
            if s.info is not None:
                chain.append(s)
            s = s.parent
        chain.reverse()
        infos = [sc.info for sc in chain if sc.info is not None]
        first = leaf.units[0] if leaf.units else None
        if first is not None and first.role == "def" and first.info is not None:
            infos.append(first.info)
        # The outermost by its qualified name: what qualifies it is outside the chain (Go's receiver type).
        crumbs = [info.qname if k == 0 else info.name for k, info in enumerate(infos)]
        if crumbs:
            leaf.meta["breadcrumb"] = " > ".join(crumbs)
        sigs = []
        for sc in chain:
            if sc.start == leaf.start and sc is leaf.scope:
                continue  # this piece holds the header itself
            if "signature" not in sc.meta and sc.info is not None:
                sc.meta["signature"] = self.signature(sc.info)
            if sc.meta.get("signature"):
                sigs.append(sc.meta["signature"])
        if sigs:
            leaf.meta["context"] = "\n".join(sigs)


def _piece_kind(scope: Scope, spec: LanguageSpec) -> str:
    if scope.kind == "code":
        return "code"
    if scope.kind == "section":
        return "section"
    return spec.glue_kind


def _find_body(node: Any) -> Any:
    """The body of a definition: its ``body`` field, or that of a function/class value (``const f = () => {}``)."""
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    frontier = list(node.named_children)
    for _ in range(3):
        nxt = []
        for child in frontier:
            body = child.child_by_field_name("body")
            if body is not None:
                return body
            nxt.extend(child.named_children)
        frontier = nxt
    return None
