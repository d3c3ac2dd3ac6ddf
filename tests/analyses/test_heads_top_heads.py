"""The study's Gaussian procedure and its top-N table, against the study's published numbers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cmr.errors import ParameterError
from cmr.profile_fit import fit_profiles
from cmr.schema import provenance_attrs

LAGS = np.arange(-5, 6)
#: the study's mean Gaussian-baseline distances of the top 20/50/100/200 Pythia induction heads
STUDY_GAUSSIAN_MEANS = {20: 1.0, 50: 0.98, 100: 0.98, 200: 0.97}


def bump_grid():
    centres, widths = np.array([-1.0, 0.0, 1.0, 2.0]), np.array([0.5, 1.0, 2.0])
    values = np.exp(-((LAGS[None, None, :] - centres[:, None, None]) ** 2) / (2 * widths[None, :, None] ** 2))
    ds = xr.Dataset({"profile": (("centre", "width", "lag"), values)},
                    coords={"centre": centres, "width": widths, "lag": LAGS})
    ds.attrs.update(provenance_attrs("lag_profile", "tests"), profile_kind="test_bumps", unit_kind="cmr_parameters")
    return ds


def units(values):
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    ds = xr.Dataset({"profile": (("unit", "lag"), values)}, coords={"unit": np.arange(values.shape[0]), "lag": LAGS})
    ds.attrs.update(provenance_attrs("lag_profile", "tests"), profile_kind="attention_score")
    return ds


def test_study_gaussian_reproduces_the_top_n_means():
    from icl_cmr.adapters.published_grid import load_published_grid
    from icl_cmr.analyses.heads.top_heads import top_induction_heads

    heads = top_induction_heads(n=200)  # the study's files installed with the package
    assert heads["induction_score"].to_series().is_monotonic_decreasing
    fits = fit_profiles(heads, load_published_grid(), objective="paper", gaussian="study")
    assert fits.attrs["gaussian_procedure"] == "study"
    gaussian = fits["gaussian_distance"].values
    for n, published in STUDY_GAUSSIAN_MEANS.items():
        assert abs(gaussian[:n].mean() - published) < 0.05, n


def test_study_start_makes_a_clean_bump_look_unfit():
    """mu starts at the peak *value* (30, far outside the lags): the study's fit finds no bump."""
    profile = 2.0 + 28.0 * np.exp(-((LAGS - 1.0) ** 2) / (2 * 0.8**2))
    study = fit_profiles(units(profile), bump_grid(), objective="lsq", gaussian="study")
    fair = fit_profiles(units(profile), bump_grid(), objective="lsq", gaussian="fair")
    assert float(fair["gaussian_distance"][0]) < 1e-8
    assert float(study["gaussian_distance"][0]) > 0.99
    assert fair.attrs["gaussian_procedure"] == "fair"


def test_study_gaussian_falls_back_to_a_flat_line_at_lag_zero(monkeypatch):
    import scipy.optimize

    def failing(*args, **kwargs):
        raise RuntimeError("Optimal parameters not found: Number of calls to function has reached maxfev = 1000.")

    monkeypatch.setattr(scipy.optimize, "curve_fit", failing)
    profile = np.array([0.0, 1, 0, 2, 0, 3, 0, 5, 1, 0, 1])
    fits = fit_profiles(units(profile), bump_grid(), objective="lsq", gaussian="study")
    np.testing.assert_array_equal(fits["gaussian_parameters"].values[0], [profile[5], 0.0, 0.0, 1.0])
    expected = np.mean((profile[5] - profile) ** 2) / np.var(profile)
    assert float(fits["gaussian_distance"][0]) == pytest.approx(expected, rel=1e-12)


def test_gaussian_procedure_names():
    with pytest.raises(ParameterError, match="gaussian"):
        fit_profiles(units(np.arange(11.0)), bump_grid(), gaussian="studdy")
    fits = fit_profiles(units(np.arange(11.0)), bump_grid(), gaussian=False)
    assert "gaussian_distance" not in fits and fits.attrs["gaussian_procedure"] == "none"


def test_table_pairs_the_same_heads():
    from icl_cmr.analyses.heads.top_heads import top_heads_table

    rng = np.random.default_rng(0)
    cmr = rng.uniform(0, 0.1, 30)
    fits = pd.DataFrame({"model": ["pythia-70m-deduped-v0"] * 30, "cmr_paper": cmr, "cmr_lsq": cmr * 0.5,
                         "gaussian_study": np.ones(30), "gaussian_fair": cmr + rng.uniform(0.005, 0.015, 30)})
    table = top_heads_table(fits, sizes=(10, 30))
    assert table["top N"].tolist() == [10, 30]
    # the fair Gaussian is worse on every head by a little: the paired test sees it
    assert float(table["fair: Wilcoxon p (paper vs Gaussian)"][1]) < 1e-5
    assert table["Gaussian better (lsq)"].tolist() == ["0 of 10", "0 of 30"]


def test_cli_fit_runs_the_study_gaussian_on_request(tmp_path, capsys):
    from cmr.io import load_dataset, save_dataset
    from icl_cmr.analyses.cli import main

    profile = 2.0 + 28.0 * np.exp(-((LAGS - 1.0) ** 2) / (2 * 0.8**2))
    save_dataset(units([profile, profile[::-1] + 1]), tmp_path / "heads.nc")
    save_dataset(bump_grid(), tmp_path / "grid.nc")
    for procedure in ("study", "fair"):
        out = tmp_path / f"{procedure}.nc"
        assert main(["fit", str(tmp_path / "heads.nc"), "--grid", str(tmp_path / "grid.nc"), "--objective", "lsq",
                     "--gaussian", procedure, "-o", str(out)]) == 0
        assert f"({procedure})" in capsys.readouterr().out
    study, fair = load_dataset(tmp_path / "study.nc"), load_dataset(tmp_path / "fair.nc")
    assert study.attrs["gaussian_procedure"] == "study"
    assert (study["gaussian_distance"] > fair["gaussian_distance"] + 0.5).all()
