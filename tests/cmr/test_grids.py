"""CMR profile grids: the published grid loader, Monte Carlo and teacher-forced generators."""
from __future__ import annotations

import numpy as np
import pytest

from cmr.errors import DataSourceError, FileFormatError
from tests.conftest import published_path


def _published():
    from icl_cmr.adapters.published_grid import load_published_grid

    return load_published_grid(published_path("cmr_crp_grid.npz"))


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
    from icl_cmr.adapters.published_grid import load_published_grid

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

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cmr.errors import ParameterError, ProfileError  # noqa: E402
from cmr.testing import teacher_forced_reference  # noqa: E402


def test_teacher_forced_matches_a_direct_matrix_transcription():
    from cmr.grids import paper_teacher_forced_grid

    grid = paper_teacher_forced_grid([0.2, 0.65, 1.0], [0.0, 0.35, 1.0], [0.0, 0.4, 1.0], list_length=30, lags=range(-6, 7))
    assert grid.attrs["profile_kind"] == "cmr_tf_prob" and grid.attrs["unit_kind"] == "cmr_parameters"
    for be in grid["beta_enc"].values:
        for br in grid["beta_rec"].values:
            for g in grid["gamma"].values:
                expected = teacher_forced_reference(be, br, g, list_length=30, max_lag=6)
                got = grid["profile"].sel(beta_enc=be, beta_rec=br, gamma=g).values
                np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(
    beta_enc=st.floats(0.01, 1.0),
    beta_rec=st.floats(0.0, 1.0),
    gamma=st.floats(0.0, 1.0),
    n=st.integers(2, 25),
)
@example(beta_enc=1.0, beta_rec=1.0, gamma=0.0, n=2)  # the last step has no support: lag -1 is never seen
def test_teacher_forced_probabilities_sum_to_one_per_step(beta_enc, beta_rec, gamma, n):
    from cmr.grids import paper_teacher_forced_grid

    lags = np.arange(-(n - 1), n)
    prob = paper_teacher_forced_grid([beta_enc], [beta_rec], [gamma], list_length=n, lags=lags)["profile"].values.ravel()
    seen = ~np.isnan(prob)  # NaN only at a lag that no step with support reaches: -(n-1), when the last step has none
    assert set(lags[~seen]) <= {-(n - 1)} and (prob[seen] >= 0).all()
    # each used step's probabilities sum to 1; lag L is seen by n - |L| steps, so the
    # count-weighted sum is the number of steps with support (n, or n-1 when the last has none)
    steps = float((prob[seen] * (n - np.abs(lags[seen]))).sum())
    assert abs(steps - round(steps)) < 1e-9 and round(steps) in (n - 1, n)


def test_teacher_forced_hand_worked_full_drift():
    from cmr.grids import paper_teacher_forced_grid

    # beta_enc = beta_rec = 1, gamma = 0: context is the last item, support only on the next one
    prob = paper_teacher_forced_grid([1.0], [1.0], [0.0], list_length=10, lags=range(-3, 4))
    np.testing.assert_array_equal(prob["profile"].values.ravel(), [0, 0, 0, 0, 1, 0, 0])
    logs = paper_teacher_forced_grid([1.0], [1.0], [0.0], kind="logsupport", list_length=10, lags=range(-3, 4), floor=1e-8)
    np.testing.assert_allclose(logs["profile"].values.ravel(), [np.log(1e-8)] * 4 + [0.0] + [np.log(1e-8)] * 2)
    assert logs.attrs["profile_kind"] == "cmr_tf_logsupport" and logs.attrs["floor"] == 1e-8


def test_teacher_forced_paper_grid_shape_and_netcdf_round_trip(tmp_path):
    from cmr.io import load_dataset, save_dataset
    from cmr.grids import paper_teacher_forced_grid

    grid = paper_teacher_forced_grid(kind="logsupport")
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    assert grid.sizes == {"beta_enc": 20, "beta_rec": 21, "gamma": 11, "lag": 17}
    assert np.isfinite(grid["profile"]).all()
    back = load_dataset(save_dataset(grid, tmp_path / "tf.nc"), "lag_profile")
    assert back.identical(grid)


# --- Monte Carlo grid ---------------------------------------------------------------------


