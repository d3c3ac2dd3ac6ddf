"""Forward asymmetry beside "CMR-like beyond chance", and the exact textbook beta_rec of the paper's variant."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import optimize, stats

from cmr.beta_scales import recall_drift, textbook_beta, textbook_beta_rec
from cmr.errors import ParameterError
from cmr.null_models import cmr_like_null
from cmr.schema import provenance_attrs
from icl_cmr.adapters.published_grid import load_published_grid
from icl_cmr.analyses.reproduce.null_shares import summarise, wilson_interval

HEAD_LAGS = np.arange(-5, 6)
RECALL_LAGS = np.array([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5])
# the pooled lag-CRP of PEERS (psifr:peers_notask), lags -5..-1, 1..5: the human forward asymmetry
PEERS_CRP = np.array([0.054, 0.065, 0.081, 0.109, 0.262, 0.455, 0.123, 0.094, 0.066, 0.064])


@pytest.fixture(scope="module")
def grid():
    return load_published_grid()


def units(values, sem=None, lags=HEAD_LAGS, kind="attention_score"):
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    variables = {"profile": (("unit", "lag"), values)}
    if sem is not None:
        variables["sem"] = (("unit", "lag"), np.broadcast_to(np.asarray(sem, dtype=np.float64), values.shape).copy())
    ds = xr.Dataset(variables, coords={"unit": np.arange(values.shape[0]), "lag": np.asarray(lags, dtype=np.int64)})
    ds.attrs.update(provenance_attrs("lag_profile", "tests"))
    ds.attrs["profile_kind"] = kind
    return ds


def binomial_sem(crp, possible=100):
    return np.sqrt(crp * (1.0 - crp) / possible)


def test_a_symmetric_peak_is_cmr_like_but_not_forward_asymmetric(grid):
    peak = np.exp(-(HEAD_LAGS**2) / 2.0)
    null = cmr_like_null(units(peak, sem=0.01), grid, objective="paper", n_null=50, n_bank=2000)
    assert null["beyond_chance"].item() == 1  # the distance alone calls it CMR-like beyond chance
    assert null["asymmetry"].item() == 0.0
    assert null["p_asymmetry"].item() == 1.0
    assert null["forward_beyond_chance"].item() == 0
    assert null["backward_beyond_chance"].item() == 0
    assert null.attrs["share_cmr_like_and_forward"] == 0.0


def test_a_human_forward_profile_is_both_and_its_mirror_is_backward(grid):
    profiles = units([PEERS_CRP, PEERS_CRP[::-1]], sem=binomial_sem(np.array([PEERS_CRP, PEERS_CRP[::-1]])),
                     lags=RECALL_LAGS, kind="lag_crp")
    null = cmr_like_null(profiles, grid, objective="paper", n_null=50, n_bank=2000)
    forward, backward = null.sel(unit=0), null.sel(unit=1)
    assert forward["beyond_chance"].item() == 1
    assert forward["forward_beyond_chance"].item() == 1
    assert forward["backward_beyond_chance"].item() == 0
    assert forward["asymmetry"].item() > 0
    assert backward["asymmetry"].item() == pytest.approx(-forward["asymmetry"].item(), abs=1e-12)
    assert backward["p_asymmetry"].item() <= 0.05
    assert backward["backward_beyond_chance"].item() == 1
    assert backward["forward_beyond_chance"].item() == 0
    assert null.attrs["share_forward_beyond_chance"] == 0.5
    assert null.attrs["share_backward_beyond_chance"] == 0.5


def test_asymmetry_values_and_p_by_hand(grid):
    sem = binomial_sem(PEERS_CRP)
    null = cmr_like_null(units(PEERS_CRP, sem=sem, lags=RECALL_LAGS, kind="lag_crp"), grid, objective="paper",
                         n_null=20, n_bank=500)
    sd = PEERS_CRP.std()
    assert null["asymmetry"].item() == pytest.approx((0.455 - 0.262) / sd, rel=1e-12)
    assert null.attrs["asymmetry_lags"] == 5
    assert null["asymmetry_sum"].item() == pytest.approx((PEERS_CRP[5:].sum() - PEERS_CRP[:5].sum()) / sd, rel=1e-12)
    z = (0.455 - 0.262) / np.hypot(sem[4], sem[5])
    assert null["p_asymmetry"].item() == pytest.approx(2 * stats.norm.sf(z), rel=1e-9)
    z_sum = (PEERS_CRP[5:].sum() - PEERS_CRP[:5].sum()) / np.sqrt((sem**2).sum())
    assert null["p_asymmetry_sum"].item() == pytest.approx(2 * stats.norm.sf(z_sum), rel=1e-9)


def test_the_shape_nulls_cannot_see_the_human_forward_asymmetry(grid):
    # why the decision uses the sampling null: among 10 lags, a +1/-1 step as large as the pooled
    # human one is what permuted or smooth structureless profiles give one time in ten
    null = cmr_like_null(units(PEERS_CRP, sem=binomial_sem(PEERS_CRP), lags=RECALL_LAGS, kind="lag_crp"), grid,
                         objective="paper", n_null=200, n_bank=20000)
    assert null["p_asymmetry_permuted"].item() > 0.05
    assert null["p_asymmetry_smooth"].item() > 0.05
    assert null["p_asymmetry"].item() < 0.01


def test_asymmetry_leaves_the_cmr_like_test_as_it_was(grid):
    values = np.random.default_rng(4).standard_normal((6, 11)).cumsum(axis=1)
    with_sem = cmr_like_null(units(values, sem=0.1), grid, objective="paper", n_null=30, n_bank=300, rng=2)
    without = cmr_like_null(units(values), grid, objective="paper", n_null=30, n_bank=300, rng=2)
    for name in ("distance", "p_permuted", "p_smooth", "p_value", "threshold", "beyond_chance", "asymmetry",
                 "p_asymmetry_permuted", "p_asymmetry_smooth"):
        np.testing.assert_array_equal(with_sem[name].values, without[name].values)
    assert without.attrs["asymmetry_null"].startswith("none")
    assert np.isnan(without["p_asymmetry"].values).all()
    assert (without["forward_beyond_chance"].values == 0).all()
    assert "asymmetry" not in with_sem.attrs["provenance"]


def test_the_null_shares_row_has_asymmetry_counts_and_wilson_intervals(grid):
    profiles = units([PEERS_CRP, PEERS_CRP[::-1], PEERS_CRP], sem=0.01, lags=RECALL_LAGS, kind="lag_crp")
    row = summarise("three", cmr_like_null(profiles, grid, objective="paper", n_null=20, n_bank=300))
    low, high = stats.binomtest(2, 3).proportion_ci(method="wilson")
    assert wilson_interval(2, 3) == pytest.approx((low, high), rel=1e-12)
    assert row["forward beyond chance"] == f"2 of 3 (67%, {100 * low:.0f}-{100 * high:.0f}%)"
    assert row["backward beyond chance"].startswith("1 of 3 (33%,")


def test_cli_null_prints_the_forward_share_beside_the_cmr_like_share(tmp_path, capsys):
    from cmr.io import save_dataset
    from icl_cmr.analyses.cli import main

    profiles = units([PEERS_CRP, PEERS_CRP[::-1]], sem=0.01, lags=RECALL_LAGS, kind="lag_crp")
    save_dataset(profiles, tmp_path / "crp.nc")
    out = tmp_path / "null.csv"
    assert main(["null", str(tmp_path / "crp.nc"), "--n-null", "19", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "CMR-like beyond chance" in printed
    assert "50% forward, 50% backward beyond chance" in printed
    import pandas as pd

    table = pd.read_csv(out)
    assert table["forward_beyond_chance"].tolist() == [1, 0]
    assert table["backward_beyond_chance"].tolist() == [0, 1]


# ---- the exact beta_rec map ------------------------------------------------------------------


def brute_force_contexts(beta_enc, beta_rec, gamma, n_items, textbook=None):
    """Contexts c_0..c_(n-1) and inputs t_in,1..t_in,(n-1): explicit vectors, one recall at a time."""
    a = 1.0 - beta_enc
    context = np.zeros(n_items)
    context[0] = 1.0
    contexts, inputs = [context], []
    for k in range(1, n_items):
        t_in = np.zeros(n_items)
        t_in[k] = 1.0 - gamma
        for i in range(k):
            t_in[i] = gamma * a ** (k - 1 - i)
        t_in /= np.linalg.norm(t_in)
        if textbook is None:
            context = (1.0 - beta_rec) * context + beta_rec * t_in
            context /= np.linalg.norm(context)
        else:
            context = textbook_step(context, t_in, textbook)
        contexts.append(context)
        inputs.append(t_in)
    return np.array(contexts), np.array(inputs)


def textbook_step(context, t_in, beta):
    """Textbook CMR's update (Polyn et al. 2009): rho keeps the context at unit norm."""
    dot = context @ t_in
    rho = np.sqrt(1.0 + beta**2 * (dot**2 - 1.0)) - beta * dot
    return rho * context + beta * t_in


