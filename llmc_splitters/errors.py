"""The library's own exceptions.

Every error raised on purpose by llmc_splitters derives from :class:`LlmcError`, so callers can catch one type.
Messages say what went wrong *and* what to do about it.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar


class LlmcError(Exception):
    """Base class of every error llmc_splitters raises on purpose."""


class ConfigurationError(LlmcError, ValueError):
    """A setting is invalid (the message names the setting and the bad value)."""


class UnsupportedInputError(LlmcError, ValueError):
    """The input cannot be chunked as given (binary data, an unknown language asked for explicitly, ...)."""


class UndecodableInputError(UnsupportedInputError):
    """Bytes that are not valid text in the requested encoding, with ``errors="strict"``."""


class MalformedNotebookError(UnsupportedInputError):
    """An ``.ipynb`` file that is not valid notebook JSON."""


class RequestError(LlmcError, ValueError):
    """A request to a server (an MCP tool call) that cannot be served as given: a bad argument, a path outside the
    indexed root, a missing index. The message is one sentence that says what to do instead."""


class MissingDependencyError(LlmcError, ImportError):
    """An optional dependency is not installed; the message gives the ``pip install`` line."""


def missing_dependency(package: str, extra: str) -> MissingDependencyError:
    """Build the error raised when an optional dependency is missing.

    Args:
        package: The import name that failed.
        extra: The llmc-splitters extra that installs it.
    """
    msg = f"{package} is not installed; install it with: pip install 'llmc-splitters[{extra}]'"
    return MissingDependencyError(msg)


class LlmcWarning(UserWarning):
    """Base class of the warnings llmc_splitters emits (filter them all with ``warnings.simplefilter``)."""


class InputWarning(LlmcWarning):
    """An input was skipped (binary, malformed) or treated in a way the caller may not expect (no path, so the
    language was guessed; pieces of one file given as separate documents). The message names the input and the
    remedy."""


class FilterWarning(LlmcWarning):
    """A search filter (``path=``, ``language=``, ``kind=``) matches nothing in the index, so the search returned
    nothing whatever the words: the message says what the stored paths (or languages, kinds) look like."""


class IndexWarning(LlmcWarning):
    """An index was opened in a way the caller may not expect (a hybrid index searched lexically because
    ``embedding=None`` was passed); the message says what to pass instead."""


_FRAMEWORKS = ("llmc_splitters", "langchain", "langchain_core", "langchain_text_splitters", "llama_index",
               "llama_index_instrumentation")


def caller_stacklevel() -> int:
    """The ``stacklevel`` (seen from the caller of this function) of the first frame outside this package and the
    frameworks: a warning then points at the user's line, however deep our calls and the framework's wrappers go."""
    frame = sys._getframe(2)
    level = 2
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] in _FRAMEWORKS:
        frame = frame.f_back
        level += 1
    return level


# ------------------------------------------------------------------------------------------ argument checking
# Names people reach for that mean one of ours (from other libraries' conventions); the nearest spelling by
# edit distance catches the rest (``embeddings`` -> ``embedding``, ``max_context_token`` -> ``max_context_tokens``).
_CONVENTIONAL = {
    "top_k": ("k", "similarity_top_k"),
    "similarity_top_k": ("k",),
    "n_results": ("k", "similarity_top_k"),
    "num_results": ("k", "similarity_top_k"),
    "embed_model": ("embedding",),
    "embedding_function": ("embedding", "embed_model"),
    "embeddings": ("embedding", "embed_model"),
    "embedder": ("embedding", "embed_model"),
    "persist_directory": ("path",),
    "persist_dir": ("path",),
    "db": ("path",),
    "chunk_size": ("max_tokens",),
    "max_tokens": ("chunk_size",),
    "token_limit": ("max_tokens", "chunk_size"),
    "chunk_overlap": ("overlap",),
    "lang": ("language",),
    # get_lines(start, end) as an agent reads a hit (start_line/end_line) or writes Python (range's stop).
    "start_line": ("start",),
    "end_line": ("end",),
    "stop": ("end",),
}


def nearest_argument(name: str, valid: Iterable[str]) -> str | None:
    """The valid argument ``name`` most likely stands for, or ``None``.

    Example:
        >>> nearest_argument("embeddings", ["embedding", "k", "path"])
        'embedding'
        >>> nearest_argument("top_k", ["embedding", "k", "path"])
        'k'
    """
    names = list(valid)
    for alias in _CONVENTIONAL.get(name, ()):
        if alias in names:
            return alias
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    folded = name.lower().replace("-", "_")
    return next((n for n in names if n.lower() == folded), None)


def unknown_argument(owner: str, name: str, valid: Iterable[str]) -> ConfigurationError:
    """The error for an argument ``owner`` does not take: it names the nearest valid one and lists them all."""
    names = sorted(valid)
    if not names:
        return ConfigurationError(f"{owner} got an unknown argument {name!r}: it takes no arguments")
    best = nearest_argument(name, names)
    hint = f"; did you mean {best!r}?" if best else ""
    msg = f"{owner} got an unknown argument {name!r}{hint} (it takes: {', '.join(names)})"
    return ConfigurationError(msg)


def check_arguments(owner: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Raise :func:`unknown_argument` for the first of ``given`` that is not in ``valid``."""
    names = set(valid)
    for name in given:
        if name not in names:
            raise unknown_argument(owner, name, names)


F = TypeVar("F", bound=Callable[..., Any])


def checked_arguments(func: F) -> F:
    """Make ``func`` (a constructor or ``from_*`` factory) raise :class:`ConfigurationError` naming the nearest
    valid argument for an unknown keyword argument, instead of a bare ``TypeError`` or, behind ``**kwargs``,
    silence.

    The valid names are the parameters of ``func``'s own signature (which ``inspect.signature`` still reports).
    A function with ``**kwargs`` is checked against ``func.accepts`` plus its named parameters when it sets that
    attribute (the names it forwards); otherwise its ``**kwargs`` are left to the callee, which is checked itself.

    Example:
        >>> class Box:
        ...     @checked_arguments
        ...     def __init__(self, *, size: int = 1) -> None:
        ...         self.size = size
        >>> Box(sise=2)
        Traceback (most recent call last):
        ...
        llmc_splitters.errors.ConfigurationError: Box() got an unknown argument 'sise'; did you mean 'size'? (it takes: size)
    """
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    named = [p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)] \
        if params and params[0].name in ("self", "cls") else \
        [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params)
    qual = func.__qualname__
    owner = f"{qual.rsplit('.', 1)[0]}()" if func.__name__ == "__init__" else f"{qual}()"

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        accepts = getattr(wrapper, "accepts", None)
        if not open_ended or accepts is not None:
            valid = {*named, *(accepts or ())}
            for name in kwargs:
                if name not in valid:
                    raise unknown_argument(owner, name, valid)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _positive_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value > 0


def check_positive(name: str, value: Any) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is a positive ``int`` (``bool`` is not)."""
    if not _positive_int(value):
        msg = f"{name} must be a positive integer, got {value!r}"
        raise ConfigurationError(msg)


def check_workers(name: str, value: Any) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is a positive ``int`` or ``"auto"``."""
    if value != "auto" and not _positive_int(value):
        msg = f"{name} must be a positive integer or 'auto', got {value!r}"
        raise ConfigurationError(msg)