RARE = 1e-4  # below this probability a lag sees too few transitions for a normal z-score


def _z_scores(ours, published):
    """Compare an MC grid with the published one (criterion documented in docs/equations.md).

    Returns z-scores of the measured entries, gaps at closed-form points, gaps at rare entries.
    Both grids have the same trial count (500 per start), so the published value carries the
    same Monte Carlo variance as ours: the combined SE is sqrt(2) * our SE. Points where the
    study used closed forms ((beta_rec, gamma) = (1, 0) or (0, 0)) must agree exactly. Entries
    where either value is below ``RARE`` (or no transition was seen) are rare events, whose
    estimated SE is unreliable: a handful of transitions, each worth <= 1e-4, may differ.
    """
    diff = (ours["profile"] - published["profile"]).values
    sem = np.broadcast_to(ours["sem"].values, diff.shape)
    low = np.minimum(ours["profile"].values, published["profile"].values)
    closed = ((ours["gamma"] == 0) & ((ours["beta_rec"] == 0) | (ours["beta_rec"] == 1))).broadcast_like(ours["profile"]).values
    measured = ~closed & (sem > 0) & (low >= RARE)
    rare = ~closed & ~measured
    return diff[measured] / (np.sqrt(2.0) * sem[measured]), np.abs(diff[closed]), np.abs(diff[rare])


def _check_reproduction(z, exact_gaps, rare_gaps, mean_band):
    """Family-wise max |z| under Bonferroni at 1e-3, mean z^2 (1 in expectation) in a band
    that catches systematic deviations, exact closed forms, rare entries within 5e-4."""
    assert np.abs(z).max() < _bonferroni_z(z.size), (np.abs(z).max(), _bonferroni_z(z.size))
    assert mean_band[0] < np.mean(z**2) < mean_band[1], np.mean(z**2)
    assert exact_gaps.max(initial=0.0) < 1e-12
    assert rare_gaps.max(initial=0.0) < 5e-4


def _bonferroni_z(n_tests, family_alpha=1e-3):
    from scipy.stats import norm

    return float(norm.isf(family_alpha / (2 * n_tests)))


def test_monte_carlo_reproduces_the_published_grid_at_sampled_points():
    from cmr.grids import paper_mc_grid

    published = _published()
    rng = np.random.default_rng(2024)
    points = [(rng.integers(20), rng.integers(21), rng.integers(11)) for _ in range(30)]
    zs, exact_gaps, rare_gaps = [], [], []
    for i, j, k in points:
        ref = published.isel(beta_enc=[i], beta_rec=[j], gamma=[k])
        ours = paper_mc_grid(ref["beta_enc"].values, ref["beta_rec"].values, ref["gamma"].values, n_trials=500, rng=5)
        z, gaps, rare = _z_scores(ours, ref)
        zs.append(z)
        exact_gaps.append(gaps)
        rare_gaps.append(rare)
    _check_reproduction(np.concatenate(zs), np.concatenate(exact_gaps), np.concatenate(rare_gaps), (0.6, 1.5))


@pytest.mark.slow
def test_monte_carlo_reproduces_the_whole_published_grid():
    """All 4,620 points at the study's 500 trials (a few minutes on 2 cores)."""
    from cmr.grids import paper_mc_grid

    published = _published()
    ours = paper_mc_grid(n_trials=500, rng=0)
    z, exact_gaps, rare_gaps = _z_scores(ours, published)
    assert z.size > 70_000
    _check_reproduction(z, exact_gaps, rare_gaps, (0.9, 1.1))
    ratio = (ours["sem_start"] / published["sem"]).where(published["sem"] > 1e-4)
    assert 0.9 < float(ratio.median()) < 1.1  # the study's SEM over starts, same MC noise level


