"""Reciprocal rank fusion: exact scores, ties, weights, bad settings."""

from __future__ import annotations

import pytest

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval.search.fusion import reciprocal_rank_fusion


def test_scores_are_sums_of_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_agreement_beats_a_single_first_place() -> None:
    fused = reciprocal_rank_fusion([["x", "a"], ["y", "a"], ["z", "a"]], k=60)
    assert fused[0][0] == "a"


def test_ties_broken_by_best_rank_then_list_order() -> None:
    assert [i for i, _ in reciprocal_rank_fusion([["a", "b"], ["b", "a"]])] == ["a", "b"]
    assert [i for i, _ in reciprocal_rank_fusion([["p"], ["q"]])] == ["p", "q"]


def test_repeats_within_a_list_count_once() -> None:
    assert dict(reciprocal_rank_fusion([["a", "a", "b"]], k=0)) == {"a": 1.0, "b": 0.5}


def test_weights() -> None:
    fused = reciprocal_rank_fusion([["a"], ["b"]], k=0, weights=[1.0, 3.0])
    assert fused == [("b", 3.0), ("a", 1.0)]


def test_empty() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


@pytest.mark.parametrize(("kwargs", "match"), [({"k": -1}, "k must be"), ({"weights": [1.0]}, "one entry per")])
def test_bad_settings(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        reciprocal_rank_fusion([["a"], ["b"]], **kwargs)
