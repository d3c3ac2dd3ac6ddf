"""The population kernel (one SIMD lane per parameter set) equals the per-trial kernel bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import cmr
from cmr.events import from_recall_matrix
from cmr.textbook import _lanes, _network
from cmr.textbook._optimize import model_spec
from cmr.textbook._trials import trial_arrays
from cmr.textbook.simulate import simulate_recalls


def per_trial_totals(sets, arrays):
    """Each set's trial log-likelihoods from ``trials_log_likelihood``, summed in trial order."""
    n_trials, n_out = arrays.recalls.shape
    trial_param = np.zeros(n_trials, dtype=np.int64)
    order = arrays.order(trial_param)
    totals = []
    for row in sets:
        trial_logl, trial_n = np.zeros(n_trials), np.zeros(n_trials, dtype=np.int64)
        _network.trials_log_likelihood(row[None, :], trial_param, arrays.trial_group, order, *arrays.kernel_groups(),
                                       arrays.recalls, trial_logl, trial_n, np.zeros((n_trials, n_out + 1)))
        total = 0.0
        for value in trial_logl:  # sequential, as the kernels sum
            total += value
        totals.append(total)
    return np.array(totals)


def lane_totals(sets, arrays):
    order = arrays.order(np.zeros(arrays.n_trials, dtype=np.int64))
    return _lanes.population_log_likelihood(sets, arrays.trial_group, order, *arrays.kernel_groups(), arrays.recalls)


def random_sets(free, n_sets, seed, patterns=False):
    """``n_sets`` parameter vectors drawn inside the search bounds of ``free`` (others at defaults)."""
    spec = model_spec(free, patterns=patterns)
    rng = np.random.default_rng(seed)
    low, high = np.array(spec.bounds).T
    sets, _ = spec.vectors(low + (high - low) * rng.random((n_sets, len(free))))
    return sets


@pytest.fixture(scope="module")
def localist_events():
    """Two list lengths (10 and 14 items), so the kernel switches study phases within a block."""
    short = simulate_recalls(cmr.default_parameters(), 10, 6, rng=1)
    long = simulate_recalls(dict(cmr.default_parameters(), T=0.3), 14, 6, rng=2)
    width = max(short.shape[1], long.shape[1])
    pad = lambda m: np.pad(m, ((0, 0), (0, width - m.shape[1])))  # noqa: E731 - local shorthand
    matrix = np.concatenate([pad(short), pad(long), pad(short[:2])])
    lengths = np.array([10] * 6 + [14] * 6 + [10] * 2)
    return from_recall_matrix(matrix, lengths)


@pytest.mark.parametrize("pool_size", [None, 40])
@pytest.mark.parametrize("n_sets", [1, 7, 150])  # one lane, one partial block, three blocks of 50
def test_localist_lanes_equal_per_trial_kernel(localist_events, pool_size, n_sets):
    arrays = trial_arrays(localist_events, pool_size=pool_size)
    free = list(cmr.STANDARD_FREE) + ["Afc", "Acf", "Dfc", "Dcf"]
    sets = random_sets(free, n_sets, seed=n_sets)
    expected = per_trial_totals(sets, arrays)
    assert np.isfinite(expected).all()
    np.testing.assert_array_equal(lane_totals(sets, arrays), expected)


@pytest.mark.parametrize("layer", ["segment", "sublayer"])
def test_pattern_lanes_equal_per_trial_kernel(layer):
    """Semantic and category CMR (one and two context blocks), every list its own study phase."""
    rng = np.random.default_rng(5)
    pool = 30
    vectors = rng.random((pool, 4))
    features = (rng.random((pool, 3)) < 0.5).astype(float)
    features[:, 0] = 1.0
    items = [f"w{i}" for i in range(pool)]
    patterns = cmr.item_patterns(items, vectors @ vectors.T / 4.0, features, feature_layer=layer)
    study = [[items[i] for i in rng.permutation(pool)[:8]] for _ in range(5)]
    matrix = np.array([list(rng.permutation(8)[:k] + 1) + [0] * (8 - k) for k in (0, 3, 8, 5, 2)])
    matrix[3, 1] = -1  # an intrusion
    matrix[4, 1] = matrix[4, 0]  # a repeat
    events = from_recall_matrix(matrix, 8, study_items=study)
    arrays = trial_arrays(events, patterns)
    free = list(cmr.STANDARD_FREE) + ["Sfc", "Scf", "Sff", "Cfc", "Ccf"]
    sets = random_sets(free, 70, seed=9, patterns=True)
    np.testing.assert_array_equal(lane_totals(sets, arrays), per_trial_totals(sets, arrays))
