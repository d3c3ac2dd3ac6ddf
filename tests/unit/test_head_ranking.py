"""rank_heads: direction, heads without a score, ties, and the callers that rank with it."""
import numpy as np
import pytest
import xarray as xr

from cmr.errors import ParameterError
from icl_cmr.adapters.head_ranking import rank_heads


def test_descending_and_ascending_on_a_grid():
    scores = np.array([[0.1, 0.9, 0.5],
                       [0.7, 0.2, 0.3]])
    assert rank_heads(scores).tolist() == [1, 3, 2, 5, 4, 0]
    assert rank_heads(scores, 2).tolist() == [1, 3]
    assert rank_heads(scores, 2, largest=False).tolist() == [0, 4]
    layers, heads = np.unravel_index(rank_heads(scores, 2), scores.shape)
    assert list(zip(layers.tolist(), heads.tolist())) == [(0, 1), (1, 0)]


def test_ties_keep_layer_head_order_in_both_directions():
    scores = np.array([[0.5, 0.8, 0.5],
                       [0.8, 0.5, 0.1]])
    assert rank_heads(scores).tolist() == [1, 3, 0, 2, 4, 5]
    assert rank_heads(scores, largest=False).tolist() == [5, 0, 2, 4, 1, 3]


def test_heads_without_a_finite_score_are_never_ranked():
    scores = np.array([[np.nan, 0.2, -np.inf],
                       [0.4, np.inf, np.nan]])
    for largest in (True, False):
        ranked = rank_heads(scores, largest=largest)
        assert sorted(ranked.tolist()) == [1, 3]
    assert rank_heads(scores, largest=False).tolist() == [1, 3]


def test_n_beyond_the_finite_heads_returns_those_alone():
    scores = np.array([0.3, np.nan, 0.9, np.nan])
    assert rank_heads(scores, 10).tolist() == [2, 0]
    assert rank_heads(scores, 0).tolist() == []
    assert rank_heads(np.full((2, 2), np.nan), 3).size == 0
    assert rank_heads(scores).dtype == np.int64


@pytest.mark.parametrize("n", [-1, 1.5, True, "2"])
def test_bad_n_is_refused(n):
    with pytest.raises(ParameterError, match="n must be"):
        rank_heads([0.1, 0.2], n)


def test_scores_are_not_modified():
    scores = np.array([[np.nan, 0.2], [0.4, 0.1]])
    before = scores.copy()
    rank_heads(scores, 2)
    np.testing.assert_array_equal(scores, before)


def test_ablation_sets_rank_through_rank_heads():
    from icl_cmr.analyses.ablation import top_heads_from_fits

    distance = np.array([[[[0.3, np.nan, 0.1],
                           [0.1, 0.2, np.nan]]]])
    fits = xr.Dataset({"distance": (("model", "checkpoint", "layer", "head"), distance)},
                      coords={"layer": [4, 5], "head": [0, 1, 2]})
    assert top_heads_from_fits(fits, n_heads=3) == [(4, 2), (5, 0), (5, 1)]
    assert top_heads_from_fits(fits, n_heads=2, largest=True) == [(4, 0), (5, 1)]
    with pytest.raises(ParameterError, match="4 of 6 heads have a finite distance"):
        top_heads_from_fits(fits, n_heads=5)
