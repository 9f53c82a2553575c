"""Syntax-error recovery: where to restart the parse so that one error does not swallow the rest of a file.

tree-sitter recovers from most syntax errors locally, but not from all: one construct a grammar cannot read (in the
bash grammar of tree-sitter-language-pack 0.13, a quoted ``/`` in the pattern of ``${var/'a/b'}``) can leave the
rest of the file as the shreds of one ERROR node, so that every definition after it loses its name. The chunker then
ends the parse before the next top-level definition and parses again from there (:func:`recovery_cut`), as many
times as it takes, within a bound on the bytes parsed again (see :mod:`llmc_splitters.chunking.chunker`). It works
for every grammar: a cut is a line at column 0 after the error (the same likely top-level boundaries as the windows
of big files), and it is taken only when the grammar itself reads what follows it as a clean definition.

:func:`error_offsets` lists where a tree has syntax errors (ERROR and MISSING nodes), for the spans' metadata.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .definitions import find_definitions
from .languages import LanguageSpec

__all__ = ["CUT_AFTER_BLANK", "CUT_ANY", "error_offsets", "recovery_cut"]

# Likely top-level boundaries (where big files are cut into windows, and a parse restarts after an error): a line at
# column 0 that does not close a bracket, continue a statement or start with `#` (a comment may sit at column 0 inside
# a Python block, a directive inside a C function); the first after a blank line, when there is one near.
_CUT = rb"\n(?=[^\s)\]}#])(?!(?:else|elif|elsif|except|finally|catch|rescue|ensure|end)\b)"
CUT_ANY = re.compile(_CUT)
CUT_AFTER_BLANK = re.compile(rb"\n[ \t\r\f\v]*" + _CUT)
# Candidate cuts tried after one error, and how far a probe reads to find the end of the definition it starts.
_CANDIDATES = 8
_PROBE_BYTES = 64 * 1024
# Error positions listed per tree (a file of unbalanced brackets has thousands).
MAX_ERRORS = 1000


def recovery_cut(root: Any, data: bytes, spec: LanguageSpec, lo: int, hi: int, parse: Any,
                 budget: int) -> tuple[int | None, int]:
    """Where to end the window ``[lo, hi)`` parsed as ``root`` so that its first error that swallows what follows
    stays in it, and the parse starts again at a top-level definition (``None`` when no error does that, or no such
    definition follows it); and the bytes the probes parsed. ``parse(lo, hi)`` parses the bytes ``[lo, hi)`` of
    ``data``; the probes stop once they have parsed ``budget`` bytes.

    An error swallows what follows when it is in a top-level node that spans a likely top-level boundary (a line
    at column 0 inside a function body means its structure was lost), or when the whole tree is one ERROR node whose
    stray tokens hold it. Its candidate cuts are the next such boundaries after it; one is taken when a parse of the
    definition it starts, alone, is clean (with the comments right above it when they parse with it).
    """
    flat = root.is_error
    spent = 0
    for node in root.children:
        if not (node.has_error or (flat and not node.is_named)):
            continue
        start, end = node.start_byte, node.end_byte
        if not flat and CUT_ANY.search(data, start, max(start, end - 1)) is None:
            continue  # an error inside a node that still ends where it should: the next node is read as usual
        for cut in _candidates(data, start, hi):
            end_probe = _probe_end(data, cut, hi)
            above = _comments_above(data, cut, start)
            for first in (above, cut) if above < cut else (cut,):
                if spent > budget:
                    return None, spent
                spent += end_probe - first
                if lo < first and _clean_definition(parse(first, end_probe), data, spec):
                    return first, spent
        if flat or end >= hi:
            break
    return None, spent


def _candidates(data: bytes, pos: int, hi: int) -> Iterator[int]:
    """The first :data:`_CANDIDATES` likely top-level boundaries after ``pos``."""
    for _ in range(_CANDIDATES):
        m = CUT_ANY.search(data, pos, hi)
        if m is None:
            return
        pos = m.end()
        yield pos


def _probe_end(data: bytes, cut: int, hi: int) -> int:
    """Where a probe from ``cut`` ends: the next boundary after a blank line (else the next one), within reach."""
    reach = min(hi, cut + _PROBE_BYTES)
    m = CUT_AFTER_BLANK.search(data, cut, reach) or CUT_ANY.search(data, cut, reach)
    return m.end() if m else reach


def _comments_above(data: bytes, cut: int, floor: int) -> int:
    """The start of the block of non-blank lines right above ``cut`` (no blank line between), not before the
    line after ``floor``, nor a line that closes a bracket (the end of the code before)."""
    floor = data.find(b"\n", floor, cut) + 1 or cut
    start = cut
    while start > floor:
        prev = data.rfind(b"\n", 0, start - 1) + 1
        line = data[prev : start - 1].strip()
        if not line or prev < floor or line[:1] in b")]}":
            break
        start = prev
    return start


def _clean_definition(root: Any, data: bytes, spec: LanguageSpec) -> bool:
    """Whether a probe's tree is clean and its first top-level node that is not a comment (or decorator) is a
    definition of the language."""
    if root.has_error:
        return False
    first = next((c for c in root.named_children if c.type not in spec.attach_forward), None)
    if first is None:
        return False
    ctx = find_definitions(spec, root, data)
    return first.id in ctx.defs


def error_offsets(root: Any) -> list[int]:
    """The byte offsets where the tree's syntax errors start, in file order, at most :data:`MAX_ERRORS`: each ERROR
    node once (with what it holds) and each MISSING node; for a tree that is one ERROR node with none inside, its
    first stray token."""
    if not root.has_error:
        return []
    found: list[int] = []
    stack = list(reversed(root.children))
    while stack and len(found) < MAX_ERRORS:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node.start_byte)
        elif node.has_error:
            stack.extend(reversed(node.children))
    if not found:
        stray = next((c for c in root.children if not c.is_named), None)
        found.append(root.start_byte if stray is None else stray.start_byte)
    return found
