"""The view of a hit's context, read from the span store: enclosing scopes, used bindings, exact slices.

Everything here is an indexed lookup of the few rows a hit needs (its ancestors by id, its file's bindings, the
leaves of a line range), so building the context of ``k`` hits costs ``O(k)`` reads whatever the size of the index.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...chunking.notebook import split_cell_path
from ...chunking.span import Span
from ...errors import ConfigurationError
from .expand import HitContext, Part, Scope, Snippet, Zoom
from ..storage.span_store import SpanStore

__all__ = ["ancestors", "binding_lines", "get_lines", "get_symbol", "hit_context", "notebook_neighbours", "snippet",
           "zoom_for"]


def snippet(span: Span) -> Snippet:
    """A span as a verbatim slice."""
    return Snippet(span.path, span.start_byte, span.end_byte, span.start_line, span.end_line, span.text, span.id)


def ancestors(store: SpanStore, span: Span, *, text: bool = True) -> list[Span]:
    """Stored parents of ``span``, innermost first, ending with the file span (whose text is never rebuilt here:
    it is the whole file). ``text=False`` rebuilds no parent's text."""
    out: list[Span] = []
    cur = span
    seen = {span.id}
    while cur.parent_id and cur.parent_id not in seen:
        seen.add(cur.parent_id)
        got = store.get([cur.parent_id], parent_text=False).get(cur.parent_id)
        if got is None:
            break
        anc = got.span
        if text and anc.parent_id is not None:
            anc = dataclasses.replace(anc, text=store.text(anc.path or "", anc.start_byte, anc.end_byte))
        out.append(anc)
        cur = anc
    return out


def hit_context(store: SpanStore, span: Span, score: float = 0.0, zoom: Zoom | None = None) -> HitContext:
    """Everything :func:`~llmc_splitters.retrieval.context.expand.expand` may add around ``span`` (``zoom``: its parts,
    see :func:`zoom_for`)."""
    scopes: list[Scope] = []
    for anc in ancestors(store, span):
        if anc.parent_id is None:  # the file itself
            continue
        header = None
        he = anc.metadata.get("header_end_byte")
        if isinstance(he, int) and anc.start_byte < he <= anc.end_byte:
            head = anc.text.encode("utf-8", "surrogatepass")[: he - anc.start_byte].decode("utf-8", "surrogatepass")
            header = Snippet(anc.path, anc.start_byte, he, anc.start_line,
                             anc.start_line + head.rstrip("\n").count("\n"), head, anc.id)
        scopes.append(Scope(snippet(anc), anc.kind, header, anc.metadata.get("skeleton")))
    used = list(span.metadata.get("uses") or [])
    hit = snippet(span)
    if span.kind == "comment" and span.path is not None:
        # A doc comment the chunker had to leave on its own documents the definition right after it: a hit on the
        # comment is a hit on both.
        nxt = store.leaf_starting_at(span.path, span.end_byte)
        if nxt is not None and nxt.kind not in ("comment", "imports", "block"):
            hit = Snippet(span.path, span.start_byte, nxt.end_byte, span.start_line, nxt.end_line,
                          span.text + nxt.text, span.id)
            used.extend(nxt.metadata.get("uses") or [])
    names = set(span.metadata.get("used_names") or ())
    imports = binding_lines(span.path, store.bindings(span.path), used, names) if used and span.path else []
    inner = [s for s in span.metadata.get("symbols") or () if s.get("name") != span.name]
    return HitContext(hit, score, tuple(scopes), tuple(imports), zoom=zoom, container=len(inner) >= 2,
                      neighbours=notebook_neighbours(store, span))


def notebook_neighbours(store: SpanStore, span: Span) -> tuple[Snippet, ...]:
    """The cells next to a notebook hit that belong with it, as a method's class belongs with the method: for a
    code cell, the markdown cell right above it (the text that explains it); for a markdown cell (or its last
    part), the code cell right after it (the code it introduces: "here is the equivalent using pivot_table").
    Of a neighbour split into several spans, the part next to the hit. Empty cells are skipped; anything else
    (a raw cell, two code cells in a row, a span that is not a cell's) has none."""
    kind = span.metadata.get("cell_type")
    if kind not in ("code", "markdown") or span.path is None or split_cell_path(span.path) is None:
        return ()
    file = store.file_of(span.path)
    numbered = {c: at[1] for c in (store.documents(file) if file is not None else ()) if (at := split_cell_path(c))}
    cells = sorted(numbered, key=numbered.__getitem__)
    if span.path not in cells:
        return ()
    i = cells.index(span.path)
    if kind == "code":
        above = [s for s in store.spans(cells[i - 1]) if s.text.strip()] if i > 0 else []
        if above and above[-1].metadata.get("cell_type") == "markdown":
            return (snippet(above[-1]),)
        return ()
    if i + 1 == len(cells) or any(s.text.strip() and s.start_byte >= span.end_byte for s in store.spans(span.path)):
        return ()  # a part of a markdown cell that does not end it introduces nothing below the cell
    below = [s for s in store.spans(cells[i + 1]) if s.text.strip()]
    if below and below[0].metadata.get("cell_type") == "code":
        return (snippet(below[0]),)
    return ()


