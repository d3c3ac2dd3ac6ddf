"""Library functions carry the defaults the command line uses: fit windows, grids, parameter files, patterns."""
from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr.errors import DataSourceError, FileFormatError, ParameterError, ProfileError
from icl_cmr.adapters.item_pools import PATTERN_KINDS, load_patterns_of_kind
from icl_cmr.adapters.published import published_file, read_published_profiles
from icl_cmr.adapters.published_grid import load_grid, load_published_grid


@pytest.fixture(scope="module")
def grid():
    return load_published_grid()


@pytest.fixture(scope="module")
def human_crp():
    """Lag-CRPs of three simulated subjects (20 lists of 12 items, 8 recalls each): NaN at lag 0."""
    rng = np.random.default_rng(5)
    recalls = np.stack([rng.permutation(12)[:8] + 1 for _ in range(60)])
    events = cmr.from_recall_matrix(recalls, 12, subject=np.repeat([1, 2, 3], 20))
    return cmr.lag_crp(events)


@pytest.fixture(scope="module")
def heads():
    return read_published_profiles(published_file("head_profiles.csv.gz"), model="gpt2-small", checkpoint="final")


def test_a_human_lag_crp_is_fitted_without_lag_zero_by_default(human_crp, grid):
    assert np.isnan(human_crp["profile"].sel(lag=0)).all()
    fits = cmr.fit_profiles(human_crp, grid)
    assert fits["lag"].values.tolist() == list(cmr.RECALL_LAGS)
    explicit = cmr.fit_profiles(human_crp, grid, lags=cmr.RECALL_LAGS)
    xr.testing.assert_equal(fits, explicit)  # the same numbers (provenance holds the time)


def test_head_profiles_are_fitted_on_the_study_window_by_default(heads, grid):
    fits = cmr.fit_profiles(heads.isel(layer=[0, 5]), grid, gaussian=False)
    assert fits["lag"].values.tolist() == list(cmr.PAPER_LAGS)
    explicit = cmr.fit_profiles(heads.isel(layer=[0, 5]), grid, lags=cmr.PAPER_LAGS, gaussian=False)
    xr.testing.assert_equal(fits, explicit)  # the same numbers (provenance holds the time)


@pytest.mark.parametrize("lags", [5, range(-2, 3), [0, 1, 2], iter([-1, 0, 1])])
def test_lag_zero_of_a_recall_lag_crp_is_refused(human_crp, grid, lags):
    with pytest.raises(ProfileError, match="undefined at lag 0.*without 0"):
        cmr.fit_profiles(human_crp, grid, lags=lags)


def test_fitting_lags_by_kind(human_crp, heads):
    assert cmr.fitting_lags(human_crp) == cmr.RECALL_LAGS
    assert cmr.fitting_lags(heads) == cmr.PAPER_LAGS
    assert cmr.fitting_lags(human_crp, lags=[-2, -1, 1, 2]) == [-2, -1, 1, 2]
    assert cmr.fitting_lags(heads, lags=3) == 3  # heads have a value at lag 0
    assert cmr.fitting_lags(human_crp, lags=iter([-3, -2, -1])) == (-3, -2, -1)  # an iterator is read once


def test_the_null_test_picks_the_same_window(human_crp, grid):
    null = cmr.cmr_like_null(human_crp, grid, n_null=5, n_bank=50, objective="paper")
    assert json.loads(null.attrs["provenance"])["lags"] == list(cmr.RECALL_LAGS)


def test_load_grid_defaults_to_the_published_grid(tmp_path):
    grid, name = load_grid()
    assert name.startswith("the study's published grid") and grid.attrs["profile_kind"] == "cmr_mc_crp"
    same, path_name = load_grid(published_file("cmr_crp_grid.npz"))
    xr.testing.assert_equal(grid, same)
    assert path_name.endswith("cmr_crp_grid.npz")
    with pytest.raises(DataSourceError, match="no such file"):
        load_grid(tmp_path / "nothere.npz")
    with pytest.raises(DataSourceError, match="no such file"):
        load_grid(tmp_path / "nothere.nc")


def test_read_parameters(tmp_path):
    path = tmp_path / "params.json"
    path.write_text('{"B_enc": 0.7, "T": 0.1}')
    assert cmr.read_parameters(path) == {"B_enc": 0.7, "T": 0.1}
    with pytest.raises(DataSourceError, match="not found"):
        cmr.read_parameters(tmp_path / "none.json")
    path.write_text("{B_enc: 0.7")
    with pytest.raises(FileFormatError, match="not valid JSON"):
        cmr.read_parameters(path)
    path.write_text("[0.7, 0.1]")
    with pytest.raises(ParameterError, match="one JSON object"):
        cmr.read_parameters(path)


def test_patterns_of_kind():
    assert load_patterns_of_kind("psifr:Morton2013", None) is None
    assert set(PATTERN_KINDS) == {"semantic", "category", "semantic+category"}
    with pytest.raises(ParameterError, match="semantic"):
        load_patterns_of_kind("psifr:Morton2013", "lexical")
