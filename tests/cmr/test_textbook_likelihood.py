"""Textbook CMR likelihood: equal to cymr event by event, plus model properties."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmr.textbook import _kernels as _cmr
from cmr.textbook import _network
from cmr.events import from_recall_matrix, from_table
from cmr.textbook.likelihood import log_likelihood
from cmr.textbook.parameters import parameter_vector
from cmr.testing import recall_sequences, textbook_parameters
from tests.conftest import assert_event_probabilities_equal, cymr_event_probabilities, require

MORTON_PARAMS = dict(
    T=0.1, Lfc=0.15, Lcf=0.15, Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85,
    P1=0.2, P2=2.0, B_start=0.3, B_rec=0.9, X1=0.001, X2=0.25, B_enc=0.7,
)
SAMPLE1_PARAMS = dict(
    B_enc=0.5, B_rec=0.8, B_start=0.0, Afc=0.0, Dfc=1.0, Acf=0.0, Dcf=1.0,
    Lfc=1.0, Lcf=1.0, P1=0.0, P2=1.0, T=10.0, X1=0.05, X2=1.0,
)
# parameter sets for the event-by-event comparison; the last two make probability floors bite
# (p < 1e-5 events) while cymr's exp(2a/T) still stays finite
OTHER_PARAMS = [
    dict(MORTON_PARAMS, Afc=0.1, Acf=0.05),
    dict(T=0.3, Lfc=0.9, Lcf=0.6, Afc=0.0, Acf=0.2, Dfc=0.1, Dcf=0.3, P1=3.0, P2=0.5,
         B_start=0.9, B_rec=0.2, X1=0.2, X2=0.05, B_enc=0.2),
    dict(T=0.02, Lfc=0.5, Lcf=0.5, Afc=0.0, Acf=0.0, Dfc=0.5, Dcf=0.5, P1=1.0, P2=1.0,
         B_start=0.0, B_rec=1.0, X1=0.5, X2=1.0, B_enc=1.0),
    dict(T=0.05, Lfc=0.3, Lcf=1.0, Afc=0.0, Acf=0.0, Dfc=0.7, Dcf=0.0, P1=5.0, P2=0.2,
         B_start=0.0, B_rec=0.95, X1=1e-8, X2=0.0, B_enc=0.99),
]


@pytest.fixture(scope="module")
def morton_mixed():
    fit = require("cymr.fit")
    table = fit.sample_data("Morton2013_mixed")
    return table, from_table(table)


def test_sample1_total_equals_cymr_published_value():
    fit = require("cymr.fit")
    table = fit.sample_data("sample1")
    table["list"] = table["subject"]
    result = log_likelihood(from_table(table), SAMPLE1_PARAMS)
    assert result.attrs["n"] == 6
    np.testing.assert_allclose(result.attrs["total_logl"], -5.936799964636842, rtol=1e-12)


def test_morton_mixed_total_equals_issue_value(morton_mixed):
    _, events = morton_mixed
    result = log_likelihood(events, MORTON_PARAMS)
    np.testing.assert_allclose(result.attrs["total_logl"], -29754.67744761493, rtol=1e-12)
    assert result.attrs["n"] == 11297
    assert result.sizes["subject"] == 29
    np.testing.assert_allclose(result["logl"].sum(), result.attrs["total_logl"], rtol=1e-13)


@pytest.mark.parametrize("index", range(len(OTHER_PARAMS)))
def test_every_event_probability_equals_cymr(morton_mixed, index):
    """Pool-sized context (cymr's config_loc_cmr(768)) event by event, and totals vs cymr."""
    ccmr = require("cymr.cmr")
    table, events = morton_mixed
    subjects = table["subject"].unique()[:4]  # keep the cymr side fast
    table = table[table["subject"].isin(subjects)]
    events = from_table(table)
    param = OTHER_PARAMS[index]
    param_def, patterns = ccmr.config_loc_cmr(768)
    reference = cymr_event_probabilities(table, param, param_def, patterns)
    ours = log_likelihood(events, param, pool_size=768, by="subject", event_probabilities=True)
    probs = assert_event_probabilities_equal(ours, reference)
    stats = ccmr.CMR().likelihood(table, param, param_def=param_def, patterns=patterns)
    np.testing.assert_allclose(ours.attrs["total_logl"], stats["logl"].sum(), rtol=1e-9)
    np.testing.assert_array_equal(ours["n"].values, stats["n"].values)
    if index >= 2:
        floored = np.nanmin(probs)
        assert floored < 1e-5  # the probability floor is exercised


def test_list_sized_context_equals_cymr_with_list_pool():
    """List-sized context == cymr when its pool is the list (item_index = serial position)."""
    ccmr = require("cymr.cmr")
    fit = require("cymr.fit")
    table = fit.sample_data("Morton2013_mixed")
    table = table[table["subject"].isin(table["subject"].unique()[:2])].copy()
    events = from_table(table)
    study = table.query("trial_type == 'study'")
    index_of = {(s, l, item): pos - 1 for s, l, item, pos in study[["subject", "list", "item", "position"]].itertuples(index=False)}
    table["item_index"] = [index_of.get((s, l, item), np.nan) for s, l, item in table[["subject", "list", "item"]].itertuples(index=False)]
    param = OTHER_PARAMS[0]  # Afc, Acf > 0: pool size matters
    param_def, patterns = ccmr.config_loc_cmr(24)
    stats = ccmr.CMR().likelihood(table, param, param_def=param_def, patterns=patterns)
    ours = log_likelihood(events, param)
    np.testing.assert_allclose(ours["logl"].values, stats["logl"].values, rtol=1e-9)
    pooled = log_likelihood(events, param, pool_size=768)
    assert abs(pooled.attrs["total_logl"] - ours.attrs["total_logl"]) > 1.0  # pool size matters here


def test_overflow_where_cymr_is_nan_stays_finite():
    """exp(2a/T) overflows in cymr (NaN); the shifted softmax gives the finite exact limit."""
    params = dict(MORTON_PARAMS, T=1e-4, Dcf=1.0, Lcf=1.0, P1=0.0)
    events = from_recall_matrix([[1, 2, 3, 0]], 3)
    result = log_likelihood(events, params, event_probabilities=True)
    assert np.isfinite(result.attrs["total_logl"])


def test_hand_worked_single_item_list():
    """One item, recalled: P(recall) = 1 - X1 (softmax over one item); then P(stop) = 1."""
    params = dict(MORTON_PARAMS, X1=0.3)
    result = log_likelihood(from_recall_matrix([[1], [0]], 1), params, by="trial", event_probabilities=True)
    np.testing.assert_allclose(result["event_probability"].values[0, :2], [0.7, 1.0])
    np.testing.assert_allclose(result["event_probability"].values[1, :1], [0.3])
    np.testing.assert_allclose(result["logl"].values, [np.log(0.7), np.log(0.3)])


def test_intrusions_and_repeats_are_skipped():
    params = dict(MORTON_PARAMS)
    clean = log_likelihood(from_recall_matrix([[3, 1, 2, 0, 0]], 5), params, by="trial")
    noisy = log_likelihood(from_recall_matrix([[-1, 3, 3, 1, -1, 2]], 5), params, by="trial")
    np.testing.assert_allclose(noisy["logl"].values, clean["logl"].values, rtol=0)
    assert int(noisy["n"][0]) == 4


def test_nan_total_warns_and_is_not_replaced(monkeypatch):
    def nan_kernel(*args):
        trial_logl, trial_n = args[-3], args[-2]
        trial_logl[:] = np.nan
        trial_n[:] = 1
    monkeypatch.setattr(_network, "trials_log_likelihood", nan_kernel)
    with pytest.warns(RuntimeWarning, match="NaN"):
        result = log_likelihood(from_recall_matrix([[1, 0]], 2), MORTON_PARAMS)
    assert np.isnan(result.attrs["total_logl"])


# --- properties -------------------------------------------------------------------------

def _params_strategy():
    """Parameter sets inside the bounds, the unbounded ones capped at typical magnitudes."""
    return textbook_parameters(bounds={"P1": (0, 10), "P2": (0, 5), "T": (0.01, 10), "X2": (0, 2),
                                       "Afc": (0, 1), "Acf": (0, 1), "Dfc": (0.01, 1), "Dcf": (0, 1)})


@settings(max_examples=40, deadline=None)
@given(params=_params_strategy(), n=st.integers(1, 12), n_other=st.integers(0, 30),
       order_seed=st.integers(0, 2**31))
def test_context_has_unit_norm_after_every_update(params, n, n_other, order_seed):
    vector = parameter_vector(params)
    c, c_study, weight = _cmr.study_list(vector, n, n_other)

    def norm(v):
        return np.sqrt(np.sum(weight * v * v))

    np.testing.assert_allclose([norm(row) for row in c_study], 1.0, rtol=1e-12)
    _cmr.reinstate_start(vector, c, weight)
    np.testing.assert_allclose(norm(c), 1.0, rtol=1e-12)
    c_in = np.zeros(n + 2)
    for item in np.random.default_rng(order_seed).permutation(n):
        _cmr.recall_update(vector, item, c, c_study, weight, c_in)
        np.testing.assert_allclose(norm(c), 1.0, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(params=_params_strategy(), n=st.integers(1, 10), data=st.data())
def test_recall_and_stop_probabilities_sum_to_one(params, n, data):
    """At every step, P(each not-yet-recalled item) + P(stop) = 1, through the public path."""
    prefix = data.draw(recall_sequences(n, max_recalls=n - 1))
    candidates = [pos for pos in range(1, n + 1) if pos not in prefix]
    rows = [list(prefix) + [pos] for pos in candidates] + [list(prefix)]
    width = len(prefix) + 1
    matrix = np.array([row + [0] * (width - len(row)) for row in rows])
    result = log_likelihood(from_recall_matrix(matrix, n), params, by="trial", event_probabilities=True)
    step = result["event_probability"].values[:, len(prefix)]
    np.testing.assert_allclose(step.sum(), 1.0, rtol=1e-10)
