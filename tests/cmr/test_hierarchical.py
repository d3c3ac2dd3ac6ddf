"""Population-level CMR fits: shrinkage that pays off, a fit that is a parameter set, typed faults."""
from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cmr
from cmr import errors
from cmr.io import load_dataset

from tests.conftest import assert_population_intervals

SPEC = cmr.FitSpec(["B_enc", "T"])


@pytest.fixture(scope="module")
def population_events():
    """Six simulated subjects of a known population, three lists of ten items each."""
    rng = np.random.default_rng(5)
    matrices, subjects = [], []
    for s in range(6):
        params = cmr.default_parameters()
        params.update(B_enc=float(rng.uniform(0.5, 0.8)), T=float(rng.uniform(0.1, 0.3)))
        matrices.append(cmr.simulate_recalls(params, 10, 3, rng=rng))
        subjects += [f"s{s}"] * 3
    return cmr.from_recall_matrix(np.concatenate(matrices), 10, subject=np.array(subjects))


@pytest.fixture(scope="module")
def population_fit(population_events):
    return cmr.fit_population(population_events, SPEC, progress=False, tol=2e-3)


def test_hierarchical_beats_independent_fits_with_few_lists():
    study = cmr.population_recovery(12, n_lists=(2,), spec=SPEC, list_length=12, rng=3, progress=False, tol=1e-2,
                                    de_options=dict(popsize=8, maxiter=60))
    rmse = study["rmse_mean"].sel(n_lists=2)
    # error of the subject estimates in units of the search range; independent fits of two lists scatter
    assert float(rmse.sel(estimator="hierarchical")) < 0.8 * float(rmse.sel(estimator="independent"))
    assert float(study["rmse"].sel(estimator="hierarchical", n_lists=2, parameter="B_enc")) < float(
        study["rmse"].sel(estimator="independent", n_lists=2, parameter="B_enc"))


def test_fit_is_a_parameter_set_with_its_own_logl(population_events, population_fit):
    fits = population_fit
    assert fits.attrs["icl_cmr_kind"] == "recall_fit" and fits.attrs["estimation"] == "hierarchical"
    scored = cmr.log_likelihood(population_events, fits)
    np.testing.assert_allclose(scored["logl"].values, fits["logl"].values, rtol=1e-12)
    check = cmr.posterior_predictive(population_events, fits, n_rep=2, rng=0)
    assert list(check["source"].values) == ["data", "model"]


def test_estimates_lie_inside_their_intervals_and_converge(population_fit):
    fits = population_fit
    assert fits.attrs["converged"] == 1 and float(fits["em_change"][-1]) < 2e-3
    free = ["B_enc", "T"]
    value = fits["value"].sel(parameter=free)
    assert_population_intervals(fits, free)
    assert np.isnan(fits["population_mean"].sel(parameter="B_rec"))
    # the median of the population lies within the subjects' own spread of estimates
    assert float(value.sel(parameter="B_enc").min()) <= float(fits["population_median"].sel(parameter="B_enc")) \
        <= float(value.sel(parameter="B_enc").max())


def test_shrinkage_pulls_estimates_toward_the_population(population_events, population_fit):
    with warnings.catch_warnings():  # two or three lists per subject put some estimates at a bound
        warnings.simplefilter("ignore", errors.FitWarning)
        independent = cmr.fit_recall(population_events, SPEC, progress=False, rng=0)
    names = ["B_enc", "T"]
    spread_independent = independent["value"].sel(parameter=names).std("subject").values
    spread_shrunk = population_fit["value"].sel(parameter=names).std("subject").values
    assert np.all(spread_shrunk < spread_independent)


def test_results_do_not_depend_on_threads(population_events, population_fit):
    again = cmr.fit_population(population_events, SPEC, progress=False, tol=2e-3, n_jobs=2)
    np.testing.assert_array_equal(again["value"].values, population_fit["value"].values)
    np.testing.assert_array_equal(again["population_sd"].values, population_fit["population_sd"].values)
    with ThreadPoolExecutor(2) as executor:  # one submitted task per subject and iteration, as on dask
        submitted = cmr.fit_population(population_events, SPEC, progress=False, tol=2e-3, executor=executor)
    np.testing.assert_array_equal(submitted["value"].values, population_fit["value"].values)


def test_a_tied_variant_is_fitted_with_its_tie(population_events):
    spec = cmr.FitSpec(["B_enc", "T"], tied={"B_rec": "B_enc"})
    fits = cmr.fit_population(population_events, spec, progress=False, tol=1e-2)
    np.testing.assert_array_equal(fits["value"].sel(parameter="B_rec").values,
                                  fits["value"].sel(parameter="B_enc").values)


