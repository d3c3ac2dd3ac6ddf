"""The fitter invariants of cmr.testing.fitting, on small data: restarts, the convergence verdict,
fits from a start (a population fit's estimates) and nested models (textbook CMR inside semantic
CMR; a fixed parameter freed)."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.textbook.starts import library_starts
from cmr.errors import FitWarning, ParameterError
from cmr.testing.fitting import check_fit, check_fitter

CHEAP = dict(progress=False, de_options=dict(popsize=4, maxiter=6, tol=0.05), max_restarts=3)


def quiet(fitter):
    """The fitter with FitWarnings off: tiny data put estimates on bounds, which is not what is checked here."""
    @functools.wraps(fitter)
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            return fitter(*args, **kwargs)
    return run


def small_events(seed: int, b_enc: float = 0.6, n_lists: int = 4):
    truths = {"a": dict(cmr.default_parameters(), B_enc=b_enc), "b": dict(cmr.default_parameters(), T=0.2)}
    return cmr.from_table(cmr.simulate_free_recall(truths, 5, n_lists, rng=seed))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**16), fixed_t=st.floats(0.05, 0.9), b_enc=st.floats(0.2, 0.9))
def test_a_freed_parameter_never_fits_worse_and_every_fit_keeps_its_best_restart(seed, fixed_t, b_enc):
    events = small_events(seed, b_enc)
    fitter = quiet(functools.partial(cmr.fit_recall, rng=seed, **CHEAP))
    check_fitter(fitter, events, cmr.FitSpec(["B_enc", "T"]), nested_spec=cmr.FitSpec(["B_enc"], fixed={"T": fixed_t}))


def test_semantic_cmr_from_the_textbook_optimum_is_never_worse():
    events = small_events(3, n_lists=5)
    rng = np.random.default_rng(0)
    vectors = rng.random((5, 3))
    patterns = cmr.item_patterns([str(i) for i in range(1, 6)], vectors @ vectors.T / 3.0)
    textbook = cmr.FitSpec(["B_enc", "B_rec", "T"], patterns=patterns)  # Scf = Sff = 0: textbook CMR
    semantic = cmr.FitSpec(["B_enc", "B_rec", "T", "Scf", "Sff"], patterns=patterns)
    check_fitter(quiet(functools.partial(cmr.fit_recall, rng=1, **CHEAP)), events, semantic, nested_spec=textbook)


def test_a_fit_from_the_population_estimates_is_never_below_them():
    events = small_events(4)
    spec = cmr.FitSpec(["B_enc", "T"])
    population = quiet(cmr.fit_population)(events, spec, progress=False, max_iter=5)
    check_fitter(quiet(functools.partial(cmr.fit_recall, rng=2, **CHEAP)), events, spec, start=population)


def test_cmr2_fits_keep_the_invariants():
    events = small_events(5)
    fitter = quiet(functools.partial(cmr.fit_cmr2, rng=0, **CHEAP))
    check_fitter(fitter, events, cmr.CMR2FitSpec(["B_enc", "T"]),
                 nested_spec=cmr.CMR2FitSpec(["B_enc"], fixed={"T": 0.3}))


def test_a_broken_fit_fails_the_checks():
    events = small_events(6)
    fits = quiet(cmr.fit_recall)(events, cmr.FitSpec(["B_enc"]), rng=0, **CHEAP)
    assert check_fit(fits) == []
    broken = fits.copy(deep=True)
    broken["logl"][0] = float(fits["restart_logl"][0].min()) - 1.0
    broken["converged"][1] = not bool(fits["converged"][1])
    failures = check_fit(broken)
    assert any(f.startswith("[restarts] unit a: logl") for f in failures), failures
    assert any(f.startswith("[verdict] unit b: converged") for f in failures), failures


def test_a_start_must_cover_the_subjects():
    events = small_events(7)
    one = events.isel(trial=np.flatnonzero(events["subject"].values == "a"))
    fits = quiet(cmr.fit_recall)(one, cmr.FitSpec(["B_enc"]), rng=0, **CHEAP)
    with pytest.raises(ParameterError, match="start has no estimates for subject.s. b"):
        cmr.fit_recall(events, cmr.FitSpec(["B_enc"]), start=fits, **CHEAP)
    with pytest.raises(ParameterError, match="start must be a recall_fit dataset or a mapping"):
        cmr.fit_recall(events, cmr.FitSpec(["B_enc"]), start=[0.5], **CHEAP)


def test_the_verdict_travels_with_cross_validation_and_predictive_checks():
    events = small_events(8)
    fits = quiet(cmr.fit_recall)(events, cmr.FitSpec(["B_enc"]), rng=0, **CHEAP)
    check = cmr.posterior_predictive(events, fits, n_rep=1, rng=0)
    not_converged = [str(s) for s, ok in zip(fits["subject"].values, fits["converged"].values) if not ok]
    assert check.attrs["fit_converged"] == int(fits["converged"].sum()) and check.attrs["fit_units"] == 2
    assert check.attrs["fit_not_converged"] == ", ".join(not_converged)
    cv = cmr.cross_validate(events, cmr.FitSpec(["B_enc"]), n_folds=2, rng=0, **CHEAP)
    assert cv["fold_converged"].dims == ("subject", "fold") and cv.attrs["convergence_tolerance"] == 0.1
    np.testing.assert_array_equal(cv["converged"].values, cv["fold_converged"].values.all(axis=1))
    # 2-3 searches after a polish from each distinct point of the start library
    library = len(library_starts(cmr.FitSpec(["B_enc"])._model))
    assert library >= 2
    assert ((cv["fold_n_restarts"] >= 2 + library) & (cv["fold_n_restarts"] <= 3 + library)).all()


def test_the_network_fitter_shares_the_restarts_and_the_verdict():
    from cmr.network import NetworkConfig

    cymr_fit = pytest.importorskip("cymr.fit")
    data = cymr_fit.sample_data("sample1")
    data["list"] = data["subject"]
    patterns = {"items": np.array(["absence", "hollow", "pupil", "fountain", "piano", "pillow"]),
                "vector": {"loc": np.eye(6)}}
    region = {(("task", "item"), ("task", "item")): "Afc + Dfc * loc"}
    fixed = {"B_rec": 0.8, "B_start": 0, "Afc": 0, "Dfc": 1, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10,
             "X1": 0.05, "X2": 1}
    spec = cmr.NetworkFitSpec({"B_enc": (0, 1)}, fixed, config=NetworkConfig(weights={"fc": region, "cf": region}),
                              patterns=patterns)
    options = dict(rng=1, de_options=dict(popsize=5, tol=1e-3))
    fits = cmr.fit_network(data, spec, max_restarts=3, **options)  # n_restarts="auto" by default
    assert fits.attrs["convergence_tolerance"] == 0.1
    for u in range(fits.sizes["unit"]):
        assert 2 <= int(fits["n_restarts"][u]) <= 3
        assert bool(fits["converged"][u]) == (float(fits["logl_gap"][u]) <= 0.1)
    one = cmr.fit_network(data, spec, n_restarts=1, **options)
    assert (one["n_restarts"] == 1).all() and not one["converged"].any() and np.isnan(one["logl_gap"]).all()
    # a unit's search depends on its label and the seed only: the second subject fitted alone is the same
    alone = cmr.fit_network(data[data["subject"] == data["subject"].unique()[1]], spec, n_restarts=1, **options)
    assert float(alone["logl"][0]) == float(one["logl"][1])