def test_monte_carlo_grid_is_deterministic_and_subgrids_agree(tmp_path):
    from cmr.io import load_dataset, save_dataset
    from cmr.grids import paper_mc_grid

    options = dict(n_trials=40, rng=9, start_positions=[1, 5, 9])
    grid = paper_mc_grid([0.3, 0.7], [0.2, 0.9], [0.0, 0.5], **options)
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    np.testing.assert_allclose(grid["profile"].sum("lag"), 1.0, atol=1e-12)
    again = paper_mc_grid([0.3, 0.7], [0.2, 0.9], [0.0, 0.5], n_jobs=1, **options)
    assert again["profile"].equals(grid["profile"]) and again["sem"].equals(grid["sem"])
    single = paper_mc_grid([0.7], [0.2], [0.5], **options)
    assert single["profile"].equals(grid["profile"].sel(beta_enc=[0.7], beta_rec=[0.2], gamma=[0.5]))
    other = paper_mc_grid([0.7], [0.2], [0.5], **{**options, "rng": 10})
    assert not other["profile"].equals(single["profile"])
    back = load_dataset(save_dataset(grid, tmp_path / "mc.nc"), "lag_profile")
    assert back.identical(grid)


def test_window_cut_renormalises():
    from cmr.grids import paper_lag_distribution
    from cmr.grids import cut_lag_window

    full = paper_lag_distribution(0.6, 0.75, 0.3, n_trials=30, rng=1)
    five = paper_lag_distribution(0.6, 0.75, 0.3, n_trials=30, rng=1, lags=range(-5, 6))
    assert full["profile"].dims == ("lag",) and float(five["beta_enc"]) == 0.6
    np.testing.assert_allclose(five["profile"].sum(), 1.0)
    expected = full["profile"].sel(lag=range(-5, 6)) / full["profile"].sel(lag=range(-5, 6)).sum()
    np.testing.assert_allclose(five["profile"], expected, rtol=1e-12)
    cut = cut_lag_window(_published(), range(-5, 6))
    np.testing.assert_allclose(cut["profile"].sum("lag"), 1.0, atol=1e-12)
    assert cut.attrs["unit_kind"] == "cmr_parameters"


def test_bad_grid_inputs_raise_typed_errors():
    from cmr.grids import cut_lag_window, paper_mc_grid, paper_teacher_forced_grid

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
    from icl_cmr.analyses.cli import main
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


def test_the_script_settings_are_rejected_by_the_same_criterion():
    # the study's script says 100 recalls per trial; its saved grid was made with 50. The
    # reproduction criterion must be able to tell (this is what made us look).
    from cmr.grids import paper_mc_grid

    published = _published()
    zs = []
    for i, j, k in [(5, 1, 1), (3, 4, 5), (11, 15, 3), (8, 10, 7), (2, 7, 9)]:
        ref = published.isel(beta_enc=[i], beta_rec=[j], gamma=[k])
        ours = paper_mc_grid(ref["beta_enc"].values, ref["beta_rec"].values, ref["gamma"].values,
                             n_trials=500, max_recalls=100, rng=5)
        zs.append(_z_scores(ours, ref)[0])
    assert np.mean(np.concatenate(zs) ** 2) > 3.0


# --- textbook CMR, teacher-forced ----------------------------------------------------------


def _hand_worked_textbook(b_enc, b_start, b_rec, temperature):
    """Two items, Lfc = Lcf = P1 = Afc = Acf = 0, Dfc = Dcf = 1: context units are the two
    items and the start unit; every item input is its own one-hot unit."""

    def integrate(c, unit, beta):
        cdot = c[unit]
        rho = np.sqrt(1 + beta**2 * (cdot**2 - 1)) - beta * cdot
        out = rho * c
        out[unit] += beta
        return out

    c = np.array([0.0, 0.0, 1.0])  # items 0, 1, start unit
    c = integrate(integrate(c, 0, b_enc), 1, b_enc)
    c = integrate(c, 2, b_start)
    probs = []
    for item in (0, 1):
        c = integrate(c, item, b_rec)
        support = np.maximum(c[:2], 1e-6)
        weights = np.exp(2 * support / temperature)
        probs.append(weights / weights.sum())
    # lags -1, 0, +1
    return np.array([probs[1][0], (probs[0][0] + probs[1][1]) / 2, probs[0][1]])


