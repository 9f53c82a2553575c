"""Prose overlap: the tail of the previous piece, repeated in front of the next one where prose had to be split.

When a Markdown section or a plain-text document is too long for one span, its pieces lose the sentences just
before their first line. Overlap gives each such piece the tail of the piece before it (about ``ratio`` times the
token budget, cut at a sentence or word boundary), so that a reader or an embedding model sees the thought it
continues. Code never gets overlap: a split definition carries the signatures of its parents instead
(``metadata["context"]``, see :mod:`llmc_splitters.chunking.headers`).

Overlap never enters a leaf's ``text``, so the leaves still tile the input exactly. It lives in
``metadata["overlap"]`` (a suffix of the previous leaf's text, so ``overlap + text`` is a contiguous slice of the
source) and ``metadata["overlap_tokens"]``; :func:`index_text` builds the text handed to an index from it.

Which neighbours get overlap: both leaves are prose (kind ``text`` or ``section``, language ``markdown`` or
``text``), both are pieces of the same structural span (same parent, same breadcrumb, and not a whole subsection),
and the tail is not code: lines of a fence or a table at the end of the previous piece are left out.
"""

from __future__ import annotations

import dataclasses
import re
from .headers import context_header, fit_header
from .span import Span, SpanTree
from .tokens import Tokenizer

DEFAULT_RATIO = 0.15
PROSE_KINDS = frozenset({"text", "section"})
PROSE_LANGUAGES = frozenset({"markdown", "text"})

# A fence delimiter or a table row: where prose stops (the overlap starts after the last such line of the tail).
_NOT_PROSE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,}|\|)[^\n]*(?:\n|$)", re.MULTILINE)
# Where a sentence starts: after end punctuation (and closing quotes/brackets) plus whitespace, or after a newline.
_SENTENCE_START = re.compile(r"(?:[.!?][\"')\]*_]*[ \t]+|\n[ \t]*)(?=\S)")
_WORD_START = re.compile(r"[ \t\n]+(?=\S)")


def add_overlap(tree: SpanTree, ratio: float, budget: int, tokenizer: Tokenizer) -> SpanTree:
    """A copy of ``tree`` whose prose leaves carry ``metadata["overlap"]`` (the tail of the leaf before them).

    Args:
        tree: A span tree as built by :meth:`ASTChunker.chunk_tree`.
        ratio: Overlap size as a fraction of ``budget`` (``0`` adds nothing).
        budget: The chunker's token budget.
        tokenizer: Counts tokens exactly.

    Returns:
        The same tree when nothing gets overlap, else a new tree whose leaves (and the same spans in
        ``tree.spans``) carry ``overlap`` and ``overlap_tokens`` in their metadata; every ``text`` is unchanged.
    """
    target = int(ratio * budget)
    if target < 1 or len(tree.leaves) < 2:
        return tree
    leaves = list(tree.leaves)
    changed: dict[str, Span] = {}
    for i in range(1, len(leaves)):
        prev, cur = tree.leaves[i - 1], tree.leaves[i]
        if not _continues(prev, cur, tree):
            continue
        tail, tokens = _tail(prev.text, target, tokenizer, prev.token_count)
        if not tail:
            continue
        meta = {**cur.metadata, "overlap": tail, "overlap_tokens": tokens}
        leaves[i] = dataclasses.replace(cur, metadata=meta)
        changed[cur.id] = leaves[i]
    if not changed:
        return tree
    spans = [changed.get(s.id, s) for s in tree.spans]
    return SpanTree.build(spans, leaves)


def overlap_tail(text: str, target: int, tokenizer: Tokenizer, known_tokens: int | None = None) -> str:
    """The overlap taken from the end of ``text``: at most ``target`` tokens, starting at a sentence or a word.

    A sentence start is preferred when it keeps at least half of the target; otherwise the tail starts at the
    first word that lets it fit. Lines of fences and tables at the end of ``text`` are never part of the tail.
    Returns ``""`` when no boundary fits (one long word) or nothing but whitespace is left.

    Args:
        text: The previous piece.
        target: Maximum tokens of the tail.
        tokenizer: Counts tokens exactly.
        known_tokens: ``tokenizer.count(text)`` when the caller already knows it.
    """
    return _tail(text, target, tokenizer, known_tokens)[0]


