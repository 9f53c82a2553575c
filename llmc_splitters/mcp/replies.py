"""Replies that fit a token budget: a search listing with its context, and exact slices cut at a line.

Pure functions over a retriever's results and its tokenizer: every reply is counted whole (its text and its data as
compact JSON, what the transport sends) before it is returned, never estimated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import RequestError

__all__ = ["Reply", "compact_json", "fit_search", "slices_reply"]

MAX_LIST = 50  # paths or matches listed in a reply; the counts are always complete
MAX_FILES = 10  # ranked files listed beside the hits of a search reply


@dataclass(frozen=True)
class Reply:
    """One tool's answer: ``text`` for the agent to read, ``data`` for a program (both within budget)."""

    text: str
    data: dict[str, Any]


def compact_json(data: Any) -> str:
    """The JSON form a reply's data is counted in (what the transport sends: no spaces)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def fit_search(retriever: Any, hits: Sequence[Any], contexts: Sequence[Any], confidence: float, budget: int,
               notes: list[str], *, clamped: bool, fill: bool = False, files: Sequence[Any] = (),
               words_in_index: bool = True, dense: bool = False) -> Reply:
    """The search reply with the largest context that keeps text + data within ``budget`` (counted, not estimated).

    ``words_in_index=False`` (no word of the query occurs in the index) is said on the reply's first line: no
    hits, and for a ``dense`` index how to ask for matches by meaning alone; or that the hits are such matches.

    ``fill``: ``hits`` are candidates, taken while they fit (the core's fill, see
    :func:`~llmc_splitters.retrieval.context.expand.expand`); only hits up to the last one taken are listed. The reply lists
    the ranked ``files`` too (one line each): up to :data:`MAX_FILES`, fewer as fewer hits fit (two per hit listed
    beyond the first; none beside a lone hit).
    """
    from ..retrieval.context.expand import expand

    counted: dict[str, int] = {}

    def count(text: str) -> int:
        """The tokenizer's count, once per text across the expansions tried here (they share most pieces)."""
        n = counted.get(text)
        if n is None:
            n = counted[text] = retriever.tokenizer.count(text)
        return n

    def render(exp: Any, listed: int, *, shown_all: bool = False) -> tuple[Reply, int]:
        shown = [shown_all or (exp is not None and (i, "hit") not in exp.dropped) for i in range(listed)]
        reply = _search_reply(hits[:listed], shown, exp, confidence, budget, notes, clamped,
                              files[:min(MAX_FILES, 2 * (listed - 1))], words_in_index, dense)
        return reply, count(reply.text) + count(compact_json(reply.data))

    if not hits:
        reply, total = render(None, 0)
        if total > budget:
            raise RequestError(f"max_tokens {budget} is too small for any reply; use at least {total + 50}")
        return reply
    top = len(hits)
    while fill:
        # Listing fewer candidates leaves more room, which may take more of those still listed: stop when the
        # hits taken reach the end of the list.
        _bare, overhead = render(None, top, shown_all=True)
        exp = expand(contexts[:top], max(budget - overhead, 1), count, cut=retriever.tokenizer.cut,
                     marker=retriever.marker, fill=True)
        taken = [i for i in range(top) if (i, "hit") not in exp.dropped]
        last = taken[-1] + 1 if taken else 1
        if last >= top:
            break
        top = last
    # List as many hits as leave room for the best one's context; list fewer when the budget is tight.
    fallback: Reply | None = None
    for listed in range(top, 0, -1):
        _bare, overhead = render(None, listed, shown_all=True)
        room = budget - overhead
        for _ in range(4):
            if room <= 0:
                break
            exp = expand(contexts[:listed], room, count, cut=retriever.tokenizer.cut, marker=retriever.marker,
                         fill=fill)
            reply, total = render(exp, listed)
            if total <= budget:
                taken = [i for i in range(listed) if (i, "hit") not in exp.dropped]
                if fill and taken and taken[-1] + 1 < listed:
                    # The room given back for the overshoot left the last candidates out: list up to the last
                    # hit taken (the same context, a shorter list).
                    reply, total = render(exp, taken[-1] + 1)
                if (0, "hit") not in exp.dropped:
                    return reply
                fallback = fallback or reply
                break
            # Token counts of joined texts are not additive: take the overshoot off and try again.
            room -= total - budget + 8
    if fallback is not None:
        return fallback
    _bare, overhead = render(None, 1, shown_all=True)
    msg = f"max_tokens {budget} is too small for a reply with even one hit; use at least {overhead + 100}"
    raise RequestError(msg)


