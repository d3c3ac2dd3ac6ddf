"""The fast paths give what the plain paths give, bit for bit.

* ``validate_events`` proves most recall matrices valid in a few whole-array passes and sends
  the rest through the row-by-row checks: the verdict and the message are those of the checks.
* ``spc``, ``pnr``, ``pfr`` and ``lag_rank`` reuse the labelled layout (coords, indexes) of an
  earlier result and the grouping of an earlier subject column, by content: a repeated call,
  and a call after the data changed in place, equal a call on a fresh copy; nothing a caller
  does to one result reaches another.
* ``log_likelihood`` keeps the list terms of recent study lists in the item pool and the
  layout of its result, by content: equal to a fresh pool and to the per-list construction.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr import _recall_stats
from cmr.errors import SchemaError
from cmr.schema import validate
from cmr.textbook._trials import trial_arrays
from tests.conftest import morton_events, require

PARAMS = dict(B_enc=0.6, B_start=0.3, B_rec=0.8, Lfc=0.2, Lcf=0.4, Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85,
              P1=1.5, P2=0.9, T=0.3, X1=0.02, X2=0.25, Scf=0.1, Sff=0.5)


# --- the same datasets, to the last bit ------------------------------------------------------


def _same(a: xr.Dataset, b: xr.Dataset, ignore_provenance: bool = True) -> None:
    """Equal variables (dims, dtype, bytes, attrs), coords, indexes, order and attrs."""
    assert list(a.variables) == list(b.variables)
    assert list(a.coords) == list(b.coords) and list(a.xindexes) == list(b.xindexes)
    assert dict(a.sizes) == dict(b.sizes)
    for name in a.variables:
        x, y = a.variables[name], b.variables[name]
        assert x.dims == y.dims and x.dtype == y.dtype and x.attrs == y.attrs, name
        assert np.asarray(x.values).tobytes() == np.asarray(y.values).tobytes(), name
    keep = (lambda k: k != "provenance") if ignore_provenance else (lambda k: True)
    assert {k: v for k, v in a.attrs.items() if keep(k)} == {k: v for k, v in b.attrs.items() if keep(k)}


def _fresh(ds: xr.Dataset) -> xr.Dataset:
    return ds.copy(deep=True)


def _random_events(rng, n_trials=12, longest=9, subjects=(3, 1, 2), items=None):
    """A recall matrix with ragged lists, intrusions, repeats and padding, as an events dataset."""
    lengths = rng.integers(1, longest + 1, size=n_trials)
    lengths[0] = longest
    outputs = longest + 3
    recalls = np.zeros((n_trials, outputs), dtype=np.int64)
    for t in range(n_trials):
        k = rng.integers(0, outputs + 1)
        recalls[t, :k] = rng.integers(-1, lengths[t] + 1, size=k)
        recalls[t, :k][recalls[t, :k] == 0] = -1
    subject = np.asarray(subjects)[rng.integers(0, len(subjects), size=n_trials)]
    study = None
    if items is not None:
        study = np.full((n_trials, longest), "", dtype=object)
        for t in range(n_trials):
            study[t, :lengths[t]] = rng.choice(items, size=lengths[t], replace=False)
    return cmr.from_recall_matrix(recalls, lengths, subject=subject, study_items=study)


# --- events validation ------------------------------------------------------------------------


def _row_by_row(recalls, length):
    """The row-by-row checks of an events dataset's recalls: the message, or None when valid."""
    if (recalls < -1).any() or (recalls > length[:, None]).any():
        return "recalls must be serial positions 1..list_length, 0 (padding) or -1 (intrusion)"
    padding = recalls == 0
    if (padding[:, :-1] & ~padding[:, 1:]).any():
        return "padding (0) must come after the last recall of a trial"
    return None


@pytest.mark.parametrize("seed", range(40))
def test_events_check_matches_the_row_by_row_checks(seed):
    rng = np.random.default_rng(seed)
    events = _random_events(rng)
    recalls = events["recalls"].values.copy()
    length = events["list_length"].values
    fault = seed % 5
    t, o = rng.integers(0, recalls.shape[0]), rng.integers(0, recalls.shape[1])
    if fault == 1:
        recalls[t, o] = -2  # below the intrusion code
    elif fault == 2:
        recalls[t, o] = length[t] + 1  # beyond its own list, maybe within a longer one
    elif fault == 3 and o + 1 < recalls.shape[1]:
        recalls[t, o], recalls[t, o + 1] = 0, max(1, recalls[t, o + 1])  # a recall after padding
    elif fault == 4:
        # a row ending in a recall followed by a row starting with padding and then a recall
        recalls[0, -1], recalls[1, 0], recalls[1, 1] = 1, 0, 1
    bad = events.copy()
    bad["recalls"] = (events["recalls"].dims, recalls)
    expected = _row_by_row(recalls, length)
    if expected is None:
        assert validate(bad, "events") is bad
    else:
        with pytest.raises(SchemaError) as info:
            validate(bad, "events")
        assert expected in str(info.value)
        assert "\n" not in str(info.value)


