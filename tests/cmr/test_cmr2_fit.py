"""Fitting CMR2 (cmr.fit_cmr2): parameter recovery, the recall_fit it returns, per-subject
simulation, replays with n_rep, and ``icl-cmr fit-recall / loglik --model cmr2``."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import ParameterError, RecallDataError
from cmr.schema import validate

# quick fits on a few lists end at a bound; the recovery test checks that its own do not
pytestmark = pytest.mark.filterwarnings("ignore::cmr.errors.FitWarning")

# a recall regime with prior-list intrusions and some editing (docs/cmr2.md)
BASE = dict(cmr.default_cmr2_parameters(), X1=0.01, X2=0.3, Lcf=0.3, P1=0.5, T=0.25)


def _params(**changes):
    return dict(BASE, **changes)


def _fixed(free):
    return {name: value for name, value in BASE.items() if name not in free}


def _one_line(exc_info, error, pattern):
    assert exc_info.type is error
    message = str(exc_info.value)
    assert "\n" not in message and "np." not in message, message
    assert re.search(pattern, message), message


@pytest.fixture(scope="module")
def small():
    """Two subjects, two sessions of three lists of five items, and a quick two-parameter fit."""
    table = cmr.simulate_cmr2({1: _params(B_distract=0.4), 2: _params(B_distract=0.8, C_thresh=0.03)},
                              list_length=5, n_lists=3, sessions=2, rng=5)
    free = ["B_enc", "B_distract"]
    spec = cmr.CMR2FitSpec(free, fixed=_fixed(free))
    fit = cmr.fit_cmr2(table, spec, session="session", rng=2, progress=False, de_options=dict(maxiter=4, popsize=5))
    return table, spec, fit


# --- recovery -----------------------------------------------------------------------------------


def test_parameters_are_recovered_from_simulated_subjects():
    true = {1: dict(B_enc=0.5, B_distract=0.4, C_thresh=0.05),
            2: dict(B_enc=0.7, B_distract=0.6, C_thresh=0.065),
            3: dict(B_enc=0.6, B_distract=0.8, C_thresh=0.03)}
    table = cmr.simulate_cmr2({s: _params(**v) for s, v in true.items()}, list_length=10, n_lists=8, sessions=8,
                              rng=11)
    free = ["B_enc", "B_distract", "C_thresh"]
    # one search per subject: recovery depends on the data, not on the restarts (restarts until two
    # agree moved no estimate by more than 0.03 and no logl by more than 0.12; the default restart
    # rule is tested in test_fit_flags.py)
    fit = cmr.fit_cmr2(table, cmr.CMR2FitSpec(free, fixed=_fixed(free)), session="session", rng=3, n_jobs=2,
                       n_restarts=1, progress=False, de_options=dict(tol=0.001))
    assert not fit["at_bound"].any()
    tolerance = {"B_enc": 0.05, "B_distract": 0.1, "C_thresh": 0.01}  # ~1,700 recalls of 3 subjects
    for subject, values in true.items():
        for name, value in values.items():
            estimate = float(fit["value"].sel(subject=subject, parameter=name))
            assert abs(estimate - value) <= tolerance[name], (subject, name, estimate, value)
        at_truth = cmr.cmr2_log_likelihood(table[table["subject"] == subject], _params(**values), session="session")
        # the search found the likelihood's maximum, at least as high as at the true values
        assert float(fit["logl"].sel(subject=subject)) >= at_truth.attrs["total_logl"] - 0.5


# --- the dataset --------------------------------------------------------------------------------


def test_the_fit_is_a_recall_fit_of_cmr2_whose_logl_is_the_likelihood(small):
    table, spec, fit = small
    validate(fit, "recall_fit")
    assert fit.attrs["model"] == "cmr2" and fit.attrs["session"] == "session"
    assert json.loads(fit.attrs["provenance"])["model"] == "cmr2"
    assert list(fit["parameter"].values) == list(cmr.CMR2_PARAMETER_NAMES)
    assert list(fit["free"].values) == [int(n in spec.free) for n in cmr.CMR2_PARAMETER_NAMES]
    assert fit.attrs["k"] == 2 and fit.sizes["subject"] == 2
    scored = cmr.cmr2_log_likelihood(table, fit, session="session")
    np.testing.assert_allclose(fit["logl"].values, scored["logl"].values, rtol=1e-12)
    np.testing.assert_array_equal(fit["n"].values, scored["n"].values)
    for name, value in _fixed(spec.free).items():
        np.testing.assert_array_equal(fit["value"].sel(parameter=name).values, value)


def test_a_fit_is_taken_by_the_likelihood_and_both_simulators(small):
    table, _, fit = small
    by_subject = {s: dict(zip(cmr.CMR2_PARAMETER_NAMES, map(float, row)))
                  for s, row in zip(fit["subject"].values.tolist(), fit["value"].values)}
    assert cmr.cmr2_log_likelihood(table, fit, session="session").identical(
        cmr.cmr2_log_likelihood(table, by_subject, session="session"))
    pd.testing.assert_frame_equal(cmr.simulate_cmr2_experiment(table, fit, session="session", rng=1),
                                  cmr.simulate_cmr2_experiment(table, by_subject, session="session", rng=1))
    pd.testing.assert_frame_equal(cmr.simulate_cmr2(fit, 5, 3, rng=1), cmr.simulate_cmr2(by_subject, 5, 3, rng=1))


def test_a_textbook_fitspec_is_the_same_cmr2_spec(small):
    table, _, _ = small
    options = dict(session="session", rng=4, progress=False, de_options=dict(maxiter=2, popsize=4))
    free = ["T"]
    textbook = cmr.fit_cmr2(table, cmr.FitSpec(free, fixed={"B_enc": 0.6}), **options)
    own = cmr.fit_cmr2(table, cmr.CMR2FitSpec(free, fixed={"B_enc": 0.6}), **options)
    np.testing.assert_array_equal(textbook["value"].values, own["value"].values)
    np.testing.assert_array_equal(textbook["logl"].values, own["logl"].values)


def test_fixed_and_tied_parameters_and_a_pooled_fit():
    table = cmr.simulate_cmr2(_params(), list_length=4, n_lists=3, subjects=2, rng=6)
    spec = cmr.CMR2FitSpec(["B_enc"], fixed={"B_distract": 0.3}, tied={"B_rec": "B_enc"})
    fit = cmr.fit_cmr2(table, spec, session="session", by=None, rng=1, progress=False,
                       de_options=dict(maxiter=2, popsize=4))
    validate(fit, "recall_fit")
    assert fit["value"].dims == ("parameter",) and fit.attrs["unit_kind"] == "pooled"
    assert float(fit["value"].sel(parameter="B_distract")) == 0.3
    assert float(fit["value"].sel(parameter="B_rec")) == float(fit["value"].sel(parameter="B_enc"))
    assert fit["tied"].sel(parameter="B_rec").item() == "B_enc"


def test_results_do_not_depend_on_threads(small):
    table, spec, _ = small
    options = dict(session="session", rng=7, progress=False, de_options=dict(maxiter=3, popsize=5))
    one = cmr.fit_cmr2(table, spec, n_jobs=1, **options)
    two = cmr.fit_cmr2(table, spec, n_jobs=3, **options)
    np.testing.assert_array_equal(one["value"].values, two["value"].values)
    np.testing.assert_array_equal(one["restart_logl"].values, two["restart_logl"].values)


# --- simulation with each subject's own parameters, replays --------------------------------------


def test_simulate_cmr2_with_each_subjects_own_parameters(small):
    p = _params()
    pd.testing.assert_frame_equal(cmr.simulate_cmr2({1: p}, 5, 3, rng=4), cmr.simulate_cmr2(p, 5, 3, rng=4))
    table = cmr.simulate_cmr2({"b": _params(X1=0.9), "a": _params(X1=0.001)}, 6, 3, sessions=2, rng=4)
    assert list(pd.unique(table["subject"])) == ["b", "a"]
    recalls = table[table["trial_type"] == "recall"].groupby("subject").size()
    assert recalls.get("a", 0) > 3 * recalls.get("b", 0)
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2({1: p, 2: p}, 5, 3, subjects=3)
    _one_line(info, ParameterError, r"subjects must be left out or equal the 2 subject\(s\) of the CMR2 parameters; got 3$")
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2({1: p, "1": p}, 5, 3)
    _one_line(info, ParameterError, r"subject labels of the CMR2 parameters must differ as text; got 1, '1'$")
    textbook_fit = small[2].isel(parameter=slice(0, 14))  # the 14 parameters of a textbook CMR fit
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2(textbook_fit, 5, 3)
    _one_line(info, ParameterError, r"missing CMR2 parameter\(s\): B_distract, C_thresh")


def test_replays_n_rep_times_the_first_being_the_single_replay(small):
    table, _, fit = small
    once = cmr.simulate_cmr2_experiment(table, fit, session="session", rng=3)
    pd.testing.assert_frame_equal(cmr.simulate_cmr2_experiment(table, fit, session="session", n_rep=1, rng=3), once)
    thrice = cmr.simulate_cmr2_experiment(table, fit, session="session", n_rep=3, rng=3)
    assert list(thrice.columns) == list(once.columns) + ["rep"]
    assert sorted(pd.unique(thrice["rep"])) == [0, 1, 2]
    pd.testing.assert_frame_equal(thrice[thrice["rep"] == 0].drop(columns="rep").reset_index(drop=True), once)
    study = thrice[thrice["trial_type"] == "study"]
    assert len(study) == 3 * (once["trial_type"] == "study").sum()
    events = cmr.from_table(thrice, list_keys=["rep", "session"], max_intrusion_share=1.0)
    assert events.sizes["trial"] == 3 * cmr.from_table(once, list_keys=["session"],
                                                       max_intrusion_share=1.0).sizes["trial"]
    with pytest.raises(ParameterError) as info:
        cmr.simulate_cmr2_experiment(table, fit, session="session", n_rep=0)
    _one_line(info, ParameterError, r"n_rep")


# --- bad input: one typed line ------------------------------------------------------------------


@pytest.mark.parametrize("arguments, pattern", [
    (dict(free=["beta_rec_post"]), r"unknown CMR2 free parameter\(s\) 'beta_rec_post'; known: Lfc, .*C_thresh$"),
    (dict(free=[]), r"at least one free CMR2 parameter is needed; got none$"),
    (dict(free=["T", "T"]), r"free parameters must be distinct; got T, T$"),
    (dict(free=["B_distract"], fixed={"B_distract": 0.5}), r"B_distract are both free and fixed$"),
    (dict(free=["T"], fixed={"C_thresh": 2}), r"CMR2 parameter C_thresh must be in \[0, 1\]; got 2$"),
    (dict(free=["T"], fixed={"c_thresh": 0.1}), r"unknown CMR2 fixed parameter\(s\) 'c_thresh'"),
    (dict(free=["C_thresh"], bounds={"C_thresh": (0.2, 1.5)}),
     r"search bounds for CMR2 parameter C_thresh must satisfy 0 <= low < high <= 1; got \(0.2, 1.5\)$"),
    (dict(free=["C_thresh"], bounds={"C_thresh": "low"}), r"C_thresh must be a pair \(low, high\); got 'low'$"),
    (dict(free=["T"], bounds={"T": (0.0, 1.0)}), r"search bounds for CMR parameter T must satisfy"),
    (dict(free=["T"], tied={"B_distract": "2 * T"}), r"tied parameter B_distract = '2 \* T' .*must stay within"),
    (dict(free=["T"], tied={"B_rec": "C_thresh"}), r"tied parameter B_rec = 'C_thresh': unknown name 'C_thresh'"),
    (dict(free=["T"], tied={"T": "B_enc"}), r"parameter T is tied and also free$"),
    (dict(free=["T"], fixed=[("B_enc", 0.5)]), r"fixed must be a mapping of parameter name to value; got list$"),
])
def test_bad_specs_are_one_typed_line(arguments, pattern):
    with pytest.raises(ParameterError) as info:
        cmr.CMR2FitSpec(**arguments)
    _one_line(info, ParameterError, pattern)


@pytest.mark.parametrize("arguments, error, pattern", [
    (dict(spec="B_enc"), ParameterError, r"spec must be a cmr.CMR2FitSpec, a cmr.FitSpec or None; got str$"),
    (dict(spec=cmr.FitSpec(["T"], pool_size=30)), ParameterError, r"must not set patterns or pool_size"),
    (dict(session="block"), RecallDataError, r"session 'block' names no variable of the events"),
    (dict(session=3), RecallDataError, r"session must be the name of a variable of the events; got int$"),
    (dict(by="list"), RecallDataError, r"by must be 'subject' \(one fit per subject\) or None \(pooled\); got 'list'$"),
    (dict(n_restarts=0), ParameterError, r"n_restarts"),
    (dict(n_jobs=0), ParameterError, r"n_jobs"),
    (dict(de_options=[("tol", 1)]), ParameterError, r"de_options must be a mapping .*; got list$"),
])
def test_bad_fit_arguments_are_one_typed_line(small, arguments, error, pattern):
    table, _, _ = small
    before = table.copy()
    with pytest.raises(error) as info:
        cmr.fit_cmr2(table, **{"spec": cmr.CMR2FitSpec(["T"]), "progress": False, **arguments})
    _one_line(info, error, pattern)
    pd.testing.assert_frame_equal(table, before)


# --- the command line ---------------------------------------------------------------------------


def _cli(argv):
    from icl_cmr.analyses.cli import build_parser, execute

    return execute(build_parser().parse_args([str(a) for a in argv]))


def test_fit_recall_and_loglik_with_model_cmr2(small, tmp_path, capsys):
    table, _, _ = small
    data = tmp_path / "sessions.csv"
    table.to_csv(data, index=False)
    out = tmp_path / "fits.nc"
    assert _cli(["fit-recall", data, "--model", "cmr2", "--session", "session", "--free", "B_distract",
                 "--no-progress", "-o", out]) == 0
    line = capsys.readouterr().out
    assert "CMR2 2 subject(s), free B_distract" in line
    fits = cmr.load_dataset(out, kind="recall_fit")
    assert fits.attrs["model"] == "cmr2" and fits.attrs["session"] == "session"
    assert _cli(["loglik", data, "--model", "cmr2", "--session", "session", "--params", out]) == 0
    scored = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(scored["total_logl"], float(fits["logl"].sum()), rtol=1e-12)
    assert scored["n"] == int(fits["n"].sum())


def test_loglik_model_cmr2_on_morton2013(tmp_path, capsys):
    params = tmp_path / "cmr2.json"
    params.write_text(json.dumps(_params(C_thresh=0.02)))
    assert _cli(["loglik", "psifr:Morton2013", "--model", "cmr2", "--session", "session", "--params", params]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert len(scored["per_subject"]) == 40 and scored["n"] > 26_000 and np.isfinite(scored["total_logl"])
    # psifr's Morton2013 has a session column: three sessions per subject
    from icl_cmr.adapters.recall_data import load_recall_data
    from cmr.cmr2._sessions import session_arrays

    assert session_arrays(load_recall_data("psifr:Morton2013"), "session").session_units.size == 120


@pytest.mark.parametrize("argv, pattern", [
    (["fit-recall", "DATA", "--model", "cmr2", "--free", "T", "--patterns", "semantic", "-o", "OUT"],
     r"--model cmr2 is localist with a session-sized context; fit-recall got --patterns"),
    (["fit-recall", "DATA", "--model", "cmr2", "--free", "T", "--cv", "2", "-o", "OUT"], r"fit-recall got --cv"),
    (["fit-recall", "DATA", "--session", "session", "--free", "T", "-o", "OUT"],
     r"--session labels the sessions of --model cmr2; got --session 'session' with --model cmr$"),
    (["fit-recall", "DATA", "--model", "cmr2", "--session", "block", "--free", "T", "-o", "OUT"],
     r"session 'block' names no variable of the events"),
    (["fit-recall", "DATA", "--model", "cmr2", "--free", "beta", "-o", "OUT"], r"unknown CMR2 free parameter"),
    (["loglik", "DATA", "--model", "cmr2", "--params", "PARAMS", "--pool-size", "30"], r"loglik got --pool-size"),
    (["loglik", "DATA", "--params", "FITS"], r"--params '.*fits.nc' is a fit of --model cmr2; got --model cmr$"),
    (["loglik", "DATA", "--model", "cmr2", "--params", "PARAMS"], r"missing CMR2 parameter\(s\): B_distract"),
])
def test_the_cli_refuses_bad_input_in_one_line(small, tmp_path, capsys, argv, pattern):
    from icl_cmr.analyses.cli import main

    table, spec, fit = small
    data = tmp_path / "sessions.csv"
    table.to_csv(data, index=False)
    textbook = tmp_path / "params.json"
    textbook.write_text(json.dumps(cmr.default_parameters()))
    fits = tmp_path / "fits.nc"
    cmr.io.save_dataset(fit, fits)
    names = {"DATA": data, "OUT": tmp_path / "out.nc", "PARAMS": textbook, "FITS": fits}
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([str(names.get(a, a)) for a in argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"icl-cmr {argv[0]}: error: "), err
    assert re.search(pattern, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind


def test_plot_and_export_take_a_cmr2_fit(small, tmp_path, capsys):
    _, _, fit = small
    fits = tmp_path / "fits.nc"
    cmr.io.save_dataset(fit, fits)
    assert _cli(["export", fits, "-o", tmp_path / "fits.csv"]) == 0
    table = pd.read_csv(tmp_path / "fits.csv")
    assert list(table["subject"]) == [1, 2]
    np.testing.assert_array_equal(table[["B_distract", "C_thresh"]].to_numpy(),
                                  fit["value"].sel(parameter=["B_distract", "C_thresh"]).values)
    assert _cli(["plot", fits, "-o", tmp_path / "fits.png"]) == 0
    assert (tmp_path / "fits.png").stat().st_size > 0
