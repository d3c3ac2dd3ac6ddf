"""Population-level fits of CMR2 (cmr.fit_population with a CMR2FitSpec): shrinkage that pays off
over sessions of lists, a fit that is a CMR2 parameter set, typed faults, the command line."""
from __future__ import annotations

import json
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cmr
from cmr import errors
from cmr.hierarchical import to_natural
from cmr.io import load_dataset

from tests.conftest import assert_population_intervals

# a recall regime with prior-list intrusions (docs/cmr2.md)
BASE = dict(cmr.default_cmr2_parameters(), X1=0.01, X2=0.3, Lcf=0.3, P1=0.5, T=0.25)
FREE = ["B_enc", "B_rec", "T", "B_distract"]
SPEC = cmr.CMR2FitSpec(FREE, fixed={name: value for name, value in BASE.items() if name not in FREE})


def _population(seed: int, n_subjects: int = 8, sessions: int = 2, n_lists: int = 4, list_length: int = 6):
    """Subjects drawn from a known latent population of FREE; their true values and simulated table."""
    model = SPEC._model
    low = np.array([b[0] for b in model.bounds])
    high = np.array([b[1] for b in model.bounds])
    rng = np.random.default_rng(seed)
    latent = rng.normal([0.4, 0.9, -0.5, 0.0], 0.5, size=(n_subjects, len(FREE)))
    truth = {s: dict(BASE, **dict(zip(FREE, to_natural(latent[s], low, high)))) for s in range(n_subjects)}
    table = cmr.simulate_cmr2(truth, list_length=list_length, n_lists=n_lists, sessions=sessions, rng=seed + 1)
    true_value = np.array([[truth[s][name] for name in FREE] for s in range(n_subjects)])
    return table, true_value, high - low


@pytest.fixture(scope="module")
def small():
    """Four subjects, two sessions of three lists of five items; a two-parameter population fit."""
    table = cmr.simulate_cmr2({s: dict(BASE, B_enc=0.45 + 0.1 * s, B_distract=0.4 + 0.1 * s) for s in range(4)},
                              list_length=5, n_lists=3, sessions=2, rng=7)
    spec = cmr.CMR2FitSpec(["B_enc", "B_distract"], fixed={k: v for k, v in BASE.items() if k not in
                                                          ("B_enc", "B_distract")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.FitWarning)
        fits = cmr.fit_population(table, spec, session="session", progress=False, tol=1e-2)
    return table, spec, fits


def test_shrunk_estimates_beat_independent_cmr2_fits_with_few_lists():
    table, true_value, width = _population(seed=0)  # 8 subjects x 2 sessions x 4 lists of 6 items
    with warnings.catch_warnings():  # a few lists per subject put independent estimates at bounds
        warnings.simplefilter("ignore", errors.FitWarning)
        population = cmr.fit_population(table, SPEC, session="session", progress=False, tol=1e-2)
        independent = cmr.fit_cmr2(table, SPEC, session="session", progress=False, rng=0)
    assert population.attrs["converged"] == 1
    rmse = {}
    for name, fits in (("population", population), ("independent", independent)):
        error = (fits["value"].sel(parameter=FREE).values - true_value) / width
        rmse[name] = np.sqrt(np.mean(error ** 2, axis=0))  # per parameter, in units of the search range
    assert rmse["population"].mean() < 0.8 * rmse["independent"].mean()
    assert rmse["population"][0] < rmse["independent"][0]  # B_enc
    assert rmse["population"][3] < rmse["independent"][3]  # B_distract


def test_fit_is_a_cmr2_parameter_set_with_its_own_logl(small):
    table, spec, fits = small
    assert fits.attrs["icl_cmr_kind"] == "recall_fit" and fits.attrs["estimation"] == "hierarchical"
    assert fits.attrs["model"] == "cmr2" and fits.attrs["session"] == "session"
    assert list(fits["parameter"].values) == list(cmr.default_cmr2_parameters())
    scored = cmr.cmr2_log_likelihood(table, fits, session="session")
    np.testing.assert_allclose(scored["logl"].values, fits["logl"].values, rtol=1e-12)
    np.testing.assert_array_equal(scored["n"].values, fits["n"].values)
    replay = cmr.simulate_cmr2_experiment(table, fits, session="session", rng=1)
    assert set(replay["subject"]) == set(table["subject"])
    np.testing.assert_array_equal(fits["value"].sel(parameter="T").values, BASE["T"])  # fixed stays fixed


def test_intervals_history_and_population_variables(small):
    _, spec, fits = small
    free = list(spec.free)
    assert_population_intervals(fits, free)
    assert np.isnan(fits["population_mean"].sel(parameter="C_thresh"))
    assert fits.sizes["iteration"] == fits.attrs["n_iter"] and float(fits["em_change"][-1]) < 1e-2
    assert np.isfinite(fits["em_marginal_logl"].values).all()


def test_cmr2_results_do_not_depend_on_threads(small):
    table, spec, fits = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.FitWarning)
        again = cmr.fit_population(table, spec, session="session", progress=False, tol=1e-2, n_jobs=2)
        with ThreadPoolExecutor(2) as executor:
            submitted = cmr.fit_population(table, spec, session="session", progress=False, tol=1e-2,
                                           executor=executor)
    for other in (again, submitted):
        np.testing.assert_array_equal(other["value"].values, fits["value"].values)
        np.testing.assert_array_equal(other["population_sd"].values, fits["population_sd"].values)


