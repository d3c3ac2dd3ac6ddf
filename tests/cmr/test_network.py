"""General CMR networks (cmr.network) against cymr 0.14: sublayers, dynamic parameters, distraction,
weight expressions, pool scope, recorded states and pattern files.

Likelihoods and recorded states are compared with cymr called on the same data and parameters;
simulations with a seeded two-sample test on recall statistics; cymr's own tests for these
features are ported with their constants.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr import errors
from cmr.network import NetworkConfig
from cmr.network._arrays import network_weights
from cmr.network._lists import recall_lists
from cmr.textbook._optimize import model_spec
from tests.conftest import require

ITEMS = np.array(["absence", "hollow", "pupil", "fountain", "piano", "pillow"])
CAT = np.array([[1, 0, 1, 1, 0, 1], [0, 1, 0, 0, 1, 0]]).T
LOC_WEIGHTS = {(("task", "item"), ("task", "item")): "loc"}
SUB_WEIGHTS = {(("task", "item"), ("loc", "item")): "loc", (("task", "item"), ("cat", "item")): "cat"}


@pytest.fixture()
def data():
    """cymr's sample1 data (two subjects, one three-item list each), as its tests use it."""
    table = require("cymr.fit").sample_data("sample1")
    table["list"] = table["subject"]
    return table


@pytest.fixture()
def patterns():
    """The patterns of cymr's CMR-D tests."""
    return {"items": ITEMS, "vector": {"loc": np.eye(6), "cat": CAT},
            "similarity": {"loc": np.eye(6), "cat": np.dot(CAT, CAT.T)}}


@pytest.fixture()
def param_dist():
    return {"B_enc": 0.5, "B_start": 0, "B_rec": 0.8, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10, "X1": 0.05,
            "X2": 1}


def cymr_def(weights, sublayers=("task",), **options):
    """A cymr CMRParameters with these fc/cf weights (and options)."""
    ccmr = require("cymr.cmr")
    param_def = ccmr.CMRParameters()
    param_def.set_sublayers(f=["task"], c=list(sublayers))
    param_def.set_weights("fc", dict(weights))
    param_def.set_weights("cf", dict(weights))
    if options:
        param_def.set_options(**options)
    return param_def


def both(data, param, param_def, patterns, subject_params=None, **keys):
    """Per-subject log-likelihoods of cymr and of cmr.network for the same network."""
    theirs = require("cymr.cmr").CMR().likelihood(data, param, subject_params, param_def, patterns=patterns, **keys)
    ours = cmr.network_log_likelihood(data, param, config=NetworkConfig.from_cymr(param_def), patterns=patterns,
                                      subject_params=subject_params)
    return theirs["logl"].to_numpy(), ours["logl"].values, theirs["n"].to_numpy(), ours["n"].values


# --- cymr's own tests, ported --------------------------------------------------------------------


def test_localist_network_gives_cymrs_published_value(data, patterns, param_dist):
    """cymr test_cmr / test_dist_cmr: localist CMR, logl -5.936799964636842 over 6 events."""
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS})
    stats = cmr.network_log_likelihood(data, param_dist, config=config, patterns=patterns)
    np.testing.assert_allclose(stats.attrs["total_logl"], -5.936799964636842, rtol=0, atol=1e-12)
    assert stats.attrs["n"] == 6


@pytest.mark.parametrize("weights", ["localist", "loc"])
def test_dist_cmr_fit(data, patterns, weights):
    """cymr test_cmr_fit / test_dist_cmr_fit: B_enc fitted per subject near 0.727 and 0.999 (cymr's
    tolerance 0.02); the fit's logl is the likelihood at the fitted values."""
    fc = "Afc + Dfc * loc" if weights == "localist" else "loc"
    region = {(("task", "item"), ("task", "item")): fc}
    config = NetworkConfig(weights={"fc": region, "cf": region})
    fixed = {"B_rec": 0.8, "B_start": 0, "Afc": 0, "Dfc": 1, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10, "X1": 0.05,
             "X2": 1}
    spec = cmr.NetworkFitSpec(["B_enc"], fixed, bounds={"B_enc": (0, 1)}, config=config, patterns=patterns)
    result = cmr.fit_network(data, spec, rng=1)
    np.testing.assert_allclose(result["value"].sel(parameter="B_enc").values, [0.72728744, 0.99883425], atol=0.02)
    np.testing.assert_array_equal(result["n"].values, [3, 3])
    best = {**fixed, "B_enc": float(result["value"].values[0, 0])}
    first = data[data["subject"] == 1]
    again = cmr.network_log_likelihood(first, best, config=config, patterns=patterns)
    assert again.attrs["total_logl"] == result["logl"].values[0]
    with pytest.raises(errors.ParameterError, match=r"parameter\(s\) B_enc are both free and fixed"):
        cmr.NetworkFitSpec({"B_enc": (0, 1)}, {**fixed, "B_enc": 1}, config=config, patterns=patterns)
    with pytest.raises(errors.ParameterError, match=r"bounds of free parameter B_enc must be finite with low < high; "
                                                     r"got \(1\.0, 0\.0\)"):
        cmr.NetworkFitSpec({"B_enc": (1, 0)}, fixed, config=config, patterns=patterns)


