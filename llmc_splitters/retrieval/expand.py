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
3. **Skeletons.** The skeleton of the innermost enclosing class (signatures only, bodies elided).
4. **Whole scopes.** A zoomed hit whole, then the enclosing scopes whole while they fit (a scope present verbatim
   makes its skeleton redundant: the skeleton is dropped from the render, and its cost with it).

A candidate that would push the *rendered* context over ``max_context_tokens`` is skipped. Literal pieces of one file
(hits, scopes, headers, bindings) are merged (nested or overlapping ranges deduplicated, touching ones joined) and
rendered file by file (files in order of their best hit; the cells of a notebook shown for one hit in notebook order),
in file order within a file, each preceded by a ``# path:start-end`` marker (1-based, inclusive lines). A skeleton is marked ``# path:start-end (skeleton)``; its text
is not a verbatim slice, and its lines that are already in the context verbatim (a header, a method shown whole)
are left out of it: no line appears twice. The result is never over budget.

Example:
    >>> from llmc_splitters.retrieval.expand import Snippet, expand
    >>> hit = Snippet("m.py", 0, 14, 1, 1, "def f(): pass\\n")
    >>> expand([HitContext(hit, 1.0)], max_context_tokens=50, count=len).context
    '# m.py:1-1\\ndef f(): pass\\n'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ..chunking.notebook import split_cell_path
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..chunking.analysis import SkeletonEntry

__all__ = ["DEFAULT_MARKER", "Snippet", "Scope", "Part", "HitContext", "Piece", "Expansion", "expand",
           "render_marker"]

DEFAULT_MARKER = "# {path}:{start}-{end}"

# Only the best hits are zoomed into when they do not fit: a lower-ranked hit that does not fit is dropped (a zoom
# re-chunks the hit and ranks its parts).
ZOOM_RANKS = 3


