"""Splitting: a parsed file in, a tiling of byte ranges (units) and structural scopes out.

The engine of the split-then-merge chunker has one module per stage, each with one job:

* :mod:`~llmc_splitters.chunking.definitions` finds the definitions of a parsed region, and their names;
* this module splits the tree along them into units (steps 1-3 below);
* :mod:`~llmc_splitters.chunking.packing` merges the units into leaves within the budget (step 4);
* :mod:`~llmc_splitters.chunking.counting` counts the tokens of byte ranges for both (an :class:`Engine` is a
  :class:`~llmc_splitters.chunking.counting.RangeCounter`), and :mod:`~llmc_splitters.chunking.units` holds what
  they hand each other.

Algorithm (cAST-style, iterative so that deep nesting cannot overflow Python's stack):

1. The file's root is always split into its top-level children; whole definitions are never packed together.
2. A child that fits the budget becomes one *unit*: a definition (class, function, method, section) stands alone;
   anything else (statements, imports, comments) is *glue*. Comments and decorators right above a definition
   (no blank line between) belong to it.
3. A child over budget is split along its own children, recursively. An over-budget definition opens a *scope*
   (a structural span: its pieces' parent). A node with no children that is still over budget is cut by lines,
   then by tokens (:mod:`llmc_splitters.chunking.fallback`).
4. Adjacent glue units of the same scope are merged greedily up to the budget, preferring cuts at blank lines;
   imports are not merged with other statements.

Cut points between units sit at line starts whenever the units are on different lines; blank lines go with the
unit above. Byte ranges tile the file, so the leaves are lossless by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from . import fallback
from ._grammar import get_parser, load_language
from .counting import RangeCounter
from .definitions import Context, DefInfo, find_definitions, wide_error
from .languages import LanguageSpec, get_spec, normalize_language
from .tokens import Tokenizer
from .units import Leaf, Scope, Unit

# Importable from here since before the engine's stages had modules of their own.
__all__ = ["Context", "DefInfo", "Engine", "Leaf", "Scope", "Unit", "parse", "wide_error"]

# A named node this small on the same line as the code before it joins that code (`};`).
_TRAILING_BYTES = 2

# What splitting a node gives: finished units, and the (node, lo, hi, scope, context) of the nodes still to split.
Task = Union[Unit, tuple[Any, int, int, Scope, Context]]


class Engine(RangeCounter):
    """One chunking run over one file (not shared between threads); it counts its ranges as a
    :class:`RangeCounter`."""

    def __init__(self, data: bytes, budget: int, tokenizer: Tokenizer, source: bytes | None = None) -> None:
        super().__init__(data if source is None else source, budget, tokenizer)
        self.data = data  # what the parser reads (same offsets as the source)
        self.scopes: list[Scope] = []
        self.wide_error = False
        self.all_defs: list[DefInfo] = []

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", "replace")

    # ----------------------------------------------------------------- definitions
    def context_for(self, spec: LanguageSpec, root: Any) -> Context:
        """The definitions, wrappers and imports under ``root`` (:func:`find_definitions`), also listed in
        ``all_defs``. Once a tree of this file holds a wide syntax error, no query runs on this file again."""
        if wide_error(root):
            self.wide_error = True
        ctx = find_definitions(spec, root, self.data, use_query=not self.wide_error)
        self.all_defs.extend(ctx.ordered)
        return ctx

    # ----------------------------------------------------------------- splitting
    def run(self, root: Any, spec: LanguageSpec, file_scope: Scope, lo: int, hi: int) -> list[Unit]:
        """Split the bytes ``[lo, hi)`` of the file (the whole file, or a window of it), parsed as ``root``, into
        units of ``file_scope``, in file order."""
        ctx = self.context_for(spec, root)
        self.scan_injections(root, spec)
        units: list[Unit] = []
        # Work stack, processed last-in-first-out; pushing children reversed keeps file order. A task is a finished
        # unit, or the (node, lo, hi, scope, context) of a node to split.
        stack: list[Task] = [(root, lo, hi, file_scope, ctx)]
        while stack:
            task = stack.pop()
            if type(task) is Unit:
                units.append(task)
            else:
                stack.extend(reversed(self._expand(*task)))
        return units

    def _items(self, node: Any, ctx: Context) -> list[tuple[list[Any], DefInfo | None]]:
        """Children of ``node`` grouped: leading comments/decorators join the definition right below them."""
        data = self.data
        items: list[tuple[list[Any], DefInfo | None]] = []
        pending: list[Any] = []
        attach = ctx.spec.attach_forward
        comments = ctx.spec.comment_types
        wrapped = ctx.wrapped
        defs = ctx.defs
        for child in node.children:
            start = child.start_byte
            end = child.end_byte
            if end == start:
                continue
            cid = child.id
            info = None if cid in wrapped else defs.get(cid)
            ctype = child.type
            if info is not None and pending:
                # Keep the attached run only back to the last blank line.
                keep = len(pending)
                nxt = start
                while keep > 0 and data.count(b"\n", pending[keep - 1].end_byte, nxt) <= 1:
                    keep -= 1
                    nxt = pending[keep].start_byte
                for p in pending[:keep]:
                    items.append(([p], None))
                items.append((pending[keep:] + [child], info))
                pending = []
                continue
            if pending and info is None and ctype not in attach:
                items.extend(([p], None) for p in pending)
                pending = []
            if items and not pending and info is None and (
                ctype in comments or end - start <= _TRAILING_BYTES or not child.is_named
            ):
                prev_nodes, _ = items[-1]
                if data.find(b"\n", prev_nodes[-1].end_byte, start) < 0:
                    # A comment, a punctuation token or a token-sized statement (`;`) on the same line as the code
                    # before it belongs to that code.
                    prev_nodes.append(child)
                    continue
            if ctype in attach:
                pending.append(child)
                continue
            items.append(([child], info))
        items.extend(([p], None) for p in pending)
        return items

    def _cuts(self, items: list[tuple[list[Any], DefInfo | None]], lo: int, hi: int) -> list[int]:
        """Cut points between items: at the start of the next item's line when they are on different lines."""
        data = self.data
        cuts = [lo]
        for i in range(1, len(items)):
            prev_end = items[i - 1][0][-1].end_byte
            start = items[i][0][0].start_byte
            nl = data.rfind(b"\n", prev_end, start)
            if nl >= 0:
                cut = nl + 1
            else:
                # No line break between them. If the next item starts its own line and only its indentation was
                # taken by the item before (Markdown block continuations), cut at that line's start anyway.
                ls = data.rfind(b"\n", 0, start) + 1
                cut = ls if ls > items[i - 1][0][0].start_byte and not data[ls:start].strip() else start
            cuts.append(max(cut, cuts[-1]))
        cuts.append(hi)
        return cuts

    def _expand(self, node: Any, lo: int, hi: int, scope: Scope, ctx: Context) -> Sequence[Task]:
        """Tasks for the children of an over-budget (or root) node covering bytes ``[lo, hi)``."""
        if node.child_count == 0:
            return self._pieces(lo, hi, scope, "block")
        items = self._items(node, ctx)
        if not items:
            return self._pieces(lo, hi, scope, "block")
        cuts = self._cuts(items, lo, hi)
        tasks: list[Task] = []
        spec = ctx.spec
        for (nodes, info), a, b in zip(items, cuts, cuts[1:]):
            if a >= b:
                continue
            if info is not None:
                tasks.extend(self._definition(nodes, info, a, b, scope, ctx))
                continue
            first = nodes[0]
            first_type = first.type
            if first_type in spec.standalone_types:
                if self.fits(a, b):
                    tasks.append(Unit(a, b, scope, "standalone", node_type=first_type))
                else:
                    tasks.extend(self._pieces(a, b, scope, first_type))
                continue
            if self.fits(a, b):
                tasks.append(Unit(a, b, scope, "glue", category=self._category(first, first_type, ctx),
                                  node_type=first_type, node=first))
                continue
            tight = self._tighten(a, b, first.start_byte, nodes[-1].end_byte, [])
            if tight is not None:
                # Only the whitespace around it pushes it over: keep the block itself whole.
                x, y = tight
                tasks.extend(self._glue(a, x, scope, "neutral", "whitespace"))
                tasks.append(Unit(x, y, scope, "glue", category=self._category(first, first_type, ctx),
                                  node_type=first_type, node=first))
                tasks.extend(self._glue(y, b, scope, "neutral", "whitespace"))
                continue
            injection = spec.injections.get(first_type)
            if injection is not None:
                tasks.extend(self._inject(first, injection, a, b, scope))
            elif first.child_count:
                tasks.append((first, a, b, scope, ctx))
            else:
                tasks.extend(self._pieces(a, b, scope, first_type))
        return tasks

    def _definition(self, nodes: list[Any], info: DefInfo, a: int, b: int, scope: Scope,
                    ctx: Context) -> Sequence[Task]:
        """Tasks for the item ``nodes`` of a definition over bytes ``[a, b)``: one unit when it fits (or fits without
        its comments or the whitespace around it), else a scope of its own whose body is split."""
        # The definition node itself; comments/decorators above it come first, a same-line comment after.
        outer_id = info.outer.id
        k = next((m for m, n in enumerate(nodes) if n.id == outer_id), len(nodes) - 1)
        first = nodes[k]
        lead_nodes = nodes[:k]
        if self.fits(a, b):
            return [Unit(a, b, scope, "def", info=info, leading=tuple(lead_nodes))]
        tasks: list[Task] = []
        tight = self._tighten(a, b, first.start_byte, nodes[-1].end_byte, lead_nodes)
        if tight is not None:
            # The definition fits without its comments or the whitespace around it: keep it whole.
            x, y = tight
            tasks.extend(self._glue(a, x, scope, "neutral", "whitespace"))
            tasks.append(Unit(x, y, scope, "def", info=info))
            tasks.extend(self._glue(y, b, scope, "neutral", "whitespace"))
            return tasks
        sub = Scope(kind=info.kind, name=info.qname, start=a, end=b, parent=scope, spec=ctx.spec, info=info)
        self.scopes.append(sub)
        lead_end = a
        for m, lead in enumerate(lead_nodes):
            following = nodes[m + 1]
            nl = self.data.rfind(b"\n", lead.end_byte, following.start_byte)
            nxt = nl + 1 if nl >= 0 else following.start_byte
            if nxt > lead_end:
                tasks.extend(self._glue(lead_end, nxt, sub, "neutral", lead.type))
                lead_end = nxt
        tasks.append((first, lead_end, b, sub, ctx))
        return tasks

    def _tighten(self, a: int, b: int, core_a: int, core_b: int, lead_nodes: list[Any]) -> tuple[int, int] | None:
        """The widest range inside ``[a, b)`` that still holds the node ``[core_a, core_b)`` whole and fits.

        Tried in order: without the comments/decorators attached above it; its own whole lines (indentation and
        the line break after it, but not the blank lines); the node's bytes alone. ``None`` when none fits.
        """
        data = self.data
        ls = data.rfind(b"\n", a, core_a) + 1 or a
        own_a = ls if not data[ls:core_a].strip() else core_a
        nl = data.find(b"\n", core_b, b)
        own_b = nl + 1 if nl >= 0 and not data[core_b:nl].strip() else core_b
        candidates = []
        if lead_nodes:
            candidates.append((own_a, b))
        candidates += [(own_a, own_b), (core_a, core_b)]
        whole = self._counts.get((a, b))
        for x, y in candidates:
            if (x, y) == (a, b) or not a <= x < y <= b:
                continue
            # Dropping n bytes drops at most about n tokens: skip, without encoding, what cannot fit.
            if whole is not None and whole - 2 * ((b - a) - (y - x)) - 4 > self.budget:
                continue
            if self.fits(x, y):
                return x, y
        return None

    def _glue(self, a: int, b: int, scope: Scope, category: str, node_type: str) -> list[Unit]:
        """A glue unit for ``[a, b)``, or fallback pieces when that range alone is over budget."""
        if a >= b:
            return []
        if self.fits(a, b):
            return [Unit(a, b, scope, "glue", category=category, node_type=node_type)]
        return self._pieces(a, b, scope, node_type)

    def _category(self, node: Any, node_type: str, ctx: Context) -> str:
        """The packing category of a glue node (of type ``node_type``): ``import``, ``neutral`` or ``other``."""
        if node.id in ctx.imports:
            return "import"
        if node_type in ctx.spec.comment_types:
            return "neutral"
        if node_type in _STRING_STATEMENT_TYPES and _string_statement(node) is not None:
            # A docstring or a directive ("use strict"): it belongs with the statements that follow.
            return "neutral"
        return "other"

    def parse_injection(self, node: Any, inj: Any) -> tuple[LanguageSpec, Any, Any, Context] | None:
        """Parse the embedded code of ``node`` (a fence, a ``<script>``) in place, through tree-sitter's included
        ranges, so that its nodes carry the file's own offsets. ``None`` when the language is unknown."""
        content = next((c for c in node.children if c.type == inj.content_type), None)
        language = inj.language
        if inj.language_attribute is not None:
            language = self._attribute(node, inj.language_attribute) or language
        if language is None and inj.language_child is not None:
            info_node = next((c for c in node.children if c.type == inj.language_child), None)
            if info_node is not None:
                words = self.text(info_node.start_byte, info_node.end_byte).strip().strip("{}.").split()
                language = words[0] if words else None
        if content is None or not language or content.end_byte <= content.start_byte:
            return None
        try:
            sub_spec = get_spec(normalize_language(language))
        except Exception:  # noqa: BLE001 - an unknown fence language is handled as plain lines
            return None
        if sub_spec.grammar is None:
            return None
        import tree_sitter

        parser = get_parser(sub_spec.grammar)
        parser.included_ranges = [
            tree_sitter.Range(content.start_point, content.end_point, content.start_byte, content.end_byte)
        ]
        try:
            tree = parser.parse(self.data)
        finally:
            parser.included_ranges = []
        return sub_spec, content, tree, self.context_for(sub_spec, tree.root_node)

    def _attribute(self, element: Any, name: str) -> str | None:
        """The value of attribute ``name`` on ``element``'s start tag (HTML, Vue, Svelte), or ``None``."""
        tag = next((c for c in element.children if c.type == "start_tag"), None)
        for attr in tag.children if tag is not None else ():
            if attr.type != "attribute" or attr.named_child_count < 2:
                continue
            key, value = attr.named_children[0], attr.named_children[1]
            if self.text(key.start_byte, key.end_byte).strip().lower() == name:
                return self.text(value.start_byte, value.end_byte).strip().strip("\"'").strip() or None
        return None

    def scan_injections(self, root: Any, spec: LanguageSpec) -> None:
        """Parse every embedded block of a document once, so that the definitions inside fences that stay whole
        (alone, packed with prose, or inside a whole section) are listed in their leaf's ``symbols``."""
        if not spec.injections:
            return
        cursor = root.walk()
        done = False
        while not done:
            node = cursor.node
            inj = spec.injections.get(node.type)
            if inj is not None:
                self.parse_injection(node, inj)
            elif cursor.goto_first_child():
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    done = True
                    break

    def _inject(self, node: Any, inj: Any, a: int, b: int, scope: Scope) -> Sequence[Task]:
        """Chunk an over-budget embedded block (a long fence, a ``<script>``) as code of its own language."""
        parsed = self.parse_injection(node, inj)
        if parsed is None:
            return self._pieces(a, b, scope, "code")
        sub_spec, content, tree, sub_ctx = parsed
        code_scope = Scope(kind="code", name=scope.name, start=a, end=b, parent=scope, spec=sub_spec,
                           meta={"code_language": sub_spec.name, "_tree": tree})
        self.scopes.append(code_scope)
        tasks: list[Task] = []
        c0, c1 = content.start_byte, content.end_byte
        # Content that starts with a line break after the opening tag/fence: the code starts on its own line.
        head = self.data[c0:c1]
        stripped = len(head) - len(head.lstrip(b" \t\r\n"))
        nl = head.rfind(b"\n", 0, stripped)
        if nl >= 0:
            c0 += nl + 1
        if c0 > a:
            tasks.extend(self._glue(a, c0, code_scope, "neutral", "fence"))
        tasks.append((tree.root_node, c0, c1, code_scope, sub_ctx))
        if b > c1:
            tasks.extend(self._glue(c1, b, code_scope, "neutral", "fence"))
        return tasks

    def _pieces(self, a: int, b: int, scope: Scope, node_type: str) -> list[Unit]:
        """Cut an over-budget range without usable children: by lines, then by tokens."""
        text = self.source_text(a, b)
        levels = fallback.TEXT_LEVELS if scope.spec.prose else fallback.CODE_LEVELS
        units: list[Unit] = []
        pos = a
        known = self._counts.get((a, b))
        for piece, tokens, how in fallback.split_text(text, self.budget, self.tok, levels, total=known):
            size = len(piece.encode("utf-8", "surrogatepass"))
            units.append(Unit(pos, pos + size, scope, "piece", node_type=node_type, tokens=tokens, how=how))
            self._counts[(pos, pos + size)] = tokens
            pos += size
        return units


