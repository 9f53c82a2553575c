"""Expand search hits into a context that fits a token budget: the hit, its scope or class skeleton, its imports.

Pure: everything the expansion needs comes in as :class:`HitContext` objects (built by the index from stored span
metadata), and the only outside service is a token counter.

For each hit, in rank order, the candidates are:

1. the hit itself (all hits come first, so context never costs the answer);
2. the header line of each enclosing scope (``class Client(Base):``), innermost first;
3. the import statements and module-level names the hit uses, in file order;
4. the smallest enclosing scope whole, if it fits; otherwise the skeleton of the innermost enclosing class.

Candidates are taken greedily in that order; one that would push the *rendered* context over
``max_context_tokens`` is skipped, so the least relevant material is what gets dropped. Literal pieces of one file
(hits, scopes, headers, imports) are merged: nested or overlapping byte ranges deduplicated, touching ones joined;
pieces are rendered file by file (files in order of their best hit), in file order within a file, each preceded by a
``# path:start-end`` marker (1-based, inclusive lines). A skeleton is marked ``# path:start-end (skeleton)``; its text
is not a verbatim slice (bodies are elided). If even the best hit alone does not fit, its head is returned, cut at
a token boundary and marked ``(truncated)``; the result is never over budget.

Example:
    >>> from llmc_splitters.retrieval.expand import Snippet, expand
    >>> hit = Snippet("m.py", 0, 14, 1, 1, "def f(): pass\\n")
    >>> expand([HitContext(hit, 1.0)], max_context_tokens=50, count=len).context
    '# m.py:1-1\\ndef f(): pass\\n'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigurationError

__all__ = ["DEFAULT_MARKER", "Snippet", "Scope", "HitContext", "Piece", "Expansion", "expand", "render_marker"]

DEFAULT_MARKER = "# {path}:{start}-{end}"


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
class HitContext:
    """A search hit with everything its expansion may use.

    Attributes:
        hit: The hit's own text.
        score: Its fused relevance score (higher is better).
        scopes: Enclosing scopes, innermost first, *excluding* the file itself.
        imports: The import statements and module-level names the hit uses, as whole-line snippets.
    """

    hit: Snippet
    score: float
    scopes: tuple[Scope, ...] = ()
    imports: tuple[Snippet, ...] = ()


@dataclass(frozen=True, slots=True)
class Piece:
    """One rendered piece of context.

    Attributes:
        path: The file it comes from.
        start_line: 1-based first line.
        end_line: 1-based last line (inclusive).
        text: Its text (verbatim, except for ``skeleton`` pieces).
        kind: ``hit`` if it contains a hit, else ``scope``, ``header``, ``import``, ``skeleton``.
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
    """

    pieces: tuple[Piece, ...]
    context: str
    token_count: int
    dropped: tuple[tuple[int, str], ...] = field(default=())


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
        piece = Piece(
            sc.snippet.path,
            sc.snippet.start_line,
            sc.snippet.end_line,
            sc.skeleton,
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


def _render(cands: list[_Cand], marker: str) -> tuple[list[Piece], str]:
    by_file: dict[str | None, list[_Cand]] = {}
    for c in sorted(cands, key=lambda c: c.rank):
        by_file.setdefault(c.path, []).append(c)
    pieces: list[Piece] = []
    for group in by_file.values():  # insertion order = order of each file's best rank
        pieces.extend(_merge(group))
    parts = []
    for p in pieces:
        note = "skeleton" if p.kind == "skeleton" else ("truncated" if p.truncated else "")
        text = p.text if p.text.endswith("\n") else p.text + "\n"
        parts.append(render_marker(marker, p.path, p.start_line, p.end_line, note) + "\n" + text)
    return pieces, "".join(parts)


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
) -> Expansion:
    """Expand ranked hits into pieces and a rendered context of at most ``max_context_tokens`` tokens.

    Args:
        hits: Hits with their context, best first.
        max_context_tokens: The budget for the whole rendered context (markers included).
        count: Token counter for the budget (``Tokenizer.count``).
        cut: Optional ``cut(text, n) -> char index`` (``Tokenizer.cut``) to truncate an oversize top hit fast.
        marker: Marker line template with ``{path}``, ``{start}``, ``{end}``.
        include_scopes: Add headers, whole scopes and skeletons (``False``: hits and imports only).
        include_imports: Add the imports and module-level names each hit uses.

    Returns:
        The :class:`Expansion`.

    Raises:
        ConfigurationError: ``max_context_tokens`` is not positive.
    """
    if max_context_tokens <= 0:
        msg = f"max_context_tokens must be > 0, got {max_context_tokens}"
        raise ConfigurationError(msg)
    chosen: list[_Cand] = []
    dropped: list[tuple[int, str]] = []

    def fits(extra: _Cand) -> bool:
        return count(_render([*chosen, extra], marker)[1]) <= max_context_tokens

    def consider(c: _Cand) -> bool:
        if _covered(c, chosen):
            return True
        if fits(c):
            chosen.append(c)
            return True
        dropped.append((c.rank, c.kind))
        return False

    # 1. The hits themselves, best first; the best one is truncated rather than lost.
    for rank, h in enumerate(hits):
        c = _Cand(rank, h.score, "hit", h.hit)
        if not consider(c) and not chosen and rank == 0:
            t = _truncate(c, max_context_tokens, count, marker, cut)
            if t is not None:
                dropped.pop()
                chosen.append(t)
    hit_ranks = {c.rank for c in chosen if c.kind == "hit"}
    # 2. Context for each kept hit, in rank order.
    for rank, h in enumerate(hits):
        if rank not in hit_ranks or any(c.rank == rank and c.truncated for c in chosen):
            continue
        if include_scopes:
            for sc in h.scopes:
                if sc.header is not None:
                    consider(_Cand(rank, h.score, "header", sc.header))
        if include_imports:
            for imp in sorted(h.imports, key=lambda s: s.start_byte):
                consider(_Cand(rank, h.score, "import", imp))
        if include_scopes:
            # Widen scope by scope (method, then class, ...) while the whole scope fits; at the first that does
            # not, fall back to the skeleton of the innermost class at or above it.
            for level, sc in enumerate(h.scopes):
                if consider(_Cand(rank, h.score, "scope", sc.snippet)):
                    continue
                dropped.pop()
                skel = next((s for s in h.scopes[level:] if s.skeleton), None)
                if skel is not None:
                    consider(_Cand(rank, h.score, "skeleton", scope=skel))
                else:
                    dropped.append((rank, "scope"))
                break
    pieces, context = _render(chosen, marker)
    return Expansion(tuple(pieces), context, count(context) if context else 0, tuple(dropped))
