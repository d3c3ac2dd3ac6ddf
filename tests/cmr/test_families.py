"""The CMR families as namespaces with the same verbs: default_parameters, log_likelihood, simulate,
fit and Spec in cmr.textbook, cmr.cmr2 and cmr.network; the paper's variant has the two it can
honestly have (simulate, and fit: the least-squares fit of lag profiles). Each family's verbs work
together on a tiny simulated data set, and the specs share one base."""
from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import cmr
from cmr.textbook.spec import BaseFitSpec

VERBS = ("default_parameters", "log_likelihood", "simulate", "fit", "Spec")
LIKELIHOOD_FAMILIES = {"textbook": cmr.textbook, "cmr2": cmr.cmr2, "network": cmr.network}
#: a few generations: the test is about the verbs, not the estimates
QUICK = dict(n_restarts=2, rng=1, de_options=dict(popsize=4, maxiter=3))


@pytest.mark.parametrize("name", sorted(LIKELIHOOD_FAMILIES))
def test_every_likelihood_family_has_the_five_verbs(name):
    family = LIKELIHOOD_FAMILIES[name]
    assert [verb for verb in VERBS if not hasattr(family, verb)] == []
    assert set(VERBS) <= set(family.__all__)
    assert issubclass(family.Spec, BaseFitSpec)


def test_the_verbs_are_the_familys_functions():
    assert cmr.textbook.fit is cmr.fit_recall and cmr.textbook.Spec is cmr.FitSpec
    assert cmr.textbook.simulate is cmr.simulate_experiment and cmr.textbook.log_likelihood is cmr.log_likelihood
    assert cmr.cmr2.fit is cmr.fit_cmr2 and cmr.cmr2.Spec is cmr.CMR2FitSpec
    assert cmr.cmr2.default_parameters is cmr.default_cmr2_parameters
    assert cmr.network.fit is cmr.fit_network and cmr.network.Spec is cmr.NetworkFitSpec
    assert cmr.network.log_likelihood is cmr.network_log_likelihood and cmr.network.simulate is cmr.simulate_network
    assert cmr.paper.fit is cmr.fit_profiles and cmr.paper.simulate is cmr.simulate_paper_free_recall
    # the flat API keeps textbook CMR unprefixed
    assert cmr.default_parameters is cmr.textbook.default_parameters


def test_the_paper_variant_says_which_verbs_it_lacks():
    assert not any(hasattr(cmr.paper, verb) for verb in ("log_likelihood", "Spec", "default_parameters"))
    doc = " ".join(cmr.paper.__doc__.split())
    assert "no ``log_likelihood``" in doc and "no ``Spec``" in doc and "``default_parameters``" in doc


def test_the_modules_behind_fit_and_simulate_still_import():
    import importlib

    from cmr.textbook.fit import unit_seeds

    assert importlib.import_module("cmr.textbook.fit").unit_seeds is unit_seeds
    assert importlib.import_module("cmr.cmr2.simulate").simulate_sessions is cmr.cmr2.simulate_sessions


def _check_fit(fits):
    assert {"converged", "logl_gap", "logl_spread", "n_restarts"} <= set(fits.data_vars)
    assert (fits["n_restarts"] == 2).all()
    np.testing.assert_array_equal(fits["converged"].values, fits["logl_gap"].values <= 0.1)


@pytest.mark.filterwarnings("ignore::cmr.errors.FitWarning")
def test_textbook_simulate_score_and_fit():
    family = cmr.textbook
    params = family.default_parameters()
    table = family.simulate_free_recall(params, 6, 4, subjects=2, rng=2)
    simulated = family.simulate(table, params, rng=1)
    assert np.isfinite(family.log_likelihood(simulated, params).attrs["total_logl"])
    _check_fit(family.fit(table, family.Spec(["B_enc"]), progress=False, **QUICK))


@pytest.mark.filterwarnings("ignore::cmr.errors.FitWarning")
def test_cmr2_simulate_score_and_fit():
    family = cmr.cmr2
    params = family.default_parameters()
    table = family.simulate_sessions(params, 5, 3, subjects=2, sessions=2, rng=5)
    simulated = family.simulate(table, params, session="session", rng=1)
    assert np.isfinite(family.log_likelihood(simulated, params, session="session").attrs["total_logl"])
    _check_fit(family.fit(table, family.Spec(["B_enc"]), session="session", progress=False, **QUICK))


def _localist_network(table):
    items = sorted(table.loc[table["trial_type"] == "study", "item"].unique())
    table = table.assign(item_index=table["item"].map({item: i for i, item in enumerate(items)}))
    patterns = {"items": np.array(items), "vector": {"loc": np.eye(len(items))}}
    task = ("task", "item")
    config = cmr.NetworkConfig(weights={"fc": {(task, task): "Afc + Dfc * loc"}, "cf": {(task, task): "Acf + Dcf * loc"}})
    return table, config, patterns


def test_network_simulate_score_and_fit():
    """A localist network at the default parameters scores a data set as textbook CMR does."""
    family = cmr.network
    params = family.default_parameters()
    table, config, patterns = _localist_network(cmr.simulate_free_recall(params, 5, 3, subjects=2, rng=3))
    simulated = family.simulate(table, params, config=config, patterns=patterns, rng=1)
    logl = family.log_likelihood(simulated, params, config=config, patterns=patterns).attrs["total_logl"]
    assert np.isfinite(logl)
    np.testing.assert_allclose(logl, cmr.textbook.log_likelihood(simulated, params).attrs["total_logl"], rtol=1e-9)
    fixed = {name: value for name, value in params.items() if name != "B_enc"}
    spec = family.Spec({"B_enc": (0.1, 0.9)}, fixed, config=config, patterns=patterns)
    _check_fit(family.fit(table, spec, **QUICK))


def test_paper_simulate_and_fit():
    """The paper's variant fitted as the paper did: a lag profile to a grid of the variant's profiles."""
    table = cmr.paper.simulate(0.6, 0.75, 0.3, list_length=8, start_positions=[1, 4], n_trials=3, max_recalls=8,
                               rng=1)
    assert set(table["trial_type"]) == {"study", "recall"}
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6, 0.9], [0.5, 0.75], [0.0, 0.3], list_length=12)
    fits = cmr.paper.fit(grid.sel(beta_enc=0.6, beta_rec=0.75, gamma=0.3), grid)
    np.testing.assert_allclose(fits["parameters"].values, [0.6, 0.75, 0.3])


def test_the_specs_share_the_base_and_pickle():
    task = ("task", "item")
    config = cmr.NetworkConfig(weights={"fc": {(task, task): "loc"}, "cf": {(task, task): "loc"}})
    specs = [cmr.textbook.Spec(["B_enc", "T"], tied={"B_rec": "B_enc"}),
             cmr.cmr2.Spec(["B_distract"], fixed={"T": 0.2}),
             cmr.network.Spec({"B_enc": (0, 1)}, config=config, patterns={"items": ["a", "b"],
                                                                          "vector": {"loc": np.eye(2)}})]
    for spec in specs:
        assert isinstance(spec, BaseFitSpec)
        again = pickle.loads(pickle.dumps(spec))
        assert again == spec and hash(again) == hash(spec) and type(again) is type(spec)
        assert repr(again) == repr(spec) and repr(spec).startswith(type(spec).__name__ + "(free=")
        assert dataclasses.replace(spec, fixed={"X1": 0.01}).fixed["X1"] == 0.01
    assert len({spec.k for spec in specs}) == 2
