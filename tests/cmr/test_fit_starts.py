"""The start library: every default fit also polishes from ten points where fits of human data ended."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cmr
from cmr.errors import FitWarning, ParameterError
from cmr.textbook._optimize import _Objective, polish_start, search, single_threaded_blas
from cmr.textbook._trials import trial_arrays
from cmr.textbook.starts import START_LIBRARY, START_NAMES, library_starts

CHEAP = dict(progress=False, de_options=dict(popsize=4, maxiter=6, tol=0.05), max_restarts=3)


def _fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return cmr.fit_recall(*args, **kwargs)


@pytest.fixture(scope="module")
def events():
    truths = {"a": dict(cmr.default_parameters(), B_enc=0.5), "b": dict(cmr.default_parameters(), T=0.2)}
    return cmr.from_table(cmr.simulate_free_recall(truths, 6, 4, rng=3))


def test_library_points_are_admissible_human_parameter_sets():
    assert START_LIBRARY.shape == (10, len(START_NAMES)) and set(START_NAMES) == set(cmr.STANDARD_FREE)
    for row in START_LIBRARY:
        cmr.validate_parameters(dict(cmr.default_parameters(), **dict(zip(START_NAMES, row))))
    # three regions: T on its lower bound with B_start near 1 or at 0, and T in the middle of its range
    t, b_start = START_LIBRARY[:, START_NAMES.index("T")], START_LIBRARY[:, START_NAMES.index("B_start")]
    assert ((t < 0.011) & (b_start > 0.9)).sum() >= 4 and ((t < 0.011) & (b_start < 0.1)).sum() >= 2
    assert (t > 0.1).sum() >= 2


def test_library_starts_follow_the_spec():
    spec = cmr.FitSpec()._model
    points = library_starts(spec)
    assert len(points) == len(START_LIBRARY)
    np.testing.assert_array_equal(points[0], START_LIBRARY[0][[START_NAMES.index(n) for n in spec.free]])
    narrow = cmr.FitSpec(["B_enc", "T"], bounds={"T": (0.05, 1.0)})._model
    got = np.array(library_starts(narrow))
    assert got[:, 1].min() == 0.05  # clipped into the search bounds
    assert len({tuple(p) for p in got}) == len(got)  # distinct
    assert library_starts(cmr.FitSpec(["Afc"])._model) == []  # frees none of the library's parameters


def test_default_fit_polishes_from_the_library_and_an_integer_count_does_not(events):
    auto = _fit(events, cmr.FitSpec(["B_enc", "T"]), rng=0, **CHEAP)
    seeds = auto["restart_seed"].values
    library = len(library_starts(cmr.FitSpec(["B_enc", "T"])._model))
    for row in seeds:
        assert (row[:library] == -2).all() and (row[library:library + 2] >= 0).all()
    assert auto.attrs["provenance"].count('"start_library": true') == 1
    fixed = _fit(events, cmr.FitSpec(["B_enc", "T"]), rng=0, n_restarts=2, **CHEAP)
    assert fixed.sizes["restart"] == 2 and (fixed["restart_seed"].values >= 0).all()
    forced = _fit(events, cmr.FitSpec(["B_enc", "T"]), rng=0, n_restarts=2, start_library=True, **CHEAP)
    assert (forced["restart_seed"].values == -2).sum(axis=1).tolist() == [library, library]
    # the searches are the same searches with and without the library: only the best of all is chosen
    np.testing.assert_array_equal(forced["restart_logl"].values[:, library:], fixed["restart_logl"].values)
    assert (forced["logl"].values >= fixed["logl"].values).all()
    assert (forced["logl"].values == np.nanmax(forced["restart_logl"].values, axis=1)).all()
    off = _fit(events, cmr.FitSpec(["B_enc", "T"]), rng=0, start_library=False, **CHEAP)
    assert (off["restart_seed"].values != -2).all()
    with pytest.raises(ParameterError, match="start_library must be True, False or None"):
        _fit(events, cmr.FitSpec(["B_enc"]), start_library="yes", **CHEAP)


def test_library_polishes_count_for_the_verdict_but_not_as_the_two_searches(events):
    """Searches stop at the first k >= 2 where the best two of the library's polishes and the first k
    searches agree within the tolerance (or at max_restarts): a library polish agreeing with one search
    is not enough (a second maximum that one search and one polish share)."""
    fits = _fit(events, cmr.FitSpec(["B_enc", "T"]), rng=0, **CHEAP)
    for seeds, logl in zip(fits["restart_seed"].values, fits["restart_logl"].values):
        library, searches = logl[seeds == -2], logl[seeds >= 0]
        assert len(library) > 0 and len(searches) >= 2

        def agree(k):
            best = np.sort(np.concatenate([library, searches[:k]]))[::-1]
            return best[0] - best[1] <= cmr.constants.CONVERGENCE_TOLERANCE

        stop = next((k for k in range(2, len(searches) + 1) if agree(k)), None)
        assert stop == len(searches) or (stop is None and len(searches) == CHEAP["max_restarts"])


def test_a_library_polish_crosses_into_the_basin_a_search_misses():
    """Morton2013 subject 10: searches settle 2.2 log units below the best known maximum (-1565.01);
    the polish from the library's third point reaches it."""
    from icl_cmr.adapters.recall_data import load_recall_data

    events = load_recall_data("psifr:Morton2013")
    spec = cmr.FitSpec()._model
    arrays = trial_arrays(events, None, cmr.FitSpec().pool_size)
    objective = _Objective(spec, arrays.subset(np.flatnonzero(np.asarray(events["subject"].values) == 10)), None, 1)
    with single_threaded_blas():
        polished = polish_start(objective, spec.bounds, library_starts(spec)[2], seed=-2)
        found = search(objective, spec.bounds, 4250628946, {}, True)  # the default fit's first search
    assert polished["seed"] == -2 and polished["logl"] == pytest.approx(-1565.009, abs=0.01)
    assert found["logl"] < -1567.0


def test_padding_of_ragged_restarts_is_not_a_given_start():
    """A unit with fewer restarts than the ``restart`` dim is padded with ``restart_seed`` -3, so -1
    means only the polish from a given start."""
    from cmr.textbook.fit import NO_RESTART, fit_dataset

    spec = cmr.FitSpec(["B_enc", "T"])._model

    def result(seed, logl):
        return dict(x=np.array([0.5, 0.3]), logl=logl, nit=0, success=True, message="", nfev=10, n_nan=0,
                    n_invalid=0, seconds=0.0, seed=seed)

    results = [[result(-1, -10.0), result(5, -11.0)], [result(7, -12.0)]]
    fits = fit_dataset(spec, ["a", "b"], results, np.array([4, 4]), "test", {})
    np.testing.assert_array_equal(fits["restart_seed"].values, [[-1, 5], [7, NO_RESTART]])
    assert NO_RESTART not in (-1, -2) and NO_RESTART < 0
    assert np.isnan(fits["restart_logl"].values[1, 1]) and fits["restart_nfev"].values[1, 1] == 0
