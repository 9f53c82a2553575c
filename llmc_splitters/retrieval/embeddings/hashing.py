"""A deterministic bag-of-terms embedding: no model, no download (tests, and a cheap stand-in)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ...errors import ConfigurationError
from .base import EmbeddingIdentity

__all__ = ["HashingEmbedding"]


class HashingEmbedding:
    """A deterministic bag-of-terms embedding (feature hashing of :func:`code_terms`); no model, no download.

    Useful in tests and as a cheap stand-in: similar term sets give similar vectors. Not a semantic model.

    Args:
        dim: Vector size.

    Example:
        >>> emb = HashingEmbedding(dim=8)
        >>> len(emb.embed_query("open_file")), emb.identity.name
        (8, 'hashing:8')
    """

    light = True  # no model: the index chunks in worker processes while it embeds

    def __init__(self, dim: int = 256) -> None:
        if dim <= 0:
            msg = f"dim must be > 0, got {dim}"
            raise ConfigurationError(msg)
        self.dim = dim
        self.name = f"hashing:{dim}"

    @property
    def identity(self) -> EmbeddingIdentity:
        """Name, dimension, no input limit."""
        return EmbeddingIdentity(self.name, self.dim, None)

    def _vec(self, text: str) -> list[float]:
        from ..terms import code_terms

        v = [0.0] * self.dim
        for t in code_terms(text):
            h = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = sum(x * x for x in v) ** 0.5
        if norm == 0.0:
            v[0] = 1.0
            return v
        return [x / norm for x in v]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text."""
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query."""
        return self._vec(text)