def test_the_old_fit_network_keywords_warn_and_give_the_same_fit(data, patterns):
    """config=, patterns=, free= (name -> bounds) and fixed= build the NetworkFitSpec for one release."""
    region = {(("task", "item"), ("task", "item")): "loc"}
    config = NetworkConfig(weights={"fc": region, "cf": region})
    fixed = {"B_rec": 0.8, "B_start": 0, "Lfc": 1, "Lcf": 1, "P1": 0, "P2": 1, "T": 10, "X1": 0.05, "X2": 1}
    options = dict(rng=3, de_options=dict(popsize=4, maxiter=5))
    spec = cmr.NetworkFitSpec({"B_enc": (0, 1)}, fixed, config=config, patterns=patterns)
    new = cmr.fit_network(data, spec, **options)
    with pytest.warns(DeprecationWarning, match=r"fit_network's arguments config, patterns, free, fixed are "
                                                r"deprecated.*cmr\.NetworkFitSpec\(config=\.\.\., patterns="):
        old = cmr.fit_network(data, config=config, patterns=patterns, free={"B_enc": (0, 1)}, fixed=fixed, **options)
    xr.testing.assert_identical(old, new)
    with pytest.raises(errors.ParameterError, match=r"takes the model as one cmr\.NetworkFitSpec; got spec and also "
                                                    r"fixed"):
        cmr.fit_network(data, spec, fixed=fixed)
    with pytest.raises(errors.ParameterError, match=r"fit_network takes the model as one cmr\.NetworkFitSpec"):
        cmr.fit_network(data)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tied'"):
        cmr.fit_network(data, tied={"B_rec": "B_enc"})


def test_network_fit_spec_is_checked_immutable_hashable_and_picklable(patterns):
    import dataclasses
    import pickle

    region = {(("task", "item"), ("task", "item")): "loc"}
    config = NetworkConfig(weights={"fc": region, "cf": region})
    spec = cmr.NetworkFitSpec({"B_enc": [0, 1]}, {"T": 10}, config=config, patterns=patterns)
    assert spec.free == ("B_enc",) and spec.k == 1 and spec.bounds["B_enc"] == (0.0, 1.0)
    assert isinstance(spec, cmr.textbook.spec.BaseFitSpec)
    same = cmr.NetworkFitSpec(["B_enc"], {"T": 10}, {"B_enc": (0, 1)}, config=config,
                              patterns={**patterns, "vector": dict(patterns["vector"])})
    assert spec == same and hash(spec) == hash(same)
    other = cmr.NetworkFitSpec(["B_enc"], {"T": 10}, {"B_enc": (0, 1)}, config=config,
                               patterns={**patterns, "vector": {"loc": 2 * np.eye(6), "cat": CAT}})
    assert spec != other and hash(spec) != hash(other)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert repr(spec) == "NetworkFitSpec(free=('B_enc',), fixed={'T': 10}, bounds={'B_enc': (0.0, 1.0)}, " \
                         "config=<1 sublayer(s)>, patterns=<6 items>)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.free = ("T",)
    assert dataclasses.replace(spec, free=["B_enc", "T"], fixed={}, bounds={"B_enc": (0, 1), "T": (1, 20)}).k == 2
    with pytest.raises(errors.ParameterError, match=r"B_rec need search bounds"):
        cmr.NetworkFitSpec(["B_enc", "B_rec"], bounds={"B_enc": (0, 1)}, config=config, patterns=patterns)
    with pytest.raises(errors.ParameterError, match=r"dependent parameters, NetworkConfig\(dependent="):
        cmr.NetworkFitSpec({"B_enc": (0, 1)}, tied={"B_rec": "B_enc"}, config=config, patterns=patterns)
    with pytest.raises(errors.ParameterError, match=r"config must be a cmr.NetworkConfig; got NoneType"):
        cmr.NetworkFitSpec({"B_enc": (0, 1)}, patterns=patterns)
    with pytest.raises(errors.ParameterError, match=r"patterns must be a mapping with 'items'"):
        cmr.NetworkFitSpec({"B_enc": (0, 1)}, config=config)


def test_cymr_configuration_files_are_read(tmp_path):
    """A network written by cymr's CMRParameters.to_json reads back as the same network, with its
    fixed and free values; the likelihood is cymr's."""
    table, patterns = synthetic()
    param_def = full_def(True, "pool")
    param_def.set_fixed(T=0.3)
    param_def.set_free(B_enc_loc=(0, 1))
    param_def.to_json(str(tmp_path / "network.json"))
    config, fixed, free = cmr.read_network(tmp_path / "network.json")
    assert fixed == {"T": 0.3} and free == {"B_enc_loc": (0, 1)}
    assert repr(config) == repr(NetworkConfig.from_cymr(param_def))
    theirs, ours, *_ = both(table, FULL_PARAM, param_def, patterns, SUBJECT_PARAM, study_keys=["distract", "cond"])
    again = cmr.network_log_likelihood(table, FULL_PARAM, config=config, patterns=patterns,
                                       subject_params=SUBJECT_PARAM)
    np.testing.assert_allclose(again["logl"].values, theirs, rtol=0, atol=1e-9)
    (tmp_path / "bad.json").write_text('{"weights": {"fc": {"task_item": "loc"}}}')
    with pytest.raises(errors.ParameterError, match=r"region 'task_item' must read 'sublayer-segment'"):
        cmr.read_network(tmp_path / "bad.json")
    with pytest.raises(errors.DataSourceError, match=r"network file not found"):
        cmr.read_network(tmp_path / "none.json")


def test_pattern_io(patterns, tmp_path):
    """cymr test_pattern_io: vectors and dot-product similarities come back."""
    path = cmr.save_patterns(tmp_path / "test_pattern.hdf5", patterns["items"], loc=patterns["vector"]["loc"],
                             cat=patterns["vector"]["cat"])
    pat = cmr.load_patterns(path)
    expected = np.array([[1, 0], [0, 1], [1, 0], [1, 0], [0, 1], [1, 0]])
    np.testing.assert_allclose(pat["vector"]["cat"], expected)
    np.testing.assert_allclose(pat["similarity"]["cat"], expected @ expected.T)
    assert list(pat["items"]) == list(ITEMS)
    assert list(cmr.load_patterns(path, features=["loc"])["vector"]) == ["loc"]


