"""CMR on lists that study an item more than once: kernels against the plain numpy reference."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import RecallDataError
from cmr.testing import textbook_parameters
from cmr.testing.repeated import repeated_event_probabilities, repeated_log_likelihood, repeated_simulation
from cmr.textbook._trials import first_positions, trial_arrays
from cmr.textbook.parameter_sets import parameter_table
from cmr.textbook.simulate import _simulate


def repeated_events(presentation, recalls, names=None, subject=None):
    """An events dataset with ``presentation_item`` from first positions (T, L) and recalls (T, R);
    items are ``names[first - 1]``, or ``"<trial>-w<first>"`` (each list its own items)."""
    presentation = np.asarray(presentation, dtype=np.int64)
    recalls = np.asarray(recalls, dtype=np.int64)
    lengths = (presentation > 0).sum(axis=1)
    events = cmr.from_recall_matrix(recalls, lengths, subject=subject)
    width = events.sizes["study_position"]
    padded = np.zeros((presentation.shape[0], width), dtype=np.int64)
    padded[:, :presentation.shape[1]] = presentation[:, :width]
    if names is None:
        words = np.array([[f"{t}-w{i}" for i in range(1, width + 1)] for t in range(len(padded))], dtype=object)
    else:
        words = np.tile(np.array(names, dtype=object), (len(padded), 1))
    study = np.where(padded > 0, np.take_along_axis(words, np.maximum(padded, 1) - 1, axis=1), "")
    events["study_item"] = (("trial", "study_position"), study.astype(object))
    events["presentation_item"] = (("trial", "study_position"), padded)
    events.attrs["repeated_items"] = int(bool((padded != np.arange(1, width + 1)[None, :])[padded > 0].any()))
    return events


@st.composite
def repeated_lists(draw, max_length=9):
    """One list with repeats (massed or spaced) as first positions, and a recall sequence."""
    n = draw(st.integers(2, max_length))
    presentation = []
    for i in range(n):
        earlier = sorted(set(presentation))
        repeat = earlier and draw(st.booleans())
        presentation.append(draw(st.sampled_from(earlier)) if repeat else i + 1)
    distinct = sorted(set(presentation))
    order = draw(st.permutations(distinct))
    k = draw(st.integers(0, len(distinct)))
    recalls = list(order[:k])
    if recalls and draw(st.booleans()):  # a repeat and an intrusion, which are not scored
        recalls.insert(draw(st.integers(0, len(recalls))), recalls[0])
        recalls.insert(draw(st.integers(0, len(recalls))), -1)
    return presentation, recalls


def _kernel_probabilities(params, presentation, recalls, **options):
    events = repeated_events([presentation], [recalls + [0]])
    ds = cmr.log_likelihood(events, params, event_probabilities=True, **options)
    p = ds["event_probability"].values[0]
    return p[~np.isnan(p)], float(ds.attrs["total_logl"])


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(repeated_lists(), textbook_parameters(within="fit", bounds={"Afc": (0.0, 0.3), "Acf": (0.0, 0.3)}))
def test_likelihood_equals_the_reference(case, params):
    presentation, recalls = case
    p, total = _kernel_probabilities(params, presentation, recalls)
    expected = repeated_event_probabilities(params, presentation, recalls)
    np.testing.assert_allclose(p, expected, rtol=1e-12, atol=1e-12)
    assert total == pytest.approx(repeated_log_likelihood(params, presentation, recalls), rel=1e-12, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(repeated_lists(max_length=7), textbook_parameters(within="fit", bounds={"Afc": (0.0, 0.3)}),
       st.integers(0, 4))
def test_pool_sized_context_equals_the_reference(case, params, extra):
    presentation, recalls = case
    pool = len(presentation) + extra
    p, _ = _kernel_probabilities(params, presentation, recalls, pool_size=pool)
    np.testing.assert_allclose(p, repeated_event_probabilities(params, presentation, recalls, pool_size=pool),
                               rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(repeated_lists(max_length=7), textbook_parameters(within="fit", bounds={"Afc": (0.0, 0.3)}),
       st.floats(0.0, 0.5), st.floats(0.0, 0.5), st.floats(0.0, 2.0), st.integers(0, 2**31 - 1))
def test_semantic_cmr_equals_the_reference(case, params, sfc, scf, sff, seed):
    presentation, recalls = case
    rng = np.random.default_rng(seed)
    pool = len(presentation) + 3
    vectors = rng.normal(size=(pool, 4))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors @ vectors.T
    names = [f"w{i}" for i in range(1, pool + 1)]
    rows = rng.permutation(pool)  # the study list draws its items from anywhere in the pool
    patterns = cmr.item_patterns([names[r] for r in rows], similarity[np.ix_(rows, rows)])
    params = dict(params, Sfc=sfc, Scf=scf, Sff=sff)
    events = repeated_events([presentation], [recalls + [0]], names=names)
    ds = cmr.log_likelihood(events, params, patterns=patterns, event_probabilities=True)
    p = ds["event_probability"].values[0]
    order = np.argsort(rows)  # pool row of each name
    distinct = sorted(set(presentation))
    expected = repeated_event_probabilities(params, presentation, recalls, similarity=similarity[np.ix_(rows, rows)],
                                            pool_rows=[order[i - 1] for i in distinct])
    np.testing.assert_allclose(p[~np.isnan(p)], expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(repeated_lists(), textbook_parameters(within="fit"), st.integers(0, 2**31 - 1))
def test_simulation_draws_as_the_reference(case, params, seed):
    presentation, _ = case
    events = repeated_events([presentation], [[0]])
    arrays = trial_arrays(events)
    table, trial_param = parameter_table(params, events["subject"].values, patterns=False)
    out = _simulate(arrays, table, trial_param, np.random.default_rng(seed))[0]
    expected = repeated_simulation(params, presentation, np.random.default_rng(seed))
    assert out[out > 0].tolist() == expected
    assert len(set(expected)) == len(expected) and set(expected) <= set(presentation)


def test_repeats_raise_recall_and_spaced_more_than_massed():
    """A twice-presented item is recalled more often than once-presented ones, spaced more than massed."""
    params = dict(cmr.default_parameters(), T=0.3, X1=0.1, X2=0.4)
    recalled = {}
    lists = {"massed": [1, 2, 3, 4, 5, 5, 7, 8, 9, 10], "spaced": [1, 2, 3, 4, 5, 6, 7, 5, 9, 10]}
    for name, presentation in lists.items():
        events = repeated_events([presentation] * 400, [[0]] * 400)
        arrays = trial_arrays(events)
        table, trial_param = parameter_table(params, events["subject"].values, patterns=False)
        out = _simulate(arrays, table, trial_param, np.random.default_rng(3))
        recalled[name] = np.array([(out == pos).any(axis=1).mean() for pos in range(1, 11)])
    once = recalled["spaced"][1:4].mean()  # positions 2-4, studied once
    assert recalled["spaced"][4] > once + 0.1
    assert recalled["spaced"][4] > recalled["massed"][4] + 0.05
    assert recalled["massed"][5] == recalled["spaced"][7] == 0  # a later presentation is never reported


def test_repeat_free_presentation_map_changes_nothing():
    """A dataset carrying presentation_item 1..n scores bit for bit as one without it."""
    rng = np.random.default_rng(0)
    recalls = np.array([rng.permutation(6)[:4] + 1 for _ in range(5)])
    plain = cmr.from_recall_matrix(recalls, 6)
    mapped = repeated_events(np.tile(np.arange(1, 7), (5, 1)), recalls)
    params = cmr.default_parameters()
    a = cmr.log_likelihood(plain, params, by="trial")["trial_logl"].values
    b = cmr.log_likelihood(mapped, params, by="trial")["trial_logl"].values
    assert a.tobytes() == b.tobytes()


def test_a_presentation_map_that_is_not_first_positions_is_refused():
    with pytest.raises(RecallDataError, match="first presentation; got 3 at study position 2"):
        first_positions(np.array([[1, 3, 3]]), np.array([3]))
    with pytest.raises(RecallDataError, match="got 2 at study position 3"):
        first_positions(np.array([[1, 1, 2]]), np.array([3]))


def test_recall_of_a_later_presentation_scores_to_the_first():
    params = cmr.default_parameters()
    first = cmr.log_likelihood(repeated_events([[1, 2, 1, 4]], [[1, 4, 0]]), params)
    later = cmr.log_likelihood(repeated_events([[1, 2, 1, 4]], [[3, 4, 0]]), params)
    assert first.attrs["total_logl"] == later.attrs["total_logl"]


@settings(max_examples=15, deadline=None)
@given(st.lists(repeated_lists(max_length=8), min_size=3, max_size=3),
       textbook_parameters(within="fit", fixed={"Afc": 0.0},
                           bounds={"B_enc": (0.1, 0.9), "B_start": (0.0, 0.9), "B_rec": (0.0, 0.9),
                                   "Dfc": (1e-100, 1.0)}))
def test_cmr2_with_full_distraction_is_textbook_cmr_on_repeats(cases, params):
    """B_distract = 1 and a tiny C_thresh make each list of a CMR2 session textbook CMR (test_cmr2.py);
    so it is with repeated items too. (Drift rates below 1: with a rate of 1 context can lose an
    item entirely, and CMR2's similarity check then refuses it where textbook CMR does not. Dfc of
    at least 1e-100: with Afc = 0 an item's context input is Dfc times its unit, whose squares
    underflow below about 1e-154; CMR2 then scales the row before normalising it (the test below),
    but the two implementations round such inputs differently: 0.03 log units apart at Dfc = 1e-290.)"""
    width = max(len(p) for p, _ in cases)
    presentation = np.zeros((3, width), dtype=np.int64)
    recalls = np.zeros((3, width + 3), dtype=np.int64)
    for t, (p, r) in enumerate(cases):
        presentation[t, :len(p)] = p
        recalls[t, :len(r)] = r
    events = repeated_events(presentation, recalls, subject=np.ones(3, dtype=np.int64))
    got = cmr.cmr2_log_likelihood(events, dict(params, B_distract=1.0, C_thresh=1e-9), by="trial")
    expected = [repeated_log_likelihood(params, p, r) for p, r in cases]
    np.testing.assert_allclose(got["trial_logl"].values, expected, rtol=1e-12)
    assert got.attrs["n_sessions"] == 1


def test_cmr2_normalises_a_tiny_item_input_without_underflow():
    """With Afc = 0 and Dfc = 1e-170 the squares of an item's input underflow to 0; the input must
    still be normalised to its unit (it was scored as no input at all, log-likelihood 0)."""
    params = dict(cmr.default_parameters(), Afc=0.0, Dfc=1e-170)
    events = repeated_events(np.array([[1, 2, 3, 4]]), np.array([[1, 4, 0]]), subject=np.ones(1, dtype=np.int64))
    tiny = cmr.cmr2_log_likelihood(events, dict(params, B_distract=1.0, C_thresh=1e-9), by="trial")
    small = cmr.cmr2_log_likelihood(events, dict(params, Dfc=1e-100, B_distract=1.0, C_thresh=1e-9), by="trial")
    assert tiny["trial_logl"].values[0] < 0
    np.testing.assert_allclose(tiny["trial_logl"].values, small["trial_logl"].values, rtol=1e-12)


def test_simulate_recalls_takes_a_presentation_map():
    params = cmr.default_parameters()
    presentation = [1, 2, 1, 4, 4, 6]
    out = cmr.simulate_recalls(params, 6, 50, rng=1, presentation=presentation)
    assert set(np.unique(out)) <= {0, 1, 2, 4, 6}
    assert ((out > 0).sum(axis=1) <= 4).all()
    same = cmr.simulate_recalls(params, 6, 50, rng=1)
    assert not np.array_equal(out, same)
    with pytest.raises(RecallDataError, match=r"presentation must be integers of shape \(6,\)"):
        cmr.simulate_recalls(params, 6, 5, presentation=[1, 2, 3])


def test_the_first_presentation_variant_keeps_the_design_and_weights_only_later_learning():
    from cmr.repetition import presentation_items
    from cmr.designs import repetition_design
    from cmr.testing.repeated import ReferenceNetwork
    from cmr.testing.spacing import GENERATING_PARAMETERS, _FirstWeighted, simulate_first_weighted

    design = repetition_design(n_subjects=2, n_control=1, n_mixed=2, rng=3)
    data = simulate_first_weighted(design, first_weight=0.3, rng=4)
    assert np.array_equal(presentation_items(data), presentation_items(design))
    assert (data["recalls"].values > 0).sum() > 0
    assert data.equals(simulate_first_weighted(design, first_weight=0.3, rng=4))
    pres = presentation_items(design)
    row = pres[(pres != np.arange(1, 25)).any(axis=1)][0]
    plain = ReferenceNetwork(GENERATING_PARAMETERS, row)
    same, weighted = _FirstWeighted(GENERATING_PARAMETERS, row, 1.0), \
        _FirstWeighted(GENERATING_PARAMETERS, row, 0.3)
    for net in (plain, same, weighted):
        net.study()
    repeated = [i for i in plain.items if (row == i).sum() == 2]
    assert all(np.array_equal(plain.fc_exp[i], same.fc_exp[i]) for i in plain.items)
    assert all(not np.allclose(plain.fc_exp[i], weighted.fc_exp[i]) for i in repeated)
    with pytest.raises(cmr.errors.ParameterError, match="first_weight must be in"):
        simulate_first_weighted(design, first_weight=1.5)


def test_parameters_are_recovered_from_repeated_lists():
    """B_enc, B_rec and T of textbook CMR recovered from 40 simulated mixed lists (24 positions,
    6 repeated items each, pooled fit) within 0.1 of the generating values (measured: within 0.04)."""
    from cmr.designs import repetition_design

    truth = dict(cmr.default_parameters(), B_enc=0.5, B_rec=0.8, T=0.3, X1=0.03, X2=0.25)
    design = repetition_design(n_subjects=1, n_control=0, n_mixed=40, rng=5)
    data = cmr.from_table(cmr.simulate_experiment(design, truth, rng=5))
    free = ["B_enc", "B_rec", "T"]
    spec = cmr.FitSpec(free, fixed={k: v for k, v in truth.items() if k not in free})
    fit = cmr.fit_recall(data, spec, by=None, n_restarts=1, rng=0)
    for name in free:
        assert abs(float(fit["value"].sel(parameter=name).squeeze()) - truth[name]) < 0.1, name


def test_record_states_refuses_repeats_by_name():
    events = repeated_events([[1, 2, 1, 4]], [[1, 0]])
    with pytest.raises(RecallDataError, match="record_states does not handle repeated study items"):
        cmr.record_states(events, cmr.default_parameters())