def brute_force_overlaps(beta_enc, beta_rec, gamma, n_items, textbook=None):
    """Per-recall overlaps c_k . c_(k-1)."""
    contexts, _ = brute_force_contexts(beta_enc, beta_rec, gamma, n_items, textbook)
    return (contexts[1:] * contexts[:-1]).sum(axis=1)


SMALL_CASES = [(0.3, 0.5, 0.4, 5), (0.8, 0.2, 0.9, 6), (0.05, 0.6, 0.7, 8), (1.0, 0.7, 0.0, 4), (0.5, 0.95, 1.0, 7)]


@pytest.mark.parametrize(("beta_enc", "beta_rec", "gamma", "n_items"), SMALL_CASES)
def test_exact_map_matches_brute_force_drift(beta_enc, beta_rec, gamma, n_items):
    variant = brute_force_overlaps(beta_enc, beta_rec, gamma, n_items)
    overlap, _ = recall_drift(beta_enc, beta_rec, gamma, n_items=n_items)
    np.testing.assert_allclose(overlap, variant, rtol=0, atol=1e-12)
    matched = textbook_beta_rec(beta_enc, beta_rec, gamma, n_items=n_items)
    textbook = brute_force_overlaps(beta_enc, beta_rec, gamma, n_items, textbook=matched)
    assert abs(textbook.mean() - variant.mean()) < 1e-10
    root = optimize.brentq(lambda b: brute_force_overlaps(beta_enc, beta_rec, gamma, n_items, textbook=b).mean()
                           - variant.mean(), 1e-9, 1.0, xtol=1e-14)
    assert matched == pytest.approx(root, abs=1e-10)


