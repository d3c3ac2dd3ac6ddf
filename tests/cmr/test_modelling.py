"""Modelling workflow: per-subject parameters, replayed lists, tied parameters, restarts, pooled fits,
cross-validation, model comparison, posterior predictive checks and recorded states."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import FitWarning, ParameterError
from cmr.events import from_recall_matrix, from_table, to_table
from cmr.io import load_dataset, save_dataset
from cmr.textbook._optimize import model_spec
from tests.conftest import require

FAST_DE = dict(popsize=6, tol=0.05, maxiter=25)
TRUTHS = {"s1": dict(cmr.default_parameters(), B_enc=0.4, T=0.3), "s2": dict(cmr.default_parameters(), B_enc=0.85)}


@pytest.fixture(scope="module")
def data():
    """Two simulated subjects with their own parameters, 16 lists of 10 items each."""
    return from_table(cmr.simulate_free_recall(TRUTHS, 10, 16, rng=5))


@pytest.fixture(scope="module")
def fits(data):
    return cmr.fit_recall(data, cmr.FitSpec(["B_enc", "T"], tied={"B_rec": "B_enc"}), n_restarts=2, rng=1, progress=False,
                          de_options=FAST_DE, n_jobs=2)


def test_per_subject_parameters_equal_separate_calls(data):
    together = cmr.log_likelihood(data, TRUTHS)
    for subject, params in TRUTHS.items():
        alone = cmr.log_likelihood(data.isel(trial=(data["subject"] == subject).values), params)
        np.testing.assert_allclose(together["logl"].sel(subject=subject), alone.attrs["total_logl"], rtol=1e-13)
    frame = pd.DataFrame(TRUTHS).T.assign(logl=0.0, n=1, k=2)  # cymr's fit table layout
    np.testing.assert_array_equal(cmr.log_likelihood(data, frame)["logl"].values, together["logl"].values)
    with pytest.raises(ParameterError, match="no parameters for 1 subject"):
        cmr.log_likelihood(data, {"s1": TRUTHS["s1"]})


def test_fit_restarts_tied_aic_and_fit_as_parameters(data, fits):
    assert fits.sizes["restart"] == 2 and fits["restart_value"].dims == ("subject", "restart", "parameter")
    best = fits["restart_logl"].max("restart")
    np.testing.assert_array_equal(fits["logl"].values, best.values)
    np.testing.assert_array_equal(fits["value"].sel(parameter="B_rec"), fits["value"].sel(parameter="B_enc"))
    assert fits.attrs["k"] == 2 and list(fits["tied"].sel(parameter=["B_rec"]).values) == ["B_enc"]
    np.testing.assert_allclose(fits["aic"], 4 - 2 * fits["logl"])
    np.testing.assert_allclose(fits["bic"], 2 * np.log(fits["n"]) - 2 * fits["logl"])
    again = cmr.log_likelihood(data, fits)  # a fit is a parameter set by subject
    np.testing.assert_allclose(again["logl"].values, fits["logl"].values, rtol=1e-12)


def test_fits_do_not_depend_on_threads_or_restart_count(data):
    one = data.isel(trial=slice(0, 8))
    a = cmr.fit_recall(one, cmr.FitSpec(["T"]), rng=4, progress=False, de_options=FAST_DE, polish=False,
                       start_library=False)
    b = cmr.fit_recall(one, cmr.FitSpec(["T"]), rng=4, progress=False, de_options=FAST_DE, polish=False, n_jobs=2, n_restarts=2)
    # a runs restarts until two agree (n_restarts="auto"), b exactly two: their first restarts are one search
    # (test_fit_starts.py checks the searches are the same searches with the start library)
    np.testing.assert_array_equal(a["restart_value"].isel(restart=0).values, b["restart_value"].isel(restart=0).values)


def test_pooled_fit_has_no_subject_dim(data):
    pooled = cmr.fit_recall(data, cmr.FitSpec(["B_enc"]), by=None, progress=False, de_options=FAST_DE)
    assert pooled["value"].dims == ("parameter",) and pooled["logl"].dims == ()
    assert pooled.attrs["unit_kind"] == "pooled"
    np.testing.assert_allclose(cmr.log_likelihood(data, pooled).attrs["total_logl"], float(pooled["logl"]), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(value=st.floats(0.0, 1.0), t=st.floats(0.01, 1.0))
def test_a_tied_parameter_is_the_same_parameter_free_and_equal(value, t):
    tied = model_spec(["B_enc", "T"], tied={"B_rec": "B_enc"})
    free = model_spec(["B_enc", "B_rec", "T"])
    a, ok_a = tied.vectors(np.array([[value, t]]))
    b, ok_b = free.vectors(np.array([[value, value, t]]))
    np.testing.assert_array_equal(a, b)
    assert ok_a[0] and ok_b[0]


def test_tied_expressions_are_parsed_not_evaluated():
    spec = model_spec(["Lfc", "Lcf"], tied={"Dfc": "1 - Lfc", "Dcf": "clip(1 - Lcf, 0, 1)"})
    sets, ok = spec.vectors(np.array([[0.25, 0.5], [1.0, 0.0]]))
    np.testing.assert_allclose(sets[:, cmr.MODEL_PARAMETER_NAMES.index("Dfc")], [0.75, 0.0])
    assert list(ok) == [True, False]  # Afc + Dfc = 0 is inadmissible, scored as impossible
    for bad in ("__import__('os')", "B_enc.real", "[1, 2]", "gamma + 1", "B_enc if T else 0"):
        with pytest.raises(ParameterError):
            model_spec(["B_enc"], tied={"B_rec": bad})
    with pytest.raises(ParameterError, match="tied and also free"):
        model_spec(["B_enc"], tied={"B_enc": "0.5"})
    with pytest.raises(ParameterError, match="uses tied"):
        model_spec(["T"], tied={"B_rec": "B_enc", "B_start": "B_rec"})


def test_replay_keeps_subjects_lists_and_items(data):
    table = cmr.simulate_experiment(data, TRUTHS, n_rep=3, rng=2)
    again = cmr.simulate_experiment(data, TRUTHS, n_rep=3, rng=2)
    assert table.equals(again)
    events = from_table(table)
    assert events.sizes["trial"] == 3 * data.sizes["trial"]
    assert set(table["rep"]) == {0, 1, 2}
    original = to_table(data).query("trial_type == 'study'")
    replayed = table.query("trial_type == 'study' and rep == 2").copy()
    replayed["list"] -= 2 * original["list"].max()
    pd.testing.assert_frame_equal(replayed[["subject", "list", "position", "item"]].reset_index(drop=True),
                                  original[["subject", "list", "position", "item"]].reset_index(drop=True),
                                  check_dtype=False)
    assert (events["recalls"].values >= 0).all()


def test_cross_validation_and_model_comparison(data, fits, tmp_path):
    cv_a = cmr.cross_validate(data, cmr.FitSpec(["B_enc", "T"]), n_folds=2, rng=3, progress=False, de_options=FAST_DE)
    cv_b = cmr.cross_validate(data, cmr.FitSpec(["T"]), n_folds=2, rng=3, progress=False, de_options=FAST_DE)
    assert cv_a["fold_logl"].dims == ("subject", "fold")
    np.testing.assert_allclose(cv_a["logl"], cv_a["fold_logl"].sum("fold"))
    np.testing.assert_array_equal(cv_a["n"].values, fits["n"].values)  # every list held out once
    folds = cv_a["trial_fold"].values
    assert sorted(np.bincount(folds[data["subject"].values == "s1"])) == [8, 8]
    # held-out lists are scored at the parameters fitted without them
    subject, fold = "s2", 1
    rows = np.flatnonzero((data["subject"].values == subject) & (folds == fold))
    params = dict(zip(cv_a["parameter"].values, cv_a["fold_value"].sel(subject=subject, fold=fold).values))
    held = cmr.log_likelihood(data.isel(trial=rows), params).attrs["total_logl"]
    np.testing.assert_allclose(float(cv_a["fold_logl"].sel(subject=subject, fold=fold)), held, rtol=1e-12)
    with pytest.warns(FitWarning):  # short searches on 16 lists end at a bound
        fits_a = cmr.fit_recall(data, cmr.FitSpec(["B_enc", "T"]), progress=False, de_options=FAST_DE)
        fits_b = cmr.fit_recall(data, cmr.FitSpec(["T"]), progress=False, de_options=FAST_DE)
    table = cmr.compare_models({"drift": fits_a, "temperature": fits_b}, cv={"drift": cv_a, "temperature": cv_b})
    best = str(table["model"].values[int(np.argmax(table["total_cv_logl"].values))])
    assert table.attrs["criterion"] == "cv_logl" and table.attrs["best_model"] == best
    assert np.isnan(table["paired_p"].sel(model=best)) and float(table["paired_statistic"].sel(model=best)) == 0
    np.testing.assert_allclose(table["akaike_weight"].sum(), 1.0)
    assert int(table["n_best_cv"].sum()) == 2
    back = load_dataset(save_dataset(table, tmp_path / "compare.nc"), kind="model_comparison")
    np.testing.assert_array_equal(back["aic"].values, table["aic"].values)
    load_dataset(save_dataset(cv_a, tmp_path / "cv.nc"), kind="recall_cv")
    load_dataset(save_dataset(fits, tmp_path / "fits.nc"), kind="recall_fit")


def test_posterior_predictive_is_one_call(data, fits, tmp_path):
    check = cmr.posterior_predictive(data, fits, n_rep=4, rng=0, lags=3)
    assert check["crp"].dims == ("source", "subject", "lag") and list(check["source"].values) == ["data", "model"]
    np.testing.assert_array_equal(check["crp"].sel(source="data").values,
                                  cmr.lag_crp(data, lags=3)["profile"].values)
    assert np.isfinite(check["spc_group"].values).all()
    back = load_dataset(save_dataset(check, tmp_path / "ppc.nc"), kind="predictive_check")
    np.testing.assert_array_equal(back["pfr"].values, check["pfr"].values)


def test_recorded_states_equal_cymr_record():
    """Context recorded step by step equals cymr's record (semantic model); probabilities its likelihood."""
    ccmr = require("cymr.cmr")
    fit = require("cymr.fit")
    table = fit.sample_data("Morton2013_mixed")
    table = table[(table["subject"] == table["subject"].iloc[0]) & table["list"].isin(table["list"].unique()[:2])]
    items = np.array([f"i{k}" for k in range(768)])
    rng = np.random.default_rng(0)
    vectors = rng.random((768, 5))
    similarity = vectors @ vectors.T / 5
    table = table.assign(item=items[table["item_index"].astype(int).to_numpy()])
    param = dict(cmr.default_parameters(), Afc=0.02, Sfc=0.1, Scf=0.2, Sff=0.5)
    param_def = ccmr.CMRParameters()
    param_def.set_sublayers(f=["task"], c=["task"])
    param_def.set_weights("fc", {(("task", "item"), ("task", "item")): "Afc + Dfc * loc + Sfc * sem"})
    param_def.set_weights("cf", {(("task", "item"), ("task", "item")): "Acf + Dcf * loc + Scf * sem"})
    param_def.set_weights("ff", {("task", "item"): "Sff * sem"})
    patterns = {"items": items, "vector": {"loc": np.eye(768), "sem": similarity}, "similarity": {"sem": similarity}}
    model = ccmr.CMR()
    study, recall = model.prepare_sim(table)
    study_state, recall_state = model.record_subject(study, recall, param, param_def=param_def, patterns=patterns)
    events = from_table(table)
    states = cmr.record_states(events, param, patterns=cmr.item_patterns(items, similarity))
    for t in range(len(study_state)):
        index = study["item_index"][t]
        units = [f"item_{p}" for p in range(1, index.size + 1)]

        def ours_vs_cymr(ours_context, other_norm, net):
            theirs = np.concatenate([[net.c[768]], net.c[index]])
            np.testing.assert_allclose(ours_context.sel(unit=["start"] + units).values, theirs, rtol=1e-9, atol=1e-12)
            rest = np.delete(net.c[:768], index)
            np.testing.assert_allclose(float(other_norm), np.linalg.norm(rest), rtol=1e-9, atol=1e-12)

        for i, net in enumerate(study_state[t]):
            ours_vs_cymr(states["study_context"].isel(trial=t, study_position=i),
                         states["study_other_norm"].isel(trial=t, study_position=i), net)
        for e, net in enumerate(recall_state[t]):
            ours_vs_cymr(states["cue_context"].isel(trial=t, event=e), states["cue_other_norm"].isel(trial=t, event=e),
                         net)
    # cymr's record_recall computes supports of only the first len(recalls) items of a list (its
    # n_item is the number of recalls), so recorded probabilities are checked against the likelihood,
    # which equals cymr's event by event (test_cmr_semantic.py)
    scored = cmr.log_likelihood(events, param, patterns=cmr.item_patterns(items, similarity), event_probabilities=True)
    position = states["event_position"].values
    for t in range(len(study_state)):
        count = int(scored["trial_n"][t])
        recalled = [float(states["probability"].isel(trial=t, event=e, study_position=position[t, e] - 1))
                    for e in range(count - 1)]
        expected = scored["event_probability"].values[t, : count - 1]
        np.testing.assert_allclose(recalled, expected, rtol=1e-12)
        np.testing.assert_allclose(float(states["stop_probability"].isel(trial=t, event=count - 1)),
                                   scored["event_probability"].values[t, count - 1], rtol=1e-12)


