"""The strict definition of CMR-like beside the study's: hand-built profiles, uniform attention, properties."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from cmr.cmr_like import (MASS_APPLIED, attention_mass, forward_effect, mirror_order, mirrored_profiles,
                          uniform_attention_prob)
from cmr.constants import STRICT_FORWARD_EFFECT, STRICT_MASS_RATIO
from cmr.errors import ParameterError
from cmr.grids import paper_teacher_forced_grid
from cmr.null_models import cmr_like_null
from cmr.schema import provenance_attrs

LAGS = np.arange(-5, 6)
N_WORDS = 100
UNIFORM = uniform_attention_prob(N_WORDS, lags=LAGS)  # per lag, about 0.0069


@pytest.fixture(scope="module")
def grid():
    """A coarse teacher-forced grid of the paper's variant (as in test_null_models)."""
    return paper_teacher_forced_grid(beta_enc=np.linspace(0.1, 1.0, 7), beta_rec=np.linspace(0.0, 1.0, 6),
                                     gamma=np.linspace(0.0, 1.0, 4), lags=range(-5, 6))


def heads(scores, probs, sem=0.002):
    """A head dataset of one layer: score profiles, probability profiles, a small sem (None: none), 100-word lists."""
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    probs = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    dims = ("model", "checkpoint", "layer", "head", "lag")
    shape = (1, 1, 1, scores.shape[0], LAGS.size)
    ds = xr.Dataset({"profile": (dims, scores.reshape(shape)), "prob_profile": (dims, probs.reshape(shape))},
                    coords={"model": ["m"], "checkpoint": [-1], "layer": [0], "head": np.arange(scores.shape[0]),
                            "lag": LAGS})
    if sem is not None:
        ds["sem"] = (dims, np.full(shape, sem))
    ds.attrs.update(provenance_attrs("lag_profile", "tests", n_words=N_WORDS))
    ds.attrs.update(profile_kind="attention_score", unit_kind="heads")
    return ds


def on_list(profile, mass):
    """Attention probabilities of the profile's shape with ``mass`` in all on lags -5..5."""
    return mass * profile / profile.sum()


def verdicts(null, name):
    return null[name].values.ravel().tolist()


# --- the uniform level and the pieces ----------------------------------------------------------


def test_uniform_level_by_hand():
    # BOS + 3 words + 3 words: second-copy query k sits at 4 + k and sees 5 + k keys
    np.testing.assert_allclose(uniform_attention_prob(3, lags=[-1, 0, 1]),
                               [(1 / 6 + 1 / 7) / 2, (1 / 5 + 1 / 6 + 1 / 7) / 3, (1 / 5 + 1 / 6) / 2], rtol=1e-15)
    assert UNIFORM.sum() == pytest.approx(0.0753, abs=1e-4)
    with pytest.raises(ParameterError, match="n_words = 3"):
        uniform_attention_prob(3, lags=[-3, 0])


def test_uniform_attention_has_mass_ratio_one_through_the_extraction_path():
    """Attention spread evenly over the visible keys gives exactly the uniform level."""
    from icl_cmr.adapters import head_profiles as hp

    n = 12
    seq = 2 * n + 1
    probs = np.tril(np.ones((seq, seq))) / np.arange(1, seq + 1)[:, None]
    scores = np.where(probs > 0, 0.0, -np.inf)[None, None]
    lags = hp.lag_range(6, n)
    summary = hp.prompt_summary(scores, probs[None, None], n, lags)
    ds = hp.head_profile_dataset(hp.pool_summaries([summary]), lags=lags, n_words=n, model="m")
    mass = float(ds["attention_mass"].squeeze())
    assert mass == pytest.approx(uniform_attention_prob(n, lags=LAGS).sum(), rel=1e-12)
    assert float(ds["uniform_mass"].squeeze()) == pytest.approx(mass, rel=1e-12)
    assert float(ds["amplitude"].squeeze()) == 0.0  # flat scores
    for which in ("score", "prob"):  # the mass stays with the heads whichever profile is fitted
        selected = hp.select_profile(ds, which=which)
        assert float(selected["attention_mass"].squeeze()) == mass and attention_mass(selected)[2] == MASS_APPLIED
    old_file = ds.drop_vars(["attention_mass", "uniform_mass", "amplitude"])  # written before they existed
    assert float(hp.select_profile(old_file, which="score")["attention_mass"].squeeze()) == mass


