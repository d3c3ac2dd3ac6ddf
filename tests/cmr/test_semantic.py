"""Semantic and category CMR: equal to cymr configured the same way, and the model's properties."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import ParameterError, RecallDataError
from cmr.events import from_recall_matrix, from_table
from tests.conftest import assert_event_probabilities_equal, cymr_event_probabilities, require

BASE = dict(T=0.1, Lfc=0.15, Lcf=0.15, Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85, P1=0.2, P2=2.0, B_start=0.3,
            B_rec=0.9, X1=0.001, X2=0.25, B_enc=0.7)
# pattern weights at their lower bounds (0), at the upper ends of their search ranges, and between
SEMANTIC_SETS = [
    dict(BASE, Sfc=0.2, Scf=0.3, Sff=1.0, Cfc=0.3, Ccf=0.2),
    dict(BASE, Afc=0.05, Acf=0.02, Sfc=0.0, Scf=0.5, Sff=0.0, Cfc=1.0, Ccf=0.0, T=0.05),
    dict(BASE, Sfc=1.0, Scf=1.0, Sff=5.0, Cfc=1.0, Ccf=1.0, T=0.3, B_start=0.0, P1=3.0),
    dict(BASE, Sfc=0.0, Scf=0.0, Sff=0.0, Cfc=0.0, Ccf=0.0, Lfc=0.6, B_enc=0.4),
]


@pytest.fixture(scope="module")
def morton():
    """cymr:Morton2013_mixed (first 3 subjects) with psifr's Morton2013 similarities and categories."""
    fit = require("cymr.fit")
    fr = require("psifr.fr")
    table = fit.sample_data("Morton2013_mixed")
    items, distances = fr.sample_distances("Morton2013")
    study = table.query("trial_type == 'study'")
    category = dict(zip(study["item"], study["category"]))
    features, names = cmr.category_features([category.get(item, "none") for item in items])
    similarity = cmr.similarity_from_distances(distances)
    table = table[table["subject"].isin(table["subject"].unique()[:3])].copy()
    return table, from_table(table), items, similarity, features, names


def cymr_config(items, similarity, features, layer):
    """cymr's CMRParameters and patterns for the semantic / category model (docs/semantic-cmr.md)."""
    ccmr = require("cymr.cmr")
    param_def = ccmr.CMRParameters()
    if layer == "segment":
        param_def.set_sublayers(f=["task"], c=["task"])
        feature_region = (("task", "item"), ("task", "cat"))
    else:
        param_def.set_sublayers(f=["task"], c=["task", "cat"])
        feature_region = (("task", "item"), ("cat", "item"))
    param_def.set_weights("fc", {(("task", "item"), ("task", "item")): "Afc + Dfc * loc + Sfc * sem",
                                 feature_region: "Cfc * cat"})
    param_def.set_weights("cf", {(("task", "item"), ("task", "item")): "Acf + Dcf * loc + Scf * sem",
                                 feature_region: "Ccf * cat"})
    param_def.set_weights("ff", {("task", "item"): "Sff * sem"})
    patterns = {"items": items, "vector": {"loc": np.eye(len(items)), "sem": similarity, "cat": features},
                "similarity": {"sem": similarity}}
    return param_def, patterns


@pytest.mark.parametrize("layer", ["segment", "sublayer"])
@pytest.mark.parametrize("index", range(len(SEMANTIC_SETS)))
def test_every_event_probability_equals_cymr(morton, layer, index):
    table, events, items, similarity, features, names = morton
    param = SEMANTIC_SETS[index]
    patterns = cmr.item_patterns(items, similarity, features, feature_names=names, feature_layer=layer)
    param_def, cymr_patterns = cymr_config(items, similarity, features, layer)
    reference = cymr_event_probabilities(table, param, param_def, cymr_patterns)
    ours = cmr.log_likelihood(events, param, patterns=patterns, event_probabilities=True)
    probs = assert_event_probabilities_equal(ours, reference)
    if index == 2:
        assert np.nanmin(probs) < 1e-5  # the probability floor is exercised


