"""What the engine's stages hand each other: scopes, units and leaves, all located by byte offsets.

Splitting (:mod:`llmc_splitters.chunking._engine`) cuts a file into :class:`Unit` ranges, each in a :class:`Scope`
(the file, or a definition too big to stay whole); packing (:mod:`llmc_splitters.chunking.packing`) groups the units
into :class:`Leaf` ranges, which the chunker labels and turns into spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .definitions import DefInfo
from .languages import LanguageSpec


@dataclass(slots=True, eq=False)
class Scope:
    """A structural span under construction: the file, or a definition that had to be split."""

    kind: str
    name: str | None
    start: int
    end: int
    parent: Scope | None
    spec: LanguageSpec
    info: DefInfo | None = None
    parts: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class Unit:
    """A byte range that is either a definition (atomic), glue, or a fallback piece."""

    start: int
    end: int
    scope: Scope
    role: str  # "def" | "glue" | "piece" | "standalone"
    category: str = "other"  # glue only: "import" | "other" | "neutral" (comments, docstrings)
    info: DefInfo | None = None
    node_type: str | None = None
    tokens: int = -1
    how: str | None = None  # fallback level that produced a piece
    leading: tuple[Any, ...] = ()  # comments/decorators attached above a definition
    node: Any = None  # the syntax node of a single-node glue unit


@dataclass(slots=True)
class Leaf:
    """Units packed together: one leaf span, labelled by the chunker (``kind``, ``name``, ``meta``)."""

    start: int
    end: int
    scope: Scope
    kind: str
    name: str | None
    tokens: int
    units: list[Unit]
    meta: dict[str, Any]
