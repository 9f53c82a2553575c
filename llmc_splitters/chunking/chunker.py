"""``ASTChunker``: the public face of the engine. It holds settings only and wires parse -> split -> merge -> spans.

One run parses the file (in windows when it is big), splits each tree into units (:mod:`._engine`, with the
definitions of :mod:`.definitions`), merges them into leaves (:mod:`.packing`), labels the leaves
(:mod:`.labels`), records the analysis when asked (:mod:`.analysis`) and assembles the spans (:mod:`.assemble`).
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from . import fallback
from ._engine import Engine, parse
from ..errors import ConfigurationError, checked_arguments
from .assemble import assemble
from .definitions import _CLASS_LIKE
from .dispatch import classify
from .inputs import ERRORS
from .labels import Labeler
from .languages import LanguageSpec, get_spec
from .notebook import notebook_tree
from .overlap import add_overlap
from .packing import merge
from .recovery import CUT_AFTER_BLANK, CUT_ANY, error_offsets, recovery_cut
from .span import Span, SpanTree
from .tokens import Tokenizer, resolve_tokenizer
from .units import Leaf, Scope

# A code file bigger than this is parsed and chunked in windows, one tree at a time: a tree-sitter tree takes
# about 45 times the size of its source in memory (a 5 MB file's tree, 230 MB).
_WINDOW_BYTES = 1 << 20
_WINDOW_GROWTH = 4
# After a syntax error that swallows the rest of a file, the parse restarts at the next definition (see _Run._recover),
# until the bytes parsed again add up to this many times the file's size.
_RECOVERY_PARSES = 8
# Lines of syntax errors listed in a file span's metadata.
_LISTED_ERRORS = 100
_UNSAFE_FOR_PARSER = re.compile("[\ud800-\udfff\U000e0000-\U0010ffff]")


def _may_be_unsafe(data: bytes) -> bool:
    """Whether the UTF-8 (surrogates passed through) ``data`` may hold a character of :data:`_UNSAFE_FOR_PARSER`:
    each of them starts with one of these bytes. A byte search is a hundred times faster than the regular
    expression, which then only runs on the rare text that has one of them."""
    return b"\xed" in data or b"\xf3" in data or b"\xf4" in data


def _safe_char(m: re.Match[str]) -> str:
    # U+FFFD and a surrogate are 3 bytes in UTF-8 (surrogatepass); U+1F600 and a plane-14+ code point are 4.
    return "\ufffd" if m.group() < "\U00010000" else "\U0001f600"


class ASTChunker:
    """Split source files into lossless, token-exact, syntax-aligned spans.

    Each function, class or method that fits ``max_tokens`` is one span; one that does not is split only along its
    own child nodes (split-then-merge). Whole definitions are never packed together; only pieces that cannot stand
    alone (statements between definitions, comments, fragments of a split body) are merged, up to the budget. A
    node without children that is still over budget (a giant string, a minified line) is cut by lines, then by
    tokens, and its spans say so in ``metadata["fallback"]``.

    The leaves returned by :meth:`chunk` tile the input: ``"".join(s.text for s in spans) == text``, for any string.
    No leaf has more than ``max_tokens`` tokens unless a single character alone is longer (flagged
    ``metadata["oversize"]``).

    Args:
        max_tokens: Token budget per leaf span.
        tokenizer: ``None`` (tiktoken cl100k, offline-safe), an encoding name, a ``tiktoken.Encoding``, a
            HuggingFace tokenizer, or any ``Callable[[str], int]``.
        max_file_bytes: Files larger than this are not parsed but split by lines and tokens
            (``metadata["fallback"] == "too_large"``). This bounds parse time (tree-sitter parses in linear time;
            the binding's progress-callback timeout crashes the interpreter in py-tree-sitter 0.26 and is not used).
            A parse that recovers into a syntax error with thousands of direct children (a file of unbalanced
            brackets) is chunked without queries, which would take quadratic time on it
            (``metadata["degraded"] == "wide_error"``). A code file over 1 MB is parsed and chunked in windows cut
            at top-level boundaries, one syntax tree at a time, which bounds memory (the file span records
            ``metadata["windows"]``). A syntax error that swallows the rest of the file (tree-sitter reads it all as
            one ERROR node) ends the parse before the next top-level definition, and the parse starts again from there
            (:mod:`llmc_splitters.chunking.recovery`): the definitions after it keep their names. The file span
            lists the lines of its syntax errors in ``metadata["parse_errors"]`` and those where the parse started
            again in ``metadata["parse_resumed"]``; each leaf that holds an error lists its lines in
            ``metadata["parse_errors"]``.
        errors: Decoding policy for ``bytes`` input: ``"fallback"`` (UTF-8, else cp1252/Latin-1, recorded in
            metadata) or ``"strict"`` (raise :class:`UndecodableInputError`). See :mod:`llmc_splitters.chunking.inputs`.
        analyze: Also record what retrieval needs, from the same parse: the file span's ``imports`` and
            ``module_names``; each leaf's ``identifiers`` and ``references``; each split definition's
            ``header_end_byte`` and, for classes, its ``skeleton`` (see :mod:`llmc_splitters.chunking.analysis`).
        overlap: Where prose had to be split (Markdown sections, plain text), each piece gets the tail of the
            piece before it, about ``overlap * max_tokens`` tokens, in ``metadata["overlap"]`` (never in
            ``text``); code never does. ``0`` turns it off (see :mod:`llmc_splitters.chunking.overlap`).

    Example:
        >>> chunker = ASTChunker(max_tokens=256)
        >>> spans = chunker.chunk("import os\\n\\ndef f():\\n    return os.sep\\n", path="m.py")
        >>> [(s.kind, s.name, s.start_line, s.end_line) for s in spans]
        [('imports', None, 1, 2), ('function', 'f', 3, 4)]
    """

    @checked_arguments
    def __init__(
        self,
        max_tokens: int = 512,
        tokenizer: Any = None,
        *,
        max_file_bytes: int = 16 * 1024 * 1024,
        errors: str = "fallback",
        analyze: bool = False,
        overlap: float = 0.15,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            msg = f"max_tokens must be a positive integer, got {max_tokens!r}"
            raise ConfigurationError(msg)
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
            msg = f"max_file_bytes must be a positive integer, got {max_file_bytes!r}"
            raise ConfigurationError(msg)
        if errors not in ERRORS:
            msg = f"errors must be one of {ERRORS}, got {errors!r}"
            raise ConfigurationError(msg)
        self.max_tokens = max_tokens
        self.max_file_bytes = max_file_bytes
        self.errors = errors
        self.analyze = analyze
        if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0 <= overlap < 0.5:
            msg = f"overlap must be a ratio with 0 <= overlap < 0.5 (0 turns it off), got {overlap!r}"
            raise ConfigurationError(msg)
        self.overlap = float(overlap)
        self._tokenizer_spec = tokenizer
        self._tokenizer: Tokenizer | None = None

    @property
    def tokenizer(self) -> Tokenizer:
        """The resolved tokenizer (loaded on first use)."""
        if self._tokenizer is None:
            self._tokenizer = resolve_tokenizer(self._tokenizer_spec)
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        """Exact token count of ``text`` under this chunker's tokenizer."""
        return self.tokenizer.count(text)

    def __repr__(self) -> str:
        return f"ASTChunker(max_tokens={self.max_tokens}, tokenizer={self.tokenizer.name!r})"

    # ------------------------------------------------------------------ public API
    def chunk(self, text: str | bytes, *, language: str | None = None, path: str | None = None) -> list[Span]:
        """Leaf spans of ``text`` in file order; they join back to ``text`` exactly.

        How the input is treated is decided by :func:`~llmc_splitters.chunking.dispatch.classify`, as at every
        other door: the language is ``language`` if given, else detected from ``path`` (extension or file name),
        a shebang line, or, without a path, the content (notebook JSON, HTML, a clean parse holding definitions,
        Markdown headings); else plain text.

        A Jupyter notebook (a ``.ipynb`` path, ``language="notebook"``, or notebook JSON without a path) gives
        per-cell spans, as :func:`~llmc_splitters.chunk_notebook` does: lossless per cell (the spans of one cell
        join back to its source, not to the notebook's JSON), offsets and lines relative to the cell, each span's
        ``path`` the cell's (``analysis.ipynb#cell3``), and ``cell_index``/``cell_type`` in its metadata.

        Args:
            text: The file's content (``bytes`` are decoded as UTF-8, with a BOM honoured; see ``errors``).
            language: Language name (``"python"``, ``"typescript"``, ``"markdown"``, ``"notebook"``, any grammar of
                tree-sitter-language-pack, or ``"text"``); detected when omitted.
            path: The file's path, recorded in every span and used to detect the language.

        Raises:
            UnsupportedInputError: ``language`` names no known grammar, or the input is binary: ``bytes`` with NUL
                or mostly control bytes or a binary signature, or a ``str`` with NUL characters, a binary signature
                or more than 10% replacement/control characters or lone surrogates (see
                :mod:`llmc_splitters.chunking.inputs`). The message names the path and the reason.
            MalformedNotebookError: A notebook that is not valid notebook JSON.
            UndecodableInputError: ``bytes`` that are not UTF-8, with ``errors="strict"``.
        """
        return list(self.chunk_tree(text, language=language, path=path).leaves)

    def chunk_tree(self, text: str | bytes, *, language: str | None = None, path: str | None = None) -> SpanTree:
        """The whole span tree: the file span, every split class/function/section, and the leaves.

        ``tree.leaves`` is what :meth:`chunk` returns; ``tree.parent(span)``, ``tree.children(span)`` and
        ``tree.ancestors(span)`` walk it (file -> class -> method -> sub-block). A notebook's tree is the notebook,
        one span per non-empty cell, and the cells' spans (see
        :func:`~llmc_splitters.chunking.notebook.notebook_tree`);
        :func:`~llmc_splitters.chunking.dispatch.document_trees` splits it per cell. Raises as :meth:`chunk`.
        """
        treatment = classify(text, path=path, language=language or None, errors=self.errors)
        if treatment.refused:
            raise treatment.error()
        assert treatment.text is not None and treatment.language is not None
        if treatment.kind == "notebook":
            return notebook_tree(treatment.text, self, path=path)
        spec = get_spec(treatment.language)
        tree = add_overlap(_Run(self, treatment.text, spec, path).build(), self.overlap, self.max_tokens,
                           self.tokenizer)
        if treatment.decoded:
            tree.root.metadata.update(treatment.decoded)
        return tree


class _Run:
    """One call of :meth:`ASTChunker.chunk_tree`."""

    def __init__(self, chunker: ASTChunker, text: str, spec: LanguageSpec, path: str | None) -> None:
        self.chunker = chunker
        self.text = text
        self.spec = spec
        self.path = path
        self.budget = chunker.max_tokens
        self.tok = chunker.tokenizer
        self.data = text.encode("utf-8", "surrogatepass")
        # The parser reads a copy with the same byte offsets, in which lone surrogates (not UTF-8) and code points
        # of planes 14-16 (they crash tree-sitter-markdown's scanner) are swapped for characters of equal length.
        parse_data = _UNSAFE_FOR_PARSER.sub(_safe_char, text).encode("utf-8") if _may_be_unsafe(self.data) \
            and _UNSAFE_FOR_PARSER.search(text) else self.data
        self.engine = Engine(parse_data, self.budget, self.tok, source=self.data)
        self.errors: list[int] = []  # where the syntax errors are (byte offsets)
        self.resumed: list[int] = []  # where the parse restarted after one
        self.reparsed = 0  # bytes parsed again by those restarts
        self.labels = Labeler(self.engine, spec, self.budget)

    # ------------------------------------------------------------------
    def build(self) -> SpanTree:
        eng = self.engine
        if not self.text:
            root_scope = Scope(kind=self.spec.root_kind, name=None, start=0, end=0, parent=None, spec=self.spec)
            return self._assemble(root_scope, [], [root_scope])
        if self.spec.grammar is None:
            root_scope = Scope(kind=self.spec.root_kind, name=None, start=0, end=len(self.data), parent=None,
                               spec=self.spec)
            leaves = self._plain(root_scope, fallback.TEXT_LEVELS)
            return self._assemble(root_scope, leaves, [root_scope])
        root_scope = Scope(kind=self.spec.root_kind, name=None, start=0, end=len(self.data), parent=None,
                           spec=self.spec)
        if len(eng.data) > self.chunker.max_file_bytes:
            root_scope.meta["fallback"] = "too_large"
            leaves = self._plain(root_scope, fallback.CODE_LEVELS)
            for leaf in leaves:
                leaf.meta.setdefault("fallback", "too_large")
            return self._assemble(root_scope, leaves, [root_scope])
        eng.scopes.append(root_scope)
        leaves = []
        lo = windows = 0
        while lo < len(eng.data):
            lo, resumed = self._window(root_scope, lo, leaves)
            windows += not resumed
        if eng.wide_error:
            root_scope.meta["degraded"] = "wide_error"
        if windows > 1:
            root_scope.meta["windows"] = windows
        if self.errors:
            root_scope.meta["parse_errors"] = self._lines(self.errors[:_LISTED_ERRORS])
        if self.resumed:
            root_scope.meta["parse_resumed"] = self._lines(self.resumed)
        return self._assemble(root_scope, leaves, eng.scopes)

    def _window(self, root_scope: Scope, lo: int, leaves: list[Leaf]) -> tuple[int, bool]:
        """Parse and chunk the window of the file that starts at ``lo`` (the whole file unless it is a big code
        file, see :data:`_WINDOW_BYTES`), append its leaves to ``leaves`` and return where it ends, and whether it
        ends there because the parse restarts after a syntax error (:meth:`_recover`).

        Everything that reads syntax nodes (labels, analysis, the signatures of split definitions) is done here,
        and then every reference to a node is dropped, so that the window's tree is freed before the next parse.
        """
        eng = self.engine
        tree, hi = self._parse_window(lo)
        tree, cut = self._recover(tree, lo, hi)
        if cut is not None:
            hi = cut
        errors = error_offsets(tree.root_node)
        self.errors.extend(errors)
        scopes, defs = len(eng.scopes), len(eng.all_defs)
        window = merge(eng.run(tree.root_node, self.spec, root_scope, lo, hi), eng.data, eng)
        if errors:
            self._mark_errors(window, errors)
        self.labels.label(window)
        if self.chunker.analyze and self.spec.root_kind == "module" and not eng.wide_error:
            self._analyze(tree.root_node, root_scope, window, eng.scopes[scopes:], first=lo == 0)
        for sc in eng.scopes[scopes:]:
            sc.meta.pop("_tree", None)
            if sc.info is not None:
                if "signature" not in sc.meta:
                    sc.meta["signature"] = self.labels.signature(sc.info)
                for k, v in self.labels.def_meta(sc.info).items():
                    sc.meta.setdefault(k, v)
        for info in eng.all_defs[defs:]:
            info.node = info.outer = None
        for leaf in window:
            leaf.units = []
        leaves.extend(window)
        return hi, cut is not None

    def _recover(self, tree: Any, lo: int, hi: int) -> tuple[Any, int | None]:
        """The tree of the window ``[lo, hi)``, ended before the definition where the parse restarts when a syntax
        error swallows what follows it (:func:`~llmc_splitters.chunking.recovery.recovery_cut`), and that cut.

        Each restart parses again the window's bytes (the head here, the rest as the next window), and the probes
        that look for it parse at most as much; restarts stop once that has cost :data:`_RECOVERY_PARSES` times the
        file's size.
        """
        data, grammar = self.engine.data, self.spec.grammar
        if not tree.root_node.has_error or self.spec.prose or self.engine.wide_error or \
                self.reparsed + (hi - lo) > _RECOVERY_PARSES * len(data):
            return tree, None
        cut, probed = recovery_cut(tree.root_node, data, self.spec, lo, hi,
                                   lambda a, b: parse(data, grammar, (a, b)).root_node, hi - lo)
        self.reparsed += probed
        if cut is None:
            return tree, None
        del tree  # freed before the head is parsed again
        self.reparsed += hi - lo
        self.resumed.append(cut)
        return parse(data, grammar, (lo, cut)), cut

    def _mark_errors(self, window: list[Leaf], errors: list[int]) -> None:
        """``parse_errors`` (the lines of its syntax errors) in the metadata of each leaf that holds one."""
        starts = [leaf.start for leaf in window]
        by_leaf: dict[int, list[int]] = {}
        for pos in errors:
            by_leaf.setdefault(max(bisect.bisect_right(starts, pos) - 1, 0), []).append(pos)
        for i, positions in by_leaf.items():
            window[i].meta["parse_errors"] = self._lines(positions)

    def _lines(self, offsets: list[int]) -> list[int]:
        """The distinct 1-based lines of byte ``offsets``, in file order (the file's newlines counted once)."""
        data = self.engine.data
        lines: list[int] = []
        line = 1
        pos = 0
        for off in sorted(offsets):
            line += data.count(b"\n", pos, off)
            pos = off
            if not lines or lines[-1] != line:
                lines.append(line)
        return lines

    def _parse_window(self, lo: int) -> tuple[Any, int]:
        """The tree of the window that starts at ``lo``, and where the window ends.

        A small file, or prose, is one window. A big code file is cut at the first likely top-level boundary
        :data:`_WINDOW_BYTES` past ``lo``, then checked on its tree. A syntax error may mean the cut went through a
        construct (a string, a block with lines at column 0), so the window ends before the first top-level node
        that holds one (the next window starts with it); if that is the window's first node, before its last node
        when that one holds an error; and if that is the first node too (a construct longer than the window), the
        window doubles, up to :data:`_WINDOW_GROWTH` times. An error that remains is the file's own. The comments
        right above a cut (no blank line between) stay with the code below it.
        """
        data, grammar, attach = self.engine.data, self.spec.grammar, self.spec.attach_forward
        if len(data) - lo <= _WINDOW_BYTES or self.spec.prose:
            return parse(data, grammar, (lo, len(data)) if lo else None), len(data)
        size = _WINDOW_BYTES
        while True:
            hi = _next_cut(data, lo + size)
            tree = parse(data, grammar, (lo, hi))
            if hi == len(data):
                return tree, hi
            root = tree.root_node
            nodes = root.children
            # Under a root that is itself an error, its unnamed children are the stray tokens.
            broken = [c.has_error or (root.is_error and not c.is_named) for c in nodes]
            tail_broken = bool(broken) and broken[-1]
            cut = _start_with_comments(nodes, broken.index(True) if True in broken else len(nodes), hi, data, lo,
                                       attach)
            if cut == lo and tail_broken:  # the error is in the first node: end before the last one
                cut = _start_with_comments(nodes, len(nodes) - 1, hi, data, lo, attach)
            elif cut == lo:  # no error after the first node: only keep comments with the code below the cut
                cut = _start_with_comments(nodes, len(nodes), hi, data, lo, attach)
            del root, nodes
            if cut == lo and tail_broken and size < _WINDOW_GROWTH * _WINDOW_BYTES:
                del tree  # freed before the longer window is parsed
                size *= 2
                continue
            if not lo < cut < hi:
                return tree, hi
            del tree  # freed before the shorter window is parsed
            return parse(data, grammar, (lo, cut)), cut

    def _analyze(self, root: Any, root_scope: Scope, leaves: list[Leaf], scopes: list[Scope], first: bool) -> None:
        from . import analysis

        grammar = self.spec.grammar
        data = self.engine.data
        meta = root_scope.meta
        meta.setdefault("imports", []).extend(i.to_dict() for i in analysis.file_imports(root, data, grammar))
        meta.setdefault("module_names", []).extend(i.to_dict() for i in analysis.module_names(root, data, grammar))
        if first:
            doc = analysis._py_docstring(root) if grammar == "python" else None
            meta["module_docstring"] = (
                data[doc.start_byte : doc.end_byte].decode("utf-8", "replace").strip("\"'rRbBuU \n") if doc else ""
            )
        for leaf in leaves:
            if leaf.scope.spec is not self.spec:
                continue  # embedded code of another language
            leaf.meta["identifiers"] = sorted(analysis.identifiers(root, data, leaf.start, leaf.end, language=grammar))
            leaf.meta["references"] = sorted(analysis.references(root, data, leaf.start, leaf.end, language=grammar))
        for sc in scopes:
            if sc.info is None or sc.spec is not self.spec:
                continue
            sc.meta["header_end_byte"] = analysis.header_end(sc.info.outer, data)
            if sc.kind in _CLASS_LIKE:
                sc.meta["skeleton"] = analysis.skeleton(sc.info.outer, data, grammar)

    def _plain(self, scope: Scope, levels: Any) -> list[Leaf]:
        leaves: list[Leaf] = []
        pos = 0
        for piece, tokens, how in fallback.split_text(self.text, self.budget, self.tok, levels):
            size = len(piece.encode("utf-8", "surrogatepass"))
            meta: dict[str, Any] = {} if how in ("whole", "paragraphs") else {"fallback": how}
            if tokens > self.budget:
                meta["oversize"] = True
            leaves.append(Leaf(pos, pos + size, scope, self.spec.glue_kind, None, tokens, [], meta))
            pos += size
        return leaves

    def _assemble(self, root: Scope, leaves: list[Leaf], scopes: list[Scope]) -> SpanTree:
        """The span tree of this file (:func:`~llmc_splitters.chunking.assemble.assemble`)."""
        return assemble(root, leaves, scopes, text=self.text, data=self.data, path=self.path, spec=self.spec,
                        definitions=self.engine.all_defs)


def _next_cut(data: bytes, pos: int) -> int:
    """The first likely top-level boundary after ``pos`` (the end of ``data`` when there is none)."""
    m = CUT_AFTER_BLANK.search(data, pos, pos + _WINDOW_BYTES) or CUT_ANY.search(data, pos)
    return m.end() if m else len(data)


def _start_with_comments(nodes: list[Any], i: int, end: int, data: bytes, lo: int, attach: frozenset[str]) -> int:
    """Where the top-level node ``nodes[i]`` (the window's ``end`` when ``i == len(nodes)``) starts, with the comments
    attached above it (no blank line between) and its line's indentation; ``lo`` when that is the window's start."""
    pos = nodes[i].start_byte if i < len(nodes) else end
    while i > 0 and nodes[i - 1].type in attach and data.count(b"\n", nodes[i - 1].end_byte, pos) <= 1:
        i -= 1
        pos = nodes[i].start_byte
    if i == 0:
        return lo
    line = data.rfind(b"\n", lo, pos) + 1
    return line if line > lo and not data[line:pos].strip() else pos