def _tail(text: str, target: int, tokenizer: Tokenizer, known_tokens: int | None) -> tuple[str, int]:
    """:func:`overlap_tail` and the tail's exact token count."""
    if target < 1 or not text.strip():
        return "", 0
    # Prose only: start after the last fence delimiter or table row.
    last = None
    for last in _NOT_PROSE_LINE.finditer(text):
        pass
    floor = last.end() if last is not None else 0
    prose = text[floor:]
    total = known_tokens if known_tokens is not None and floor == 0 else tokenizer.count(prose)
    if total <= target:
        tail = prose.lstrip()
        if not tail.strip():
            return "", 0
        return tail, total if tail == prose else tokenizer.count(tail)
    start = _suffix_start(text, floor, target, tokenizer)
    # `start` may sit inside a word or a sentence: move forward to a sentence start that keeps at least half the
    # target, else to the first word start that fits.
    at = _first_boundary(_SENTENCE_START, text, start, floor)
    if at is not None:
        k = tokenizer.count(text[at:])
        if max(1, target // 2) <= k <= target:
            return text[at:], k
    at = _first_boundary(_WORD_START, text, start, floor)
    while at is not None:
        k = tokenizer.count(text[at:])
        if k <= target:
            return text[at:], k
        at = _first_boundary(_WORD_START, text, at + 1, floor)
    return "", 0


def _first_boundary(pattern: re.Pattern[str], text: str, start: int, floor: int) -> int | None:
    """The first index ``>= start`` where ``pattern`` says a sentence (or word) starts, if any."""
    for m in pattern.finditer(text, max(floor, start - 16)):
        if m.end() >= start:
            return m.end() if m.end() < len(text) else None
    return None


def _suffix_start(text: str, floor: int, target: int, tokenizer: Tokenizer) -> int:
    """An index after which about ``target`` tokens of ``text`` remain (never before ``floor``).

    Encodes only a window at the end: one count to size it, then one ``cut`` drops the window's first
    ``count - target`` tokens. BPE may merge differently across the cut, so the caller re-counts its tail.
    """
    n = len(text)
    width = max(64, target * 8)
    while True:
        lo = max(floor, n - width)
        window = text[lo:]
        k = tokenizer.count(window)
        if k > target or lo == floor:
            break
        width *= 4
    if k <= target:
        return lo
    return lo + tokenizer.cut(window, k - target)


def _continues(prev: Span, cur: Span, tree: SpanTree) -> bool:
    """Whether ``cur`` is a prose piece that continues the prose piece ``prev`` inside one structural span."""
    if prev.kind not in PROSE_KINDS or cur.kind not in PROSE_KINDS:
        return False
    if prev.language not in PROSE_LANGUAGES or cur.language not in PROSE_LANGUAGES:
        return False
    if prev.parent_id != cur.parent_id or prev.metadata.get("breadcrumb") != cur.metadata.get("breadcrumb"):
        return False
    parent = tree.get(cur.parent_id) if cur.parent_id else None
    parent_name = parent.name if parent is not None else None
    # A piece is named after the span it was cut from; a whole subsection leaf has its own, longer name.
    return cur.name == parent_name and prev.name == parent_name


def index_text(span: Span, budget: int, tokenizer: Tokenizer, header: bool = True) -> str:
    """The text to hand to an index for ``span``: context header, then overlap, then the span's text.

    Everything fits ``budget`` tokens. When it does not, the overlap gives way first (it is shortened to a later
    word boundary, then dropped), then the header's lines from the last one up; the span's own text is never cut.
    To leave room for both, chunk with a budget below the index's (e.g. ``max_tokens = 0.8 * index_budget``).

    Args:
        span: A leaf span (with ``metadata["overlap"]`` if :func:`add_overlap` gave it one).
        budget: Token budget of the index text.
        tokenizer: Counts tokens exactly (``ASTChunker.tokenizer``).
        header: Prefix the context header (path, heading path or enclosing signatures).

    Example:
        >>> from llmc_splitters import ASTChunker
        >>> chunker = ASTChunker(max_tokens=64)
        >>> doc = "# Guide\\n\\n## Install\\n\\nRun pip.\\n"
        >>> [index_text(s, 64, chunker.tokenizer) for s in chunker.chunk(doc, path="README.md")][:1]
        ['# README.md > Guide\\n# Guide\\n\\n## Install\\n\\nRun pip.\\n']
    """
    text = span.text
    if tokenizer.count(text) > budget:
        return text
    head = fit_header(context_header(span), span.token_count, budget, tokenizer) if header else ""
    if head and tokenizer.count(head + text) > budget:
        head = ""
    overlap = span.metadata.get("overlap") or ""
    if overlap:
        # The longest word-aligned tail of the overlap that still fits: bisect over word starts (a later start is
        # a shorter tail), then keep only a candidate whose exact count fits.
        starts = [0, *(m.end() for m in _WORD_START.finditer(overlap))]
        lo, hi = -1, len(starts)  # starts[hi:] fit (none yet known); starts[:lo + 1] do not
        found = None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            candidate = head + overlap[starts[mid] :] + text
            if tokenizer.count(candidate) <= budget:
                hi, found = mid, candidate
            else:
                lo = mid
        if found is not None:
            return found
    return head + text