def binding_lines(path: str | None, bindings: Sequence[dict[str, Any]], used: Iterable[int],
                  names: set[str] | None = None) -> list[Snippet]:
    """The used bindings a hit needs, each statement once and in a form that parses: whole when it has at most
    :data:`_WHOLE_LINES` lines, and a type (a TypeScript ``type`` or ``interface``, a Python ``type`` alias) always
    whole, since its lines are what the name means; else an excerpt (:attr:`Snippet.lines`): its first line, the
    lines that name what the hit uses (``names``) and its closing line. Used statements that only blank lines
    separate are joined into one slice, under one marker."""
    out: list[Snippet] = []
    for i in sorted(set(used)):
        if not 0 <= i < len(bindings):
            continue
        b = bindings[i]
        lines = b["text"].splitlines(keepends=True)
        keep = None
        if len(lines) > _WHOLE_LINES and b.get("kind") != "type":
            wanted = {n for n in (names or ()) if n in set(b.get("names") or ())}
            keep = tuple(k for k, line in enumerate(lines)
                         if k in (0, len(lines) - 1) or wanted and _names_in(line) & wanted)
        out.append(Snippet(path, b["start"], b["end"], b["start_line"], b["end_line"], b["text"], lines=keep))
    return _joined(out)


def _joined(snippets: list[Snippet]) -> list[Snippet]:
    """``snippets`` (whole bindings and excerpts) in file order, with whole ones that touch, or that only blank lines
    (at most :data:`_GAP_LINES`) separate, joined into one slice. A binding the hit does not use is never shown for
    the sake of one marker less."""
    out: list[Snippet] = []
    for s in sorted(set(snippets), key=lambda s: (s.start_byte, -s.end_byte)):
        prev = out[-1] if out else None
        if prev is None or prev.lines is not None or s.lines is not None:
            out.append(s)
            continue
        gap = s.start_line - prev.end_line - 1
        if s.start_byte > prev.end_byte:
            # Only blank lines between them: as many bytes as lines ("\n" each), nothing else.
            if not 0 < gap <= _GAP_LINES or s.start_byte - prev.end_byte != gap:
                out.append(s)
                continue
            prev = Snippet(prev.path, prev.start_byte, s.start_byte, prev.start_line, s.start_line - 1,
                           prev.text + "\n" * gap)
        if s.end_byte > prev.end_byte:
            tail = s.text.encode("utf-8", "surrogatepass")[prev.end_byte - s.start_byte:]
            prev = Snippet(prev.path, prev.start_byte, s.end_byte, prev.start_line, s.end_line,
                           prev.text + tail.decode("utf-8", "surrogatepass"))
        out[-1] = prev
    return out


# A used binding of at most this many lines is shown whole; a longer one by its head, the lines naming what a hit
# uses and its closing line.
_WHOLE_LINES = 8
# Two used bindings that at most this many blank lines separate are shown as one slice.
_GAP_LINES = 2


def _names_in(line: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_$][A-Za-z0-9_$]*", line))


# --------------------------------------------------------------------------------------------------------- zoom