def test_forward_effect_and_mirror_order_by_hand():
    y = np.array([0.0, 1.0, 4.0, 3.0, 0.0])
    assert forward_effect(y, [-2, -1, 0, 1, 2]) == pytest.approx((3 - 1) / 4)
    assert mirror_order([-2, -1, 0, 1, 2]).tolist() == [4, 3, 2, 1, 0]
    assert mirror_order([-2, -1, 1, 2]).tolist() == [3, 2, 1, 0]
    assert mirror_order([-3, -1, 0, 1, 2]) is None
    with pytest.raises(ParameterError, match="lags -1 and \\+1"):
        forward_effect(y, [0, 1, 2, 3, 4])


def test_mass_is_not_applicable_to_recall_and_not_available_without_probabilities():
    crp = xr.Dataset({"profile": (("subject", "lag"), np.ones((2, 3)))}, coords={"lag": [-1, 1, 2]},
                     attrs={"profile_kind": "lag_crp", "unit_kind": "subject"})
    assert attention_mass(crp)[2].startswith("not applicable")
    scores_only = heads(np.ones((1, 11)), np.ones((1, 11))).drop_vars("prob_profile")
    assert attention_mass(scores_only)[2].startswith("not available")
    no_length = heads(np.ones((1, 11)), np.ones((1, 11)) / 11)
    no_length.attrs["provenance"] = "{}"
    assert "n_words" in attention_mass(no_length)[2]
    assert attention_mass(heads(np.ones((1, 11)), np.ones((1, 11)) / 11))[2] == MASS_APPLIED


# --- hand-built profiles under both definitions -------------------------------------------------


def test_hand_built_profiles_under_both_definitions(grid):
    planted = grid["profile"].isel(beta_enc=4, beta_rec=5, gamma=1).values  # peak at +1, decaying both ways
    symmetric = np.exp(-LAGS**2 / 2.0)  # a duplicate-token head: peak at lag 0
    lean = symmetric.copy()
    lean[LAGS == 1] += 0.03  # 3% of the range forward
    flat_bump = planted * 3 + 1  # the score profile of an induction head ...
    scores = np.stack([symmetric * 4, flat_bump, planted * 3 + 1, lean * 4])
    probs = np.stack([on_list(symmetric, 0.5), np.full(11, 1e-4) + 1e-4 * (LAGS == 1),  # ... with probabilities ~0
                      on_list(planted, 0.9), on_list(lean, 0.5)])
    null = cmr_like_null(heads(scores, probs), grid, objective="lsq", n_null=99, n_bank=2000)
    assert null.attrs["mass_criterion"] == MASS_APPLIED
    assert verdicts(null, "cmr_like_study") == [1, 1, 1, 1]
    assert verdicts(null, "cmr_like_strict") == [0, 0, 1, 0]
    # the lag-0 peak: its own mirror, CMR-like beyond chance, so it fails the mirror criterion
    assert null["mirror_gap"].values.ravel()[0] == 0.0
    assert verdicts(null, "passes_mirror")[0] == 0 and verdicts(null, "passes_mass")[0] == 1
    # the near-zero-probability head: the score profile passes everything but the mass floor
    assert null["mass_ratio"].values.ravel()[1] < 0.03
    assert [verdicts(null, name)[1] for name in ("passes_mass", "passes_forward", "passes_mirror")] == [0, 1, 1]
    # the induction-like head passes all three
    assert [verdicts(null, name)[2] for name in ("passes_mass", "passes_forward", "passes_mirror")] == [1, 1, 1]
    assert null["mass_ratio"].values.ravel()[2] > STRICT_MASS_RATIO
    # the 3% lean: forward beyond its sampling error, but below the effect-size floor
    assert verdicts(null, "forward_beyond_chance")[3] == 1
    assert null["forward_effect"].values.ravel()[3] == pytest.approx(0.03, rel=1e-4)
    assert verdicts(null, "passes_forward")[3] == 0
    assert null.attrs["share_cmr_like_study"] == 1.0 and null.attrs["share_cmr_like_strict"] == 0.25
    np.testing.assert_allclose(null["amplitude"].values.ravel(), np.ptp(scores, axis=1))
    # fitting the probabilities themselves: a flat, near-zero profile with a tiny bump at +1 has the
    # shape of the induction head (the distance cannot see the scale) and fails on mass alone
    bump = 1e-4 + 1e-5 * planted / planted.max()
    probs_fit = cmr_like_null(heads(scores[:1], bump, sem=1e-7), grid, objective="lsq", n_null=99, n_bank=2000,
                              variable="prob_profile")
    assert verdicts(probs_fit, "cmr_like_study") == [1] and verdicts(probs_fit, "cmr_like_strict") == [0]
    assert [verdicts(probs_fit, name)[0] for name in ("passes_mass", "passes_forward", "passes_mirror")] == [0, 1, 1]


