"""Rendering a set of context candidates, and measuring it: the literal pieces of one file merged by byte range,
skeletons without the lines shown verbatim, each piece under its ``# path:start-end`` marker, files in the order of
their best hit (see :mod:`llmc_splitters.retrieval.context.expand`, which decides what the candidates are)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ...chunking.notebook import split_cell_path

if TYPE_CHECKING:
    from ...chunking.analysis import SkeletonEntry

__all__ = ["Snippet", "Scope", "Piece", "called_skeleton", "render_marker"]

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
        lines: For an excerpt of a long statement, the 0-based lines of ``text`` a context shows (its head, the
            lines that name what a hit uses, its closing line); ``None``: every line.
    """

    path: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    text: str
    span_id: str | None = None
    lines: tuple[int, ...] | None = None


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
class Piece:
    """One rendered piece of context.

    Attributes:
        path: The file it comes from.
        start_line: 1-based first line.
        end_line: 1-based last line (inclusive).
        text: Its text (verbatim, except for ``skeleton`` pieces).
        kind: ``hit`` if it contains a hit, else ``scope``, ``header``, ``import``, ``cell`` (a neighbouring notebook
            cell), ``skeleton``, ``excerpt`` (a long import or constant shown by its head, the lines that name what
            a hit uses and its closing line: the lines of its range that are not shown were left out).
        kinds: Kinds of everything merged into it, in order of selection.
        span_ids: Ids of the spans merged into it.
        score: Best score of the hits it contains or serves.
        rank: Best (0-based) rank of those hits.
        truncated: Whether the text was cut to fit the budget.
        continues: For a part of a function, method or section that goes on past the piece (a piece of a split
            definition, a block of a hit zoomed into), the definition's last line; its marker says so
            (``(continues)``, three tokens). ``None`` otherwise.
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
    continues: int | None = None


@dataclass(slots=True)
class _Cand:
    rank: int
    score: float
    kind: str
    snippet: Snippet | None = None
    scope: Scope | None = None  # for skeletons
    truncated: bool = False
    continues: tuple[int, int] | None = None  # (end byte, end line) of the definition a core is a part of

    @property
    def path(self) -> str | None:
        return self.snippet.path if self.snippet is not None else self.scope.snippet.path  # type: ignore[union-attr]


def render_marker(marker: str, path: str | None, start: int, end: int, note: str = "") -> str:
    """Format a marker line (``note`` such as ``skeleton`` is appended in parentheses)."""
    line = marker.format(path=path if path is not None else "<text>", start=start, end=end)
    return f"{line} ({note})" if note else line


def _literal(c: _Cand) -> bool:
    """Whether a candidate's text is a verbatim slice of its range (not a skeleton, not an excerpt)."""
    return c.kind != "skeleton" and c.snippet is not None and c.snippet.lines is None


def _merge(cands: list[_Cand]) -> list[Piece]:
    """Merge the literal candidates of one file by byte range; place skeletons at their scope's start, and
    excerpts (the lines of one statement they show, united) at theirs."""
    literal = sorted((c for c in cands if _literal(c)), key=lambda c: (c.snippet.start_byte, -c.snippet.end_byte))  # type: ignore[union-attr]
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
        # The definition a piece belongs to goes on past it, unless what was merged with it reaches its end.
        rest = [m.continues for m in members if m.continues is not None and m.continues[0] > snip.end_byte]
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
            max(line for _, line in rest) if rest and not any(m.truncated for m in members) else None,
        )
        pieces.append((snip.start_byte, 1, piece))
    pieces.extend(_excerpts([c for c in cands if c.kind != "skeleton" and not _literal(c)], merged))
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


def _excerpts(cands: list[_Cand], merged: list[tuple[Snippet, list[_Cand]]]) -> list[tuple[int, int, Piece]]:
    """The excerpt pieces of one file: per statement, the union of the lines its candidates show, unless a literal
    piece shows the statement whole."""
    by_range: dict[tuple[int, int], list[_Cand]] = {}
    for c in cands:
        s = c.snippet
        assert s is not None
        if not any(m.start_byte <= s.start_byte and s.end_byte <= m.end_byte for m, _ in merged):
            by_range.setdefault((s.start_byte, s.end_byte), []).append(c)
    out = []
    for (start, _), members in by_range.items():
        s = members[0].snippet
        assert s is not None
        keep = {k for m in members for k in m.snippet.lines or ()}  # type: ignore[union-attr]
        lines = s.text.splitlines(keepends=True)
        pos, shown = s.start_byte, []
        for k, line in enumerate(lines):
            end = pos + len(line.encode("utf-8", "surrogatepass"))
            # A line a verbatim piece already shows (a hit inside the statement) is not shown twice.
            if k in keep and not any(m.start_byte <= pos and end <= m.end_byte for m, _ in merged):
                shown.append(line)
            pos = end
        text = "".join(shown)
        if not text:
            continue
        ids = tuple(dict.fromkeys(m.snippet.span_id for m in members if m.snippet and m.snippet.span_id))
        out.append((start, 1, Piece(s.path, s.start_line, s.end_line, text, "excerpt", ("excerpt",), ids,
                                    max(m.score for m in members), min(m.rank for m in members))))
    return out


@lru_cache(maxsize=256)
def _entries(skeleton: str) -> tuple[SkeletonEntry, ...]:
    """A skeleton's entries, parsed once per skeleton (a context is measured many times while it is built)."""
    from ...chunking.analysis import skeleton_entries

    return tuple(skeleton_entries(skeleton))


def called_skeleton(scope: Scope, code: str) -> Scope | None:
    """``scope`` with its skeleton cut down to the members ``code`` reaches
    (:func:`~llmc_splitters.chunking.analysis.skeleton_for`), or ``None`` when that says nothing the header does not."""
    from ...chunking.analysis import skeleton_for

    text = skeleton_for(scope.skeleton or "", code)
    return None if text is None else Scope(scope.snippet, scope.kind, scope.header, text)


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
    note = p.kind if p.kind in ("skeleton", "excerpt") else ("truncated" if p.truncated else "")
    if p.continues is not None:
        note = "continues"
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