def zoom_for(store: SpanStore, chunker: Any, span: Span, rank: Callable[[Sequence[str]], list[int]]
             ) -> Zoom | None:
    """The zoom of a hit: its syntax-aligned parts (the chunker's own split of it at a smaller budget), ranked by
    ``rank`` (indices of the texts, best first), each with the header chain, bindings and skeleton it needs.

    Derived at query time from the stored text and offsets (the chunker re-run over the hit, or over its document
    when the hit does not start a top-level statement), only when a hit does not fit: nothing is indexed for it.
    """
    from ...chunking.chunker import ASTChunker

    if not isinstance(chunker, ASTChunker) or span.path is None or span.token_count < 2:
        return None
    path = span.path

    def split(budget: int) -> tuple[Any, tuple[int, int, int], list[Span]]:
        """The chunker's split of the hit at ``budget`` tokens: its tree, the offset of what was chunked, and
        the non-blank leaves inside the hit, each widened to whole lines (a marker names whole lines)."""
        sub = ASTChunker(max_tokens=budget, tokenizer=chunker.tokenizer, analyze=True)
        if not span.text.startswith((" ", "\t")):  # a top-level statement: chunked alone
            text = span.text
            base = (span.start_byte, span.start_char, span.start_line - 1)
        else:
            last = store.last_line(path)
            text = store.text(path, 0, last[1]) if last is not None else ""
            base = (0, 0, 0)
        tree = sub.chunk_tree(text, language=span.language, path=path)
        inside = [_whole_lines(leaf, text) for leaf in tree.leaves if leaf.text.strip()
                  and span.start_byte <= leaf.start_byte + base[0] and leaf.end_byte + base[0] <= span.end_byte]
        return tree, base, inside

    memo: dict[int, list[Part]] = {}
    inner = [s for s in span.metadata.get("symbols") or () if s.get("name") != span.name]
    want = max(2, len(inner))

    def parts(room: int) -> list[Part]:
        got = memo.get(room)
        if got is None:
            got = memo[room] = _parts(room)
        return got

    def _parts(room: int) -> list[Part]:
        # The biggest budget under the room that splits the hit in two or more parts (a class that fit one leaf:
        # in as many parts as it has definitions, so that a method is a part).
        budget = max(8, min(room - 8, span.token_count - 1))
        tree, base, inside = split(budget)
        while len(inside) < want and budget > 16:
            budget = max(16, budget * 2 // 3)
            tree, base, inside = split(budget)
        if len(inside) <= 1:
            return []
        bindings = store.bindings(path)
        by_name: dict[str, int] = {}
        for i, b in enumerate(bindings):
            for n in b.get("names") or ():
                by_name.setdefault(n, i)
        out = []
        for i in rank([leaf.text for leaf in inside]):
            leaf = inside[i]
            headers, skeleton = [], None
            for anc in tree.ancestors(leaf):
                a = _shift(anc, base)
                if a.start_byte < span.start_byte or a.end_byte > span.end_byte:
                    break
                he = anc.metadata.get("header_end_byte")
                if isinstance(he, int) and anc.start_byte < he <= anc.end_byte:
                    head = anc.text.encode("utf-8", "surrogatepass")[: he - anc.start_byte].decode("utf-8", "surrogatepass")
                    headers.append(Snippet(path, a.start_byte, he + base[0], a.start_line,
                                           a.start_line + head.rstrip("\n").count("\n"), head, a.id))
                if skeleton is None and anc.metadata.get("skeleton"):
                    skeleton = Scope(snippet(a), a.kind, headers[-1] if headers else None, anc.metadata["skeleton"])
            ids = set(leaf.metadata.get("identifiers") or ())
            used = {by_name[n] for n in ids if n in by_name}
            used = {u for u in used if not span.start_byte <= bindings[u]["start"] < span.end_byte}
            names = {n for n in ids if by_name.get(n) in used}
            out.append(Part(snippet(_shift(leaf, base)), tuple(headers), tuple(binding_lines(path, bindings, used,
                                                                                             names)), skeleton))
        return out

    return parts


def _whole_lines(span: Span, text: str) -> Span:
    """A span of ``text`` widened to the whole lines it touches."""
    sc = text.rfind("\n", 0, span.start_char) + 1
    nl = text.find("\n", max(span.start_char, span.end_char - 1))
    ec = len(text) if nl < 0 else nl + 1
    if (sc, ec) == (span.start_char, span.end_char):
        return span
    head = text[sc : span.start_char].encode("utf-8", "surrogatepass")
    tail = text[span.end_char : ec].encode("utf-8", "surrogatepass")
    return dataclasses.replace(span, text=text[sc:ec], start_char=sc, end_char=ec,
                               start_byte=span.start_byte - len(head), end_byte=span.end_byte + len(tail))


def _shift(span: Span, base: tuple[int, int, int]) -> Span:
    """A span of a re-chunked slice, moved to where the slice sits in its document."""
    db, dc, dl = base
    if not (db or dc or dl):
        return span
    return dataclasses.replace(span, start_byte=span.start_byte + db, end_byte=span.end_byte + db,
                               start_char=span.start_char + dc, end_char=span.end_char + dc,
                               start_line=span.start_line + dl, end_line=span.end_line + dl)


def get_lines(store: SpanStore, path: str, start_line: int, end_line: int | None = None) -> Snippet:
    """The exact text of lines ``start_line..end_line`` (1-based, inclusive) of an indexed file.

    Raises:
        ConfigurationError: The file is not indexed or the range is outside it.
    """
    if store.last_line(path) is None:
        cells = store.documents(path) if store.marker(path) is not None else []
        if cells:
            listed = ", ".join(cells[:3]) + ("..." if len(cells) > 3 else "")
            msg = f"{path!r} is a notebook: its cells are indexed one by one ({listed}); ask for the lines of a cell"
            raise ConfigurationError(msg)
        if store.marker(path) is not None:
            msg = f"{path!r} is indexed but empty: it has no lines"
            raise ConfigurationError(msg)
        known = store.paths()
        listed = ", ".join(known[:5]) + ("..." if len(known) > 5 else "")
        msg = f"{path!r} is not indexed; indexed files: {listed or '(none)'}"
        raise ConfigurationError(msg)
    end_line = start_line if end_line is None else end_line
    last = store.last_line(path)
    n_lines = last[0] if last is not None else 1
    if not (1 <= start_line <= end_line <= max(n_lines, 1)):
        msg = f"lines {start_line}-{end_line} are outside {path!r} (1-{n_lines})"
        raise ConfigurationError(msg)
    # The leaves that overlap the lines, the first of them holding the start of `start_line` (a leaf that starts
    # inside a line is preceded by one whose last line is that line, which overlaps too).
    leaves = store.leaves_in_lines(path, start_line, end_line)
    if not leaves:
        return Snippet(path, 0, 0, start_line, end_line, "")
    data = "".join(s.text for s in leaves).encode("utf-8", "surrogatepass")
    base, line, pos = leaves[0].start_byte, leaves[0].start_line, 0
    while line < start_line:
        pos = data.index(b"\n", pos) + 1
        line += 1
    s = pos
    while line <= end_line and pos < len(data):
        nl = data.find(b"\n", pos)
        pos = len(data) if nl < 0 else nl + 1
        line += 1
    return Snippet(path, base + s, base + pos, start_line, end_line, data[s:pos].decode("utf-8", "surrogatepass"))


def get_symbol(store: SpanStore, name: str, path: str | None = None) -> list[Snippet]:
    """Exact slices for a qualified symbol (``Client.send``), with no search.

    A span (leaf or split parent) named ``name`` is returned whole. A method inside a class that fit in one leaf is
    cut from that leaf by the line range the chunker recorded in ``metadata["symbols"]``. If nothing has that exact
    name, spans whose name ends with ``.name`` are tried.
    """

    def whole(rows: Iterable[object]) -> list[Snippet]:
        rows = list(rows)
        # A split definition is a parent plus part-leaves carrying its name: the parent is the whole thing.
        parents = {r.span.name for r in rows if r.role == "parent" and r.span.parent_id is not None}  # type: ignore[attr-defined]
        keep = [r for r in rows if r.role == "parent" or r.span.name not in parents]  # type: ignore[attr-defined]
        return [snippet(r.span) for r in keep if r.span.parent_id is not None or r.role == "leaf"]  # type: ignore[attr-defined]

    def inside_leaves(match: Callable[[str], bool], leaves: Iterable[Span]) -> list[Snippet]:
        got = []
        for leaf in leaves:
            for sym in leaf.metadata.get("symbols") or ():
                if match(str(sym.get("name", ""))) and "start_line" in sym and "end_line" in sym:
                    got.append(get_lines(store, leaf.path or "", int(sym["start_line"]), int(sym["end_line"])))
        return got

    out = whole(store.by_name(name, path))
    if not out:
        out = inside_leaves(lambda n: n == name, store.with_symbol(name, path))
    if not out:
        # A bare or partly qualified name (``run`` for ``Job.run``): a span of that name, or a definition inside
        # a leaf (a method of a class that fit in one leaf is not a span of its own).
        tail = name.rsplit(".", 1)[-1]
        out = whole(r for r in store.by_name(tail, path, tail=True) if (r.span.name or "").endswith("." + name))
        out += inside_leaves(lambda n: n.endswith("." + name), store.with_symbol(name, path, suffix=True))
    out = sorted(set(out), key=lambda s: (s.path or "", s.start_byte, -s.end_byte))
    # A definition found both as a span and in a leaf's symbols (its lines without its comment) is listed once.
    return [s for k, s in enumerate(out) if not any(o.path == s.path and o.start_byte <= s.start_byte and
                                                    s.end_byte <= o.end_byte for o in out[:k])]
