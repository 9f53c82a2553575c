"""Last-resort splitting of a text that has no usable structure, losslessly and within a token budget.

Used for unparsable or plain text and for a single syntax node that alone exceeds the budget (a giant string
literal, a minified line). Each level splits at its own separators and packs the pieces greedily; a piece still
over budget goes down one level; the last level cuts by tokens, preferring a whitespace or punctuation boundary.
Separators stay attached to the piece before them, so the pieces always join back to the input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .tokens import Tokenizer

# Split points, most meaningful first. Each regex matches the separator; a piece ends right after it.
PARAGRAPHS = re.compile(r"\n[ \t\r\f\v]*\n+")
LINES = re.compile(r"\n")
SENTENCES = re.compile(r"(?<=[.!?;:])[ \t]+")
WORDS = re.compile(r"[ \t]+")

CODE_LEVELS: tuple[tuple[str, re.Pattern[str]], ...] = (("lines", LINES),)
TEXT_LEVELS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("paragraphs", PARAGRAPHS),
    ("lines", LINES),
    ("sentences", SENTENCES),
    ("words", WORDS),
)
_SOFT_BREAK = frozenset(" \t,;)]}>")


def _pieces(text: str, pattern: re.Pattern[str]) -> list[str]:
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.end() > pos:
            out.append(text[pos : m.end()])
            pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def cut_by_tokens(text: str, budget: int, tokenizer: Tokenizer) -> list[str]:
    """Cut ``text`` into pieces of at most ``budget`` tokens, each as long as possible.

    A cut moves back to the last whitespace or punctuation character in the last quarter of the piece, so words
    and numbers are not split when that can be avoided. A single character over budget becomes its own piece.
    """
    split = getattr(tokenizer, "split", None)
    if split is not None:
        ends = split(text, budget)
        return [text[a:b] for a, b in zip([0, *ends], ends)]
    out: list[str] = []
    rest = text
    while rest:
        i = tokenizer.cut(rest, budget)
        if i < len(rest):
            floor = i - i // 4
            j = i
            while j > floor and rest[j - 1] not in _SOFT_BREAK:
                j -= 1
            if j > floor:
                i = j
        out.append(rest[:i])
        rest = rest[i:]
    return out


def split_text(
    text: str,
    budget: int,
    tokenizer: Tokenizer,
    levels: Sequence[tuple[str, re.Pattern[str]]] = TEXT_LEVELS,
    pack: bool = True,
    total: int | None = None,
) -> list[tuple[str, int, str]]:
    """Split ``text`` into ``(piece, token_count, how)`` triples of at most ``budget`` tokens.

    Args:
        text: Any string.
        budget: Maximum tokens per piece.
        tokenizer: Counts tokens exactly.
        levels: ``(name, separator regex)`` from coarsest to finest; the token cut follows the last level.
        pack: Merge adjacent pieces while they fit (``False`` keeps one piece per separator-delimited segment
            whenever it fits).
        total: ``tokenizer.count(text)`` when the caller already knows it.

    Returns:
        Pieces that join back to ``text``; ``how`` names the level that produced each piece (``"tokens"`` for the
        token cut). A piece is over budget only when it is a single character that alone exceeds it.
    """
    if not text:
        return []
    n = tokenizer.count(text) if total is None else total
    if n <= budget:
        return [(text, n, "whole")]
    if not levels:
        return [(p, tokenizer.count(p), "tokens") for p in cut_by_tokens(text, budget, tokenizer)]
    how, pattern = levels[0]
    segments = _pieces(text, pattern)
    if len(segments) <= 1:
        return split_text(text, budget, tokenizer, levels[1:], pack)
    out: list[tuple[str, int, str]] = []
    group: list[str] = []
    group_tokens = 0

    def flush() -> None:
        nonlocal group, group_tokens
        if not group:
            return
        joined = "".join(group)
        exact = tokenizer.count(joined) if len(group) > 1 else group_tokens
        if exact <= budget:
            out.append((joined, exact, how))
        else:
            # Token counts are not additive across a join; re-split this group one level down the same way.
            out.extend(split_text(joined, budget, tokenizer, levels[1:], pack))
        group, group_tokens = [], 0

    for seg in segments:
        t = tokenizer.count(seg)
        if t > budget:
            flush()
            out.extend(split_text(seg, budget, tokenizer, levels[1:], pack))
            continue
        if group and (not pack or group_tokens + t > budget):
            flush()
        group.append(seg)
        group_tokens += t
    flush()
    return out