def test_recall_after_padding_is_named_with_its_trial():
    events = cmr.from_recall_matrix(np.array([[1, 2, 3], [2, 0, 0]]), 3)
    bad = events.copy()
    bad["recalls"] = (events["recalls"].dims, np.array([[1, 2, 0], [0, 2, 0]]))
    with pytest.raises(SchemaError, match=r"^events dataset: padding \(0\) must come after the last recall of a "
                                          r"trial; trial 1 has recalls after a 0: \[0, 2, 0\]$"):
        validate(bad, "events")
    # row ends: a last recall then a row starting with a recall is valid
    fine = events.copy()
    fine["recalls"] = (events["recalls"].dims, np.array([[1, 2, 3], [2, 0, 0]]))
    assert validate(fine, "events") is fine


@pytest.mark.parametrize("value", [True, None, {"a": 1}, [1, 2], np.bool_(False)])
def test_unsafe_variable_attribute_is_named(value):
    events = cmr.from_recall_matrix(np.array([[1, 2, 0]]), 3)
    bad = events.copy()
    bad["recalls"].attrs["units"] = value
    with pytest.raises(SchemaError, match=r"^events\.recalls: attribute 'units' must be str, int, float or a "
                                          r"numeric array \(netCDF-safe; store structures as JSON strings\); got "):
        validate(bad, "events")
    bad["recalls"].attrs["units"] = "position"
    assert validate(bad, "events") is bad


# --- recall statistics -------------------------------------------------------------------------


def _reference_counts(recalls, lengths, group, n_groups, n_positions):
    """SPC counts by hand: lists where a position was validly recalled / was studied."""
    actual = np.zeros((n_groups, n_positions), dtype=np.int64)
    possible = np.zeros((n_groups, n_positions), dtype=np.int64)
    for t in range(recalls.shape[0]):
        seen = set()
        for position in recalls[t]:
            if position == 0:
                break
            if position > 0:
                seen.add(int(position))
        for j in range(lengths[t]):
            possible[group[t], j] += 1
            actual[group[t], j] += (j + 1) in seen
    return actual, possible


@pytest.mark.parametrize("seed", range(25))
def test_spc_kernel_counts_by_hand(seed):
    rng = np.random.default_rng(100 + seed)
    events = _random_events(rng, n_trials=int(rng.integers(1, 30)), longest=int(rng.integers(1, 12)))
    recalls = np.ascontiguousarray(events["recalls"].values, dtype=np.int64)
    lengths = np.ascontiguousarray(events["list_length"].values, dtype=np.int64)
    n_groups = int(rng.integers(1, 4))
    group = rng.integers(0, n_groups, size=recalls.shape[0]).astype(np.int64)
    n_positions = int(lengths.max()) + int(rng.integers(0, 3))
    actual, possible = _recall_stats.count_recalled(recalls, lengths, group, n_groups, n_positions)
    expected_actual, expected_possible = _reference_counts(recalls, lengths, group, n_groups, n_positions)
    np.testing.assert_array_equal(actual, expected_actual)
    np.testing.assert_array_equal(possible, expected_possible)


STATS = ("spc", "pnr", "pfr", "lag_rank")


@pytest.mark.parametrize("by", ["subject", "trial", None])
@pytest.mark.parametrize("stat", STATS)
def test_repeated_statistics_equal_the_first(stat, by):
    events = _random_events(np.random.default_rng(7), n_trials=30)
    first = getattr(cmr, stat)(_fresh(events), by=by)
    again = [getattr(cmr, stat)(events, by=by) for _ in range(3)]
    for ds in again:
        _same(first, ds)
        assert ds.attrs["icl_cmr_kind"] == "recall_stat"
    assert again[0] is not again[1] and again[0]["prob" if stat != "lag_rank" else "rank"].values is not \
        again[1]["prob" if stat != "lag_rank" else "rank"].values