def parse(data: bytes, grammar: str, window: tuple[int, int] | None = None) -> Any:
    """Parse ``data`` with the calling thread's parser for ``grammar``; only its bytes ``[lo, hi)`` when a
    ``window`` is given (through tree-sitter's included ranges, so that the nodes keep the file's offsets).

    NOTE: always from a bytestring. py-tree-sitter 0.26 ignores ``progress_callback`` for bytes and crashes the
    interpreter when the callback fires with a read-callback source, so parse time is bounded by the input size.
    """
    load_language(grammar)
    parser = get_parser(grammar)
    if window is None:
        return parser.parse(data)
    import tree_sitter

    def point(pos: int) -> Any:
        return tree_sitter.Point(data.count(b"\n", 0, pos), pos - data.rfind(b"\n", 0, pos) - 1)

    lo, hi = window
    parser.included_ranges = [tree_sitter.Range(point(lo), point(hi), lo, hi)]
    try:
        return parser.parse(data)
    finally:
        parser.included_ranges = []


# The types of the nodes that may be a string statement (:func:`_string_statement`).
_STRING_STATEMENT_TYPES = frozenset({"string", "concatenated_string", "expression_statement"})


def _string_statement(node: Any) -> Any:
    """The string of a statement that is only a string literal (a Python docstring), else ``None``."""
    if node.type in ("string", "concatenated_string"):
        return node
    if node.type == "expression_statement" and node.named_child_count == 1:
        child = node.named_children[0]
        if child.type in ("string", "concatenated_string"):
            return child
    return None
