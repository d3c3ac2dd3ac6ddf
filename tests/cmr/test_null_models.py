"""cmr_like_null: calibration of both nulls on structureless profiles, agreement with fit_profiles."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from cmr.errors import ParameterError
from cmr.grids import paper_teacher_forced_grid
from cmr.null_models import cmr_like_null, profile_roughness, structureless_profiles
from cmr.profile_fit import fit_profiles
from cmr.schema import provenance_attrs

LAGS = np.arange(-5, 6)


@pytest.fixture(scope="module")
def grid():
    """A coarse teacher-forced grid of the paper's variant (fast, smooth, peaked at +1)."""
    return paper_teacher_forced_grid(beta_enc=np.linspace(0.1, 1.0, 7), beta_rec=np.linspace(0.0, 1.0, 6),
                                     gamma=np.linspace(0.0, 1.0, 4), lags=range(-5, 6))


def units(values):
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    ds = xr.Dataset({"profile": (("unit", "lag"), values)},
                    coords={"unit": np.arange(values.shape[0]), "lag": LAGS.astype(np.int64)})
    ds.attrs.update(provenance_attrs("lag_profile", "tests"))
    ds.attrs["profile_kind"] = "attention_score"
    return ds


def test_roughness_of_known_profiles():
    assert np.isnan(profile_roughness(np.ones(11)))
    alternating = (-1.0) ** np.arange(11)
    # 10 differences of size 2 over 11 squared deviations of about 1
    assert profile_roughness(alternating) == pytest.approx(40.0 / (11 - 1 / 11))
    assert profile_roughness(np.arange(11.0)) == pytest.approx(10.0 / 110.0)
    spike = np.zeros(11)
    spike[6] = 1.0
    assert profile_roughness(spike) == pytest.approx(2.0 / (1.0 - 1.0 / 11))
    noise = np.random.default_rng(0).standard_normal((4000, 11))
    assert np.mean(profile_roughness(noise)) == pytest.approx(2.0, abs=0.05)


@pytest.mark.parametrize("objective", ["paper", "lsq"])
def test_distance_is_the_fit_profiles_distance(grid, objective):
    values = structureless_profiles(20, 11, rng=3)
    values[0] = grid["profile"].isel(beta_enc=3, beta_rec=2, gamma=1).values * 5 + 1
    null = cmr_like_null(units(values), grid, objective=objective, n_null=20, n_bank=200)
    fits = fit_profiles(units(values), grid, objective=objective, gaussian=False)
    np.testing.assert_allclose(null["distance"].values, fits["distance"].values, rtol=0, atol=1e-12)


def test_permuted_null_is_uniform_on_exchangeable_profiles(grid):
    # white noise: every permutation of a unit is as likely as the unit itself, so p is exact
    values = np.random.default_rng(11).standard_normal((400, 11))
    null = cmr_like_null(units(values), grid, objective="paper", n_null=99, n_bank=400, rng=1)
    p = null["p_permuted"].values
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert abs(np.mean(p <= 0.05) - 0.05) < 0.035  # 3.2 binomial SDs at n = 400
    # the combined test is conservative: never rejects more often than its level
    assert np.mean(null["p_value"].values <= 0.05) <= 0.05 + 0.035


def test_smooth_null_is_uniform_on_structureless_profiles(grid):
    values = structureless_profiles(400, 11, rng=12345)
    null = cmr_like_null(units(values), grid, objective="lsq", n_null=99, n_bank=20_000, rng=2)
    p = null["p_smooth"].values
    assert stats.kstest(p, "uniform").pvalue > 0.01
    rough = null["roughness"].values >= np.quantile(null["roughness"].values, 2 / 3)
    assert stats.kstest(p[rough], "uniform").pvalue > 0.01  # the roughness matching holds at the rough end
    assert np.mean(null["beyond_chance"].values) <= 0.05 + 0.035


