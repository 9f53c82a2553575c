"""Grammar loading: tree-sitter languages, parsers (one per thread) and compiled queries, all cached.

Grammars come from tree-sitter-language-pack 0.13.x, which bundles them in its wheel (1.x downloads at run time).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import MissingDependencyError

_local = threading.local()
_lock = threading.Lock()


def _pack() -> Any:
    try:
        import tree_sitter_language_pack
    except ImportError as exc:  # pragma: no cover - a core dependency
        msg = "tree-sitter-language-pack is not installed; install it with: pip install 'tree-sitter-language-pack>=0.13,<1'"
        raise MissingDependencyError(msg) from exc
    return tree_sitter_language_pack


@lru_cache(maxsize=None)
def load_language(grammar: str) -> Any:
    """The ``tree_sitter.Language`` of a grammar name (cached)."""
    with _lock:
        return _pack().get_language(grammar)


@lru_cache(maxsize=None)
def has_grammar(grammar: str) -> bool:
    """Whether the bundled language pack has this grammar."""
    try:
        load_language(grammar)
    except Exception:  # noqa: BLE001 - the pack raises LookupError/KeyError/ValueError depending on version
        return False
    return True


def get_parser(grammar: str) -> Any:
    """A parser for ``grammar`` owned by the calling thread (tree-sitter parsers are not thread-safe)."""
    parsers: dict[str, Any] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(grammar)
    if parser is None:
        import tree_sitter

        parser = tree_sitter.Parser(load_language(grammar))
        parsers[grammar] = parser
    return parser


@lru_cache(maxsize=None)
def load_query(grammar: str, stem: str) -> Any:
    """The compiled query ``queries/<stem>.scm`` for ``grammar`` (queries are immutable and shareable)."""
    import tree_sitter

    source = resources.files(__package__).joinpath("queries", f"{stem}.scm").read_text(encoding="utf-8")
    return tree_sitter.Query(load_language(grammar), source)
