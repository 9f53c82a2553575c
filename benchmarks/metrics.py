"""Retrieval and chunk metrics. Pure functions over char ranges, so they can be checked on hand-made examples.

A *context* is a list of :class:`Piece` (a char range of a file and what it cost in tokens). A part of a file is
"in the context" when every non-whitespace character of it lies inside some piece of the same file: chunkers that
strip indentation are not penalised for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .corpus import Query, SourceFile


@dataclass(frozen=True)
class Piece:
    path: str
    start: int
    end: int
    tokens: int


def merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def uncovered(merged: list[tuple[int, int]], a: int, b: int) -> list[tuple[int, int]]:
    """Parts of [a, b) outside the merged ranges."""
    gaps = []
    pos = a
    for s, e in merged:
        if e <= pos:
            continue
        if s >= b:
            break
        if s > pos:
            gaps.append((pos, min(s, b)))
        pos = max(pos, e)
        if pos >= b:
            break
    if pos < b:
        gaps.append((pos, b))
    return gaps


def covered(text: str, merged: list[tuple[int, int]], a: int, b: int) -> bool:
    """Every non-whitespace char of text[a:b] lies in the merged ranges."""
    return all(not text[s:e].strip() for s, e in uncovered(merged, a, b))


def intersect(merged: list[tuple[int, int]], a: int, b: int) -> list[tuple[int, int]]:
    return [(max(s, a), min(e, b)) for s, e in merged if e > a and s < b]


def _ranges_for(context: list[Piece], path: str) -> list[tuple[int, int]]:
    return merge((p.start, p.end) for p in context if p.path == path and p.start >= 0)


def gold_lines(file: SourceFile, q: Query) -> list[tuple[int, int]]:
    """The char range of each non-blank gold line, clipped to the gold span."""
    out = []
    for line in range(q.start_line, q.end_line + 1):
        s, e = file.line_range(line)
        s, e = max(s, q.gold_start), min(e, q.gold_end)
        if e > s and file.text[s:e].strip():
            out.append((s, e))
    return out


def line_recall(file: SourceFile, q: Query, context: list[Piece]) -> float:
    merged = _ranges_for(context, q.path)
    lines = gold_lines(file, q)
    if not lines:
        return 0.0
    return sum(covered(file.text, merged, s, e) for s, e in lines) / len(lines)


def full_hit(file: SourceFile, q: Query, context: list[Piece]) -> bool:
    return covered(file.text, _ranges_for(context, q.path), q.gold_start, q.gold_end)


def precision(file: SourceFile, q: Query, context: list[Piece], count: Callable[[str], int]) -> float:
    """Gold tokens in the context (each counted once) / tokens the context costs."""
    total = sum(p.tokens for p in context)
    if total == 0:
        return 0.0
    merged = _ranges_for(context, q.path)
    gold = sum(count(file.text[s:e]) for s, e in intersect(merged, q.gold_start, q.gold_end))
    return min(1.0, gold / total)


def completeness(file: SourceFile, q: Query, context: list[Piece]) -> bool | None:
    """For a method or a function using imported names: whole function + class header line + its import lines.

    ``None`` when the query needs no context (a free function using no imported name).
    """
    if not q.needs_context:
        return None
    merged = _ranges_for(context, q.path)
    if not covered(file.text, merged, q.gold_start, q.gold_end):
        return False
    lines = list(q.import_lines)
    if q.is_method and q.class_line is not None:
        lines.append(q.class_line)
    for line in lines:
        s, e = file.line_range(line)
        if not covered(file.text, merged, s, e):
            return False
    return True


def fill(ranked: Iterable[tuple[object, int]], budget: int) -> list[object]:
    """Take items in rank order while they fit; an item that does not fit is skipped, the next one is tried."""
    out = []
    left = budget
    for item, tokens in ranked:
        if tokens <= left:
            out.append(item)
            left -= tokens
            if left <= 0:
                break
    return out


# --------------------------------------------------------------------------------------------------------------
# Chunk statistics
# --------------------------------------------------------------------------------------------------------------


def cuts_line(text: str, pos: int) -> bool:
    """Whether a cut at ``pos`` splits a line: code on that line both before and after ``pos``."""
    ls = text.rfind("\n", 0, pos) + 1
    le = text.find("\n", pos)
    return bool(text[ls:pos].strip()) and bool(text[pos: len(text) if le == -1 else le].strip())


def boundary_inside_line(text: str, start: int, end: int) -> tuple[bool, bool]:
    """Whether a chunk's start / end cuts a line (see :func:`cuts_line`)."""
    return cuts_line(text, start), cuts_line(text, end)


def chunk_stats(files: list[SourceFile], chunks_by_file: list[list], budget: int) -> dict[str, float]:
    """count, mean/max tokens, share over budget, share of boundaries inside a line, lossless files, nws coverage.

    Lossless file: every chunk's source text is an exact slice of the file and the slices cover every character.
    """
    n = 0
    tok_sum = 0
    tok_max = 0
    over = 0
    boundaries = 0
    inside = 0
    lossless = 0
    nws_total = 0
    nws_cov = 0
    unlocated = 0
    for f, chunks in zip(files, chunks_by_file, strict=True):
        located = [c for c in chunks if c.start >= 0]
        unlocated += len(chunks) - len(located)
        for c in chunks:
            n += 1
            tok_sum += c.tokens
            tok_max = max(tok_max, c.tokens)
            over += c.tokens > budget
        for c in located:
            b0, b1 = boundary_inside_line(f.text, c.start, c.end)
            if c.start > 0:
                boundaries += 1
                inside += b0
            if c.end < len(f.text):
                boundaries += 1
                inside += b1
        merged = merge((c.start, c.end) for c in located)
        gaps = uncovered(merged, 0, len(f.text))
        if all(c.verbatim for c in chunks) and not gaps and len(located) == len(chunks):
            lossless += 1
        nws_f = len(f.text) - sum(ch.isspace() for ch in f.text)
        nws_gap = sum(len(f.text[s:e]) - sum(ch.isspace() for ch in f.text[s:e]) for s, e in gaps)
        nws_total += nws_f
        nws_cov += nws_f - nws_gap
    return {
        "files": len(files),
        "chunks": n,
        "mean_tokens": tok_sum / n if n else 0.0,
        "max_tokens": tok_max,
        "over_budget": over / n if n else 0.0,
        "boundary_inside_line": inside / boundaries if boundaries else 0.0,
        "lossless_files": lossless / len(files) if files else 0.0,
        "nws_coverage": nws_cov / nws_total if nws_total else 0.0,
        "unlocated_chunks": unlocated,
    }
