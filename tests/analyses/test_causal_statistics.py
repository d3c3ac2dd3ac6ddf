"""Set-level inference of the causal test: a random set passes the primary tests at their nominal rate.

Synthetic effects stand in for ablations: set ``s`` on unit ``u`` has effect
``a_s + b_u + e_su`` with a between-set sd of 0.06 nats and a per-unit residual sd of 0.34
(the sizes measured on SmolLM2's ICL score). The "top" set is one more random set, so every
test of it against the random sets should reject at about its level.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from cmr.errors import ParameterError
from icl_cmr.analyses.causal import ablation
from icl_cmr.analyses.causal import power as ablation_power
from icl_cmr.analyses.causal import statistics as ablation_stats

BETWEEN_SD, RESIDUAL_SD, UNIT_SD = 0.06, 0.34, 0.5


def _null_experiments(n_rep, n_sets, n_units, seed):
    """(n_rep, n_sets + 1, n_units) synthetic effects; row 0 of each experiment plays the top set."""
    rng = np.random.default_rng(seed)
    sets = rng.normal(0, BETWEEN_SD, (n_rep, n_sets + 1, 1))
    units = rng.normal(0, UNIT_SD, (n_rep, 1, n_units))
    return sets + units + rng.normal(0, RESIDUAL_SD, (n_rep, n_sets + 1, n_units))


def test_a_random_set_passes_the_primary_tests_at_the_nominal_rate():
    effects = _null_experiments(600, 60, 40, seed=0)
    rank_p, crossed_p, old_p, z = [], [], [], []
    for experiment in effects:
        top, null = experiment[0], experiment[1:]
        rank_p.append(ablation_stats.rank_pvalue(top.mean(), null.mean(axis=1)))
        crossed_p.append(ablation_stats.crossed_contrast(top, null)["t_pvalue"])
        old_p.append(stats.ttest_1samp(top - null.mean(axis=0), 0.0).pvalue)  # the set against the family's mean
        z.append(ablation_stats.set_z(top.mean(), null.mean(axis=1))[0])
    rank_p, crossed_p, old_p = map(np.asarray, (rank_p, crossed_p, old_p))
    # the rank p is exact: P(p <= 0.05) = floor(0.05 * 61) / 61 = 3 / 61 = 0.049; 600 draws: sd 0.009
    assert np.mean(rank_p <= 0.05) == pytest.approx(3 / 61, abs=0.03)
    # the crossed set x unit contrast holds its level (two-sided), where the paired t against the mean does not
    assert 0.02 <= np.mean(crossed_p < 0.05) <= 0.08
    assert np.mean(old_p < 0.05) > 0.12
    assert np.mean(np.abs(z) > 1.96) == pytest.approx(0.05, abs=0.03)


def test_the_paired_t_against_the_family_mean_grows_with_units_the_crossed_test_does_not():
    rates = {}
    for n_units in (6, 200):
        effects = _null_experiments(300, 40, n_units, seed=n_units)
        old = [stats.ttest_1samp(e[0] - e[1:].mean(axis=0), 0.0).pvalue < 0.05 for e in effects]
        new = [ablation_stats.crossed_contrast(e[0], e[1:])["t_pvalue"] < 0.05 for e in effects]
        rates[n_units] = (np.mean(old), np.mean(new))
    assert rates[200][0] > 0.3 > rates[6][0]  # the old test: a random set "passes" more often with more units
    assert all(0.01 <= new <= 0.1 for _, new in rates.values())


def test_crossed_contrast_by_hand_and_degenerate_cases():
    # 3 sets x 2 units; set means 1, 2, 3 (units add +0 / +1): MS_sets = 2 * var([1.5, 2.5, 3.5]) = 2, MS_res = 0
    null = np.array([[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])
    top = np.array([4.0, 6.0])  # unit deviations from the family's unit means (2, 3): 2 and 3
    out = ablation_stats.crossed_contrast(top, null)
    assert out["mean_difference"] == pytest.approx(5.0 - 2.5)
    assert out["between_set_sd"] == pytest.approx(1.0) and out["residual_sd"] == pytest.approx(0.0)
    # Var(D) = sigma_set^2 (1 + 1/3) + var([2, 3]) / 2 = 4/3 + 0.25
    assert out["t_statistic"] == pytest.approx(2.5 / np.sqrt(4 / 3 + 0.25))
    assert out["ci_low"] < out["mean_difference"] < out["ci_high"]
    assert np.isnan(ablation_stats.crossed_contrast(top[:1], null[:, :1])["t_pvalue"])  # one unit
    assert np.isnan(ablation_stats.crossed_contrast(top, null[:1])["t_pvalue"])  # one set
    with pytest.raises(ParameterError, match="n_set, n_unit"):
        ablation_stats.crossed_contrast(top, null.T)


def test_unit_means_make_articles_the_unit():
    values = np.array([[1.0, 3.0, 10.0, 5.0], [0.0, 0.0, 2.0, 4.0]])
    labels, means = ablation_stats.unit_means(values, [4, 4, 9, 1])
    assert labels.tolist() == [1, 4, 9]
    np.testing.assert_allclose(means, [[5.0, 2.0, 10.0], [4.0, 0.0, 2.0]])
    with pytest.raises(ParameterError, match="one unit"):
        ablation_stats.unit_means(values, [1, 2])


def test_comparison_statistics_use_article_means_for_paired_tests():
    rng = np.random.default_rng(5)
    articles = np.repeat(np.arange(8), 3)  # 8 articles of 3 windows each
    effects = rng.normal(size=(1, 4, 24)) + rng.normal(size=(1, 1, 8)).repeat(3, axis=2)
    names, table = ablation_stats.comparison_statistics(effects, ["top", "induction", "random", "random"], rng=0, n_boot=100,
                                                        articles=articles)
    row = dict(zip(ablation_stats.STAT_NAMES, table[0, names.index("top_vs_induction")]))
    d = (effects[0, 0] - effects[0, 1]).reshape(8, 3).mean(axis=1)
    assert row["n_units"] == 8 and row["t_pvalue"] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    per_passage = dict(zip(ablation_stats.STAT_NAMES,
                           ablation_stats.comparison_statistics(effects, ["top", "induction", "random", "random"], rng=0,
                                                                n_boot=100)[1][0, names.index("top_vs_induction")]))
    assert per_passage["n_units"] == 24


def test_random_sets_from_all_heads_make_the_top_set_exchangeable():
    # sets drawn uniformly among all 12 heads: every head equally often, the top set's heads included
    sets, _, families = ablation.head_sets(3, 4, [(0, 0), (0, 1)], n_random=3000, n_matched=0, rng=2)
    drawn = [head for s, f in zip(sets, families) if f == "random" for head in s]
    counts = np.array([drawn.count((l, h)) for l in range(3) for h in range(4)])
    assert counts.sum() == 6000 and abs(counts / 6000 - 1 / 12).max() < 0.015
    assert counts[0] > 0 and counts[1] > 0  # the top set's own heads are drawn too
    # a top set that is itself a uniform draw passes the rank test at its nominal rate
    rng = np.random.default_rng(0)
    head_effect = rng.normal(size=12)
    p = []
    for rep in range(300):
        draws = [sorted(rng.choice(12, size=2, replace=False)) for _ in range(20)]
        top, *null = [head_effect[d].sum() for d in draws]
        p.append(ablation_stats.rank_pvalue(top, null))
    assert np.mean(np.asarray(p) <= 0.1) == pytest.approx(2 / 21, abs=0.05)


def test_rank_test_power_agrees_with_a_simulation():
    rng = np.random.default_rng(1)
    z, n, level = 2.5, 199, 0.05
    null = rng.normal(size=(4000, n))
    top = z + 0.5 * rng.normal(size=4000)
    p = (1 + np.sum(null >= top[:, None], axis=1)) / (n + 1)
    assert abs(np.mean(p <= level) - ablation_power.rank_test_power(z, n, alpha=level, z_sd=0.5)) < 0.03
    # a fixed value: exact binomial; 19 sets at level 0.05: only c = 0 passes, i.e. Phi(z)^19
    assert ablation_power.rank_test_power(1.0, 19, alpha=0.05) == pytest.approx(stats.norm.cdf(1.0) ** 19)
    assert ablation_power.rank_test_power(3.0, 10, alpha=0.05) == 0.0  # 1 / 11 > 0.05: unreachable
    with pytest.raises(ParameterError):
        ablation_power.rank_test_power(1.0, 0)


def test_rank_power_is_bounded_by_the_between_set_spread():
    small = dict(effect=0.1, between_set_sd=0.06, residual_sd=0.34)
    few, many, limit = (ablation_power.rank_design_power(**small, n_units=u, n_random=1000, m=6)
                        for u in (30, 3000, np.inf))
    # z tends to 0.1 / 0.06 = 1.67 whatever the units: below Holm's 0.05 / 6 level, so the limit is ~0
    assert limit == pytest.approx(ablation_power.rank_test_power(0.1 / 0.06, 1000, alpha=0.05, m=6))
    assert many == pytest.approx(limit, abs=1e-3) and limit < 0.01 < few < 0.1  # few units: only luck
    large = dict(effect=0.3, between_set_sd=0.06, residual_sd=0.34)
    few, many, limit = (ablation_power.rank_design_power(**large, n_units=u, n_random=1000, m=6)
                        for u in (10, 300, np.inf))
    assert few < many <= limit + 1e-9 and limit > 0.99
    # no between-set spread: the units alone set the power, which then grows to 1
    assert ablation_power.rank_design_power(0.1, 0.0, 0.34, 3000, 1000, m=6) > 0.99


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_sets=st.integers(2, 12), n_units=st.integers(2, 15),
       shift=st.floats(-3, 3), scale=st.floats(0.1, 10))
def test_crossed_contrast_ignores_unit_effects_and_follows_the_set(seed, n_sets, n_units, shift, scale):
    rng = np.random.default_rng(seed)
    null, top = rng.normal(size=(n_sets, n_units)), rng.normal(size=n_units)
    units = rng.normal(0, 5, n_units)  # an article effect shared by every set cancels in the contrast
    base = ablation_stats.crossed_contrast(top, null)
    moved = ablation_stats.crossed_contrast(top + units, null + units)
    for key in ("mean_difference", "t_statistic", "between_set_sd", "residual_sd", "set_residual_sd"):
        assert moved[key] == pytest.approx(base[key], rel=1e-9, abs=1e-9)
    shifted = ablation_stats.crossed_contrast(top + shift, null)  # shifting the set shifts the difference only
    assert shifted["mean_difference"] == pytest.approx(base["mean_difference"] + shift, abs=1e-9)
    assert shifted["set_residual_sd"] == pytest.approx(base["set_residual_sd"], rel=1e-9, abs=1e-12)
    scaled = ablation_stats.crossed_contrast(scale * top, scale * null)  # units of the effect do not matter
    assert scaled["t_statistic"] == pytest.approx(base["t_statistic"], rel=1e-9, abs=1e-9)