def test_total_equals_cymr_likelihood(morton):
    ccmr = require("cymr.cmr")
    table, events, items, similarity, features, names = morton
    param = SEMANTIC_SETS[0]
    param_def, cymr_patterns = cymr_config(items, similarity, features, "segment")
    stats = ccmr.CMR().likelihood(table, param, param_def=param_def, patterns=cymr_patterns)
    patterns = cmr.item_patterns(items, similarity, features, feature_names=names)
    ours = cmr.log_likelihood(events, param, patterns=patterns)
    np.testing.assert_allclose(ours["logl"].values, stats["logl"].values, rtol=1e-9)
    np.testing.assert_allclose(ours.attrs["total_logl"], stats["logl"].sum(), rtol=1e-9)
    np.testing.assert_array_equal(ours["n"].values, stats["n"].values)


def test_zero_weights_equal_localist_cmr_exactly(morton):
    """With Sfc = Scf = Sff = Cfc = Ccf = 0 the semantic model is localist CMR over the same pool."""
    _, events, items, similarity, features, names = morton
    patterns = cmr.item_patterns(items, similarity, features, feature_names=names)
    param = dict(BASE, Afc=0.03, Acf=0.01)
    semantic = cmr.log_likelihood(events, param, patterns=patterns, by="trial", event_probabilities=True)
    localist = cmr.log_likelihood(events, param, pool_size=len(items), by="trial", event_probabilities=True)
    np.testing.assert_array_equal(semantic["event_probability"].values, localist["event_probability"].values)
    np.testing.assert_array_equal(semantic["logl"].values, localist["logl"].values)


def test_morton_distances_are_cosine_distances():
    """1 - d is a Gram matrix of unit vectors (PSD, unit diagonal): the documented conversion."""
    fr = require("psifr.fr")
    _, distances = fr.sample_distances("Morton2013")
    similarity = cmr.similarity_from_distances(distances)
    np.testing.assert_allclose(np.diag(similarity), 1.0)
    assert np.linalg.eigvalsh(similarity).min() > -1e-10
    part = distances[:200, :200]  # a principal submatrix that is not PSD proves the whole is not
    assert np.linalg.eigvalsh(1 - part**2 / 2).min() < -0.1  # not Euclidean distances of unit vectors


def test_pattern_errors_are_typed():
    with pytest.raises(ParameterError, match="distinct"):
        cmr.item_patterns(["a", "a"])
    with pytest.raises(ParameterError, match="shape"):
        cmr.item_patterns(["a", "b"], np.eye(3))
    with pytest.raises(ParameterError, match="feature_layer"):
        cmr.item_patterns(["a", "b"], features=np.eye(2), feature_layer="column")
    patterns = cmr.item_patterns(["a", "b"], np.eye(2))
    events = from_recall_matrix([[1, 2]], 2, study_items=[["a", "z"]])
    with pytest.raises(RecallDataError, match="not in the item pool.*'z'"):
        cmr.log_likelihood(events, cmr.default_parameters(), patterns=patterns)
    with pytest.raises(ParameterError, match="Sff.*no item patterns"):
        cmr.log_likelihood(from_recall_matrix([[1, 2]], 2), dict(cmr.default_parameters(), Sff=1.0))


# --- properties on random pools -------------------------------------------------------------

