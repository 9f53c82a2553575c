"""Token counts of byte ranges of one file, and whether a range fits the budget.

A node whose UTF-8 size is at most the budget fits for sure with tiktoken (a token is at least one byte); other sizes
are counted exactly, and every count is memoized per byte range, so a definition that fits is encoded exactly once
and the encoded volume stays linear in the file size.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from .tokens import TiktokenTokenizer, Tokenizer

_LINE_HAS_CODE = re.compile(rb"[ \t\f\v]*[^\s]")
# A node this many times larger than the budget (in bytes) is over budget without counting (tiktoken only).
_SURELY_OVER_BYTES_PER_TOKEN = 24


class RangeCounter:
    """Exact, memoized token counts of the byte ranges of one file (not shared between threads)."""

    def __init__(self, source: bytes, budget: int, tokenizer: Tokenizer) -> None:
        self.source = source  # what tokens are counted on
        self.budget = budget
        self.tok = tokenizer
        self.byte_bound = isinstance(tokenizer, TiktokenTokenizer)
        self._additive = bool(getattr(tokenizer, "line_additive", False))
        self._ends: Any = None
        self._counts: dict[tuple[int, int], int] = {}
        # Running density of what was counted so far, seeded with a typical value for code (~3.3 bytes/token).
        self._seen_tokens = 3
        self._seen_bytes = 10

    def source_text(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "surrogatepass")

    def count(self, start: int, end: int) -> int:
        """Exact token count of ``[start, end)`` (memoized; feeds the running tokens-per-byte ratio)."""
        key = (start, end)
        n = self._counts.get(key)
        if n is None:
            n = self._from_whole(start, end)
            if n is None:
                n = self.tok.count(self.source_text(start, end))
            self._counts[key] = n
            self._seen_tokens += n
            self._seen_bytes += end - start
        return n

    def _clean(self, pos: int) -> bool:
        src = self.source
        return pos == 0 or pos == len(src) or (src[pos - 1] == 10 and src[pos] not in (10, 13))

    def _from_whole(self, start: int, end: int) -> int | None:
        """The count of a slice, mostly read off one encoding of the whole file.

        With cl100k the tokens of a slice between clean line starts are exactly the whole file's tokens inside it
        (see :data:`llmc_splitters.chunking.tokens._CL100K_PATTERN`), so the file is encoded once and such slices cost
        nothing. A slice that starts or ends inside a line is split at its first and last line starts that
        separate tokens in any text holding them (:meth:`_separator`): only the partial lines are encoded.
        """
        if not self._additive:
            return None
        a = start if self._clean(start) else self._separator(start, end, forward=True)
        b = end if self._clean(end) else self._separator(a, end, forward=False) if a is not None else None
        if a is None or b is None or b < a:
            return None
        ends = self._ends
        if ends is None:
            ends = self._ends = self.tok.token_ends(self.source_text(0, len(self.source)))  # type: ignore[attr-defined]
            if ends is None:
                self._additive = False
                return None
        i = bisect.bisect_right(ends, a)
        j = bisect.bisect_right(ends, b)
        if (a and ends[i - 1] != a) or (b and ends[j - 1] != b):
            return None  # not a token boundary after all: count the slice itself
        n = j - i
        if a > start:
            n += self.tok.count(self.source_text(start, a))
        if end > b:
            n += self.tok.count(self.source_text(b, end))
        return n

    def _separator(self, lo: int, hi: int, *, forward: bool) -> int | None:
        """The first (or last) line start in ``(lo, hi)`` after which the line holds a non-blank character before
        ``hi``. Such a line start ends every pre-token of cl100k in any text that holds the line break before it
        and that character (a run of whitespace pre-tokenizes up to its last line break), so a slice's tokens
        add up across it."""
        src = self.source
        pos = src.find(b"\n", lo, hi) if forward else src.rfind(b"\n", lo, hi)
        while pos >= 0:
            c = pos + 1
            if c < hi and _LINE_HAS_CODE.match(src, c, hi):
                return c
            pos = src.find(b"\n", c, hi) if forward else src.rfind(b"\n", lo, pos)
        return None

    def estimate(self, start: int, end: int) -> int:
        """Exact count when known, else bytes times this file's running tokens-per-byte ratio (no encoding)."""
        n = self._counts.get((start, end))
        if n is not None:
            return n
        return int((end - start) * self._seen_tokens / self._seen_bytes) + 1

    def fits(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` fits the budget; counts exactly only near the budget."""
        size = end - start
        if self.byte_bound:
            if size <= self.budget:
                return True  # a tiktoken token is at least one byte
            if size > self.budget * _SURELY_OVER_BYTES_PER_TOKEN:
                return False
        if (start, end) not in self._counts and size * self._seen_tokens > 3 * self.budget * self._seen_bytes:
            # Three times over budget at this file's average density: over, without encoding it.
            return False
        return self.count(start, end) <= self.budget
