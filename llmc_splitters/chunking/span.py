"""The span record and the span tree.

A :class:`Span` is one contiguous slice of a file. The chunker returns *leaf* spans that tile the file exactly:

    "".join(s.text for s in leaves) == text
    leaves[i].end_byte == leaves[i + 1].start_byte

Offsets are half-open (``start <= x < end``) in two units, UTF-8 bytes (as tree-sitter counts) and Python ``str``
characters: ``text == source[start_char:end_char]``. Lines are 1-based and inclusive: ``start_line`` is the line of
the span's first character and ``end_line`` the line of its last character; a span's final ``"\\n"`` belongs to the
line it ends. Only ``"\\n"`` breaks lines.

Structural spans (the file, and every class/function/section that had to be split) are kept in a :class:`SpanTree`;
each leaf's ``parent_id`` names the innermost structural span that contains it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# A fixed namespace makes span ids stable across runs, machines and processes.
_SPAN_NAMESPACE = uuid.UUID("6f0b8e2c-3d7a-5b1e-9c4f-2a8d1e7b5c30")


def span_id(path: str | None, start_byte: int, end_byte: int, text: str, salt: str = "") -> str:
    """Return the deterministic id of a span: a UUID string (accepted by every common vector store).

    The same path, byte range and content (and ``salt``, e.g. a repository name or a settings fingerprint) always
    give the same id.
    """
    return _span_id_of_bytes(path, start_byte, end_byte, text.encode("utf-8", "surrogatepass"), salt)


# The hash state after the namespace, copied for each id (the chunker makes one id per span).
_NAMESPACE_SHA1 = hashlib.sha1(_SPAN_NAMESPACE.bytes)
# A version-5 UUID's variant bits make its 17th hex digit one of 8, 9, a, b: the digit each digest digit becomes.
_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def _span_id_of_bytes(path: str | None, start_byte: int, end_byte: int, data: bytes | memoryview,
                      salt: str = "") -> str:
    """:func:`span_id` of a text given as its UTF-8 bytes (as the chunker holds it)."""
    h = _NAMESPACE_SHA1.copy()
    h.update(f"{salt}\x00{path or ''}\x00{start_byte}\x00{end_byte}\x00".encode("utf-8", "surrogatepass"))
    h.update(data)
    # The layout of a version-5 (SHA-1, name-based) UUID, formatted directly from the hex digest: the version
    # nibble is 5, and the variant bits set the 17th digit.
    x = h.hexdigest()
    return f"{x[:8]}-{x[8:12]}-5{x[13:16]}-{_VARIANT_DIGIT[x[16]]}{x[17:20]}-{x[20:32]}"


@dataclass(frozen=True, slots=True)
class Span:
    """One contiguous, syntax-aligned slice of a source file.

    Attributes:
        id: Deterministic UUID string (see :func:`span_id`).
        path: The file's path as given to the chunker, or ``None``.
        language: The language the span was parsed as (``"python"``, ``"markdown"``, ``"text"``, ...).
        kind: What the span is: ``module``, ``imports``, ``class``, ``function``, ``method``, ``block``,
            ``comment``, ``section``, ``code``, ``text``, ...
        name: Qualified symbol (``Client.send``) or heading path, or ``None``.
        text: The exact source text, ``source[start_char:end_char]``.
        start_byte: UTF-8 byte offset of the first byte.
        end_byte: UTF-8 byte offset one past the last byte.
        start_char: ``str`` index of the first character.
        end_char: ``str`` index one past the last character.
        start_line: 1-based line of the first character.
        end_line: 1-based line of the last character (inclusive).
        parent_id: Id of the enclosing structural span, or ``None`` for the file span.
        token_count: Exact number of tokens of ``text`` under the chunker's tokenizer. For a structural span it
            is the sum of its leaves' exact counts (``metadata["token_count_is_sum_of_leaves"]``), which is within
            a few tokens of encoding its text whole and costs nothing.
        metadata: Everything else: ``signature``, ``docstring``, ``breadcrumb``, ``symbols``, ``split``, ...
    """

    id: str
    path: str | None
    language: str
    kind: str
    name: str | None
    text: str
    start_byte: int
    end_byte: int
    start_char: int
    end_char: int
    start_line: int
    end_line: int
    parent_id: str | None
    token_count: int
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_metadata(self) -> dict[str, Any]:
        """Flat, JSON- and vector-store-friendly metadata (no ``text``; ``None`` values dropped)."""
        out: dict[str, Any] = {
            "span_id": self.id,
            "source": self.path,
            "language": self.language,
            "kind": self.kind,
            "symbol": self.name,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "start_byte": self.start_byte,
            "end_byte": self.end_byte,
            "start_index": self.start_char,
            "end_index": self.end_char,
            "parent_id": self.parent_id,
            "token_count": self.token_count,
        }
        crumb = self.metadata.get("breadcrumb")
        if crumb:
            out["breadcrumb"] = crumb
        return {k: v for k, v in out.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (``metadata`` copied)."""
        return {
            "id": self.id,
            "path": self.path,
            "language": self.language,
            "kind": self.kind,
            "name": self.name,
            "text": self.text,
            "start_byte": self.start_byte,
            "end_byte": self.end_byte,
            "start_char": self.start_char,
            "end_char": self.end_char,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "parent_id": self.parent_id,
            "token_count": self.token_count,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        """Inverse of :meth:`to_dict`."""
        fields = dict(data)
        fields["metadata"] = dict(fields.get("metadata") or {})
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class SpanTree:
    """The whole span tree of one file: the file span, the structural spans that were split, and the leaves.

    ``spans`` is in pre-order (a parent before its children, siblings in file order); ``leaves`` is in file order
    and tiles the file. Every child's byte range lies inside its parent's.

    Example:
        >>> from llmc_splitters import ASTChunker
        >>> tree = ASTChunker(max_tokens=64).chunk_tree("def f():\\n    return 1\\n", language="python")
        >>> [s.kind for s in tree.leaves]
        ['function']
        >>> tree.parent(tree.leaves[0]).kind
        'module'
    """

    root: Span
    spans: tuple[Span, ...]
    leaves: tuple[Span, ...]
    _by_id: Mapping[str, Span] = field(repr=False, compare=False)
    _children: Mapping[str, tuple[Span, ...]] = field(repr=False, compare=False)
    _leaf_ids: frozenset[str] = field(repr=False, compare=False, default=frozenset())

    @classmethod
    def build(cls, spans: list[Span], leaves: list[Span]) -> SpanTree:
        """Index ``spans`` (pre-order, root first, siblings in document order) and ``leaves`` (document order).

        Children are listed in the order ``spans`` gives them: a notebook's cells all start at offset 0 of their
        own cell, so offsets alone cannot order them.
        """
        by_id = {s.id: s for s in spans}
        children: dict[str, list[Span]] = {}
        for s in spans:
            if s.parent_id is not None:
                children.setdefault(s.parent_id, []).append(s)
        return cls(
            root=spans[0],
            spans=tuple(spans),
            leaves=tuple(leaves),
            _by_id=by_id,
            _children={k: tuple(v) for k, v in children.items()},
            _leaf_ids=frozenset(s.id for s in leaves),
        )

    def subtree(self, span: Span) -> SpanTree:
        """The tree rooted at ``span`` (one of this tree's spans): it, its descendants and the leaves inside it."""
        keep = {span.id}
        spans = [span]
        for s in self.spans:  # pre-order: a parent comes before its children
            if s.parent_id in keep and s.id not in keep:
                keep.add(s.id)
                spans.append(s)
        return SpanTree.build(spans, [s for s in self.leaves if s.id in keep])

    def __iter__(self) -> Iterator[Span]:
        return iter(self.spans)

    def __len__(self) -> int:
        return len(self.spans)

    def get(self, span_id: str) -> Span | None:
        """The span with this id, or ``None``."""
        return self._by_id.get(span_id)

    def parent(self, span: Span) -> Span | None:
        """The enclosing structural span, or ``None`` for the root."""
        return self._by_id.get(span.parent_id) if span.parent_id else None

    def children(self, span: Span) -> tuple[Span, ...]:
        """Direct children in file order."""
        return self._children.get(span.id, ())

    def ancestors(self, span: Span) -> list[Span]:
        """Enclosing spans, innermost first, ending with the root."""
        out: list[Span] = []
        cur = self.parent(span)
        while cur is not None:
            out.append(cur)
            cur = self.parent(cur)
        return out

    def is_leaf(self, span: Span) -> bool:
        """Whether ``span`` is one of the leaves (the root is a leaf only of an empty file's tree, never)."""
        return span.id in self._leaf_ids

    def find_symbol(self, name: str) -> list[Span]:
        """Spans whose qualified ``name`` equals ``name``, or whose ``metadata["symbols"]`` lists it."""
        out = [s for s in self.spans if s.name == name]
        if not out:
            out = [s for s in self.leaves if any(sym.get("name") == name for sym in s.metadata.get("symbols", ()))]
        return out

    def at_line(self, line: int) -> Span | None:
        """The leaf covering 1-based ``line`` (the first one if several share the line)."""
        for s in self.leaves:
            if s.start_line <= line <= s.end_line:
                return s
        return None
