"""Holm and Benjamini-Hochberg adjusted p-values (cmr.multiple_comparisons): hand cases, the step-up
rule, NaN handling, bad input, and the properties every adjustment has."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cmr
from cmr.errors import ParameterError

ADJUSTMENTS = [cmr.holm, cmr.benjamini_hochberg]


def test_holm_hand_case_and_nan():
    p = [0.01, 0.04, 0.03, 0.005, np.nan]
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    np.testing.assert_allclose(cmr.holm(p), [0.03, 0.06, 0.06, 0.02, np.nan], equal_nan=True)
    np.testing.assert_allclose(cmr.holm([[0.5, 0.9]]), [[1.0, 1.0]])


def test_benjamini_hochberg_hand_case_and_nan():
    p = [0.01, 0.04, 0.03, 0.005, np.nan, 0.5]
    # sorted 0.005, 0.01, 0.03, 0.04, 0.5 times 5/1, 5/2, 5/3, 5/4, 5/5 = 0.025, 0.025, 0.05, 0.05, 0.5
    # -> running min from the largest
    np.testing.assert_allclose(cmr.benjamini_hochberg(p), [0.025, 0.05, 0.05, 0.025, np.nan, 0.5], equal_nan=True)
    np.testing.assert_allclose(cmr.benjamini_hochberg([[0.9, 0.95]]), [[0.95, 0.95]])


def test_benjamini_hochberg_rejects_what_the_step_up_rule_rejects():
    # 0.039 > 0.05 * 3 / 5 but 0.04 <= 0.05 * 4 / 5: the step-up rule rejects the four smallest
    p = np.array([0.001, 0.02, 0.039, 0.04, 0.3])
    assert (cmr.benjamini_hochberg(p) <= 0.05).tolist() == [True, True, True, True, False]
    assert (cmr.holm(p) <= 0.05).tolist() == [True, False, False, False, False]


def test_permutation_p_values_are_rejected_as_by_the_threshold_rule():
    # p-values on the lattice k / (n_null + 1) of the null models: the same rejections as
    # comparing the sorted p_(i) with q i / m, for every family size
    rng = np.random.default_rng(0)
    for m in (1, 2, 7, 50, 144, 201):
        p = rng.integers(1, 202, size=m) / 201.0
        ranked = np.sort(p)
        below = ranked <= 0.05 * np.arange(1, m + 1) / m
        n_rejected = np.flatnonzero(below).max() + 1 if below.any() else 0
        assert int(np.sum(cmr.benjamini_hochberg(p) <= 0.05)) == n_rejected


@pytest.mark.parametrize("adjust", ADJUSTMENTS)
def test_an_empty_or_all_nan_family_gives_nan(adjust):
    assert adjust([]).shape == (0,)
    assert np.isnan(adjust([np.nan, np.nan])).all()


@pytest.mark.parametrize("adjust", ADJUSTMENTS)
@pytest.mark.parametrize("bad", [[0.2, 1.5], [-0.1]])
def test_a_value_outside_zero_one_is_refused(adjust, bad):
    with pytest.raises(ParameterError, match=r"\[0, 1\]"):
        adjust(bad)


P_VALUES = hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(0, 1))


@settings(max_examples=80, deadline=None)
@given(P_VALUES)
def test_adjusted_p_values_lie_between_p_and_one_and_keep_its_order(p):
    for adjust in ADJUSTMENTS:
        adjusted = adjust(p)
        assert adjusted.shape == p.shape
        assert np.all(adjusted >= p) and np.all(adjusted <= 1)
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(adjusted[order]) >= 0)  # monotone in p
    assert np.all(cmr.benjamini_hochberg(p) <= cmr.holm(p))  # FDR control is never stricter than FWER


@settings(max_examples=40, deadline=None)
@given(P_VALUES, st.integers(0, 5))
def test_nan_entries_are_left_out_of_the_family(p, n_nan):
    padded = np.concatenate([p, np.full(n_nan, np.nan)])
    for adjust in ADJUSTMENTS:
        out = adjust(padded)
        np.testing.assert_array_equal(out[: p.size], adjust(p))
        assert np.isnan(out[p.size:]).all()
