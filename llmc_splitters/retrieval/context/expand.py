"""Expand search hits into a context that fits a token budget: the part of each hit that matches, then what makes it
readable alone (its header chain, the binding lines it uses, its class skeleton, its enclosing scope whole).

Pure: everything the expansion needs comes in as :class:`HitContext` objects (built by the index from stored span
metadata), and the only outside services are a token counter and, per hit, an optional *zoom*: a function that
returns the hit's parts (its methods, its blocks: syntax-aligned sub-spans, best match first) at most ``n`` tokens
each.

The budget is spent in this order, every step in rank order over the hits:

1. **Cores.** Each hit's own text, if it fits what is left; else, for the first hit that does not fit (and for
   any of the three best hits that is a class holding several definitions), its best-matching part that fits (the
   zoom); a hit whose core cannot fit at all is reported in ``dropped``. Only when not even the best hit fits is
   its best part cut at a line end and marked ``(truncated)`` (one statement bigger than the budget). With
   ``fill=True`` (no ``k``: take hits while they fit) a hit is taken together with its header chain and binding
   lines when they fit, else alone.
2. **Header chain and bindings.** The header lines of each enclosing scope (``class Client(Base):``, and for a part
   the headers between it and the hit, such as ``def send(...)``), innermost first, then the import and
   module-level binding lines the core uses, in file order, then, for a notebook cell, its neighbouring cells (the
   markdown cell that explains a code cell, the code cell a markdown cell introduces). In fill mode a hit that
   cannot have them all is taken without its neighbouring cells, else alone.
3. **Skeletons.** The skeleton of the innermost enclosing class (signatures only, bodies elided); when it does not
   fit, the same cut down to the members the core reaches (``this.retry(...)``, ``self.hooks``) between the header
   and the closing line, so that a TypeScript method's class is shown closed.
4. **Whole scopes.** A zoomed hit whole, then the enclosing scopes whole while they fit (a scope present verbatim
   makes its skeleton redundant: the skeleton is dropped from the render, and its cost with it).

A candidate that would push the *rendered* context over ``max_context_tokens`` is skipped. Literal pieces of one file
(hits, scopes, headers, bindings) are merged (nested or overlapping ranges deduplicated, touching ones joined) and
rendered file by file (files in order of their best hit; the cells of a notebook shown for one hit in notebook order),
in file order within a file, each preceded by a ``# path:start-end`` marker (1-based, inclusive lines). A skeleton is marked ``# path:start-end (skeleton)``; its text
is not a verbatim slice, and its lines that are already in the context verbatim (a header, a method shown whole)
are left out of it: no line appears twice. A long import or constant is an *excerpt*, ``# path:start-end
(excerpt)``: its head, the lines that name what the hits use and its closing line, so that what is shown parses.
A piece of a function, method or section that goes on past it is marked ``# path:start-end (continues)`` (the
span's text is unchanged; :attr:`Piece.continues` holds the definition's last line). The result is never over budget.

Example:
    >>> from llmc_splitters.retrieval.context.expand import Snippet, expand
    >>> hit = Snippet("m.py", 0, 14, 1, 1, "def f(): pass\\n")
    >>> expand([HitContext(hit, 1.0)], max_context_tokens=50, count=len).context
    '# m.py:1-1\\ndef f(): pass\\n'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...errors import ConfigurationError
from .render import Piece, Scope, Snippet, _Cand, _PartSums, _render, _Whole, called_skeleton, render_marker

__all__ = ["DEFAULT_MARKER", "Snippet", "Scope", "Part", "HitContext", "Piece", "Expansion", "expand",
           "render_marker"]

DEFAULT_MARKER = "# {path}:{start}-{end}"

# Only the best hits are zoomed into when they do not fit: a lower-ranked hit that does not fit is dropped (a zoom
# re-chunks the hit and ranks its parts).
ZOOM_RANKS = 3


@dataclass(frozen=True, slots=True)
class Part:
    """A part of a hit to zoom into (a method of a class, a block of a function), with its own context.

    Attributes:
        snippet: The part, verbatim.
        headers: Header lines of the structures between the hit and the part (``def send(...)`` for a block of
            ``send``), innermost first.
        imports: The binding lines the part uses (instead of the whole hit's).
        skeleton: The innermost class around the part inside the hit, with its skeleton, if any.
    """

    snippet: Snippet
    headers: tuple[Snippet, ...] = ()
    imports: tuple[Snippet, ...] = ()
    skeleton: Scope | None = None


Zoom = Callable[[int], Sequence[Part]]
"""``zoom(n) -> parts``: a hit's parts of at most ``n`` tokens each, best match first."""


@dataclass(frozen=True, slots=True)
class HitContext:
    """A search hit with everything its expansion may use.

    Attributes:
        hit: The hit's own text.
        score: Its fused relevance score (higher is better).
        scopes: Enclosing scopes, innermost first, *excluding* the file itself.
        imports: The binding lines (imports, module-level names) the hit uses.
        zoom: Its parts, for when the whole hit does not fit (``None``: it cannot be zoomed into).
        container: The hit holds several definitions (a class that fit one leaf): its best-matching part is its
            core even when the whole hit fits, and the whole hit comes after the part's context, as its scope.
        neighbours: For a notebook cell, the neighbouring cells that belong with it, as a class belongs with its
            method (see :func:`~llmc_splitters.retrieval.context.lookup.notebook_neighbours`); each path is its cell's.
    """

    hit: Snippet
    score: float
    scopes: tuple[Scope, ...] = ()
    imports: tuple[Snippet, ...] = ()
    zoom: Zoom | None = field(default=None, compare=False)
    container: bool = False
    neighbours: tuple[Snippet, ...] = ()


@dataclass(frozen=True, slots=True)
class Expansion:
    """The expansion of a ranked hit list.

    Attributes:
        pieces: Rendered pieces, in render order.
        context: The rendered context string (markers + texts).
        token_count: Tokens in ``context`` (always ``<= max_context_tokens``).
        dropped: Candidates that did not fit, as ``(rank, kind)``.
        cores: What each hit that got in is shown as, ``(rank, start_line, end_line, zoomed)``: the hit's own lines,
            or, ``zoomed``, the lines of the part of it that fit (for a truncated hit, the lines of its head).
    """

    pieces: tuple[Piece, ...]
    context: str
    token_count: int
    dropped: tuple[tuple[int, str], ...] = field(default=())
    cores: tuple[tuple[int, int, int, bool], ...] = field(default=())


# The kinds of definition whose piece says that it goes on (a class is shown by its skeleton instead).
_CONTINUED_KINDS = frozenset({"function", "method", "section"})


def _continuation(h: HitContext, core: Snippet, part: Part | None) -> tuple[int, int] | None:
    """``(end byte, end line)`` of the function, method or section that ``core`` (the hit, or ``part`` of it) is a
    piece of, when it goes on past the core: the split definition around a hit, or the hit around a block of it (a
    part of a hit that holds several definitions is one of them, whole)."""
    outer = [sc.snippet for sc in h.scopes[:1] if sc.kind in _CONTINUED_KINDS]
    if part is not None and not h.container:
        outer.append(h.hit)
    # The line is its last one that is not blank (the blank lines after a definition belong to its span).
    ends = [(s.end_byte, s.start_line + s.text.rstrip().count("\n")) for s in outer
            if s.path == core.path and s.end_byte > core.end_byte]
    end = max(ends) if ends else None
    return end if end is not None and end[1] > core.end_line else None


def _covered(c: _Cand, chosen: list[_Cand]) -> bool:
    """A literal candidate already inside a chosen literal one adds nothing."""
    if c.snippet is None:
        return False
    s = c.snippet
    return any(
        o.snippet is not None
        and o.kind != "skeleton"
        and o.snippet.lines is None
        and not o.truncated
        and o.snippet.path == s.path
        and o.snippet.start_byte <= s.start_byte
        and s.end_byte <= o.snippet.end_byte
        for o in chosen
    )


def _truncate(c: _Cand, budget: int, count: Callable[[str], int], marker: str, cut: Callable[[str, int], int] | None) -> _Cand | None:
    """The head of a hit that fits ``budget`` with its marker, or ``None``."""
    s = c.snippet
    assert s is not None
    overhead = count(render_marker(marker, s.path, s.start_line, s.end_line, "truncated") + "\n\n")
    room = budget - overhead
    if room <= 0:
        return None
    text = s.text
    n = cut(text, room) if cut is not None else _search_cut(count, text, room)
    while n > 0:
        # Prefer whole lines: cut after the last newline of the head when there is one.
        nl = text.rfind("\n", 0, n)
        keep = nl + 1 if nl >= 0 else n
        head = text[:keep]
        end_line = s.start_line + head.rstrip("\n").count("\n")
        end_byte = s.start_byte + len(head.encode("utf-8", "surrogatepass"))
        trial = Snippet(s.path, s.start_byte, end_byte, s.start_line, end_line, head, s.span_id)
        t = _Cand(c.rank, c.score, c.kind, trial, truncated=True)
        if count(_render([t], marker)[1]) <= budget:
            return t
        n = min(int(n * 0.9), keep - 1)
    return None


def _search_cut(count: Callable[[str], int], text: str, n: int) -> int:
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= n:
            lo = mid
        else:
            hi = mid - 1
    return lo


def expand(
    hits: Sequence[HitContext],
    max_context_tokens: int,
    count: Callable[[str], int],
    *,
    cut: Callable[[str, int], int] | None = None,
    marker: str = DEFAULT_MARKER,
    include_scopes: bool = True,
    include_imports: bool = True,
    fill: bool = False,
    essentials_only: bool = False,
) -> Expansion:
    """Expand ranked hits into pieces and a rendered context of at most ``max_context_tokens`` tokens.

    Args:
        hits: Hits with their context, best first.
        max_context_tokens: The budget for the whole rendered context (markers included).
        count: Token counter for the budget (``Tokenizer.count``).
        cut: Optional ``cut(text, n) -> char index`` (``Tokenizer.cut``) to truncate a part bigger than the budget.
        marker: Marker line template with ``{path}``, ``{start}``, ``{end}``.
        include_scopes: Add headers, skeletons and whole scopes (``False``: cores and bindings only).
        include_imports: Add the binding lines each core uses.
        fill: Take a hit only with its header chain and bindings, and go on down the list while hits fit (for a
            list longer than what fits: the retriever's "no ``k``" mode).
        essentials_only: Stop after steps 1 and 2 (cores, header chains, bindings): no skeletons, no whole scopes.
            What a hit needs at least; the framework faces size each hit with it before giving out what is left.

    Returns:
        The :class:`Expansion`.

    Raises:
        ConfigurationError: ``max_context_tokens`` is not positive.
    """
    if max_context_tokens <= 0:
        msg = f"max_context_tokens must be > 0, got {max_context_tokens}"
        raise ConfigurationError(msg)
    args = (hits, max_context_tokens, count, cut, marker, include_scopes, include_imports, fill, essentials_only)
    exp = _expand(*args, measure=_PartSums(count, marker))
    if exp.token_count > max_context_tokens:
        # The counter is not additive over pieces (a marker that joins the token before it): decide whole.
        exp = _expand(*args, measure=_Whole(count, marker))
    return exp


def _expand(
    hits: Sequence[HitContext],
    max_context_tokens: int,
    count: Callable[[str], int],
    cut: Callable[[str, int], int] | None,
    marker: str,
    include_scopes: bool,
    include_imports: bool,
    fill: bool,
    essentials_only: bool,
    *,
    measure: _Whole,
) -> Expansion:
    """:func:`expand`, deciding what fits by ``measure`` (the rendered tokens of a candidate set)."""
    chosen: list[_Cand] = []
    dropped: list[tuple[int, str]] = []
    kept: dict[int, Part | None] = {}  # rank -> the part its core is (None: the whole hit)

    def fits(*extra: _Cand) -> bool:
        return measure([*chosen, *extra]) <= max_context_tokens

    def consider(c: _Cand) -> bool:
        if _covered(c, chosen):
            return True
        if fits(c):
            chosen.append(c)
            return True
        dropped.append((c.rank, c.kind))
        return False

    def essentials(rank: int, h: HitContext, part: Part | None, cells: bool = True) -> list[_Cand]:
        """The header chain (innermost first), the binding lines and (``cells``) the neighbouring notebook cells of
        a core, not yet in the context."""
        out: list[_Cand] = []
        if include_scopes:
            heads = [*(part.headers if part is not None else ()), *(sc.header for sc in h.scopes if sc.header)]
            out += [_Cand(rank, h.score, "header", s) for s in heads]
        if include_imports:
            imps = part.imports if part is not None else h.imports
            out += [_Cand(rank, h.score, "import", s) for s in sorted(imps, key=lambda s: s.start_byte)]
        if include_scopes and cells:
            out += [_Cand(rank, h.score, "cell", s) for s in h.neighbours]
        seen: list[_Cand] = [*chosen]
        unique = []
        for c in out:
            if not _covered(c, seen):
                unique.append(c)
                seen.append(c)
        return unique

    def units(rank: int, h: HitContext, c: _Cand, part: Part | None) -> list[list[_Cand]]:
        """What a core may be taken with, best first: in fill mode its essentials, then the same without the
        neighbouring cells (when it has some), then nothing."""
        if not fill:
            return [[c]]
        out = [[c, *essentials(rank, h, part)]]
        if h.neighbours and include_scopes:
            out.append([c, *essentials(rank, h, part, cells=False)])
        return [*out, [c]]

    def core(rank: int, h: HitContext) -> tuple[list[_Cand], Part | None] | None:
        """The hit whole, else its best part that fits (with its essentials in fill mode), else ``None``."""
        whole = _Cand(rank, h.score, "hit", h.hit, continues=_continuation(h, h.hit, None))
        zoomed = h.zoom is not None and rank < ZOOM_RANKS and (h.container or not kept)
        if not (zoomed and h.container):
            for unit in units(rank, h, whole, None):
                if fits(*unit):
                    return unit, None
        if zoomed:
            room = max_context_tokens - measure(chosen)
            for part in h.zoom(max(room, 1)):  # type: ignore[misc]
                pc = _Cand(rank, h.score, "hit", part.snippet, continues=_continuation(h, part.snippet, part))
                for unit in units(rank, h, pc, part):
                    if fits(*unit):
                        return unit, part
            if h.container:
                for unit in units(rank, h, whole, None):
                    if fits(*unit):
                        return unit, None  # no part fits better than the whole
        return None

    # 1. Cores, best hit first.
    for rank, h in enumerate(hits):
        if _covered(_Cand(rank, h.score, "hit", h.hit), chosen):
            continue  # inside a hit already taken
        got = core(rank, h)
        if got is not None:
            unit, part = got
            chosen.extend(c for c in unit if not _covered(c, chosen))
            kept[rank] = part
            continue
        if rank == 0 and not chosen:
            # Not even the best hit fits: the head of its best part, cut at a line end.
            parts = h.zoom(max_context_tokens) if h.zoom is not None else ()
            target = _Cand(0, h.score, "hit", parts[0].snippet if parts else h.hit)
            t = _truncate(target, max_context_tokens, count, marker, cut)
            if t is not None:
                chosen.append(t)
                continue
        dropped.append((rank, "hit"))
    # 2. Header chains and bindings, hit by hit.
    if not fill:
        for rank, part in kept.items():
            for c in essentials(rank, hits[rank], part):
                consider(c)
    if include_scopes and not essentials_only:
        # 3. The skeleton of the innermost class around each core.
        for rank, part in kept.items():
            h = hits[rank]
            skel = part.skeleton if part is not None and part.skeleton is not None else \
                next((sc for sc in h.scopes if sc.skeleton), None)
            if skel is None:
                continue
            whole = _Cand(rank, h.score, "skeleton", scope=skel)
            if fits(whole):
                chosen.append(whole)
                continue
            # What fits instead: the header, the members the core reaches (`this.retry(...)`) and the closing line.
            cut_down = called_skeleton(skel, (part.snippet if part is not None else h.hit).text)
            consider(_Cand(rank, h.score, "skeleton", scope=cut_down) if cut_down is not None else whole)
        # 4. Whole scopes: a zoomed hit whole, then each enclosing scope while it fits.
        for rank, part in kept.items():
            h = hits[rank]
            if part is not None and not consider(_Cand(rank, h.score, "scope", h.hit)):
                continue
            for sc in h.scopes:
                if not consider(_Cand(rank, h.score, "scope", sc.snippet)):
                    break
    pieces, context = _render(chosen, marker)
    cores = []
    for c in chosen:
        if c.kind == "hit" and c.snippet is not None:
            whole = hits[c.rank].hit
            zoomed = (c.snippet.start_byte, c.snippet.end_byte) != (whole.start_byte, whole.end_byte)
            cores.append((c.rank, c.snippet.start_line, c.snippet.end_line, zoomed))
    cores.sort()
    return Expansion(tuple(pieces), context, count(context) if context else 0, tuple(dropped), tuple(cores))
