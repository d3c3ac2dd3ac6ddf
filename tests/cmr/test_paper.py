"""The paper's simplified CMR (Ji-An et al. 2024): simulator, closed forms and the study's conventions."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmr.errors import ParameterError, RecallDataError
from cmr.paper.simulate import (
    closed_form_lag_distribution,
    paper_lag_statistics,
    simulate_paper_free_recall,
    simulate_paper_recalls,
)


@settings(max_examples=30, deadline=None)
@given(
    list_length=st.integers(2, 40),
    start=st.integers(1, 40),
    max_recalls=st.integers(1, 60),
    seed=st.integers(0, 2**31),
)
def test_full_drift_and_no_backward_input_recalls_in_study_order(list_length, start, max_recalls, seed):
    start = min(start, list_length)
    recalls, starts = simulate_paper_recalls(
        1.0, 1.0, 0.0, list_length=list_length, start_positions=[start], n_trials=3,
        max_recalls=max_recalls, rng=seed,
    )
    expected = np.arange(start + 1, list_length + 1)[:max_recalls]  # then the end state
    row = np.zeros(max_recalls, dtype=np.int64)
    row[: expected.size] = expected
    assert (recalls == row).all()
    assert (starts == start).all()


def test_no_context_drift_repeats_the_next_item_until_the_cap():
    # beta_rec = 0 keeps the start context: with beta_enc = 1 only item s0+1 has support
    recalls, _ = simulate_paper_recalls(1.0, 0.0, 0.7, start_positions=[5], n_trials=2, max_recalls=50, rng=1)
    assert (recalls == 6).all()
    # the study's CRP then has 1/50 at +1 (the transition from s0) and 49/50 at 0, as in its saved grid
    stats = paper_lag_statistics(1.0, 0.0, 0.7, n_trials=4, rng=3)
    per_start = stats["per_start"][0]
    np.testing.assert_allclose(per_start[:, 8], 49 / 50, rtol=0, atol=1e-15)
    np.testing.assert_allclose(per_start[:, 9], 1 / 50, rtol=0, atol=1e-15)
    assert not stats["closed_form"][0]


def test_seed_determines_the_simulation():
    a = simulate_paper_recalls(0.4, 0.6, 0.3, n_trials=20, rng=7)[0]
    b = simulate_paper_recalls(0.4, 0.6, 0.3, n_trials=20, rng=np.random.default_rng(7))[0]
    c = simulate_paper_recalls(0.4, 0.6, 0.3, n_trials=20, rng=8)[0]
    assert (a == simulate_paper_recalls(0.4, 0.6, 0.3, n_trials=20, rng=7)[0]).all()
    assert a.shape == (20 * 20, 50) and a.dtype == np.int64
    assert not (a == c).all()
    assert b.shape == a.shape
    assert ((a >= 0) & (a <= 100)).all()
    # padding only after the last recall
    assert not ((np.cumsum(a == 0, axis=1) > 0) & (a != 0)).any()


def test_psifr_table_round_trips_through_events():
    from cmr.events import from_table

    table = simulate_paper_free_recall(0.5, 0.5, 0.2, list_length=12, start_positions=[1, 4], n_trials=3, rng=0)
    assert list(table.columns[:5]) == ["subject", "list", "trial_type", "position", "item"]
    assert set(table["trial_type"]) == {"study", "recall"}
    study = table[table["trial_type"] == "study"]
    assert len(study) == 2 * 3 * 12
    starts = table.groupby("list")["start_position"].first()
    assert starts.tolist() == [1, 1, 1, 4, 4, 4]
    events = from_table(table[["subject", "list", "trial_type", "position", "item"]])
    recalls, _ = simulate_paper_recalls(0.5, 0.5, 0.2, list_length=12, start_positions=[1, 4], n_trials=3, rng=0)
    got = events["recalls"].transpose("trial", "output_position").values
    width = got.shape[1]
    assert (got == recalls[:, :width]).all() and (recalls[:, width:] == 0).all()
    assert isinstance(table, pd.DataFrame)


def test_closed_forms_are_distributions_and_match_the_limits():
    for beta_enc in (0.05, 0.3, 1.0):
        for beta_rec in (0.0, 1.0):
            crp = closed_form_lag_distribution(beta_enc, beta_rec, 3, 100, 8)
            assert crp.shape == (17,)
            assert abs(crp.sum() - 1) < 1e-12 and (crp >= 0).all()
    # beta_rec = 1: context = last item, only forward transitions; beta_enc = 1: always +1
    np.testing.assert_allclose(closed_form_lag_distribution(1.0, 1.0, 0, 100, 8), np.eye(17)[9])
    # beta_rec = 0, beta_enc = 1: i.i.d. draws of the same item: all mass at lag 0
    np.testing.assert_allclose(closed_form_lag_distribution(1.0, 0.0, 0, 100, 8), np.eye(17)[8])
    crp = closed_form_lag_distribution(0.4, 0.0, 2, 100, 8)
    np.testing.assert_allclose(crp[:8], crp[9:][::-1])  # differences of i.i.d. draws are symmetric
    with pytest.raises(ParameterError):
        closed_form_lag_distribution(0.4, 0.5, 2, 100, 8)


def test_closed_form_points_need_no_simulation():
    stats = paper_lag_statistics([0.3, 0.3], [1.0, 0.0], [0.0, 0.0], n_trials=1, rng=0)
    assert stats["closed_form"].all()
    np.testing.assert_array_equal(stats["per_start_var"], 0.0)
    np.testing.assert_allclose(stats["per_start"][0, 4], closed_form_lag_distribution(0.3, 1.0, 4, 100, 8))


def test_monte_carlo_agrees_with_the_exact_lag_distribution_of_full_drift():
    # beta_rec = 1, gamma = 0: a Markov chain; far from the list end each step has lag d with
    # probability (1-a) a**(d-1). With max_recalls = 5 from start 1 the end is never near.
    a = 0.5
    stats = paper_lag_statistics(1 - a, 1.0, 0.0, start_positions=[1], n_trials=4000, max_recalls=5,
                                 rng=11, closed_forms=False)
    lags = np.arange(1, 9)
    exact = (1 - a) * a ** (lags - 1)
    exact = exact / exact.sum()
    got = stats["per_start"][0, 0, 9:]
    sem = np.sqrt(stats["per_start_var"][0, 0, 9:])
    assert (np.abs(got - exact) < 4.5 * sem + 1e-12).all()
    assert stats["per_start"][0, 0, :9].sum() == 0


def test_invalid_inputs_raise_typed_errors():
    with pytest.raises(ParameterError, match=r"beta_enc must lie in \(0, 1\]"):
        simulate_paper_recalls(0.0, 0.5, 0.5)
    with pytest.raises(ParameterError, match=r"gamma must lie in \[0, 1\]; got nan"):
        simulate_paper_recalls(0.5, 0.5, float("nan"))
    with pytest.raises(ParameterError, match="beta_rec"):
        paper_lag_statistics([0.5], [1.5], [0.0])
    with pytest.raises(RecallDataError, match="start_positions"):
        simulate_paper_recalls(0.5, 0.5, 0.5, list_length=10, start_positions=[11])
    with pytest.raises(ParameterError, match="n_trials"):
        simulate_paper_recalls(0.5, 0.5, 0.5, n_trials=0)
    with pytest.raises(ParameterError, match="rng"):
        simulate_paper_recalls(0.5, 0.5, 0.5, rng="seven")
    with pytest.raises(ParameterError, match="one parameter point"):
        simulate_paper_recalls([0.5, 0.6], 0.5, 0.5)