def test_textbook_teacher_forced_hand_worked_two_items():
    from cmr.grids import textbook_teacher_forced_grid

    fixed = {"Lfc": 0.0, "Lcf": 0.0, "P1": 0.0, "Afc": 0.0, "Acf": 0.0, "Dfc": 1.0, "Dcf": 1.0, "B_start": 0.4}
    grid = textbook_teacher_forced_grid({"B_enc": [0.3, 0.8], "B_rec": [0.2, 0.9], "T": [0.5]}, fixed=fixed,
                                        lags=[-1, 0, 1], list_length=2)
    assert grid["profile"].dims == ("B_enc", "B_rec", "T", "lag")
    assert grid.attrs["profile_kind"] == "cmr_tf_prob" and grid.attrs["unit_kind"] == "cmr_parameters"
    logs = textbook_teacher_forced_grid({"B_enc": [0.3, 0.8], "B_rec": [0.2, 0.9], "T": [0.5]}, fixed=fixed,
                                        kind="logsupport", lags=[-1, 0, 1], list_length=2)
    for b_enc in (0.3, 0.8):
        for b_rec in (0.2, 0.9):
            expected = _hand_worked_textbook(b_enc, 0.4, b_rec, 0.5)
            got = grid["profile"].sel(B_enc=b_enc, B_rec=b_rec, T=0.5).values
            np.testing.assert_allclose(got, expected, rtol=1e-12)
            got_log = logs["profile"].sel(B_enc=b_enc, B_rec=b_rec, T=0.5).values
            np.testing.assert_allclose(got_log[[0, 2]], np.log(expected[[0, 2]]), rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    b_enc=st.floats(0.0, 1.0),
    b_rec=st.floats(0.0, 1.0),
    temperature=st.floats(0.02, 2.0),
    n=st.integers(2, 12),
)
def test_textbook_teacher_forced_probabilities_sum_to_one_per_step(b_enc, b_rec, temperature, n):
    from cmr.grids import textbook_teacher_forced_grid

    lags = np.arange(-(n - 1), n)
    grid = {"B_enc": [b_enc], "B_rec": [b_rec], "T": [temperature]}
    prob = textbook_teacher_forced_grid(grid, list_length=n, lags=lags)["profile"].values.ravel()
    logs = textbook_teacher_forced_grid(grid, kind="logsupport", list_length=n, lags=lags)["profile"].values.ravel()
    np.testing.assert_allclose((prob * (n - np.abs(lags))).sum(), n, rtol=1e-10)
    assert (logs <= 1e-12).all() and (np.exp(logs) <= prob * (1 + 1e-9)).all()  # Jensen


def test_textbook_teacher_forced_bad_input():
    from cmr.grids import textbook_teacher_forced_grid

    with pytest.raises(ParameterError, match="unknown CMR parameter"):
        textbook_teacher_forced_grid({"beta_enc": [0.5]})
    with pytest.raises(ParameterError, match="B_rec must be in"):
        textbook_teacher_forced_grid({"B_rec": [0.5, 1.5]})
    with pytest.raises(ParameterError, match="strictly increasing"):
        textbook_teacher_forced_grid({"T": [0.5, 0.1]})
    with pytest.raises(ParameterError, match="non-empty mapping"):
        textbook_teacher_forced_grid({})


def test_grid_command_textbook_variant(tmp_path, capsys):
    import json

    from icl_cmr.analyses.cli import main
    from cmr.io import load_dataset

    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps({"Dcf": 0.0}))
    out = tmp_path / "tb.nc"
    argv = ["grid", "--variant", "textbook", "--kind", "tf-prob", "--axis", "B_rec=0.3,0.9", "--axis", "T=0.1",
            "--fixed", str(fixed), "--list-length", "20", "-o", str(out)]
    assert main(argv) == 0
    grid = load_dataset(out, "lag_profile")
    assert grid["profile"].dims == ("B_rec", "T", "lag") and '"Dcf": 0.0' in grid.attrs["provenance"]
    assert main(["grid", "--variant", "textbook", "--kind", "mc", "--axis", "T=0.1", "-o", str(out)]) == 1
    assert main(["grid", "--variant", "textbook", "--kind", "tf-prob", "--axis", "beta=0.1", "-o", str(out)]) == 1
    assert main(["grid", "--kind", "tf-prob", "--axis", "T=0.1", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "tf-prob or tf-logsupport" in err and "unknown CMR parameter" in err and "--variant textbook" in err
