"""Decay-matched beta: exact on the context decay of textbook CMR and of the paper's variant."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr.beta_scales import context_decay, paper_beta, textbook_beta
from cmr.errors import ParameterError


def one_list(n_items=6):
    study = pd.DataFrame({"subject": 1, "list": 1, "trial_type": "study", "position": np.arange(1, n_items + 1),
                          "item": [f"w{i}" for i in range(n_items)]})
    recall = pd.DataFrame({"subject": 1, "list": 1, "trial_type": "recall", "position": [1, 2],
                           "item": ["w5", "w4"]})
    return pd.concat([study, recall], ignore_index=True)


@pytest.mark.parametrize("beta_paper", [0.05, 0.42, 0.67, 0.95])
def test_textbook_study_context_decays_like_the_paper_model(beta_paper):
    """cymr-style study with one-hot inputs: item i's weight after item k is B * rho^(k-i), rho = 1 - beta_paper."""
    params = dict(cmr.default_parameters(), B_enc=textbook_beta(beta_paper), Afc=0.0, Dfc=1.0)
    states = cmr.record_states(one_list(), params)
    context = states["study_context"].isel(trial=0)
    for k in range(1, 6):
        for i in range(k):
            ratio = float(context.isel(study_position=k).sel(unit=f"item_{i + 1}")
                          / context.isel(study_position=k - 1).sel(unit=f"item_{i + 1}"))
            assert ratio == pytest.approx(1.0 - beta_paper, rel=1e-12)
    assert context_decay(beta_paper, "paper", "enc") == pytest.approx(1.0 - beta_paper, abs=0)


@pytest.mark.parametrize("beta_paper", [0.1, 0.5, 0.9])
def test_paper_recall_update_decays_like_textbook(beta_paper):
    """The paper's variant's normalised recall update with an orthogonal input shrinks old content by the textbook rho."""
    old = np.array([0.6, 0.8, 0.0])
    new_input = np.array([0.0, 0.0, 1.0])
    updated = (1 - beta_paper) * old + beta_paper * new_input
    updated /= np.linalg.norm(updated)
    rho = np.sqrt(1 - textbook_beta(beta_paper, phase="rec") ** 2)
    np.testing.assert_allclose(updated[:2], rho * old[:2], rtol=1e-12)
    assert context_decay(beta_paper, "paper", "rec") == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("phase", ["enc", "rec"])
def test_round_trip_and_ends(phase):
    beta = np.linspace(0, 1, 101)
    back = paper_beta(textbook_beta(beta, phase=phase), phase=phase)
    np.testing.assert_allclose(back, beta, atol=1e-12)
    assert textbook_beta(0.0, phase=phase) == 0.0 and textbook_beta(1.0, phase=phase) == 1.0
    assert np.all(np.diff(textbook_beta(beta, phase=phase)) > 0)


def test_known_values_and_types():
    # the heads' beta_enc of 0.42-0.67 is 0.81-0.94 on the textbook scale
    assert textbook_beta(0.42) == pytest.approx(np.sqrt(1 - 0.58**2))
    assert round(textbook_beta(0.42), 2) == 0.81 and round(textbook_beta(0.67), 2) == 0.94
    assert textbook_beta(0.5, phase="rec") == pytest.approx(np.sqrt(0.5))
    da = xr.DataArray([0.2, np.nan], dims="unit", coords={"unit": [3, 4]})
    out = textbook_beta(da)
    assert isinstance(out, xr.DataArray) and out["unit"].values.tolist() == [3, 4] and np.isnan(out.values[1])
    with pytest.raises(ParameterError, match=r"\[0, 1\]"):
        textbook_beta(1.2)
    with pytest.raises(ParameterError, match="phase"):
        textbook_beta(0.2, phase="study")


def test_fits_on_the_grid_edge_are_flagged():
    from cmr.schema import provenance_attrs

    lags = np.arange(-5, 6)
    centres, widths = np.array([-1.0, 0.0, 1.0, 2.0]), np.array([0.5, 1.0, 2.0])
    values = np.exp(-((lags[None, None, :] - centres[:, None, None]) ** 2) / (2 * widths[None, :, None] ** 2))
    grid = xr.Dataset({"profile": (("centre", "width", "lag"), values)},
                      coords={"centre": centres, "width": widths, "lag": lags})
    grid.attrs.update(provenance_attrs("lag_profile", "tests"), profile_kind="test_bumps", unit_kind="cmr_parameters")
    units = xr.Dataset({"profile": (("unit", "lag"), values[[3, 1], [1, 1]] * 4 + 1)},
                       coords={"unit": [0, 1], "lag": lags})
    units.attrs.update(provenance_attrs("lag_profile", "tests"), profile_kind="attention_score")
    fits = cmr.fit_profiles(units, grid, objective="paper")
    assert fits["at_grid_edge"].sel(parameter="centre").values.tolist() == [1, 0]
    assert fits["at_grid_edge"].sel(parameter="width").values.tolist() == [0, 0]
