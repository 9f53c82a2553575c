"""Framework-free helpers shared by the LangChain and LlamaIndex faces: reading a document's path and language."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from .languages import get_spec, normalize_language


def language_name(value: Any) -> str | None:
    """A language given as ``str`` or as a ``str`` enum (LangChain's ``Language.PYTHON``), normalised."""
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str) or not value.strip():
        return None
    return normalize_language(value)


def known_language(language: str | None) -> bool:
    """Whether the chunker has a grammar (or the plain-text path) for ``language``."""
    if language is None:
        return False
    try:
        get_spec(language)
    except ValueError:
        return False
    return True


def first_path(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` in ``metadata`` that holds a non-empty value, as ``str``."""
    for key in keys:
        value = metadata.get(key)
        if value:
            return str(value)
    return None