def test_pattern_files_are_read_by_cymr_and_the_other_way_round(patterns, tmp_path):
    ccmr = require("cymr.cmr")
    ours = cmr.save_patterns(tmp_path / "ours.h5", ITEMS, cat=CAT)
    read = ccmr.load_patterns(str(ours))
    np.testing.assert_array_equal(read["similarity"]["cat"], CAT @ CAT.T)
    ccmr.save_patterns(str(tmp_path / "theirs.h5"), ITEMS, cat=CAT, loc=np.eye(6))
    back = cmr.load_patterns(tmp_path / "theirs.h5")
    assert list(back["vector"]) == ["cat", "loc"]
    np.testing.assert_array_equal(back["vector"]["loc"], np.eye(6))


def test_init_network(data, patterns):
    """cymr test_init_network: weights of two sublayers from dependent weight parameters."""
    config = NetworkConfig(
        weights={"fc": {(("task", "item"), ("loc", "item")): "w_loc * loc",
                        (("task", "item"), ("cat", "item")): "w_cat * cat"},
                 "cf": {(("task", "item"), ("loc", "item")): "w_loc * loc",
                        (("task", "item"), ("cat", "item")): "w_cat * cat"},
                 "ff": {("task", "item"): "s_loc * loc + s_cat * cat"}},
        dependent={"w_loc": "wr_loc / sqrt(wr_loc**2 + wr_cat**2)", "w_cat": "wr_cat / sqrt(wr_loc**2 + wr_cat**2)",
                   "s_loc": "sr_loc / (sr_loc + sr_cat)", "s_cat": "sr_cat / (sr_loc + sr_cat)"},
    )
    lists = recall_lists(data, pool_size=6)
    values = {"wr_loc": np.ones((2, 1)), "wr_cat": np.full((2, 1), np.sqrt(2)), "sr_loc": np.ones((2, 1)),
              "sr_cat": np.full((2, 1), 2.0)}
    for name, expr in config.dependent.items():
        values[name] = expr(values)
    net = network_weights(config, patterns, lists, values)
    expected = np.array([
        [0.5774, 0.0000, 0.0000, 0, 0, 0, 0.0000, 0.8165, 0.0000, 0.0000],
        [0.0000, 0.5774, 0.0000, 0, 0, 0, 0.0000, 0.0000, 0.8165, 0.0000],
        [0.0000, 0.0000, 0.5774, 0, 0, 0, 0.0000, 0.8165, 0.0000, 0.0000],
        [0.0000, 0.0000, 0.0000, 0, 0, 0, 1.0000, 0.0000, 0.0000, 1.0000],
    ])
    np.testing.assert_allclose(net.w_fc[0], expected, atol=0.0001)
    expected_ff = np.array([[1.0, 0.0, 0.6667], [0.0, 1.0, 0.0], [0.6667, 0.0, 1.0]])
    np.testing.assert_allclose(net.w_ff[0], expected_ff, atol=0.0001)


def test_dist_cmr_record(data, patterns, param_dist):
    """cymr test_dist_cmr_record: context after each study item and at each recall."""
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS})
    states = cmr.record_network(data, param_dist, config=config, patterns=patterns)
    c = states["c"].values
    np.testing.assert_allclose(c[0], [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8660254])
    np.testing.assert_allclose(c[1], [0.4330127, 0.5, 0.0, 0.0, 0.0, 0.0, 0.75])
    np.testing.assert_allclose(c[2], [0.375, 0.4330127, 0.5, 0.0, 0.0, 0.0, 0.64951905])
    np.testing.assert_allclose(c[3], [0.375, 0.4330127, 0.5, 0.0, 0.0, 0.0, 0.64951905])
    np.testing.assert_allclose(c[4], [0.29319805, 0.80043616, 0.12426407, 0.0, 0.0, 0.0, 0.50783392])
    np.testing.assert_allclose(c[5], [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.8660254])
    np.testing.assert_allclose(states["c_in"].values[5], [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(states["f"].values[5], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(states["f_in"].values[5], [0.0, 0.0, 0.0, 0.0])
    assert list(states["phase"].values[:6]) == ["study"] * 3 + ["recall"] * 2 + ["study"]


def test_dist_cmr_record_include(data, patterns, param_dist):
    """cymr test_dist_cmr_record_include: only the fields asked for."""
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS})
    states = cmr.record_network(data, param_dist, config=config, patterns=patterns, include=["c", "c_in"])
    assert "c" in states and "c_in" in states and "f" not in states and "f_in" not in states
    states = cmr.record_network(data, param_dist, config=config, patterns=patterns, exclude=["c"])
    assert sorted(states.data_vars) == ["c_in", "f", "f_in"]


def test_dynamic_cmr(data, patterns, param_dist):
    """cymr test_dynamic_cmr: B_enc = distract * B_distract per studied item."""
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS},
                           dynamic={"study": {"B_enc": "distract * B_distract"}})
    stats = cmr.network_log_likelihood(data, {**param_dist, "B_distract": 0.2}, config=config, patterns=patterns)
    np.testing.assert_allclose(stats.attrs["total_logl"], -5.9899248839454415, rtol=1e-12)


def test_dynamic_cmr_recall(data, patterns, param_dist):
    """cymr test_dynamic_cmr_recall: B_rec = op * B_op per recall."""
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS}, dynamic={"recall": {"B_rec": "op * B_op"}})
    stats = cmr.network_log_likelihood(data, {**param_dist, "B_op": 0.2}, config=config, patterns=patterns)
    np.testing.assert_allclose(stats.attrs["total_logl"], -5.919470385031945, rtol=1e-12)