@st.composite
def semantic_case(draw):
    n = draw(st.integers(1, 8))
    pool = n + draw(st.integers(0, 5))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    vectors = rng.random((pool, 4))
    similarity = vectors @ vectors.T / 4.0  # nonnegative similarities
    features = (rng.random((pool, 3)) < 0.5).astype(float)
    features[:, 0] = 1.0  # every item has a feature, so feature input is never zero
    weight = st.floats(0.0, 1.0)
    params = dict(
        Lfc=draw(weight), Lcf=draw(weight), P1=draw(st.floats(0, 5)), P2=draw(st.floats(0, 3)),
        B_enc=draw(weight), B_start=draw(weight), B_rec=draw(weight), T=draw(st.floats(0.05, 2)),
        X1=draw(st.floats(0, 0.5)), X2=draw(st.floats(0, 1)), Afc=draw(weight), Acf=draw(weight),
        Dfc=draw(st.floats(0.01, 1)), Dcf=draw(weight), Sfc=draw(weight), Scf=draw(weight),
        Sff=draw(st.floats(0, 3)), Cfc=draw(st.floats(0.01, 1)), Ccf=draw(weight),
    )
    items = [f"w{i}" for i in range(pool)]
    studied = [items[i] for i in rng.permutation(pool)[:n]]
    layer = draw(st.sampled_from(["segment", "sublayer"]))
    patterns = cmr.item_patterns(items, similarity, features, feature_layer=layer)
    return n, studied, params, patterns, draw(st.data())


@settings(max_examples=30, deadline=None)
@given(case=semantic_case())
def test_recall_and_stop_probabilities_sum_to_one(case):
    """At every step P(each not-yet-recalled item) + P(stop) = 1, semantic and category CMR."""
    n, studied, params, patterns, data = case
    prefix = data.draw(st.permutations(range(1, n + 1)))[: data.draw(st.integers(0, n - 1))]
    candidates = [pos for pos in range(1, n + 1) if pos not in prefix]
    rows = [list(prefix) + [pos] for pos in candidates] + [list(prefix)]
    width = len(prefix) + 1
    matrix = np.array([row + [0] * (width - len(row)) for row in rows])
    events = from_recall_matrix(matrix, n, study_items=[studied] * len(rows))
    result = cmr.log_likelihood(events, params, patterns=patterns, by="trial", event_probabilities=True)
    step = result["event_probability"].values[:, len(prefix)]
    np.testing.assert_allclose(step.sum(), 1.0, rtol=1e-10)


@settings(max_examples=30, deadline=None)
@given(case=semantic_case())
def test_context_stays_unit_norm(case):
    """Every recorded context (each sublayer) has length 1: shown units plus the rest of the pool."""
    n, studied, params, patterns, data = case
    order = data.draw(st.permutations(range(1, n + 1)))
    events = from_recall_matrix([list(order)], n, study_items=[studied])
    states = cmr.record_states(events, params, patterns=patterns)
    features = [u for u in states["unit"].values if u.startswith("feature_")]
    split = patterns.feature_layer == "sublayer"
    blocks = [[u for u in states["unit"].values if u not in features and u != "start_features"],
              ["start_features"] + features] if split else [list(states["unit"].values)]
    for name, other in (("study_context", "study_other_norm"), ("cue_context", "cue_other_norm")):
        context = states[name].isel(trial=0)
        rest = states[other].isel(trial=0).values
        total = sum((context.sel(unit=b) ** 2).sum("unit").values for b in blocks)
        valid = ~np.isnan(rest)
        expected = len(blocks)  # each sublayer has unit length
        np.testing.assert_allclose(total[valid] + rest[valid] ** 2, expected, rtol=1e-10)


@settings(max_examples=25, deadline=None)
@given(case=semantic_case())
def test_semantic_weights_zero_equal_localist(case):
    n, studied, params, patterns, data = case
    order = data.draw(st.permutations(range(1, n + 1)))[: data.draw(st.integers(0, n))]
    zero = dict(params, Sfc=0.0, Scf=0.0, Sff=0.0, Cfc=0.0, Ccf=0.0)
    segment = cmr.item_patterns(patterns.items, patterns.similarity, patterns.features)
    events = from_recall_matrix([list(order) + [0]], n, study_items=[studied])
    semantic = cmr.log_likelihood(events, zero, patterns=segment, event_probabilities=True)
    localist = cmr.log_likelihood(events, zero, pool_size=patterns.size, event_probabilities=True)
    np.testing.assert_array_equal(semantic["event_probability"].values, localist["event_probability"].values)