def test_record_state_shapes_on_localist_lists():
    events = from_recall_matrix([[2, 1, -1, 2, 0], [3, 0, 0, 0, 0]], 3)
    states = cmr.record_states(events, cmr.default_parameters())
    assert states["support"].dims == ("trial", "event", "study_position")
    np.testing.assert_array_equal(states["event_position"].values[:, :3], [[2, 1, 0], [3, 0, 0]])
    # probabilities of the recall events and the stop sum to one at each event
    total = states["probability"].sum("study_position") + states["stop_probability"]
    np.testing.assert_allclose(total.values[0, :3], 1.0)


@pytest.mark.slow
def test_semantic_parameter_recovery():
    """10 simulated subjects replaying Morton2013 lists: drift, temperature and both semantic weights
    recovered with r >= 0.8 (icl-cmr reproduce semantic-recovery; about 3 minutes)."""
    require("psifr")
    from icl_cmr.analyses.reproduce.semantic_recovery import FIXED, FREE, RANGES
    from icl_cmr.adapters.item_pools import load_item_patterns
    from icl_cmr.adapters.recall_data import load_recall_data

    patterns = load_item_patterns("psifr:Morton2013", categories=False)
    fits = cmr.parameter_recovery(10, cmr.FitSpec(FREE, FIXED, patterns=patterns), ranges=RANGES,
                                  events=load_recall_data("psifr:Morton2013"), rng=0, n_jobs=2, progress=False)
    for name in FREE:
        assert float(fits["correlation"].sel(parameter=name)) >= 0.8, name
