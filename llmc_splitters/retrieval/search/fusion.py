"""Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): merge ranked lists without comparing scores.

Each list contributes ``weight / (k + rank)`` to every item it ranks (``rank`` is 1-based), so an item ranked well by
several retrievers beats one ranked first by a single retriever, and BM25 scores never have to be put on the same
scale as cosine similarities.

Example:
    >>> reciprocal_rank_fusion([["a", "b", "c"], ["b", "a"]], k=60)[0][0]
    'a'
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from ...errors import ConfigurationError

__all__ = ["reciprocal_rank_fusion", "DEFAULT_RRF_K"]

DEFAULT_RRF_K = 60
"""The constant from the original paper; it damps the weight of the very first ranks."""

T = TypeVar("T", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[T]], *, k: int = DEFAULT_RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[T, float]]:
    """Fuse ranked lists of ids into one list of ``(id, score)``, best first.

    Args:
        rankings: Ranked lists (best first). An id repeated within one list counts once, at its first position;
            repeats do not take up ranks.
        k: The RRF constant (``>= 0``); larger values flatten the difference between ranks.
        weights: One weight per list (default 1.0 each).

    Returns:
        ``(id, fused_score)`` pairs sorted by score, descending. Ties are broken by the best rank the id reached
        in any list, then by the first list that ranked it, so the output is deterministic.

    Raises:
        ConfigurationError: ``k`` is negative or ``weights`` does not have one entry per list.
    """
    if k < 0:
        msg = f"k must be >= 0, got {k}"
        raise ConfigurationError(msg)
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        msg = f"weights must have one entry per ranking ({len(rankings)}), got {len(weights)}"
        raise ConfigurationError(msg)
    scores: dict[T, float] = {}
    tie: dict[T, tuple[int, int]] = {}
    for li, (ranking, w) in enumerate(zip(rankings, weights)):
        seen: set[T] = set()
        rank = 0
        for item in ranking:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
            best = tie.get(item)
            if best is None or (rank, li) < best:
                tie[item] = (rank, li)
    return sorted(scores.items(), key=lambda kv: (-kv[1], tie[kv[0]]))
