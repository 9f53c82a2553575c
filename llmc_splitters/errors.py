"""The library's own exceptions.

Every error raised on purpose by llmc_splitters derives from :class:`LlmcError`, so callers can catch one type.
Messages say what went wrong *and* what to do about it.
"""

from __future__ import annotations


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
