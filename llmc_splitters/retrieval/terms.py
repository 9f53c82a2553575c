"""Code-aware lexical search: identifier-splitting terms and BM25 (via the ``bm25s`` package, loaded lazily).

Code mixes identifiers (``maxRetries``, ``max_retries``, ``HTTPServer``) with prose. :func:`code_terms` keeps each
identifier whole *and* adds its parts, all lowercased, so the query ``retries`` finds ``max_retries``, the query
``max_retries`` prefers the exact identifier, and ``HTTPServer`` matches ``http server``. A light plural folding
(``retries`` -> ``retry``) is applied to the parts so ``retry`` and ``retries`` meet.

Example:
    >>> code_terms("def getHTTPResponse(max_retries):")
    ['def', 'gethttpresponse', 'get', 'http', 'response', 'max_retries', 'max', 'retry']
"""

from __future__ import annotations

import functools
import re
from itertools import chain
from collections.abc import Iterable, Sequence

from ..errors import missing_dependency

__all__ = ["code_terms", "split_identifier", "BM25Index"]

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*|[0-9]+(?:\.[0-9]+)?")
# camelCase / PascalCase / acronym boundaries: "getHTTPResponse2x" -> get, HTTP, Response2x
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")

# English function words that carry no signal in a code search ("how are retries configured").
_STOPWORDS = frozenset(
    "a an and are as at be by do does for from how i in is it of on or that the this to what when where which who "
    "why with".split()
)


def _fold(term: str) -> str:
    """Light plural folding: retries -> retry, classes -> class, tokens -> token (not 'class', 'status', 'is')."""
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 4 and term.endswith(("sses", "shes", "ches", "xes")):
        return term[:-2]
    if len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


def split_identifier(identifier: str) -> list[str]:
    """Split an identifier on ``_``/``$``, digits-to-letters and camelCase boundaries; parts lowercased.

    >>> split_identifier("parseHTTPHeader_v2")
    ['parse', 'http', 'header', 'v2']
    """
    parts: list[str] = []
    for chunk in re.split(r"[_$]+", identifier):
        parts.extend(m.group(0).lower() for m in _CAMEL.finditer(chunk))
    return [p for p in parts if p]


def code_terms(text: str, *, stopwords: Iterable[str] = _STOPWORDS) -> list[str]:
    """Terms of ``text`` for BM25: each identifier lowercased whole, then its parts (plural-folded) if it has several.

    English function words and single-character *parts* of a longer identifier are dropped; a single-letter
    identifier (``g``, ``x``) and numbers are kept, so a query for the name ``g`` finds it.

    Args:
        text: Code, a query, or prose.
        stopwords: Lowercased words to drop.

    Returns:
        Terms in order of appearance (repeats kept: BM25 counts them).
    """
    if stopwords is _STOPWORDS:  # the index's path: every word's terms cached
        return list(chain.from_iterable(map(_word_terms, _IDENT.findall(text))))
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
    terms = functools.partial(_word_terms_uncached, stop=stop)
    return list(chain.from_iterable(map(terms, _IDENT.findall(text))))


def _word_terms_uncached(word: str, stop: frozenset[str] = _STOPWORDS) -> tuple[str, ...]:
    """The terms of one identifier or number (see :func:`code_terms`)."""
    whole = word.lower().strip("_$")
    if not whole or whole in stop:
        return ()
    parts = split_identifier(word)
    if len(parts) <= 1:
        term = _fold(whole) if whole.isalpha() else whole
        return (term,) if term else ()
    return (whole, *(_fold(p) for p in parts if len(p) > 1 and p not in stop))


# Identifiers repeat across code (``self``, ``return``, a module's own names): each word is split once per process.
_word_terms = functools.lru_cache(maxsize=1 << 17)(_word_terms_uncached)


class BM25Index:
    """A BM25 index over a fixed list of documents (rebuilt, not updated, when the corpus changes).

    Args:
        documents: The texts to index; results refer to them by position.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.

    Raises:
        MissingDependencyError: ``bm25s`` is not installed (``pip install 'llmc-splitters[bm25]'``).

    Example:
        >>> idx = BM25Index(["def send(self): ...", "def receive(self): ..."])
        >>> idx.search("send", k=1)[0][0]
        0
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        try:
            import bm25s
        except ImportError as exc:
            raise missing_dependency("bm25s", "bm25") from exc
        self.size = len(documents)
        self._model = None
        if self.size:
            model = bm25s.BM25(k1=k1, b=b)
            model.index([code_terms(d) for d in documents], show_progress=False)
            self._model = model

    def scores(self, query: str) -> list[float]:
        """BM25 score of every document (0.0 where no query term occurs)."""
        if self._model is None:
            return []
        terms = code_terms(query)
        if not terms:
            return [0.0] * self.size
        return [float(x) for x in self._model.get_scores(terms)]

    def search(self, query: str, k: int = 10, allowed: Iterable[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` best documents with a positive score, as ``(position, score)``, best first.

        Args:
            query: Free text or identifiers.
            k: How many results at most.
            allowed: Restrict the search to these positions (multi-stage retrieval).
        """
        scores = self.scores(query)
        if not scores:
            return []
        candidates = range(self.size) if allowed is None else sorted(set(allowed))
        ranked = sorted(((i, scores[i]) for i in candidates if scores[i] > 0.0), key=lambda t: (-t[1], t[0]))
        return ranked[:k]