def test_a_semantic_variant_is_fitted_with_its_patterns():
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(20, 5))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    items = [f"w{i}" for i in range(20)]
    with pytest.warns(cmr.errors.SimilarityWarning, match="not positive semi-definite"):  # negative cosines set to 0
        patterns = cmr.item_patterns(items, np.clip(vectors @ vectors.T, 0, 1))
    recalls = np.concatenate([cmr.simulate_recalls(cmr.default_parameters(), 8, 3, rng=rng) for _ in range(4)])
    study = [[items[i] for i in rng.permutation(20)[:8]] for _ in range(12)]
    events = cmr.from_recall_matrix(recalls, 8, subject=np.repeat([1, 2, 3, 4], 3), study_items=study)
    spec = cmr.FitSpec(["B_enc", "Sff"], patterns=patterns)
    fits = cmr.fit_population(events, spec, progress=False, tol=1e-2)
    np.testing.assert_allclose(cmr.log_likelihood(events, fits, patterns=patterns)["logl"].values,
                               fits["logl"].values, rtol=1e-12)
    assert np.isfinite(fits["population_median"].sel(parameter="Sff"))


def test_saved_fit_round_trips(tmp_path, population_fit):
    path = cmr.save_dataset(population_fit, tmp_path / "pop.nc")
    back = load_dataset(path)
    np.testing.assert_array_equal(back["em_sd"].values, population_fit["em_sd"].values)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda ev: cmr.fit_population(ev.isel(trial=slice(0, 3)), SPEC, progress=False), errors.RecallDataError,
     "needs at least 2 subjects to estimate a population; got 1"),
    (lambda ev: cmr.fit_population(ev, ["B_enc"], progress=False), errors.ParameterError,
     "takes the model as one cmr.FitSpec or cmr.CMR2FitSpec; got list"),
    (lambda ev: cmr.fit_population(ev, SPEC, tol=0, progress=False), errors.ParameterError,
     "tol must be a finite number > 0; got 0"),
    (lambda ev: cmr.fit_population(ev, SPEC, interval=np.float64(1.5), progress=False), errors.ParameterError,
     r"interval must be a probability in \(0, 1\); got 1.5"),
    (lambda ev: cmr.population_recovery(4, n_lists=(2,), spec=SPEC, population={"P1": (1.0, 0.5)}), errors.ParameterError,
     "population names parameters that are not free: P1; free: B_enc, T"),
    (lambda ev: cmr.population_recovery(4, n_lists=(2,), spec=SPEC, population={"T": (5.0, 0.5)}), errors.ParameterError,
     r"population median of T must lie inside its search bounds \(0.01, 1\); got 5.0"),
    (lambda ev: cmr.population_recovery(1, n_lists=(2,), spec=SPEC), errors.ParameterError, "n_subjects must be an integer >= 2"),
])
def test_bad_arguments_end_in_one_typed_line(population_events, call, error, pattern):
    with pytest.raises(error, match=pattern) as caught:
        call(population_events)
    assert "\n" not in str(caught.value) and "np." not in str(caught.value)


@pytest.mark.parametrize("argv, pattern", [
    (["--free", "B_enc,T"], "needs SOURCE"),
    (["--free", "B_enc,T", "--recovery", "4", "SOURCE_FILE"], "--recovery simulates its own subjects"),
    (["--free", "B_enc,T", "--recovery", "4", "--lists", "4,x"], "--lists must be positive integers"),
    (["--free", "B_enc,T", "--recovery", "4", "--check", "check.nc"], "--check needs SOURCE data"),
    (["SOURCE_FILE", "--free", "B_enc,T", "--bounds", "T=1"], "--bounds entries must look like NAME=LOW:HIGH"),
    (["--free", "B_enc,T", "--recovery", "1"], "--recovery must be an integer >= 2; got 1"),
    (["SOURCE_FILE", "--free", "B_enc,T", "--check", "check.nc", "--check-reps", "0"],
     "--check-reps must be an integer >= 1; got 0"),
    (["--free", "B_enc,T", "--recovery", "4", "--patterns", "semantic"], "--recovery simulates localist CMR"),
])
def test_cli_faults_print_one_line_and_write_nothing(tmp_path, monkeypatch, capsys, population_events, argv, pattern):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    cmr.to_table(population_events).to_csv("recall.csv", index=False)
    argv = [("recall.csv" if a == "SOURCE_FILE" else a) for a in argv]
    assert main(["fit-population", *argv, "-o", "pop.nc"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("icl-cmr fit-population: error: ") and err.count("\n") == 1 and pattern in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recall.csv"]


def test_cli_writes_the_fit_and_its_predictive_check(tmp_path, monkeypatch, capsys, population_events):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    cmr.to_table(population_events).to_csv("recall.csv", index=False)
    assert main(["fit-population", "recall.csv", "--free", "B_enc,T", "--tol", "0.01", "--no-progress",
                 "--check", "check.nc", "--check-reps", "2", "-o", "pop.nc"]) == 0
    out = capsys.readouterr().out
    assert "converged in" in out and "population medians B_enc" in out and "wrote check.nc" in out
    assert load_dataset("pop.nc").attrs["estimation"] == "hierarchical"
    assert load_dataset("check.nc").attrs["icl_cmr_kind"] == "predictive_check"