@pytest.mark.parametrize("stat", STATS)
def test_statistics_follow_data_changed_in_place(stat):
    events = _random_events(np.random.default_rng(11), n_trials=20)
    before = getattr(cmr, stat)(events)
    # the same layout (subjects, lengths), other values; then other subjects
    events["recalls"].values[:, :2] = np.where(events["recalls"].values[:, :2] != 0, 1, 0)
    events["recalls"].values[:, 1] = np.where(events["recalls"].values[:, 1] == 1, -1, events["recalls"].values[:, 1])
    changed = getattr(cmr, stat)(events)
    _same(changed, getattr(cmr, stat)(_fresh(events)))
    subjects = events["subject"].values  # read-only: other labels come as a new variable
    events["subject"] = (events["subject"].dims, np.where(subjects == 3, 9, subjects))
    relabelled = getattr(cmr, stat)(events)
    assert 9 in relabelled["subject"].values and 3 not in relabelled["subject"].values
    _same(relabelled, getattr(cmr, stat)(_fresh(events)))
    assert before["subject"].values.tolist() != relabelled["subject"].values.tolist()


def test_changes_to_one_result_do_not_reach_the_next():
    events = _random_events(np.random.default_rng(3), n_trials=15)
    first = cmr.spc(events)
    reference = cmr.spc(_fresh(events))
    first["prob"].attrs["long_name"] = "changed"
    first["serial_position"].attrs["units"] = "position"
    first.coords["subject"].attrs["units"] = "person"
    first.attrs["stat_kind"] = "changed"
    first["prob"].values[:] = 7.0
    first["actual"].values[:] = -1
    first["subject"] = ("subject", np.arange(first.sizes["subject"]) + 100)
    _same(cmr.spc(events), reference)


def test_statistics_with_masks_and_object_subjects_equal_a_fresh_copy():
    events = _random_events(np.random.default_rng(5), n_trials=16, subjects=("b", "a", "c"))
    for stat in STATS:
        _same(getattr(cmr, stat)(events), getattr(cmr, stat)(_fresh(events)))
    masked = cmr.spc(events, item_query="input > 2")
    _same(masked, cmr.spc(_fresh(events), item_query="input > 2"))


@pytest.mark.parametrize("stat", ["spc", "pnr"])
def test_repeated_statistics_equal_psifr(stat):
    fr = require("psifr.fr")
    events = morton_events(3)
    table = fr.merge_free_recall(cmr.to_table(events))
    keys, column = (["subject", "input"], "recall") if stat == "spc" else (["subject", "output", "input"], "prob")
    theirs = getattr(fr, stat)(table).set_index(keys).to_xarray()
    for _ in range(2):  # the first call makes the layout, the second reuses it
        ours = getattr(cmr, stat)(events)
        assert np.array_equal(ours["subject"].values, theirs["subject"].values)
        np.testing.assert_allclose(ours["prob"].values, theirs[column].values, rtol=0, atol=1e-12)


# --- the semantic likelihood -------------------------------------------------------------------


def _pool(rng, size=40, categories=False):
    vectors = rng.normal(size=(size, 6))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors @ vectors.T
    items = [f"w{k}" for k in range(size)]
    if categories:
        features, names = cmr.category_features(rng.integers(0, 4, size=size).astype(str))
        return cmr.item_patterns(items, similarity, features, feature_names=names)
    return cmr.item_patterns(items, similarity)


def _per_list(patterns, events):
    """The pattern terms list by list, with ItemPatterns.list_arrays."""
    lengths = events["list_length"].values
    rows = patterns.index_of(events["study_item"].transpose("trial", "study_position").values)
    longest = int(lengths.max())
    shape = (lengths.size, longest, longest)
    sim, gram, feats, row_sum = np.zeros(shape), np.zeros(shape), np.zeros(shape), np.zeros((lengths.size, longest))
    for t, n in enumerate(lengths):
        s, q, r, f = patterns.list_arrays(rows[t, :n])
        sim[t, :n, :n], gram[t, :n, :n], row_sum[t, :n], feats[t, :n, :n] = s, q, r, f
    return sim, gram, row_sum, feats


@pytest.mark.parametrize("categories", [False, True])
@pytest.mark.parametrize("reuse", [False, True])
def test_list_terms_equal_the_per_list_construction(reuse, categories):
    rng = np.random.default_rng(21)
    patterns = _pool(rng, categories=categories)
    events = _random_events(rng, n_trials=14, items=patterns.items)
    for _ in range(2):
        arrays = trial_arrays(events, patterns, reuse=reuse)
        for name, expected in zip(("group_sim", "group_sim_gram", "group_row_sum", "group_feature_gram"),
                                  _per_list(patterns, events)):
            got = getattr(arrays, name)
            assert got.dtype == expected.dtype and got.shape == expected.shape and got.flags.c_contiguous
            assert got.tobytes() == expected.tobytes(), name


