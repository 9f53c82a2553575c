"""Code-aware lexical terms: how code and questions become the terms the lexical index (BM25 on tantivy) matches.

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


__all__ = ["code_terms", "split_identifier"]

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