def test_smooth_null_without_roughness_matching_is_not_calibrated(grid):
    """The calibration check can fail: with every bank profile as the null (no matching), smooth
    random walks look CMR-like far more often than their level."""
    walks = np.cumsum(np.random.default_rng(6).standard_normal((200, 11)), axis=1)
    unmatched = cmr_like_null(units(walks), grid, objective="paper", n_null=1000, n_bank=1000, rng=2)
    assert stats.kstest(unmatched["p_smooth"].values, "uniform").pvalue < 1e-6
    assert np.mean(unmatched["p_smooth"].values <= 0.05) > 0.15
    matched = cmr_like_null(units(walks), grid, objective="paper", n_null=99, n_bank=20_000, rng=2)
    assert np.mean(matched["p_smooth"].values <= 0.05) < 0.05 + 0.04


def test_a_planted_cmr_profile_is_beyond_chance(grid):
    rng = np.random.default_rng(4)
    planted = grid["profile"].isel(beta_enc=4, beta_rec=5, gamma=1).values
    values = np.stack([planted * 3 + 0.01 * rng.standard_normal(11) for _ in range(5)])
    null = cmr_like_null(units(values), grid, objective="lsq", n_null=49, n_bank=2000)
    np.testing.assert_array_equal(null["p_value"].values, 1 / 50)
    assert null["beyond_chance"].values.tolist() == [1] * 5
    assert (null["distance"] < null["threshold"]).all()
    assert null.attrs["share_beyond_chance"] == 1.0


def test_bad_arguments_and_invalid_units(grid):
    values = structureless_profiles(3, 11, rng=0)
    with pytest.raises(ParameterError, match="n_bank"):
        cmr_like_null(units(values), grid, n_null=50, n_bank=10)
    with pytest.raises(ParameterError, match="refine"):
        cmr_like_null(units(values), grid, objective="paper", refine=True)
    with pytest.raises(ParameterError, match="alpha"):
        cmr_like_null(units(values), grid, alpha=1.5)
    values[1] = 2.0  # constant: no distance
    null = cmr_like_null(units(values), grid, n_null=10, n_bank=100)
    assert np.isnan(null["p_value"].values[1]) and null["beyond_chance"].values[1] == 0
    assert np.isfinite(null["p_value"].values[[0, 2]]).all()


def test_null_models_doc_example_runs(monkeypatch, capsys):
    import re

    from tests.conftest import REPO_ROOT

    monkeypatch.chdir(REPO_ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "docs" / "null-models.md").read_text(), flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/null-models.md", "exec"), namespace)  # noqa: S102 - our own documentation
    p_l5h1 = float(capsys.readouterr().out.split()[0])
    assert p_l5h1 == 1 / 51  # GPT-2 L5H1, the study's best head, beats every null profile


def test_cli_null_writes_a_table_and_refuses_bad_input(tmp_path, capsys, grid):
    from cmr.io import save_dataset
    from icl_cmr.analyses.cli import main

    values = structureless_profiles(6, 11, rng=9)
    values[0] = grid["profile"].isel(beta_enc=4, beta_rec=5, gamma=1).values * 3 + 1
    save_dataset(units(values), tmp_path / "heads.nc")
    save_dataset(grid, tmp_path / "grid.nc")
    out = tmp_path / "null.csv"
    assert main(["null", str(tmp_path / "heads.nc"), "--grid", str(tmp_path / "grid.nc"), "--n-null", "19",
                 "-o", str(out)]) == 0
    assert "beyond chance" in capsys.readouterr().out
    import pandas as pd

    table = pd.read_csv(out)
    assert len(table) == 6 and table.loc[0, "p_value"] == pytest.approx(1 / 20) and table.loc[0, "beyond_chance"] == 1
    assert main(["null", str(tmp_path / "heads.nc"), "--grid", str(tmp_path / "grid.nc"), "--n-null", "0",
                 "-o", str(out)]) != 0
    assert "n_null" in capsys.readouterr().err