@pytest.mark.parametrize("by", ["subject", "trial", None])
@pytest.mark.parametrize("event_probabilities", [False, True])
def test_repeated_likelihood_equals_a_fresh_pool(by, event_probabilities):
    rng = np.random.default_rng(31)
    patterns = _pool(rng, categories=True)
    events = _random_events(rng, n_trials=10, items=patterns.items)
    params = dict(PARAMS, Cfc=0.2, Ccf=0.1)
    calls = [cmr.log_likelihood(events, params, patterns=patterns, by=by, event_probabilities=event_probabilities)
             for _ in range(3)]
    fresh = cmr.item_patterns(patterns.items, patterns.similarity, patterns.features,
                              feature_names=patterns.feature_names)
    reference = cmr.log_likelihood(_fresh(events), params, patterns=fresh, by=by,
                                   event_probabilities=event_probabilities)
    for ds in calls:
        _same(reference, ds, ignore_provenance=False)
    assert np.isfinite(reference.attrs["total_logl"])
    assert calls[0]["trial_logl"].values is not calls[1]["trial_logl"].values


def test_likelihood_follows_study_lists_changed_in_place():
    rng = np.random.default_rng(41)
    patterns = _pool(rng)
    events = _random_events(rng, n_trials=8, items=patterns.items)
    before = cmr.log_likelihood(events, PARAMS, patterns=patterns)
    study = events["study_item"].values
    t = int(np.argmax(before["trial_n"].values))  # the list with most recalls
    n = int(events["list_length"].values[t])
    study[t, 0], study[t, n - 1] = study[t, n - 1], study[t, 0]  # its first and last items swap places
    after = cmr.log_likelihood(events, PARAMS, patterns=patterns)
    fresh = cmr.item_patterns(patterns.items, patterns.similarity)
    _same(after, cmr.log_likelihood(_fresh(events), PARAMS, patterns=fresh), ignore_provenance=False)
    assert after["trial_logl"].values[t] != before["trial_logl"].values[t]
    events["subject"] = (events["subject"].dims, np.full(events.sizes["trial"], 5))  # other labels: a new layout
    relabelled = cmr.log_likelihood(events, PARAMS, patterns=patterns)
    assert relabelled["subject"].values.tolist() == [5]
    assert (relabelled["subject_of_trial"].values == 5).all()


def test_changes_to_one_likelihood_result_do_not_reach_the_next():
    rng = np.random.default_rng(51)
    patterns = _pool(rng)
    events = _random_events(rng, n_trials=6, items=patterns.items)
    first = cmr.log_likelihood(events, PARAMS, patterns=patterns)
    reference = cmr.log_likelihood(_fresh(events), PARAMS, patterns=patterns)
    first["trial_logl"].values[:] = 0.0
    first["logl"].values[:] = 0.0
    first["trial_logl"].attrs["units"] = "nats"
    first.attrs["model"] = "changed"
    first["subject_of_trial"] = ("trial", np.full(events.sizes["trial"], -7))
    _same(cmr.log_likelihood(events, PARAMS, patterns=patterns), reference, ignore_provenance=False)


def test_kept_list_terms_stay_out_of_a_pickle():
    rng = np.random.default_rng(61)
    patterns = _pool(rng, size=60)
    events = _random_events(rng, n_trials=20, items=patterns.items)
    before = len(pickle.dumps(patterns))
    expected = cmr.log_likelihood(events, PARAMS, patterns=patterns)
    assert len(pickle.dumps(patterns)) == before
    copy = pickle.loads(pickle.dumps(patterns))
    _same(cmr.log_likelihood(events, PARAMS, patterns=copy), expected, ignore_provenance=False)


def test_localist_likelihood_repeats_exactly():
    events = _random_events(np.random.default_rng(71), n_trials=12)
    params = {k: v for k, v in PARAMS.items() if k not in ("Scf", "Sff")}
    first = cmr.log_likelihood(_fresh(events), params, by="trial", event_probabilities=True)
    for _ in range(2):
        _same(first, cmr.log_likelihood(events, params, by="trial", event_probabilities=True),
              ignore_provenance=False)