def test_dynamic_list_scope_equals_cymr(data, patterns, param_dist):
    """A dynamic parameter with one value per list (cymr's scope 'list'), and a function of the column."""
    param_def = cymr_def(LOC_WEIGHTS)
    param_def.set_dynamic("study", "list", T="T0 * mean(retention)")
    param_def.set_dynamic("study", "item", B_enc="B0 * distract / max(distract)")
    param = {**param_dist, "T0": 0.2, "B0": 0.9}
    theirs, ours, n_theirs, n_ours = both(data, param, param_def, patterns, study_keys=["distract", "retention"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(n_ours, n_theirs)
    plain = cmr.network_log_likelihood(data, param_dist, config=NetworkConfig(weights={"fc": LOC_WEIGHTS,
                                                                                       "cf": LOC_WEIGHTS}),
                                       patterns=patterns)
    assert abs(plain.attrs["total_logl"] - ours.sum()) > 1e-3  # the dynamic values matter


@pytest.fixture()
def sublayer_config():
    return NetworkConfig(weights={"fc": SUB_WEIGHTS, "cf": SUB_WEIGHTS}, sublayers=("loc", "cat"),
                         sublayer_params={"loc": {"B_enc": "B_enc_loc"}, "cat": {"B_enc": "B_enc_cat"}})


def test_sublayer_study(data, patterns, param_dist, sublayer_config):
    """cymr test_sublayer_study: with Lfc = 1 the learned fc rows are the contexts after each item."""
    param = {**param_dist, "B_enc_loc": 0.5, "B_enc_cat": 0.8}
    states = cmr.record_network(data, param, config=sublayer_config, patterns=patterns)
    expected = np.array([
        [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8660, 0.8, 0.0, 0.6],
        [0.4330, 0.5, 0.0, 0.0, 0.0, 0.0, 0.75, 0.48, 0.8, 0.36],
        [0.375, 0.4330, 0.5, 0.0, 0.0, 0.0, 0.6495, 0.9576, 0.2627, 0.1182],
    ])
    np.testing.assert_allclose(states["c"].values[:3], expected, atol=0.0001)
    assert list(states["c_sublayer"].values) == ["loc"] * 7 + ["cat"] * 3


def test_sublayer_cmr(data, patterns, param_dist, sublayer_config):
    """cymr test_sublayer_cmr: logl -5.8694368046085215."""
    param = {**param_dist, "B_enc_loc": 0.5, "B_enc_cat": 0.8}
    stats = cmr.network_log_likelihood(data, param, config=sublayer_config, patterns=patterns)
    np.testing.assert_allclose(stats.attrs["total_logl"], -5.8694368046085215, rtol=1e-12)


def test_sublayer_generate(data, patterns, param_dist, sublayer_config):
    """cymr test_sublayer_generate: generation from the list and from the whole pool."""
    param = {**param_dist, "B_enc_loc": 0.5, "B_enc_cat": 0.8}
    sim = cmr.simulate_network(data, param, config=sublayer_config, patterns=patterns, rng=1, n_rep=50)
    recalled = sim[sim["trial_type"] == "recall"]
    studied = sim[sim["trial_type"] == "study"]
    assert isinstance(sim, pd.DataFrame) and len(studied) == 6 * 50
    for (_, lst), rows in recalled.groupby(["subject", "list"]):
        assert set(rows["item"]) <= set(studied[studied["list"] == lst]["item"])
    pool = NetworkConfig(weights={"fc": SUB_WEIGHTS, "cf": SUB_WEIGHTS}, sublayers=("loc", "cat"),
                         sublayer_params={"loc": {"B_enc": "B_enc_loc"}, "cat": {"B_enc": "B_enc_cat"}}, scope="pool")
    sim = cmr.simulate_network(data, param, config=pool, patterns=patterns, rng=1, n_rep=50)
    recalled = sim[sim["trial_type"] == "recall"]
    assert set(recalled["item"]) - set(ITEMS[:3]) - set(ITEMS[3:]) == set()
    first = recalled[recalled["subject"] == 1]
    assert set(first["item"]) & set(ITEMS[3:])  # intrusions from the other list's items


# --- every feature at once, against cymr ----------------------------------------------------------


def synthetic(seed=1, n_items=8, pool=40):
    """Three subjects x four lists from a 40-item pool, with repeats, intrusions and data columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for subject in range(3):
        for lst in range(1, 5):
            studied = rng.choice(pool, n_items, replace=False)
            for p in range(n_items):
                rows.append((subject, lst, "study", p + 1, f"w{studied[p]}", studied[p], rng.integers(0, 3), lst % 2))
            recalled = list(rng.permutation(studied)[:rng.integers(0, n_items)])
            if recalled:
                recalled.insert(1, recalled[0])
            recalled.append(rng.integers(pool))
            for o, r in enumerate(recalled):
                rows.append((subject, lst, "recall", o + 1, f"w{r}", r, np.nan, np.nan))
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "item_index", "distract",
                                        "cond"])
    sem = rng.random((pool, 5))
    sem /= np.linalg.norm(sem, axis=1, keepdims=True)
    cat = np.eye(4)[rng.integers(0, 4, pool)]
    patterns = {"items": np.array([f"w{i}" for i in range(pool)]),
                "vector": {"loc": np.eye(pool), "sem": sem, "cat": cat},
                "similarity": {"sem": sem @ sem.T, "cat": cat @ cat.T}}
    return table, patterns


FULL_PARAM = {"Afc": 0.1, "Dfc": 0.9, "Acf": 0.05, "w_cat": 0.7, "Sff": 0.3, "B_enc_loc": 0.6, "B_enc_cat": 0.4,
              "B_rec_loc": 0.8, "B_rec_cat": 0.5, "Lfc": 0.3, "Lcf": 0.4, "Lcf_cat": 0.2, "P1": 1.5, "P2": 0.8,
              "B_start": 0.2, "T": 0.3, "X1": 0.02, "X1_base": 0.02, "X2": 0.3, "B_d0": 0.1, "B_d1": 0.2,
              "B_retention": 0.35, "B_distract": 0.1}
SUBJECT_PARAM = {0: {}, 1: {"T": 0.5, "B_enc_loc": 0.3}, 2: {}}


def full_def(distraction, scope, cf_loc="Acf + Dcf * loc"):
    """Two sublayers with their own B_enc, B_rec and Lcf; semantic ff; dependent, dynamic
    (item and list scope) parameters; distraction; recall scope."""
    param_def = cymr_def({}, sublayers=("loc", "cat"), distraction=distraction, scope=scope)
    param_def.set_weights("fc", {(("task", "item"), ("loc", "item")): "Afc + Dfc * loc",
                                 (("task", "item"), ("cat", "item")): "w_cat * cat"})
    param_def.set_weights("cf", {(("task", "item"), ("loc", "item")): cf_loc,
                                 (("task", "item"), ("cat", "item")): "w_cat * cat"})
    param_def.set_weights("ff", {("task", "item"): "Sff * sem"})
    param_def.set_sublayer_param("c", "loc", {"B_enc": "B_enc_loc", "B_rec": "B_rec_loc", "Lcf": "Lcf"})
    param_def.set_sublayer_param("c", "cat", {"B_enc": "B_enc_cat", "B_rec": "B_rec_cat", "Lcf": "Lcf_cat"})
    param_def.set_dependent(Dcf="1 - Acf")
    param_def.set_dynamic("study", "item", B_distract="B_d0 + distract * B_d1")
    param_def.set_dynamic("study", "list", X1="X1_base * (1 + cond)")
    return param_def


@pytest.mark.parametrize("distraction", [False, True])
@pytest.mark.parametrize("scope", ["list", "pool"])
def test_every_feature_equals_cymr(distraction, scope):
    table, patterns = synthetic()
    theirs, ours, n_theirs, n_ours = both(table, FULL_PARAM, full_def(distraction, scope), patterns, SUBJECT_PARAM,
                                          study_keys=["distract", "cond"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(n_ours, n_theirs)


@pytest.mark.parametrize("distraction", [False, True])
@pytest.mark.parametrize("scope", ["list", "pool"])
def test_item_recall_and_sublayer_parameters_equal_cymr(distraction, scope):
    """Lfc per studied item (from a data column) and per sublayer, B_rec per recall (from the
    output position), B_start, P1 and B_retention per sublayer."""
    table, patterns = synthetic(seed=4)
    table["op"] = np.where(table["trial_type"] == "recall", table["position"], np.nan)
    param_def = cymr_def({}, sublayers=("loc", "cat"), distraction=distraction, scope=scope)
    param_def.set_weights("fc", {(("task", "item"), ("loc", "item")): "Afc + Dfc * loc",
                                 (("task", "item"), ("cat", "item")): "w_cat * cat"})
    param_def.set_weights("cf", {(("task", "item"), ("loc", "item")): "Acf + Dcf * loc",
                                 (("task", "item"), ("cat", "item")): "w_cat * cat"})
    param_def.set_sublayer_param("c", "loc", {"B_start": "B_start", "P1": "P1", "B_retention": "B_retention",
                                              "Lfc": "Lfc"})
    param_def.set_sublayer_param("c", "cat", {"B_start": "B_start_cat", "P1": "P1_cat", "B_retention": "B_ret_cat",
                                              "Lfc": "0.5 * Lfc"})
    param_def.set_dynamic("study", "item", Lfc="Lfc0 * (1 + distract)")
    param_def.set_dynamic("recall", "item", B_rec="B_rec0 * exp(-0.1 * op)")
    param_def.set_dependent(Dcf="1 - Acf")
    param = {**FULL_PARAM, "B_start_cat": 0.5, "P1_cat": 0.3, "B_ret_cat": 0.6, "Lfc0": 0.2, "B_rec0": 0.9,
             "B_enc": 0.6}
    theirs, ours, n_theirs, n_ours = both(table, param, param_def, patterns, SUBJECT_PARAM, study_keys=["distract"],
                                          recall_keys=["op"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(n_ours, n_theirs)
    with pytest.raises(errors.ParameterError, match=r"dynamic recall parameter B_rec = .* depends on the recorded "
                                                     r"recalls; a simulation needs one value per list"):
        cmr.simulate_network(table, param, config=NetworkConfig.from_cymr(param_def), patterns=patterns,
                             subject_params=SUBJECT_PARAM)


def test_weight_expressions_with_functions_equal_cymr():
    """Any weight expression over patterns: functions, reductions, several features at once."""
    table, patterns = synthetic(seed=2)
    cf = "Acf + Dcf * loc + 0.2 * sqrt(abs(half_loc - 0.1)) + 0.1 * maximum(loc, 0) / sum(loc) + 0.05 * mean(cat)"
    patterns["vector"]["half_loc"] = patterns["vector"]["loc"] * 0.5
    theirs, ours, *_ = both(table, FULL_PARAM, full_def(True, "list", cf_loc=cf), patterns, SUBJECT_PARAM,
                            study_keys=["distract", "cond"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)


def test_dependent_parameters_with_functions_equal_cymr():
    """Dependent (tied) parameters with functions: means of several parameters, square roots."""
    table, patterns = synthetic(seed=3)
    param_def = full_def(True, "pool")
    param_def.set_dependent(B_start="mean([B_enc_loc, B_enc_cat]) * 0.5", w_cat="sqrt(mean([Afc, Dfc, Acf]))")
    theirs, ours, *_ = both(table, FULL_PARAM, param_def, patterns, SUBJECT_PARAM, study_keys=["distract", "cond"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    untied, *_ = both(table, FULL_PARAM, full_def(True, "pool"), patterns, SUBJECT_PARAM,
                      study_keys=["distract", "cond"])
    assert np.all(np.abs(untied - ours) > 1e-3)  # the tied values matter


def test_fit_ties_take_means_of_parameters():
    """A fit's tied parameter may be mean([...]) or sum([...]) of others, valued as cymr's
    set_dependent values it, for one parameter set and for a whole population at once."""
    set_dependent = require("cymr.parameters").set_dependent
    spec = model_spec(["B_enc", "T"], tied={"B_rec": "mean([B_enc, T, 0.5])", "B_start": "sum([B_enc, 0.1]) / 2"})
    population = np.array([[0.2, 0.3], [0.9, 0.05], [0.35, 0.7]])
    sets, ok = spec.vectors(population)
    assert ok.all()
    for row, (b_enc, t) in zip(sets, population):
        expected = set_dependent({"B_enc": b_enc, "T": t}, {"B_rec": "mean([B_enc, T, 0.5])",
                                                           "B_start": "sum([B_enc, 0.1]) / 2"})
        assert row[cmr.MODEL_PARAMETER_NAMES.index("B_rec")] == expected["B_rec"]
        assert row[cmr.MODEL_PARAMETER_NAMES.index("B_start")] == expected["B_start"]
    for bad, pattern in (("mean(B_enc, T)", r"mean takes one list such as \[Lfc, Lcf\]"),
                         ("mean([B_enc, gamma])", r"unknown name 'gamma'"), ("[B_enc, T]", r"got List")):
        with pytest.raises(errors.ParameterError, match=pattern) as info:
            cmr.FitSpec(["B_enc", "T"], tied={"B_rec": bad})
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("distraction", [False, True])
def test_recorded_states_equal_cymr(distraction):
    """c, c_in and f of every state equal cymr's; f_in where cymr computes it (its recall states
    cue only the first n_recalls item units)."""
    table, patterns = synthetic()
    param_def = full_def(distraction, "list")
    theirs = require("cymr.cmr").CMR().record(table, FULL_PARAM, SUBJECT_PARAM, param_def, patterns=patterns,
                                               study_keys=["distract", "cond"])
    ours = cmr.record_network(table, FULL_PARAM, subject_params=SUBJECT_PARAM,
                              config=NetworkConfig.from_cymr(param_def), patterns=patterns)
    assert len(theirs) == ours.sizes["state"]
    for name in ("c", "c_in", "f"):
        np.testing.assert_allclose(ours[name].values, np.array([getattr(s, name) for s in theirs]), rtol=0, atol=1e-12)
    f_in = np.array([s.f_in for s in theirs])
    counts = ours["phase"].to_series().groupby(ours["list"].values).apply(lambda p: int((p == "recall").sum()))
    for k in np.flatnonzero(ours["phase"].values == "recall"):
        n_recalls = counts[int(ours["list"].values[k])]
        np.testing.assert_allclose(ours["f_in"].values[k, :n_recalls], f_in[k, :n_recalls], rtol=1e-12)


# --- the generator against cymr's -----------------------------------------------------------------


def recall_statistics(sim, n_items, studied):
    """Per list: number of recalls, recalled serial positions, first recall position, intrusions."""
    sim = sim.merge(studied, on=["subject", "item"], how="left")
    recalls = sim[sim["trial_type"] == "recall"]
    lists = sim[sim["trial_type"] == "study"].groupby(["subject", "list"]).size().index
    spc = np.zeros(n_items)
    first = np.zeros(n_items + 1)
    intrusions = 0
    adjacent = transitions = 0
    counts = recalls.groupby(["subject", "list"]).size().reindex(lists, fill_value=0).to_numpy()
    study = sim[sim["trial_type"] == "study"]
    serial_of = {key: dict(zip(rows["item"], rows["position"])) for key, rows in study.groupby(["subject", "list"])}
    for key, rows in recalls.groupby(["subject", "list"]):
        serial = serial_of.get(key, {})
        positions = [serial.get(item) for item in rows["item"]]
        intrusions += sum(p is None for p in positions)
        for p in {p for p in positions if p is not None}:
            spc[int(p) - 1] += 1
        first[int(positions[0]) - 1 if positions[0] is not None else n_items] += 1
        steps = [b - a for a, b in zip(positions, positions[1:]) if a is not None and b is not None]
        adjacent += sum(abs(step) == 1 for step in steps)
        transitions += len(steps)
    return counts, spc, first, intrusions, len(lists), adjacent, transitions


def _z(a, n_a, b, n_b):
    pooled = (a + b) / (n_a + n_b)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    return np.where(se > 0, (a / n_a - b / n_b) / np.where(se > 0, se, 1), 0.0)


@pytest.mark.parametrize("scope, screen", [("list", False), ("pool", False), ("pool", True)])
def test_generator_matches_cymrs_statistically(scope, screen):
    """Seeded two-sample tests on 720 simulated lists from each generator: mean number of recalls
    and mean log-likelihood of a list under the generating parameters (Welch t), serial position
    curve and first-recall positions (two-proportion z per position), share of transitions to an
    adjacent position (lag +-1), intrusion rate; every |statistic| below 4.5 (a false alarm has
    probability < 1e-4 overall). The likelihood statistic detects a change of T from 0.2 to 0.3,
    the number of recalls one of X2 from 0.3 to 0.4, the lag +-1 share one of B_rec_loc from 0.8 to 0.4;
    with these A1, A2 screening moves the intrusion share from about 0.34 to 0.43 (z about 7)."""
    stats = require("scipy.stats")
    table, patterns = synthetic()
    param = {**FULL_PARAM, "T": 0.2, "A1": -8.0, "A2": 12.0, **({"Afc": 0.0} if screen else {})}
    param_def = full_def(True, scope)
    param_def.set_options(filter_recalls=screen)  # context-match screening of candidates (A1, A2)
    state = np.random.get_state()
    np.random.seed(12345)  # cymr draws from numpy's global generator
    try:
        theirs = require("cymr.cmr").CMR().generate(table, param, SUBJECT_PARAM, param_def, patterns=patterns,
                                                     study_keys=["distract", "cond"], n_rep=60)
    finally:
        np.random.set_state(state)
    ours = cmr.simulate_network(table, param, subject_params=SUBJECT_PARAM, config=NetworkConfig.from_cymr(param_def),
                                patterns=patterns, n_rep=60, rng=2024)
    studied = table[table["trial_type"] == "study"][["subject", "item"]].drop_duplicates()
    studied = studied.assign(_studied=1).drop(columns="_studied")
    a = recall_statistics(theirs[["subject", "list", "trial_type", "position", "item"]], 8, studied)
    b = recall_statistics(ours[["subject", "list", "trial_type", "position", "item"]], 8, studied)
    assert a[4] == b[4] == 720
    t = stats.ttest_ind(a[0], b[0], equal_var=False).statistic
    assert abs(t) < 4.5
    assert np.all(np.abs(_z(a[1], 720, b[1], 720)) < 4.5)
    assert np.all(np.abs(_z(a[2], 720, b[2], 720)) < 4.5)
    assert abs(_z(np.array(a[3]), a[0].sum(), np.array(b[3]), b[0].sum())) < 4.5
    assert abs(_z(np.array(a[5]), a[6], np.array(b[5]), b[6])) < 4.5
    config = NetworkConfig.from_cymr(param_def)
    assert config.filter_recalls == screen
    logl = [cmr.network_log_likelihood(sim, param, subject_params=SUBJECT_PARAM, config=config, patterns=patterns,
                                       by="list")["logl"].values for sim in (theirs, ours)]
    assert logl[0].size == logl[1].size == 720
    assert abs(stats.ttest_ind(logl[0], logl[1], equal_var=False).statistic) < 4.5
    if scope == "pool":
        assert a[3] > 0 and b[3] > 0  # both generate intrusions from the pool
    else:
        assert a[3] == b[3] == 0


def test_simulation_is_reproducible_from_its_seed(data, patterns, param_dist):
    config = NetworkConfig(weights={"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS})
    one = cmr.simulate_network(data, param_dist, config=config, patterns=patterns, rng=7, n_rep=20)
    two = cmr.simulate_network(data, param_dist, config=config, patterns=patterns, rng=7, n_rep=20)
    pd.testing.assert_frame_equal(one, two)


def test_localist_network_equals_textbook_cmr(data, param_dist):
    """The textbook model is a special case: a pool-sized localist network gives cmr.log_likelihood."""
    pool = {"items": ITEMS, "vector": {"loc": np.eye(6)}}
    weights = {(("task", "item"), ("task", "item")): "Afc + Dfc * loc"}
    cf = {(("task", "item"), ("task", "item")): "Acf + Dcf * loc"}
    param = {**param_dist, "Afc": 0.1, "Dfc": 0.9, "Acf": 0.05, "Dcf": 0.95, "P1": 0.7, "T": 0.4}
    ours = cmr.network_log_likelihood(data, param, config=NetworkConfig(weights={"fc": weights, "cf": cf}),
                                      patterns=pool)
    textbook = cmr.log_likelihood(data.drop(columns=["item_index", "task", "distract", "retention", "op"]), param,
                                  pool_size=6)
    np.testing.assert_allclose(ours.attrs["total_logl"], textbook.attrs["total_logl"], rtol=0, atol=1e-9)


# --- faults: one typed error, one line ------------------------------------------------------------


def _config(**kwargs):
    return NetworkConfig(weights=kwargs.pop("weights", {"fc": LOC_WEIGHTS, "cf": LOC_WEIGHTS}), **kwargs)


@pytest.mark.parametrize("make, error, pattern", [
    (lambda: _config(weights={"fc": {(("task", "item"), ("task", "item")): "__import__('os').getcwd()"}}),
     errors.ParameterError, r"only numbers, names"),
    (lambda: _config(weights={"fc": {(("task", "item"), ("task", "item")): "loc +"}}), errors.ParameterError,
     r"cannot parse"),
    (lambda: _config(weights={"fc": LOC_WEIGHTS, "cf": {(("task", "item"), ("other", "item")): "loc"}}),
     errors.ParameterError, r"must also be an fc region"),
    (lambda: _config(weights={"fc": SUB_WEIGHTS}, sublayers=("cat", "loc")), errors.ParameterError,
     r"sublayers must list .* \(loc, cat\); got cat, loc"),
    (lambda: _config(dynamic={"study": {"T": "distract"}}), errors.ParameterError, r"scope 'item' must be one of"),
    (lambda: _config(scope="session"), errors.ParameterError, r"scope must be 'list' or 'pool'; got 'session'"),
    (lambda: _config(dynamic={"study": {"T": "distract"}}, dynamic_scope={"T": "trial"}), errors.ParameterError,
     r"dynamic_scope of 'T' must be 'item' or 'list'; got 'trial'"),
    (lambda: _config(sublayer_params={"task": {"T": "T"}}), errors.ParameterError,
     r"sublayer parameter 'T' of 'task' must be one of Lfc, Lcf"),
    (lambda: _config(weights={"fc": {(("task", "item"), ("task", "start")): "loc"}}), errors.ParameterError,
     r"reserved"),
])
def test_bad_configurations_fail_with_one_typed_line(make, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        make()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("change, error, pattern", [
    (lambda d, p: (d, {k: v for k, v in p.items() if k != "B_rec"}), errors.ParameterError,
     r"network parameters missing: B_rec"),
    (lambda d, p: (d, {**p, "T": "warm"}), errors.ParameterError, r"parameter T must be a real number; got 'warm'"),
    (lambda d, p: (d, {**p, "T": np.float64("nan")}), errors.ParameterError, r"parameter T must be a finite real "
                                                                               r"number; got nan"),
    (lambda d, p: (d[~((d["subject"] == 2) & (d["position"] == 3) & (d["trial_type"] == "study"))], p),
     errors.RecallDataError, r"lists must all have one length; got lengths 2, 3"),
    (lambda d, p: (d.drop(columns="item_index"), p), errors.RecallDataError, r"missing: item_index"),
    (lambda d, p: (d.assign(item_index=d["item_index"] + 10), p), errors.RecallDataError,
     r"item_index must be integers 0\.\.5 .*; got 10\.0"),
])
def test_bad_inputs_fail_with_one_typed_line(data, patterns, param_dist, change, error, pattern):
    table, param = change(data, param_dist)
    with pytest.raises(error, match=pattern) as info:
        cmr.network_log_likelihood(table, param, config=_config(), patterns=patterns)
    assert "\n" not in str(info.value) and "np." not in str(info.value)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config={"fc": LOC_WEIGHTS}, patterns=pat),
     errors.ParameterError, r"config must be a cmr.NetworkConfig; got dict"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(), patterns=[1, 2]),
     errors.ParameterError, r"patterns must be a mapping with 'items' and 'vector'.*; got list"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(), patterns={"items": ITEMS[:3],
                                                                                    "vector": {"loc": np.eye(6)}}),
     errors.ParameterError, r"patterns\['vector'\]\['loc'\] must have shape \(items, units\) with 3 items; got \(6, 6\)"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(), patterns=pat, by="session"),
     errors.ParameterError, r"by must be 'subject', 'list' or None; got 'session'"),
    (lambda d, p, pat: cmr.network_log_likelihood(d.values, p, config=_config(), patterns=pat),
     errors.RecallDataError, r"data must be a psifr recall table .*; got ndarray"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(), patterns=pat, subject_params={1: 3}),
     errors.ParameterError, r"subject_params values must be mappings of name to value; got int"),
    (lambda d, p, pat: cmr.simulate_network(d, p, config=_config(), patterns=pat, n_rep=0),
     errors.ParameterError, r"n_rep must be an integer >= 1; got 0"),
    (lambda d, p, pat: cmr.simulate_network(d, p, config=_config(filter_recalls=True), patterns=pat),
     errors.ParameterError, r"filter_recalls needs parameter A1; give it in params"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(dynamic={"study": {"T": "distract"}},
                                                                       dynamic_scope={"T": "list"}), patterns=pat),
     errors.ParameterError, r"T = 'distract' with scope 'list' must have one value per list; got several on list 0"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(weights={"fc": {
        (("task", "item"), ("task", "item")): "Lfc"}}), patterns=pat),
     errors.ParameterError, r"must have one row per item \(3\), e.g. by using a pattern; got 1 row\(s\)"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(weights={"fc": {
        (("task", "item"), ("task", "item")): "0 * loc"}}), patterns=pat),
     errors.ParameterError, r"item 0 has all-zero fc weights in context sublayer 'task'"),
    (lambda d, p, pat: cmr.network_log_likelihood(d, p, config=_config(dependent={"B_enc": "1/0 + B_rec"}),
                                                  patterns=pat),
     errors.ParameterError, r"B_enc = '1/0 \+ B_rec' must evaluate to a finite number; got a division by zero"),
])
def test_bad_arguments_fail_with_one_typed_line(data, patterns, param_dist, call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call(data, param_dist, patterns)
    assert "\n" not in str(info.value) and "np." not in str(info.value)


def test_an_events_dataset_gives_what_its_table_gives(data, patterns, param_dist):
    config = _config(dynamic={"study": {"B_enc": "distract * B_distract"}})
    param = {**param_dist, "B_distract": 0.2}
    from_table = cmr.network_log_likelihood(data, param, config=config, patterns=patterns)
    events = cmr.from_table(data)
    from_events = cmr.network_log_likelihood(events, param, config=config, patterns=patterns)
    assert from_events.attrs["total_logl"] == from_table.attrs["total_logl"]


def test_unknown_names_and_fields_are_refused(data, patterns, param_dist):
    config = _config(weights={"fc": {(("task", "item"), ("task", "item")): "loc * gain"}})
    with pytest.raises(errors.ParameterError, match=r"unknown name\(s\) gain"):
        cmr.network_log_likelihood(data, param_dist, config=config, patterns=patterns)
    with pytest.raises(errors.ParameterError, match=r"include and exclude take c, c_in, f, f_in; got 'w_fc'"):
        cmr.record_network(data, param_dist, config=_config(), patterns=patterns, include=["w_fc"])
    config = _config(dynamic={"study": {"B_enc": "missing_column * 2"}})
    with pytest.raises(errors.ParameterError, match=r"unknown name\(s\) missing_column"):
        cmr.network_log_likelihood(data, param_dist, config=config, patterns=patterns)


def test_pattern_file_faults_leave_nothing_behind(tmp_path):
    with pytest.raises(errors.DataSourceError, match=r"pattern file not found"):
        cmr.load_patterns(tmp_path / "none.h5")
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    with pytest.raises(errors.FileFormatError, match=r"is not an HDF5 file"):
        cmr.load_patterns(bad)
    good = cmr.save_patterns(tmp_path / "good.h5", ITEMS, cat=CAT)
    with pytest.raises(errors.ParameterError, match=r"features sem are not in .*; it has cat"):
        cmr.load_patterns(good, features=["sem"])
    with pytest.raises(errors.ParameterError, match=r"feature cat must have shape \(6, units\); got \(5, 2\)"):
        cmr.save_patterns(tmp_path / "short.h5", ITEMS, cat=CAT[:5])
    with pytest.raises(errors.OutputError, match=r"does not exist"):
        cmr.save_patterns(tmp_path / "missing" / "p.h5", ITEMS, cat=CAT)
    with pytest.raises(errors.OutputError, match=r"is a directory"):
        cmr.save_patterns(tmp_path, ITEMS, cat=CAT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.h5", "good.h5"]


def test_the_documented_example_runs(data):
    """The example of docs/cmr-features.md runs as written on cymr's sample data."""
    import re

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "cmr-features.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace = {"data": data}
    exec(compile(block, "docs/cmr-features.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert np.isfinite(namespace["stats"].attrs["total_logl"])
    assert sorted(namespace["states"].data_vars) == ["c", "c_in"]
    assert (namespace["sim"]["trial_type"] == "study").sum() == 60

