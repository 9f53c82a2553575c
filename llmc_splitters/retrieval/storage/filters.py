"""Search filters: a path prefix or glob, a language, a span kind, applied inside the lexical and vector searches.

A filter narrows what each search ranks, so ``k`` hits come back whenever ``k`` matching spans exist (filtering a
top-``n`` list afterwards would return fewer, or none). Each engine gets the filter in its own terms: the lexical
index and Chroma match the directories of a path prefix as terms (every stored record carries its file's ancestor
directories), and a glob or a prefix that is not a directory is first resolved to the matching files by the span
store.

A filter that lets nothing through is not an empty answer to the words: :func:`unmatched` says which part of it
matches no indexed span and what the stored paths (or languages, kinds) look like, and the index warns with that
sentence (:class:`~llmc_splitters.errors.FilterWarning`) when a filtered search finds nothing.

Example:
    >>> SearchFilter.of(path="src/pkg/", language="Python").language
    'python'
    >>> SearchFilter.of(path="src/**/*.py").is_glob
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigurationError

__all__ = ["SearchFilter", "ancestor_dirs", "unmatched"]

_GLOB_CHARS = frozenset("*?[")


def ancestor_dirs(path: str) -> list[str]:
    """Every ancestor directory of a stored (POSIX, relative) path: ``a/b/c.py`` -> ``["a", "a/b"]``."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What a search may return.

    Attributes:
        path: A path prefix (``src/``, ``src/pkg/client.py``) or a glob (``src/**/*.py``, ``*.ts``: ``*`` matches
            any characters, ``/`` included) on the stored file paths.
        language: A language name (``python``, ``typescript``...).
        kind: A span kind (``function``, ``method``, ``class``...).
    """

    path: str | None = None
    language: str | None = None
    kind: str | None = None

    @classmethod
    def of(cls, path: str | None = None, language: str | None = None, kind: str | None = None) -> SearchFilter:
        """A validated filter (``None`` parts do not filter).

        Raises:
            ConfigurationError: A part is not a non-empty string.
        """
        for name, value in (("path", path), ("language", language), ("kind", kind)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                msg = f"{name} filter must be a non-empty string, got {value!r}"
                raise ConfigurationError(msg)
        if path is not None:
            path = path.strip().replace("\\", "/")
            while path.startswith("./"):
                path = path[2:]
            if path.startswith("/") or path.startswith("../") or path == "..":
                msg = f"path filter {path!r} must be relative to the indexed root (stored paths are relative)"
                raise ConfigurationError(msg)
        lang = None
        if language is not None:
            from ...chunking.languages import normalize_language

            lang = normalize_language(language.strip())
        return cls(path or None, lang, kind.strip() if kind else None)

    @classmethod
    def from_mapping(cls, filters: Mapping[str, Any] | None) -> SearchFilter:
        """From a dict with keys ``path``, ``language``, ``kind`` (what the framework faces pass on).

        Raises:
            ConfigurationError: An unknown key.
        """
        if not filters:
            return cls()
        unknown = sorted(set(filters) - {"path", "language", "kind"})
        if unknown:
            msg = f"unknown filter key(s) {unknown}; filters are path (prefix or glob), language and kind"
            raise ConfigurationError(msg)
        return cls.of(filters.get("path"), filters.get("language"), filters.get("kind"))

    @classmethod
    def given(cls, filters: SearchFilter | Mapping[str, Any] | None, path: str | None = None,
              language: str | None = None, kind: str | None = None) -> SearchFilter:
        """The filter a search is given: ``filters`` (a filter or a dict), each of ``path``, ``language`` and
        ``kind`` replacing its part when given."""
        base = filters if isinstance(filters, SearchFilter) else cls.from_mapping(filters)
        if path is None and language is None and kind is None:
            return base
        return cls.of(path or base.path, language or base.language, kind or base.kind)

    @property
    def empty(self) -> bool:
        """Whether this filter lets everything through."""
        return self.path is None and self.language is None and self.kind is None

    @property
    def is_glob(self) -> bool:
        """Whether ``path`` is a glob rather than a prefix."""
        return self.path is not None and any(c in _GLOB_CHARS for c in self.path)

    @property
    def directory(self) -> str | None:
        """The directory a prefix ending with ``/`` names (``src/pkg/`` -> ``src/pkg``), else ``None``."""
        if self.path is None or self.is_glob or not self.path.endswith("/"):
            return None
        return self.path.rstrip("/") or None

    def matches(self, path: str | None, language: str | None, kind: str | None) -> bool:
        """Whether a record passes (the reference semantics every engine implements)."""
        if self.language is not None and language != self.language:
            return False
        if self.kind is not None and kind != self.kind:
            return False
        if self.path is None:
            return True
        if path is None:
            return False
        if self.is_glob:
            from fnmatch import fnmatchcase

            return fnmatchcase(path, self.path)
        return path.startswith(self.path)

    def describe(self) -> str:
        """``path=src/ language=python`` (for messages)."""
        return " ".join(f"{k}={v}" for k, v in (("path", self.path), ("language", self.language), ("kind", self.kind))
                        if v is not None) or "none"


def unmatched(filt: SearchFilter, store: Any) -> str | None:
    """Why no indexed span passes ``filt``, in one sentence, or ``None`` when some span does.

    The part of the filter that matches nothing is named with what the index holds instead: for a path, how stored
    paths look (relative to the indexed root) and, when dropping leading directories finds indexed files, the path
    that does; for a language or a kind, the ones the index has. ``store`` is the index's span store.

    Example:
        >>> from llmc_splitters.retrieval import CodeIndex
        >>> idx = CodeIndex()
        >>> _ = idx.index_texts({"http/client.py": "def send():\\n    return 1\\n"})
        >>> print(unmatched(SearchFilter.of(path="src/http/"), idx.span_store))
        no indexed path starts with 'src/http/'; paths are stored relative to the indexed root, like 'http/client.py' (try path='http/')
        >>> unmatched(SearchFilter.of(path="http/", language="python"), idx.span_store) is None
        True
    """
    if filt.empty:
        return None
    glob = filt.path if filt.is_glob else None
    prefix = None if glob is not None else filt.path
    if store.first_file(prefix=prefix, glob=glob, language=filt.language, kind=filt.kind) is not None:
        return None
    if filt.path is not None and store.first_file(prefix=prefix, glob=glob) is None:
        return _path_note(filt.path, glob is not None, store)
    for name, value in (("language", filt.language), ("kind", filt.kind)):
        if value is not None and store.first_file(**{name: value}) is None:
            held = list(store.leaf_counts(name))
            shown = ", ".join(held[:12]) + (", ..." if len(held) > 12 else "")
            what = "file is in the language" if name == "language" else "span is of the kind"
            return f"no indexed {what} {value!r} (the index holds {shown or 'nothing'})"
    return f"no indexed span passes the filters together ({filt.describe()}), though each matches alone"


def _path_note(path: str, is_glob: bool, store: Any) -> str:
    """A path filter that matches no indexed file: what stored paths look like, and a filter that would match."""
    what = "matches" if is_glob else "starts with"
    suggestion = None
    parts = path.split("/")
    for i in range(1, len(parts)):
        shorter = "/".join(parts[i:])
        if shorter and shorter not in ("*", "**") and (store.first_file(glob=shorter) if is_glob else
                                                       store.first_file(prefix=shorter)) is not None:
            suggestion = shorter
            break
    if suggestion is not None:
        example = store.first_file(glob=suggestion) if is_glob else store.first_file(prefix=suggestion)
    else:
        example = store.first_file()
    if example is None:
        return "the index holds no file yet"
    hint = f" (try path={suggestion!r})" if suggestion is not None else ""
    return (f"no indexed path {what} {path!r}; paths are stored relative to the indexed root, like {example!r}"
            f"{hint}")