def slices_reply(retriever: Any, snippets: Sequence[Any], notes: list[str], head: dict[str, Any], budget: int) -> Reply:
    """Snippets under markers: whole while they fit; the first that does not is cut at a line (or, a single
    line longer than the budget, at a token) and the reply says how to go on; the rest are listed, not shown."""
    from ..retrieval.context.expand import render_marker

    tok = retriever.tokenizer
    parts: list[str] = []
    entries: list[dict[str, Any]] = []
    out_notes = list(notes)
    snippets = list(snippets)
    if len(snippets) > MAX_LIST:
        out_notes.append(f"{len(snippets)} matches; the first {MAX_LIST} are listed: give path to narrow")
        snippets = snippets[:MAX_LIST]

    def reply() -> Reply:
        data = {**head, "slices": entries, "notes": out_notes, "max_tokens": budget}
        return Reply("\n".join([*(f"note: {n}" for n in out_notes), *parts]), data)

    def total() -> int:
        r = reply()
        return int(tok.count(r.text)) + int(tok.count(compact_json(r.data)))

    def marker(sn: Any, end: int, note: str = "") -> str:
        return render_marker(retriever.marker, sn.path, sn.start_line, end, note)

    for i, sn in enumerate(snippets):
        entry = {"path": sn.path, "start_line": sn.start_line, "end_line": sn.end_line, "shown_to": sn.end_line}
        entries.append(entry)
        parts.append(f"{marker(sn, sn.end_line)}\n{sn.text}")
        if total() <= budget:
            continue
        parts.pop()
        rest = snippets[i + 1 :]
        entries.extend({"path": x.path, "start_line": x.start_line, "end_line": x.end_line, "shown_to": None}
                       for x in rest)
        if rest:
            out_notes.append(f"{len(rest)} more matches are listed in slices without their text; read them "
                             "with get_lines")
        lines = sn.text.splitlines(keepends=True)

        def show(sn: Any, entry: dict[str, Any], lines: list[str], n: int) -> None:
            entry["shown_to"] = sn.start_line + n - 1
            parts.append(f"{marker(sn, entry['shown_to'])}\n" + "".join(lines[:n]))
            out_notes.append(_cut_note(sn, entry["shown_to"]))

        lo, hi = 0, len(lines) - 1  # the most whole lines that fit, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            show(sn, entry, lines, mid)
            fits = total() <= budget
            parts.pop()
            out_notes.pop()
            lo, hi = (mid, hi) if fits else (lo, mid - 1)
        if lo:
            show(sn, entry, lines, lo)
        elif not parts:
            # Not even the first line fits (a minified file): its head, cut at a token.
            entry["shown_to"] = sn.start_line
            note = (f"line {sn.start_line} of {sn.path} is longer than the reply budget; only its start is "
                    "shown")
            out_notes.append(note)
            parts.append(f"{marker(sn, sn.start_line, 'truncated')}\n")
            room = budget - total() - 8
            line = lines[0] if lines else ""
            parts[-1] += line[: tok.cut(line, room)] if room > 0 else ""
        else:
            entry["shown_to"] = None
            out_notes.append(f"{sn.path}:{sn.start_line}-{sn.end_line} did not fit; read it with "
                             f"get_lines({sn.path!r}, {sn.start_line}, {sn.end_line})")
        break
    # Last resort (a tiny budget): give up unshown listings, then notes; the text shown stays exact.
    while total() > budget and len(entries) > 1 and entries[-1]["shown_to"] is None:
        entries.pop()
    while total() > budget and out_notes:
        out_notes.pop()
    return reply()


def _search_reply(hits: Sequence[Any], shown: list[bool], exp: Any, confidence: float, budget: int,
                  notes: list[str], clamped: bool, files: Sequence[Any] = (), words_in_index: bool = True,
                  dense: bool = False) -> Reply:
    rows = []
    lines = []
    for i, (h, vis) in enumerate(zip(hits, shown)):
        s = h.span
        rows.append({"path": s.path, "start_line": s.start_line, "end_line": s.end_line, "symbol": s.name,
                     "kind": s.kind, "language": s.language, "score": round(float(h.score), 4), "in_context": vis})
        ranks = ", ".join(f"{name.replace('_', ' ')} #{r}" for name, r in h.ranks.items())
        lines.append(f"{i + 1}. {s.path}:{s.start_line}-{s.end_line} {s.name or '-'} ({s.kind}) {ranks}"
                     + ("" if vis else " [not in the context: over budget]"))
    context = exp.context if exp is not None else ""
    ctx_tokens = exp.token_count if exp is not None else 0
    head = f"confidence {confidence:.2f}; {len(hits)} hits; context {ctx_tokens} tokens; reply within {budget} tokens"
    if not hits:
        head = f"no hits: nothing in the index matches these words (confidence {confidence:.2f})"
    if not words_in_index:
        meaning = "dense_fallback=true returns the nearest code by meaning alone" if dense else \
            "the index is lexical: it matches words only"
        head = f"no hits: no word of the query occurs in the index ({meaning})" if not hits else \
            f"no word of the query occurs in the index: these hits match by meaning alone\n{head}"
    if files:
        lines.append("files, best first:")
        lines.extend(f"  {f.path}:{f.start_line}-{f.end_line} {f.symbol or '-'}" for f in files)
    text = "\n".join([head, *lines, *(f"note: {n}" for n in notes)]) + ("\n\n" + context if context else "")
    data = {"confidence": round(float(confidence), 4), "hits": rows,
            "files": [{"path": f.path, "start_line": f.start_line, "end_line": f.end_line, "symbol": f.symbol}
                      for f in files],
            "context_tokens": ctx_tokens, "words_in_index": words_in_index,
            "max_tokens": budget, "clamped": clamped, "notes": list(notes)}
    return Reply(text, data)


def _cut_note(sn: Any, shown_to: int) -> str:
    return (f"{sn.path}:{sn.start_line}-{sn.end_line} was cut at line {shown_to} to fit the reply budget; "
            f"continue with get_lines({sn.path!r}, {shown_to + 1}, {sn.end_line})")
