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
    assert rank_heads(scores, n=2).tolist() == [1, 3]
    assert rank_heads(scores, n=2, largest=False).tolist() == [0, 4]
    layers, heads = np.unravel_index(rank_heads(scores, n=2), scores.shape)
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
    assert rank_heads(scores, n=10).tolist() == [2, 0]
    assert rank_heads(scores, n=0).tolist() == []
    assert rank_heads(np.full((2, 2), np.nan), n=3).size == 0
    assert rank_heads(scores).dtype == np.int64


@pytest.mark.parametrize("n", [-1, 1.5, True, "2"])
def test_bad_n_is_refused(n):
    with pytest.raises(ParameterError, match="n must be"):
        rank_heads([0.1, 0.2], n=n)


def test_scores_are_not_modified():
    scores = np.array([[np.nan, 0.2], [0.4, 0.1]])
    before = scores.copy()
    rank_heads(scores, n=2)
    np.testing.assert_array_equal(scores, before)


def test_ablation_sets_rank_through_rank_heads():
    from icl_cmr.adapters.head_ranking import top_heads

    distance = np.array([[[[0.3, np.nan, 0.1],
                           [0.1, 0.2, np.nan]]]])
    fits = xr.Dataset({"distance": (("model", "checkpoint", "layer", "head"), distance)},
                      coords={"layer": [4, 5], "head": [0, 1, 2]})
    assert top_heads(fits, n_heads=3) == [(4, 2), (5, 0), (5, 1)]
    assert top_heads(fits, n_heads=2, largest=True) == [(4, 0), (5, 1)]
    with pytest.raises(ParameterError, match="4 of 6 heads have a finite distance"):
        top_heads(fits, n_heads=5)


def test_layer_zero_is_never_a_composing_head():
    from icl_cmr.adapters.head_ranking import composing_heads

    scores = np.array([[9.0, 8.0], [1.0, 2.0], [3.0, np.nan]])
    grid = composing_heads(scores)
    assert np.isnan(grid[0]).all() and scores[0, 0] == 9.0  # a copy: the input is unchanged
    assert rank_heads(grid).tolist() == [4, 3, 2]
    with pytest.raises(ParameterError, match="grid"):
        composing_heads(np.ones(3))


# --- the top CMR-like heads under either definition ------------------------------------------


def _null(distance, strict, mass_criterion="applied"):
    """A profile_null-like dataset of one model: distances and strict verdicts on a (layer, head) grid."""
    dims = ("model", "checkpoint", "layer", "head")
    distance = np.asarray(distance, dtype=np.float64)[None, None]
    strict = np.asarray(strict, dtype=np.int64)[None, None]
    return xr.Dataset({"distance": (dims, distance), "cmr_like_strict": (dims, strict)},
                      coords={"layer": [3, 4], "head": [0, 1, 2]},
                      attrs={"icl_cmr_kind": "profile_null", "mass_criterion": mass_criterion,
                             "strict_criteria": "d < 0.5; ..."})


DISTANCE = [[0.05, 0.30, 0.10],
            [0.01, np.nan, 0.20]]
STRICT = [[0, 1, 1],
          [0, 0, 1]]


def test_the_study_definition_is_the_study_top_set():
    from icl_cmr.adapters.head_ranking import cmr_like_heads
    from icl_cmr.adapters.head_ranking import top_heads

    null = _null(DISTANCE, STRICT)
    for fraction in (0.2, 0.5, 0.8):
        heads, notes = cmr_like_heads(null, definition="study", fraction=fraction)
        assert heads == top_heads(null, fraction=fraction) and notes == []
    assert cmr_like_heads(null, definition="study", n_heads=2)[0] == [(4, 0), (3, 0)]
    with pytest.raises(ParameterError, match="5 of 6 heads have a finite distance"):
        cmr_like_heads(null, definition="study", n_heads=6)


def test_the_strict_definition_ranks_only_strict_heads_and_never_tops_the_set_up():
    from icl_cmr.adapters.head_ranking import cmr_like_heads

    null = _null(DISTANCE, STRICT)
    assert cmr_like_heads(null, definition="strict", n_heads=2) == ([(3, 2), (4, 2)], [])
    heads, notes = cmr_like_heads(null, definition="strict", n_heads=5)
    assert heads == [(3, 2), (4, 2), (3, 1)]
    assert notes == ["only 3 heads pass the strict definition: the set has 3 heads, not 5"]
    heads, notes = cmr_like_heads(_null(DISTANCE, STRICT, "not available: no probabilities"), definition="strict", n_heads=1)
    assert heads == [(3, 2)] and "not applied (not available: no probabilities)" in notes[0]
    with pytest.raises(ParameterError, match="no head passes the strict definition"):
        cmr_like_heads(_null(DISTANCE, np.zeros((2, 3))), definition="strict")


def test_strict_ranking_needs_a_null_and_a_known_definition():
    from cmr.errors import SchemaError
    from icl_cmr.adapters.head_ranking import cmr_like_heads

    fits = _null(DISTANCE, STRICT).drop_vars("cmr_like_strict")
    fits.attrs["icl_cmr_kind"] = "profile_fit"
    with pytest.raises(SchemaError, match="icl-cmr null HEADS.nc"):
        cmr_like_heads(fits, definition="strict")
    with pytest.raises(ParameterError, match="study, strict"):
        cmr_like_heads(fits, definition="loose")


def test_ablate_ranks_by_either_definition_before_the_model_loads(tmp_path, capsys):
    from cmr.io import save_dataset
    from cmr.schema import provenance_attrs
    from icl_cmr.analyses.cli import main

    null = _null(DISTANCE, STRICT)
    null.attrs.update(provenance_attrs("profile_null", "tests"), alpha=0.05, n_null=19, objective="lsq")
    for name in ("p_permuted", "p_smooth", "p_value", "threshold", "beyond_chance"):
        null[name] = null["distance"] * 0
    save_dataset(null, tmp_path / "null.nc")
    common = ["ablate", str(tmp_path / "no-such-model"), "--heads-from", str(tmp_path / "null.nc"),
              "--top-fraction", "0.5", "--n-random", "2", "--n-matched", "0", "--n-passages", "2", "-o",
              str(tmp_path / "abl.nc")]
    assert main(common) != 0  # no such model: it stops at loading, after the top set is fixed
    study = capsys.readouterr().out
    assert "top set fixed before any ablation (3 heads" in study and "L4.H0,L3.H0,L3.H2" in study
    assert main([*common, "--rank-by", "strict"]) != 0
    strict = capsys.readouterr().out
    assert "strict definition" in strict and "L3.H2,L4.H2,L3.H1" in strict