@dataclass(frozen=True, slots=True)
class Snippet:
    """A verbatim slice of a file.

    Attributes:
        path: The file path (``None`` for anonymous text).
        start_byte: UTF-8 offset of the first byte.
        end_byte: UTF-8 offset one past the last byte.
        start_line: 1-based line of the first character.
        end_line: 1-based line of the last character (inclusive).
        text: ``source[start_byte:end_byte]`` decoded.
        span_id: The span this slice is (or belongs to), if any.
    """

    path: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    text: str
    span_id: str | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """An enclosing scope of a hit (a class or function that contains it).

    Attributes:
        snippet: The whole scope, verbatim.
        kind: ``class``, ``function``, ``method``, ...
        header: Its header lines (decorators + ``class A(B):``), verbatim, or ``None``.
        skeleton: Its skeleton (signatures only, bodies elided), or ``None`` (functions have none).
    """

    snippet: Snippet
    kind: str
    header: Snippet | None = None
    skeleton: str | None = None


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
            method (see :func:`~llmc_splitters.retrieval.context.notebook_neighbours`); each path is its cell's.
    """

    hit: Snippet
    score: float
    scopes: tuple[Scope, ...] = ()
    imports: tuple[Snippet, ...] = ()
    zoom: Zoom | None = field(default=None, compare=False)
    container: bool = False
    neighbours: tuple[Snippet, ...] = ()


@dataclass(frozen=True, slots=True)
class Piece:
    """One rendered piece of context.

    Attributes:
        path: The file it comes from.
        start_line: 1-based first line.
        end_line: 1-based last line (inclusive).
        text: Its text (verbatim, except for ``skeleton`` pieces).
        kind: ``hit`` if it contains a hit, else ``scope``, ``header``, ``import``, ``cell`` (a neighbouring notebook
            cell), ``skeleton``.
        kinds: Kinds of everything merged into it, in order of selection.
        span_ids: Ids of the spans merged into it.
        score: Best score of the hits it contains or serves.
        rank: Best (0-based) rank of those hits.
        truncated: Whether the text was cut to fit the budget.
    """

    path: str | None
    start_line: int
    end_line: int
    text: str
    kind: str
    kinds: tuple[str, ...] = ()
    span_ids: tuple[str, ...] = ()
    score: float = 0.0
    rank: int = 0
    truncated: bool = False


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


@dataclass(slots=True)
class _Cand:
    rank: int
    score: float
    kind: str
    snippet: Snippet | None = None
    scope: Scope | None = None  # for skeletons
    truncated: bool = False

    @property
    def path(self) -> str | None:
        return self.snippet.path if self.snippet is not None else self.scope.snippet.path  # type: ignore[union-attr]


def render_marker(marker: str, path: str | None, start: int, end: int, note: str = "") -> str:
    """Format a marker line (``note`` such as ``skeleton`` is appended in parentheses)."""
    line = marker.format(path=path if path is not None else "<text>", start=start, end=end)
    return f"{line} ({note})" if note else line


def _merge(cands: list[_Cand]) -> list[Piece]:
    """Merge the literal candidates of one file by byte range; place skeletons at their scope's start."""
    literal = sorted((c for c in cands if c.kind != "skeleton"), key=lambda c: (c.snippet.start_byte, -c.snippet.end_byte))  # type: ignore[union-attr]
    merged: list[tuple[Snippet, list[_Cand]]] = []
    for c in literal:
        s = c.snippet
        assert s is not None
        if merged and s.start_byte <= merged[-1][0].end_byte and not c.truncated and not merged[-1][1][-1].truncated:
            cur, members = merged[-1]
            if s.end_byte > cur.end_byte:
                # Overlapping or touching: keep cur, append the part of s past cur's end (bytes, then decode).
                tail = s.text.encode("utf-8", "surrogatepass")[cur.end_byte - s.start_byte :]
                text = cur.text + tail.decode("utf-8", "surrogatepass")
                cur = Snippet(cur.path, cur.start_byte, s.end_byte, cur.start_line, s.end_line, text, cur.span_id)
            members.append(c)
            merged[-1] = (cur, members)
        else:
            merged.append((s, [c]))
    pieces: list[tuple[int, int, Piece]] = []
    for snip, members in merged:
        kinds = tuple(dict.fromkeys(m.kind for m in members))
        ids = tuple(dict.fromkeys(m.snippet.span_id for m in members if m.snippet and m.snippet.span_id))
        kind = "hit" if "hit" in kinds else ("scope" if "scope" in kinds else kinds[0])
        piece = Piece(
            snip.path,
            snip.start_line,
            snip.end_line,
            snip.text,
            kind,
            kinds,
            ids,
            max(m.score for m in members),
            min(m.rank for m in members),
            any(m.truncated for m in members),
        )
        pieces.append((snip.start_byte, 1, piece))
    for c in cands:
        if c.kind != "skeleton":
            continue
        sc = c.scope
        assert sc is not None and sc.skeleton is not None
        # A skeleton is redundant when its whole scope is already there verbatim.
        if any(s.start_byte <= sc.snippet.start_byte and s.end_byte >= sc.snippet.end_byte for s, _ in merged):
            continue
        # Lines shown verbatim elsewhere are left out of the skeleton (header pieces inside it are dropped instead).
        shown = {line.strip() for s, members in merged if s.start_line <= sc.snippet.end_line
                 and s.end_line >= sc.snippet.start_line and any(m.kind != "header" for m in members)
                 for line in s.text.splitlines()}
        text = _without_shown(sc.skeleton, shown)
        if not text.strip():
            continue
        piece = Piece(
            sc.snippet.path,
            sc.snippet.start_line,
            sc.snippet.end_line,
            text,
            "skeleton",
            ("skeleton",),
            (sc.snippet.span_id,) if sc.snippet.span_id else (),
            c.score,
            c.rank,
        )
        pieces.append((sc.snippet.start_byte, 0, piece))
    pieces.sort(key=lambda t: (t[0], t[1]))
    # A header inside a rendered skeleton of the same scope is redundant.
    skel_ranges = [(p.start_line, p.end_line) for _, _, p in pieces if p.kind == "skeleton"]
    out = []
    for _, _, p in pieces:
        if p.kinds == ("header",) and any(a <= p.start_line and p.end_line <= b for a, b in skel_ranges):
            continue
        out.append(p)
    return out


@lru_cache(maxsize=256)
def _entries(skeleton: str) -> tuple[SkeletonEntry, ...]:
    """A skeleton's entries, parsed once per skeleton (a context is measured many times while it is built)."""
    from ..chunking.analysis import skeleton_entries

    return tuple(skeleton_entries(skeleton))