def test_the_effect_floor_is_the_constant(grid):
    """Leans just below and just above the floor fall on either side of it."""
    base = np.exp(-LAGS**2 / 2.0)
    rows = []
    for share in (0.9 * STRICT_FORWARD_EFFECT, 1.1 * STRICT_FORWARD_EFFECT):
        lean = base.copy()
        lean[LAGS == 1] += share  # the range stays 1 - exp(-12.5), so (y(+1) - y(-1)) / range = share
        rows.append(lean)
    null = cmr_like_null(heads(np.stack(rows), np.stack(rows) * 0.3), grid, n_null=19, n_bank=200)
    np.testing.assert_allclose(null["forward_effect"].values.ravel(),
                               [0.9 * STRICT_FORWARD_EFFECT, 1.1 * STRICT_FORWARD_EFFECT], rtol=1e-4)
    assert verdicts(null, "passes_forward") == [0, 1]


def test_recall_lag_crps_get_the_criteria_that_apply():
    """A human-like lag-CRP: no attention, so the mass criterion is marked not applicable."""
    from icl_cmr.adapters.published_grid import load_published_grid

    published = load_published_grid()  # the study's grid: its CMR cannot fit a backward profile well
    lags = [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    forward = np.array([0.02, 0.03, 0.04, 0.06, 0.12, 0.35, 0.12, 0.07, 0.05, 0.04])  # PEERS-like
    values = np.stack([forward, forward[::-1]])
    crp = xr.Dataset({"profile": (("subject", "lag"), values)}, coords={"subject": [1, 2], "lag": lags})
    crp.attrs.update(provenance_attrs("lag_profile", "tests"))
    crp.attrs.update(profile_kind="lag_crp", unit_kind="subject")
    null = cmr_like_null(crp, published, objective="paper", n_null=49, n_bank=2000)
    assert null.attrs["mass_criterion"].startswith("not applicable")
    assert "attention mass" not in null.attrs["strict_criteria"]
    assert np.isnan(null["passes_mass"].values).all() and np.isnan(null["attention_mass"].values).all()
    assert np.isnan(null.attrs["share_passes_mass"])
    assert null.attrs["forward_significance"].startswith("not available")
    assert verdicts(null, "passes_forward") == [1, 0]
    # the forward profile passes; its mirror, a backward profile, fails on direction and mirror alike
    assert verdicts(null, "cmr_like_study")[0] == 1 and verdicts(null, "passes_mirror") == [1, 0]
    assert verdicts(null, "cmr_like_strict") == [1, 0]


# --- properties ----------------------------------------------------------------------------------


profiles = st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=11, max_size=11).map(np.array)


