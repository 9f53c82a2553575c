"""What the index needs from an embedding model, the bounded input it embeds, and a model's identity.

Anything with ``embed_documents(list[str]) -> list[list[float]]`` and ``embed_query(str) -> list[float]`` is an
:class:`Embedding` (LangChain ``Embeddings`` objects qualify). A model may also expose its input limit as
``max_input_tokens`` plus ``count_tokens(text)`` and ``cut(text, n)``; the index then embeds a *bounded view* of any
longer span (its head, cut at a token boundary) and records that in the span's metadata, instead of letting the model
truncate silently.

A model's :class:`EmbeddingIdentity` (name, dimension, input limit) is what an index records and compares when it is
reopened: vectors of two models never mix in one index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["BoundedView", "Embedding", "EmbeddingIdentity", "bounded_view", "identity_of"]


@runtime_checkable
class Embedding(Protocol):
    """What the index needs from an embedding model."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Which model made an index's vectors: recorded in the index, compared when it is reopened.

    Attributes:
        name: Stable name of the model and its backend (``"minilm:model"``, ``"minilm-onnx-int8:model"``, ...).
            Two names differ exactly when their vectors may differ.
        dimension: Vector size (``None`` when it is only known after a first embed call).
        max_input_tokens: Input limit in the model's own tokens (``None``: no limit the index must respect).

    Example:
        >>> ident = EmbeddingIdentity("minilm:model", 384, 254)
        >>> ident.as_dict()
        {'name': 'minilm:model', 'dimension': 384, 'max_input_tokens': 254}
        >>> EmbeddingIdentity.from_dict(ident.as_dict()) == ident
        True
    """

    name: str
    dimension: int | None
    max_input_tokens: int | None

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (JSON and Chroma metadata friendly)."""
        return {"name": self.name, "dimension": self.dimension, "max_input_tokens": self.max_input_tokens}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmbeddingIdentity:
        """The inverse of :meth:`as_dict` (missing numbers read as ``None``)."""
        dim, limit = data.get("dimension"), data.get("max_input_tokens")
        return cls(str(data["name"]), None if dim is None else int(dim), None if limit is None else int(limit))

    def mismatch(self, other: EmbeddingIdentity) -> str | None:
        """Why vectors of ``other`` cannot join an index built with ``self`` (``None`` when they can).

        A dimension or limit that one side does not know yet is not a mismatch; the name always counts.
        """
        if self.name != other.name:
            return f"embedding {other.name!r} is not {self.name!r}"
        if self.dimension is not None and other.dimension is not None and self.dimension != other.dimension:
            return f"embedding {self.name!r} gives {other.dimension}-dimensional vectors, not {self.dimension}"
        return None


def identity_of(embedding: Any, *, probe: bool = False) -> EmbeddingIdentity:
    """The identity of any embedding object: its own ``identity`` if it has one, else read from its attributes.

    Args:
        embedding: An :class:`Embedding`.
        probe: When the dimension is not known from attributes, embed one short query to learn it (a call to a
            remote provider, if the embedding is one).

    Returns:
        The :class:`EmbeddingIdentity`; ``dimension`` is ``None`` when unknown and ``probe`` is false.
    """
    own = getattr(embedding, "identity", None)
    if isinstance(own, EmbeddingIdentity):
        if own.dimension is None and probe:
            return EmbeddingIdentity(own.name, len(embedding.embed_query("dimension probe")), own.max_input_tokens)
        return own
    name = getattr(embedding, "name", None) or getattr(embedding, "model_name", None) or getattr(
        embedding, "model", None)
    name = str(name) if isinstance(name, str) and name else type(embedding).__name__
    dim = getattr(embedding, "dimension", None) or getattr(embedding, "dimensions", None)
    dim = dim if isinstance(dim, int) and dim > 0 else None
    if dim is None and probe:
        dim = len(embedding.embed_query("dimension probe"))
    limit = getattr(embedding, "max_input_tokens", None)
    return EmbeddingIdentity(name, dim, limit if isinstance(limit, int) and limit > 0 else None)


class BoundedView:
    """The text actually embedded for a span, and whether it is the whole span.

    Attributes:
        text: What is embedded.
        truncated: ``True`` when ``text`` is only the head of the span.
        tokens: Model tokens in ``text`` (``None`` when the model exposes no tokenizer).
        limit: The model's input limit in tokens (``None`` when unknown).
    """

    __slots__ = ("text", "truncated", "tokens", "limit")

    def __init__(self, text: str, truncated: bool, tokens: int | None, limit: int | None) -> None:
        self.text, self.truncated, self.tokens, self.limit = text, truncated, tokens, limit


def bounded_view(text: str, embedding: Any) -> BoundedView:
    """Cut ``text`` to the embedding model's input limit, if the model says what its limit is.

    A model with ``bound(text, limit) -> (end, tokens)`` does it in one tokenizer pass (the local MiniLM backends
    do); otherwise ``count_tokens`` and ``cut`` are used.

    Args:
        text: The text to embed.
        embedding: The model; it is bounded if it has ``max_input_tokens`` and ``count_tokens`` (``cut`` optional).

    Returns:
        A :class:`BoundedView`; ``truncated`` tells whether the head of ``text`` is all that gets embedded.
    """
    limit = getattr(embedding, "max_input_tokens", None)
    counter = getattr(embedding, "count_tokens", None)
    if not limit or counter is None:
        return BoundedView(text, False, None, None)
    limit = int(limit)
    bound = getattr(embedding, "bound", None)
    if bound is not None:
        end, n = bound(text, limit)
        return BoundedView(text[:end], end < len(text), int(n), limit)
    n = int(counter(text))
    if n <= limit:
        return BoundedView(text, False, n, limit)
    cutter = getattr(embedding, "cut", None)
    if cutter is not None:
        i = int(cutter(text, limit))
    else:  # binary search on prefixes
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if counter(text[:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        i = lo
    head = text[:i]
    return BoundedView(head, True, int(counter(head)), limit)