def _without_shown(skeleton: str, shown: set[str]) -> str:
    """A skeleton without the members already shown verbatim: a member goes whole (its multi-line signature, doc
    line, decorators and placeholder) when every line of its signature is in the context, so what is left stays
    balanced code; the header and the closing line always stay."""
    out: list[str] = []
    for entry in _entries(skeleton):
        if entry.role == "member" and entry.signature and all(line in shown for line in entry.signature):
            continue
        if entry.role == "blank" and (len(out) == 1 or not out or not out[-1].strip()):
            continue  # no blank line under the header, nor two in a row (what was left out leaves no gap)
        out.extend(entry.lines)
    return "".join(out)


def _groups(cands: Sequence[_Cand]) -> list[list[_Cand]]:
    """The candidates by file, files in the order of their best rank (the cells one hit brought, in notebook
    order), each file's in rank order."""
    by_file: dict[str | None, list[_Cand]] = {}
    for c in sorted(cands, key=lambda c: c.rank):
        by_file.setdefault(c.path, []).append(c)
    groups = sorted(by_file.items(), key=lambda g: (g[1][0].rank, (split_cell_path(g[0]) or ("", 0))[1]))
    return [group for _, group in groups]


def _render_piece(p: Piece, marker: str) -> str:
    note = "skeleton" if p.kind == "skeleton" else ("truncated" if p.truncated else "")
    text = p.text if p.text.endswith("\n") else p.text + "\n"
    return render_marker(marker, p.path, p.start_line, p.end_line, note) + "\n" + text


def _render(cands: list[_Cand], marker: str) -> tuple[list[Piece], str]:
    pieces = [p for group in _groups(cands) for p in _merge(group)]
    return pieces, "".join(_render_piece(p, marker) for p in pieces)


class _Whole:
    """The tokens of a candidate set's rendered context, counted whole."""

    def __init__(self, count: Callable[[str], int], marker: str) -> None:
        self._count = count
        self._marker = marker

    def __call__(self, cands: Sequence[_Cand]) -> int:
        return self._count(_render(list(cands), self._marker)[1]) if cands else 0


class _PartSums(_Whole):
    """The tokens of a candidate set's rendered context as the sum of its rendered pieces' counts.

    Each piece is ``marker line + text ending in a newline``; with a marker that starts a token of its own (the
    default ``# path:...``: a BPE pre-tokenizer splits a newline from the ``#`` after it) the sum is the whole
    count, and deciding what fits costs one render of the file that changed and one count of each new piece, not a
    count of the whole context per candidate. A file's pieces are kept by the identity of its candidates (held
    here, so an id is never reused), and a piece's count by its text. :func:`expand` checks the final context whole
    and decides again with whole counts when a counter is not additive.
    """

    def __init__(self, count: Callable[[str], int], marker: str) -> None:
        super().__init__(count, marker)
        self._files: dict[tuple[int, ...], tuple[int, list[_Cand]]] = {}
        self._pieces: dict[str, int] = {}

    def __call__(self, cands: Sequence[_Cand]) -> int:
        total = 0
        for group in _groups(cands):
            key = tuple(map(id, group))
            got = self._files.get(key)
            if got is None:
                got = (sum(self._piece(_render_piece(p, self._marker)) for p in _merge(group)), group)
                self._files[key] = got
            total += got[0]
        return total

    def _piece(self, text: str) -> int:
        n = self._pieces.get(text)
        if n is None:
            n = self._pieces[text] = self._count(text)
        return n


def _covered(c: _Cand, chosen: list[_Cand]) -> bool:
    """A literal candidate already inside a chosen literal one adds nothing."""
    if c.snippet is None:
        return False
    s = c.snippet
    return any(
        o.snippet is not None
        and o.kind != "skeleton"
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
        whole = _Cand(rank, h.score, "hit", h.hit)
        zoomed = h.zoom is not None and rank < ZOOM_RANKS and (h.container or not kept)
        if not (zoomed and h.container):
            for unit in units(rank, h, whole, None):
                if fits(*unit):
                    return unit, None
        if zoomed:
            room = max_context_tokens - measure(chosen)
            for part in h.zoom(max(room, 1)):  # type: ignore[misc]
                pc = _Cand(rank, h.score, "hit", part.snippet)
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
            if skel is not None:
                consider(_Cand(rank, h.score, "skeleton", scope=skel))
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