@settings(max_examples=15, deadline=None)
@given(rows=st.lists(profiles, min_size=2, max_size=4), mass=st.floats(0.0, 1.0))
def test_strict_is_a_subset_of_the_study_and_a_unit_and_its_mirror_are_never_both_strict(grid, rows, mass):
    rows = np.stack(rows)
    rows[0] = grid["profile"].isel(beta_enc=3, beta_rec=5, gamma=1).values  # at least one CMR-like unit
    both = np.concatenate([rows, rows[:, ::-1]])
    probs = np.full(both.shape, mass / 11)
    null = cmr_like_null(heads(both, probs, sem=None), grid, objective="paper", n_null=19, n_bank=300, rng=1)
    study = np.array(verdicts(null, "cmr_like_study"), dtype=bool)
    strict = np.array(verdicts(null, "cmr_like_strict"), dtype=bool)
    assert not (strict & ~study).any()
    n = rows.shape[0]
    assert not (strict[:n] & strict[n:]).any()
    # mirroring swaps the distance and the mirrored distance, and flips the forward effect
    distance = null["distance"].values.ravel()
    mirrored = null["mirror_distance"].values.ravel()
    np.testing.assert_allclose(mirrored[:n], distance[n:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(null["forward_effect"].values.ravel()[n:], -null["forward_effect"].values.ravel()[:n])


@settings(max_examples=10, deadline=None)
@given(row=profiles, mass=st.floats(0.0, 1.0))
def test_mirroring_twice_gives_the_same_verdicts(grid, row, mass):
    rows = np.stack([row, row + grid["profile"].isel(beta_enc=3, beta_rec=5, gamma=1).values * 10])
    ds = heads(rows, np.full(rows.shape, mass / 11))
    once = cmr_like_null(ds, grid, objective="paper", n_null=19, n_bank=300, rng=2)
    twice = cmr_like_null(mirrored_profiles(mirrored_profiles(ds)), grid, objective="paper", n_null=19, n_bank=300,
                          rng=2)
    for name in ("cmr_like_study", "cmr_like_strict", "passes_mass", "passes_forward", "passes_mirror"):
        np.testing.assert_array_equal(once[name].values, twice[name].values)
    mirror = cmr_like_null(mirrored_profiles(ds), grid, objective="paper", n_null=19, n_bank=300, rng=2)
    np.testing.assert_allclose(mirror["distance"].values, once["mirror_distance"].values, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(mirrored_profiles(ds)["profile"].values[..., ::-1], ds["profile"].values)


# --- the command line: both definitions printed, amplitude and mass in the tables -----------------


def test_cli_null_reports_both_definitions(tmp_path, capsys, grid):
    import pandas as pd

    from cmr.io import save_dataset
    from icl_cmr.analyses.cli import main

    planted = grid["profile"].isel(beta_enc=4, beta_rec=5, gamma=1).values
    symmetric = np.exp(-LAGS**2 / 2.0)
    save_dataset(heads(np.stack([planted * 3 + 1, symmetric * 4]), np.stack([on_list(planted, 0.9),
                                                                             on_list(symmetric, 0.5)])), tmp_path / "h.nc")
    save_dataset(grid, tmp_path / "grid.nc")
    out = tmp_path / "null.csv"
    assert main(["null", str(tmp_path / "h.nc"), "--grid", str(tmp_path / "grid.nc"), "--objective", "lsq",
                 "--n-null", "49", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "study's definition (d < 0.5 and beyond both nulls): 100%; strict definition: 50%" in printed
    assert "mass criterion: applied" in printed
    table = pd.read_csv(out)
    assert table["cmr_like_strict"].tolist() == [1, 0] and table["cmr_like_study"].tolist() == [1, 1]
    columns = list(table.columns)
    assert columns[columns.index("distance") + 1:columns.index("distance") + 3] == ["amplitude", "attention_mass"]


def test_export_of_heads_carries_amplitude_and_mass(tmp_path):
    import pandas as pd

    from cmr.io import save_dataset
    from icl_cmr.analyses.cli import main

    probs = np.stack([np.full(11, 0.05), np.full(11, 0.001)])
    ds = heads(np.stack([np.arange(11.0), np.zeros(11)]), probs)  # a file without the summaries
    save_dataset(ds, tmp_path / "h.nc")
    assert main(["export", str(tmp_path / "h.nc"), "--layout", "units", "-o", str(tmp_path / "h.csv")]) == 0
    table = pd.read_csv(tmp_path / "h.csv")
    np.testing.assert_allclose(table["amplitude"], [10.0, 0.0])
    np.testing.assert_allclose(table["attention_mass"], [0.55, 0.011])
    np.testing.assert_allclose(table["uniform_mass"], UNIFORM.sum())


def test_the_null_shares_row_counts_both_definitions(grid):
    from icl_cmr.analyses.reproduce.null_shares import summarise

    planted = grid["profile"].isel(beta_enc=4, beta_rec=5, gamma=1).values
    symmetric = np.exp(-LAGS**2 / 2.0)
    ds = heads(np.stack([planted * 3 + 1, symmetric * 4, planted * 2 + 1]),
               np.stack([on_list(planted, 0.9), on_list(symmetric, 0.5), np.full(11, 1e-4)]))
    row = summarise("three", cmr_like_null(ds, grid, objective="lsq", n_null=49, n_bank=2000),
                    top=np.array([True, True, False]))
    assert row["CMR-like, study (d < 0.5, beyond both nulls)"].startswith("3 of 3 (100%,")
    assert row["CMR-like, strict"].startswith("1 of 3 (33%,")
    assert row["mass criterion"] == "applied"
    assert row["top-10% induction heads CMR-like (study / strict)"] == "2 / 1 of 2"


def test_tiny_model_heads_carry_their_attention_mass(tl, tiny):
    """Through the real extraction path: the mass is the probability profile summed over -5..5."""
    heads_ = tl.extract_heads(tiny, n_words=12, n_prompts=2, rng=1, lags=6)
    window = heads_["prob_profile"].sel(lag=LAGS)
    np.testing.assert_allclose(heads_["attention_mass"].values, window.sum("lag").values, rtol=1e-12)
    np.testing.assert_allclose(heads_["uniform_mass"].values, uniform_attention_prob(12, lags=LAGS).sum(), rtol=1e-12)
    assert (heads_["attention_mass"].values <= 1 + 1e-6).all()
    scores = heads_["profile"].sel(lag=LAGS)
    np.testing.assert_allclose(heads_["amplitude"].values, (scores.max("lag") - scores.min("lag")).values)
    assert attention_mass(heads_)[2] == MASS_APPLIED
    narrow = tl.extract_heads(tiny, n_words=12, n_prompts=1, rng=1, lags=4)  # a window narrower than -5..5
    assert "attention_mass" not in narrow and "amplitude" not in narrow
    assert attention_mass(narrow)[2].startswith("not available")


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 20))
def test_uniform_level_is_the_profile_of_uniform_attention_at_every_lag(n):
    from icl_cmr.adapters import head_profiles as hp

    seq = 2 * n + 1
    probs = (np.tril(np.ones((seq, seq))) / np.arange(1, seq + 1)[:, None])[None, None]
    lags = hp.lag_range(n - 1, n)
    summary = hp.prompt_summary(np.log(np.maximum(probs, 1e-300)), probs, n, lags)
    ds = hp.head_profile_dataset(hp.pool_summaries([summary]), lags=lags, n_words=n, model="m")
    np.testing.assert_allclose(ds["prob_profile"].values.ravel(), uniform_attention_prob(n, lags=lags), rtol=1e-12)


def test_null_shares_of_a_heads_file_apply_the_mass_criterion(tmp_path):
    from cmr.io import save_dataset
    from icl_cmr.analyses.reproduce.null_shares import null_table

    rows = np.random.default_rng(3).normal(size=(4, 11))
    ds = heads(rows, np.full(rows.shape, 0.02))
    ds["induction_score"] = ds["prob_profile"].sel(lag=1)
    save_dataset(ds, tmp_path / "heads.nc")
    table = null_table(heads_path=tmp_path / "heads.nc", objectives=("lsq",), models=(), humans=(), n_null=19)
    assert len(table) == 1 and table[0]["mass criterion"] == "applied"
    assert table[0]["CMR-like, strict"].startswith("0 of 4")  # mass ratio 0.22 / 0.075 < 3 for every head
