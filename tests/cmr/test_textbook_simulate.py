"""Seeded CMR free-recall simulation: psifr tables, reproducible, agrees with the likelihood."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmr.errors import ParameterError, RecallDataError
from cmr.events import from_recall_matrix, from_table
from cmr.textbook.likelihood import log_likelihood
from cmr.textbook.parameters import default_parameters
from cmr.textbook.simulate import simulate_free_recall, simulate_recalls
from tests.conftest import require
from tests.cmr.test_textbook_likelihood import _params_strategy


def test_seeded_reproducible_and_psifr_format():
    params = default_parameters()
    first = simulate_free_recall(params, 12, 6, subjects=["a", "b"], rng=7)
    again = simulate_free_recall(params, 12, 6, subjects=["a", "b"], rng=np.random.default_rng(7))
    other = simulate_free_recall(params, 12, 6, subjects=["a", "b"], rng=8)
    assert first.equals(again) and not first.equals(other)
    assert list(first.columns[:5]) == ["subject", "list", "trial_type", "position", "item"]
    assert set(first["subject"]) == {"a", "b"}
    assert (first.query("trial_type == 'study'").groupby(["subject", "list"]).size() == 12).all()
    events = from_table(first)
    assert events.sizes["trial"] == 12
    recalls = events["recalls"].values
    assert (recalls >= 0).all()  # no intrusions
    for row in recalls:  # no repeats
        made = row[row > 0]
        assert made.size == np.unique(made).size


def test_psifr_runs_on_simulated_table():
    fr = require("psifr.fr")
    table = simulate_free_recall(default_parameters(), 16, 20, subjects=3, rng=1)
    crp = fr.lag_crp(fr.merge_free_recall(table))
    assert crp["actual"].sum() > 0
    # temporal contiguity with forward asymmetry at these parameters
    prob = crp.groupby("lag")["prob"].mean()
    assert prob.loc[1] > prob.loc[-1] > prob.loc[5]


def test_sequence_frequencies_match_likelihood():
    """Frequencies of whole recall sequences of a 3-item list match exp(log-likelihood)."""
    params = dict(default_parameters(), X1=0.1, X2=0.6, T=0.2)
    n_trials = 20000
    recalls = simulate_recalls(params, 3, n_trials, rng=123)
    counts = Counter(tuple(row[row > 0]) for row in recalls)
    sequences = sorted(counts)
    matrix = np.zeros((len(sequences), 3), dtype=np.int64)
    for i, seq in enumerate(sequences):
        matrix[i, : len(seq)] = seq
    result = log_likelihood(from_recall_matrix(matrix, 3), params, by="trial", event_probabilities=True)
    expected = np.nanprod(result["event_probability"].values, axis=1) * n_trials
    observed = np.array([counts[s] for s in sequences])
    # every frequency within 5 binomial standard deviations
    sd = np.sqrt(expected * (1 - expected / n_trials))
    assert np.all(np.abs(observed - expected) < 5 * sd + 1), (observed, expected)
    assert abs(expected.sum() - n_trials) < 1e-6 * n_trials  # all possible sequences were seen


@settings(max_examples=30, deadline=None)
@given(params=_params_strategy(), n=st.integers(1, 15), seed=st.integers(0, 2**32 - 1))
def test_simulate_then_likelihood_is_finite(params, n, seed):
    matrix = simulate_recalls(params, n, 5, rng=seed)
    result = log_likelihood(from_recall_matrix(matrix, n), params)
    assert np.isfinite(result.attrs["total_logl"])
    assert result.attrs["n"] == int((matrix > 0).sum()) + 5


def test_bad_arguments_raise_typed_errors():
    params = default_parameters()
    with pytest.raises(ParameterError, match="list_length must be an integer >= 1; got 0"):
        simulate_recalls(params, 0, 3, rng=1)
    with pytest.raises(ParameterError, match="rng"):
        simulate_recalls(params, 3, 3, rng="seed")
    with pytest.raises(RecallDataError, match="pool_size"):
        simulate_recalls(params, 10, 3, rng=1, pool_size=5)
    with pytest.raises(ParameterError, match="B_rec"):
        simulate_free_recall(dict(params, B_rec=2.0), 5, 2, rng=1)