def test_stepwise_beta_reproduces_the_variant_context_exactly():
    # per recall, beta_rec / sqrt((1-B)^2 + B^2 + 2B(1-B)x) makes textbook CMR's update the variant's
    beta_enc, beta_rec, gamma, n_items = 0.4, 0.6, 0.5, 6
    contexts, inputs = brute_force_contexts(beta_enc, beta_rec, gamma, n_items)
    _, x = recall_drift(beta_enc, beta_rec, gamma, n_items=n_items)
    np.testing.assert_allclose(x, (contexts[:-1] * inputs).sum(axis=1), rtol=0, atol=1e-12)
    steps = beta_rec / np.sqrt((1 - beta_rec) ** 2 + beta_rec**2 + 2 * beta_rec * (1 - beta_rec) * x)
    for k, beta in enumerate(steps):
        np.testing.assert_allclose(textbook_step(contexts[k], inputs[k], beta), contexts[k + 1], rtol=0, atol=1e-12)
    assert (steps < textbook_beta(beta_rec, phase="rec")).all()  # the overlaps are positive here


def test_orthogonal_inputs_give_the_orthogonal_formula_and_ends_are_exact():
    beta_rec = np.linspace(0.0, 1.0, 11)
    np.testing.assert_allclose(textbook_beta_rec(1.0, beta_rec, 0.0), textbook_beta(beta_rec, phase="rec"),
                               rtol=0, atol=1e-12)
    assert textbook_beta_rec(0.3, 0.0, 0.5) == 0.0
    assert textbook_beta_rec(0.3, 1.0, 0.5) == 1.0
    # an input overlapping the context moves it less per unit of beta: the orthogonal formula overstates
    assert textbook_beta_rec(0.05, 0.6, 0.7) < textbook_beta(0.6, phase="rec") - 0.2


def test_documented_error_of_the_orthogonal_formula():
    beta_enc, beta_rec, gamma = np.meshgrid(np.round(np.arange(1, 21) * 0.05, 2), np.round(np.arange(21) * 0.05, 2),
                                            np.round(np.arange(11) * 0.1, 1), indexing="ij")
    error = textbook_beta(beta_rec, phase="rec") - textbook_beta_rec(beta_enc, beta_rec, gamma)
    assert np.abs(error).max() == pytest.approx(0.217, abs=5e-4)
    assert np.median(np.abs(error)) == pytest.approx(0.036, abs=5e-4)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    (dict(beta_enc=0.5, beta_rec=0.5, gamma=1.5), r"^gamma must lie in \[0, 1\] \(NaN passes through\); got values from 1.5 to 1.5$"),
    (dict(beta_enc=[0.5, 0.6], beta_rec=[0.1, 0.2, 0.3], gamma=0.2),
     r"^beta_enc, beta_rec and gamma must broadcast together; got shapes \(2,\), \(3,\), \(\)$"),
    (dict(beta_enc=0.5, beta_rec=0.5, gamma=0.2, n_items=1), r"^n_items must be an integer >= 2; got 1$"),
    (dict(beta_enc=1.25, beta_rec=0.5, gamma=0.2), r"^beta_enc must lie in \[0, 1\] \(NaN passes through\); got values from 1.25 to 1.25$"),
    (dict(beta_enc=0.5, beta_rec="fast", gamma=0.2), r"^beta_rec must be a number or an array of numbers in \[0, 1\]; got 'fast'$"),
])
def test_bad_arguments_raise_one_typed_line(kwargs, pattern):
    with pytest.raises(ParameterError, match=pattern) as caught:
        textbook_beta_rec(**kwargs)
    assert "\n" not in str(caught.value)
