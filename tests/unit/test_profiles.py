"""CMR profile grids: the published grid loader, Monte Carlo and teacher-forced generators."""
from __future__ import annotations

import numpy as np
import pytest

from cmr.errors import DataSourceError, FileFormatError
from tests.conftest import reference_path


def _published():
    from adapters.published_grid import load_published_grid

    return load_published_grid(reference_path("icl-cmr", "cmr_crp_grid.npz"))


def test_published_grid_loads_with_parameter_dims(tmp_path):
    from cmr.io import load_dataset, save_dataset

    grid = _published()
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    assert grid.sizes == {"beta_enc": 20, "beta_rec": 21, "gamma": 11, "lag": 17}
    assert grid["lag"].dtype == np.int64 and list(grid["lag"].values) == list(range(-8, 9))
    assert grid.attrs["unit_kind"] == "cmr_parameters"
    assert grid.attrs["profile_kind"] == "cmr_mc_crp"
    np.testing.assert_allclose(grid["profile"].sum("lag"), 1.0, atol=1e-12)
    assert float(grid["beta_enc"][11]) == 0.6 and float(grid["gamma"][3]) == 0.3
    back = load_dataset(save_dataset(grid, tmp_path / "grid.nc"), "lag_profile")
    assert back.identical(grid)


def test_published_grid_bad_paths(tmp_path):
    from adapters.published_grid import load_published_grid

    with pytest.raises(DataSourceError, match="existing .npz"):
        load_published_grid(tmp_path / "absent.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(FileFormatError, match="not a readable"):
        load_published_grid(bad)
    partial = tmp_path / "partial.npz"
    np.savez(partial, crp=np.zeros((2, 2, 2, 3)))
    with pytest.raises(FileFormatError, match="lacks"):
        load_published_grid(partial)


# --- teacher-forced profiles ------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cmr.errors import ParameterError, ProfileError  # noqa: E402


def _teacher_forced_reference(beta_enc, beta_rec, gamma, n, max_lag):
    """Straight numpy transcription of DESIGN 2b/2c with the explicit matrix M."""
    states = n + 1
    offset = np.arange(states)[None, :] - np.arange(states)[:, None]
    m = np.where(offset > 0, (1 - beta_enc) ** np.maximum(offset - 1, 0), 0.0)
    eye = np.identity(states)
    t = eye[0].copy()
    sums = np.zeros(2 * max_lag + 1)
    counts = np.zeros(2 * max_lag + 1)
    for k in range(n):
        if k > 0:
            t_in = (1 - gamma) * eye[k] + gamma * (m @ eye[k])
            t_in /= np.linalg.norm(t_in)
            t = (1 - beta_rec) * t + beta_rec * t_in
            t /= np.linalg.norm(t)
        support = (m.T @ t)[:n]
        if support.sum() <= 0:
            continue
        p = support / support.sum()
        for i, lag in enumerate(range(-max_lag, max_lag + 1)):
            if 0 <= k + lag < n:
                sums[i] += p[k + lag]
                counts[i] += 1
    return sums / counts


def test_teacher_forced_matches_a_direct_matrix_transcription():
    from cmr.profiles import paper_teacher_forced_grid

    grid = paper_teacher_forced_grid([0.2, 0.65, 1.0], [0.0, 0.35, 1.0], [0.0, 0.4, 1.0], list_length=30, lags=range(-6, 7))
    assert grid.attrs["profile_kind"] == "cmr_tf_prob" and grid.attrs["unit_kind"] == "cmr_parameters"
    for be in grid["beta_enc"].values:
        for br in grid["beta_rec"].values:
            for g in grid["gamma"].values:
                expected = _teacher_forced_reference(be, br, g, 30, 6)
                got = grid["profile"].sel(beta_enc=be, beta_rec=br, gamma=g).values
                np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(
    beta_enc=st.floats(0.01, 1.0),
    beta_rec=st.floats(0.0, 1.0),
    gamma=st.floats(0.0, 1.0),
    n=st.integers(2, 25),
)
def test_teacher_forced_probabilities_sum_to_one_per_step(beta_enc, beta_rec, gamma, n):
    from cmr.profiles import paper_teacher_forced_grid

    lags = np.arange(-(n - 1), n)
    prob = paper_teacher_forced_grid([beta_enc], [beta_rec], [gamma], list_length=n, lags=lags)["profile"].values.ravel()
    assert (prob >= 0).all()
    # each used step's probabilities sum to 1; lag L is seen by n - |L| steps, so the
    # count-weighted sum is the number of steps with support (n, or n-1 when the last has none)
    steps = float((prob * (n - np.abs(lags))).sum())
    assert abs(steps - round(steps)) < 1e-9 and round(steps) in (n - 1, n)


def test_teacher_forced_hand_worked_full_drift():
    from cmr.profiles import paper_teacher_forced_grid

    # beta_enc = beta_rec = 1, gamma = 0: context is the last item, support only on the next one
    prob = paper_teacher_forced_grid([1.0], [1.0], [0.0], list_length=10, lags=range(-3, 4))
    np.testing.assert_array_equal(prob["profile"].values.ravel(), [0, 0, 0, 0, 1, 0, 0])
    logs = paper_teacher_forced_grid([1.0], [1.0], [0.0], kind="logsupport", list_length=10, lags=range(-3, 4), floor=1e-8)
    np.testing.assert_allclose(logs["profile"].values.ravel(), [np.log(1e-8)] * 4 + [0.0] + [np.log(1e-8)] * 2)
    assert logs.attrs["profile_kind"] == "cmr_tf_logsupport" and logs.attrs["floor"] == 1e-8


def test_teacher_forced_paper_grid_shape_and_netcdf_round_trip(tmp_path):
    from cmr.io import load_dataset, save_dataset
    from cmr.profiles import paper_teacher_forced_grid

    grid = paper_teacher_forced_grid(kind="logsupport")
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    assert grid.sizes == {"beta_enc": 20, "beta_rec": 21, "gamma": 11, "lag": 17}
    assert np.isfinite(grid["profile"]).all()
    back = load_dataset(save_dataset(grid, tmp_path / "tf.nc"), "lag_profile")
    assert back.identical(grid)


# --- Monte Carlo grid ---------------------------------------------------------------------


def _z_scores(ours, published):
    """Compare an MC grid with the published one: z-scores, closed-form gaps, rare-event gaps.

    Both grids have the same trial count (500 per start), so the published value carries the
    same Monte Carlo variance as ours: the combined SE is sqrt(2) * our SE. Points where the
    study used closed forms ((beta_rec, gamma) = (1, 0) or (0, 0)) must agree exactly; an
    entry whose MC SE is 0 (no transition seen at that lag) may differ by a few rare events,
    each worth at most 1 / (trials * starts) = 1e-4.
    """
    diff = (ours["profile"] - published["profile"]).values
    sem = np.broadcast_to(ours["sem"].values, diff.shape)
    closed = ((ours["gamma"] == 0) & ((ours["beta_rec"] == 0) | (ours["beta_rec"] == 1))).broadcast_like(ours["profile"]).values
    measured = ~closed & (sem > 0)
    rare = ~closed & (sem == 0)
    return diff[measured] / (np.sqrt(2.0) * sem[measured]), np.abs(diff[closed]), np.abs(diff[rare])


def _bonferroni_z(n_tests, family_alpha=1e-3):
    from scipy.stats import norm

    return float(norm.isf(family_alpha / (2 * n_tests)))


def test_monte_carlo_reproduces_the_published_grid_at_sampled_points():
    from cmr.profiles import paper_mc_grid

    published = _published()
    rng = np.random.default_rng(2024)
    points = [(rng.integers(20), rng.integers(21), rng.integers(11)) for _ in range(30)]
    zs, exact_gaps, rare_gaps = [], [], []
    for i, j, k in points:
        ref = published.isel(beta_enc=[i], beta_rec=[j], gamma=[k])
        ours = paper_mc_grid(ref["beta_enc"].values, ref["beta_rec"].values, ref["gamma"].values, n_trials=500, seed=5)
        z, gaps, rare = _z_scores(ours, ref)
        zs.append(z)
        exact_gaps.append(gaps)
        rare_gaps.append(rare)
    z = np.concatenate(zs)
    # criterion (documented in docs/equations.md): family-wise max |z| under Bonferroni at 1e-3,
    # and the mean z^2 (1 in expectation) within a band that catches systematic deviations
    assert np.abs(z).max() < _bonferroni_z(z.size), np.abs(z).max()
    assert 0.6 < np.mean(z**2) < 1.5, np.mean(z**2)
    assert np.concatenate(exact_gaps).max(initial=0.0) < 1e-12
    assert np.concatenate(rare_gaps).max(initial=0.0) < 5e-4


def test_monte_carlo_grid_is_deterministic_and_subgrids_agree(tmp_path):
    from cmr.io import load_dataset, save_dataset
    from cmr.profiles import paper_mc_grid

    options = dict(n_trials=40, seed=9, start_positions=[1, 5, 9])
    grid = paper_mc_grid([0.3, 0.7], [0.2, 0.9], [0.0, 0.5], **options)
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    np.testing.assert_allclose(grid["profile"].sum("lag"), 1.0, atol=1e-12)
    again = paper_mc_grid([0.3, 0.7], [0.2, 0.9], [0.0, 0.5], n_threads=1, **options)
    assert again["profile"].equals(grid["profile"]) and again["sem"].equals(grid["sem"])
    single = paper_mc_grid([0.7], [0.2], [0.5], **options)
    assert single["profile"].equals(grid["profile"].sel(beta_enc=[0.7], beta_rec=[0.2], gamma=[0.5]))
    other = paper_mc_grid([0.7], [0.2], [0.5], **{**options, "seed": 10})
    assert not other["profile"].equals(single["profile"])
    back = load_dataset(save_dataset(grid, tmp_path / "mc.nc"), "lag_profile")
    assert back.identical(grid)


def test_window_cut_renormalises():
    from cmr.paper_variant import paper_crp
    from cmr.profiles import cut_lag_window

    full = paper_crp(0.6, 0.75, 0.3, n_trials=30, seed=1)
    five = paper_crp(0.6, 0.75, 0.3, n_trials=30, seed=1, lags=range(-5, 6))
    assert full["profile"].dims == ("lag",) and float(five["beta_enc"]) == 0.6
    np.testing.assert_allclose(five["profile"].sum(), 1.0)
    expected = full["profile"].sel(lag=range(-5, 6)) / full["profile"].sel(lag=range(-5, 6)).sum()
    np.testing.assert_allclose(five["profile"], expected, rtol=1e-12)
    cut = cut_lag_window(_published(), range(-5, 6))
    np.testing.assert_allclose(cut["profile"].sum("lag"), 1.0, atol=1e-12)
    assert cut.attrs["unit_kind"] == "cmr_parameters"


def test_bad_grid_inputs_raise_typed_errors():
    from cmr.profiles import cut_lag_window, paper_mc_grid, paper_teacher_forced_grid

    with pytest.raises(ParameterError, match="strictly increasing"):
        paper_teacher_forced_grid([0.5, 0.5], [0.1], [0.1])
    with pytest.raises(ParameterError, match=r"beta_enc must lie in \(0, 1\]"):
        paper_teacher_forced_grid([0.0, 0.5], [0.1], [0.1])
    with pytest.raises(ProfileError, match="integers"):
        paper_teacher_forced_grid([0.5], [0.1], [0.1], lags=[-1.5, 0.5])
    with pytest.raises(ProfileError, match="kind"):
        paper_teacher_forced_grid([0.5], [0.1], [0.1], kind="softmax")
    with pytest.raises(ProfileError, match="lags"):
        paper_teacher_forced_grid([0.5], [0.1], [0.1], list_length=5, lags=range(-6, 7))
    with pytest.raises(ProfileError, match="not in the dataset"):
        cut_lag_window(_published(), range(-9, 2))
    logs = paper_teacher_forced_grid([0.5], [0.1], [0.1], kind="logsupport")
    with pytest.raises(ProfileError, match="distributions"):
        cut_lag_window(logs, range(-5, 6))
    with pytest.raises(ParameterError, match="gamma"):
        paper_mc_grid([0.5], [0.1], [1.2])


def test_grid_command_writes_lag_profiles(tmp_path, capsys):
    from analyses.cli import main
    from cmr.io import load_dataset

    out = tmp_path / "tf.nc"
    assert main(["grid", "--kind", "tf-logsupport", "--beta-enc", "0.5:0.7:0.1", "--gamma", "0,0.3", "--lags=-5:5", "-o", str(out)]) == 0
    grid = load_dataset(out, "lag_profile")
    assert grid.attrs["profile_kind"] == "cmr_tf_logsupport"
    np.testing.assert_array_equal(grid["beta_enc"], [0.5, 0.6, 0.7])
    assert grid.sizes["beta_rec"] == 21 and list(grid["lag"].values) == list(range(-5, 6))
    mc = tmp_path / "mc.nc"
    assert main(["grid", "--kind", "mc", "--beta-enc", "0.6", "--beta-rec", "0.75", "--gamma", "0.3", "--n-trials", "20", "--seed", "3", "-o", str(mc)]) == 0
    assert load_dataset(mc, "lag_profile").attrs["profile_kind"] == "cmr_mc_crp"
    assert main(["grid", "--kind", "tf-prob", "--beta-enc", "1:0:0.1", "-o", str(tmp_path / "bad.nc")]) == 1
    assert "START:STOP:STEP" in capsys.readouterr().err
