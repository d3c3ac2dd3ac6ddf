"""Population fits from individual fits, and a non-converged population fit that says which parameters moved."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import cmr
from cmr import errors
from cmr._hierarchical import START_Z, individual_starts, to_latent, unconverged_parameters

SPEC = cmr.FitSpec(["B_enc", "T"])
CHEAP = dict(progress=False, de_options=dict(popsize=6, maxiter=20), max_restarts=3)


@pytest.fixture(scope="module")
def events():
    rng = np.random.default_rng(11)
    matrices, subjects = [], []
    for s in range(4):
        params = dict(cmr.default_parameters(), B_enc=float(rng.uniform(0.5, 0.8)), T=float(rng.uniform(0.1, 0.3)))
        matrices.append(cmr.simulate_recalls(params, 10, 4, rng=rng))
        subjects += [f"s{s}"] * 4
    return cmr.from_recall_matrix(np.concatenate(matrices), 10, subject=np.array(subjects))


@pytest.fixture(scope="module")
def fits(events):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.FitWarning)
        return cmr.fit_recall(events, SPEC, rng=0, **CHEAP)


def test_each_subject_starts_from_its_own_estimate(fits):
    model = SPEC._model
    labels = list(fits["subject"].values)
    latent, unconverged = individual_starts(model, fits, labels, cmr.textbook.parameters.MODEL_PARAMETER_NAMES)
    low = np.array([b[0] for b in model.bounds])
    high = np.array([b[1] for b in model.bounds])
    for z, label in zip(latent, labels):
        x = fits["value"].sel(subject=label, parameter=list(model.free)).values
        np.testing.assert_allclose(z, np.clip(to_latent(x, low, high), -START_Z, START_Z))
    assert unconverged == [str(s) for s, ok in zip(labels, fits["converged"].values) if not ok]
    at_bound = fits.copy(deep=True)
    at_bound["value"].loc[dict(subject=labels[0], parameter="T")] = high[1]
    z, _ = individual_starts(model, at_bound, labels, cmr.textbook.parameters.MODEL_PARAMETER_NAMES)
    assert z[0][1] == START_Z  # a start on a bound is placed just inside it


def test_population_fit_from_individual_fits(events, fits):
    pop = cmr.fit_population(events, SPEC, progress=False, tol=2e-3, start=fits)
    assert json.loads(pop.attrs["provenance"])["start"] is True and pop.attrs["converged"] == 1
    assert pop.attrs["not_converged_parameters"] == ""
    plain = cmr.fit_population(events, SPEC, progress=False, tol=2e-3)
    # the same population, whichever starts the first E-step had
    np.testing.assert_allclose(pop["population_median"].sel(parameter=list(SPEC.free)).values,
                               plain["population_median"].sel(parameter=list(SPEC.free)).values, atol=0.02)


def test_a_start_that_did_not_converge_is_named(events, fits):
    bad = fits.copy(deep=True)
    bad["converged"].values[:] = [False, True, True, True]
    with pytest.warns(errors.FitWarning, match=r"start fits of 1 of 4 subjects did not converge \(subject s0\)"):
        cmr.fit_population(events, SPEC, progress=False, tol=2e-3, start=bad)


@pytest.mark.parametrize("start, pattern", [
    ({"B_enc": 0.5}, "start must be a recall_fit dataset of individual fits of the same subjects"),
    ("pooled", "start must be a fit per subject"),
    ("missing", r"start has no estimates for subject\(s\) s3"),
])
def test_a_start_of_the_wrong_kind_is_one_typed_line(events, fits, start, pattern):
    if start == "pooled":
        start = fits.isel(subject=0, drop=True)
    elif start == "missing":
        start = fits.isel(subject=slice(0, 3))
    with pytest.raises(errors.ParameterError, match=pattern):
        cmr.fit_population(events, SPEC, progress=False, start=start)


def test_a_population_fit_that_did_not_converge_names_what_moved(events):
    with pytest.warns(errors.FitWarning, match=r"did not converge in 2 iterations .*still moving: (B_enc|T) "
                                               r"\(population (sd|median) .*per iteration"):
        pop = cmr.fit_population(events, SPEC, progress=False, max_iter=2, tol=1e-6)
    assert pop.attrs["converged"] == 0 and pop.attrs["not_converged_parameters"]


def test_unconverged_parameters_say_how_each_moved():
    low, high = np.zeros(4), np.ones(4)
    mean = [np.array([0.0, 1.0, 2.0, -4.0]), np.array([0.0, 1.05, 2.0, -4.1])]
    sd = [np.array([0.5, 0.5, 0.2, 0.3]), np.array([0.5, 0.5, 0.1, 0.3])]
    lines, kinds = unconverged_parameters(["A", "B", "C", "T"], mean, sd, 0.01, low, high)
    assert lines == ["B (population median 0.741, moving by 0.05 per iteration on the latent scale)",
                     "C (population sd 0.1, shrinking by 0.1 per iteration)",
                     "T (population median 0.0163, running toward its lower bound 0 by 0.1 per iteration on the "
                     "latent scale)"]
    assert kinds == ["bound", "shrinking", "moving"]
    assert unconverged_parameters(["A"], mean[:1], sd[:1], 0.01, low, high) == ([], [])
    # a mean far out but moving back inward is only moving
    inward = unconverged_parameters(["T"], [np.array([-4.0]), np.array([-3.9])], [np.ones(1), np.ones(1)], 0.01,
                                    low[:1], high[:1])
    assert inward[1] == ["moving"]


def test_a_spread_going_back_and_forth_is_an_oscillation():
    sd = [np.array([0.6931]), np.array([0.6898]), np.array([0.6884]), np.array([0.6922]), np.array([0.6895])]
    mean = [np.array([-3.75])] * 5
    lines, kinds = unconverged_parameters(["X1"], mean, sd, 1e-3, np.zeros(1), np.ones(1))
    assert lines == ["X1 (population sd going back and forth between 0.688 and 0.693 over the last 4 iterations)"]
    assert kinds == ["oscillating"]