def test_a_tied_cmr2_variant_keeps_its_tie(small):
    table, _, _ = small
    spec = cmr.CMR2FitSpec(["B_enc", "B_distract"], fixed={"X1": 0.01, "X2": 0.3}, tied={"B_rec": "B_enc"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.FitWarning)
        fits = cmr.fit_population(table, spec, session="session", progress=False, tol=2e-2)
    np.testing.assert_array_equal(fits["value"].sel(parameter="B_rec").values,
                                  fits["value"].sel(parameter="B_enc").values)


def test_saved_cmr2_fit_round_trips(tmp_path, small):
    _, _, fits = small
    back = load_dataset(cmr.save_dataset(fits, tmp_path / "pop2.nc"))
    np.testing.assert_array_equal(back["value"].values, fits["value"].values)
    assert back.attrs["model"] == "cmr2"


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: cmr.fit_population(t, cmr.FitSpec(["B_enc"]), session="session", progress=False),
     errors.ParameterError, "session labels the sessions of CMR2 and needs a cmr.CMR2FitSpec; got session "
     "'session' with a cmr.FitSpec"),
    (lambda t: cmr.fit_population(t, ["B_enc"], session="session", progress=False), errors.ParameterError,
     "fit_population takes the model as one cmr.FitSpec or cmr.CMR2FitSpec; got list"),
    (lambda t: cmr.fit_population(t, cmr.CMR2FitSpec(["B_enc"]), session="nope", progress=False),
     errors.RecallDataError, "session 'nope' names no variable of the events"),
    (lambda t: cmr.fit_population(t, cmr.CMR2FitSpec(["B_enc"]), session=3, progress=False),
     errors.RecallDataError, "session must be the name of a variable of the events; got int"),
    (lambda t: cmr.fit_population(t[t["subject"] == 0], cmr.CMR2FitSpec(["B_enc"]), session="session",
                                  progress=False), errors.RecallDataError, "needs at least 2 subjects"),
    (lambda t: cmr.fit_population(t, cmr.CMR2FitSpec(["B_enc"]), session="session", tol=-1, progress=False),
     errors.ParameterError, "tol must be a finite number > 0; got -1"),
    (lambda t: cmr.population_recovery(4, n_lists=(2,), spec=cmr.CMR2FitSpec(["B_enc"])), errors.ParameterError,
     "population_recovery takes the model as one cmr.FitSpec; got CMR2FitSpec"),
])
def test_bad_combinations_end_in_one_typed_line(small, call, error, pattern):
    table, _, _ = small
    with pytest.raises(error, match=pattern) as caught:
        call(table)
    assert "\n" not in str(caught.value) and "np." not in str(caught.value)


@pytest.mark.parametrize("argv, pattern", [
    (["--model", "cmr2", "--patterns", "semantic"], "--model cmr2 is localist with a session-sized context; "
     "fit-population got --patterns"),
    (["--model", "cmr2", "--pool-size", "3"], "fit-population got --pool-size"),
    (["--model", "cmr2", "--check", "check.nc"], "--check simulates textbook CMR, not --model cmr2; leave it out"),
    (["--session", "session"], "--session labels the sessions of --model cmr2; got --session 'session' with "
     "--model cmr"),
    (["--model", "cmr2", "--session", "nope"], "session 'nope' names no variable of the events"),
])
def test_cli_faults_print_one_line_and_write_nothing(tmp_path, monkeypatch, capsys, small, argv, pattern):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    small[0].to_csv("recall.csv", index=False)
    assert main(["fit-population", "recall.csv", "--free", "B_enc", *argv, "--no-progress", "-o", "pop.nc"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("icl-cmr fit-population: error: ") and err.count("\n") == 1 and pattern in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recall.csv"]


def test_cli_recovery_is_refused_for_cmr2(tmp_path, monkeypatch, capsys):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["fit-population", "--model", "cmr2", "--recovery", "4", "--free", "B_enc", "-o", "r.nc"]) == 1
    err = capsys.readouterr().err
    assert err == "icl-cmr fit-population: error: --recovery simulates textbook CMR, not --model cmr2; leave it out\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_fits_cmr2_sessions_and_loglik_reads_the_fit(tmp_path, monkeypatch, capsys, small):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    table, _, _ = small
    table.to_csv("recall.csv", index=False)
    fixed = {k: v for k, v in BASE.items() if k not in ("B_enc", "B_distract")}
    with open("fixed.json", "w") as handle:
        json.dump(fixed, handle)
    assert main(["fit-population", "recall.csv", "--model", "cmr2", "--session", "session", "--free",
                 "B_enc,B_distract", "--fixed", "fixed.json", "--tol", "0.01", "--no-progress", "-o", "pop.nc"]) == 0
    out = capsys.readouterr().out
    assert "CMR2, 4 subject(s), converged in" in out and "population medians B_enc" in out
    fits = load_dataset("pop.nc")
    assert fits.attrs["model"] == "cmr2" and fits.attrs["estimation"] == "hierarchical"
    np.testing.assert_array_equal(fits["value"].values, small[2]["value"].values)
    assert main(["loglik", "recall.csv", "--model", "cmr2", "--session", "session", "--params", "pop.nc"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["total_logl"] == pytest.approx(float(fits["logl"].sum()), rel=1e-12)
