"""psifr's own tests, ported: the same hand-made data and psifr's expected numbers, asserted on
this toolkit's analyses.

Each test is named after the psifr test it ports (psifr 0.10, its repository's ``tests/``),
cited in its docstring. psifr's list-level inputs (pool and recall sequences) become one psifr
long table per test; psifr's flattened tables become our labelled arrays. Where our semantics
differ on purpose, the test asserts ours and says why (docs/recall-analyses.md lists them, with
the psifr tests that do not apply). None calls psifr: the numbers are psifr's, written down.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.intrusions import intrusion_list_lags


def _same(a, b):
    return a == b


def _differ(a, b):
    return a != b


def _table(study, recall, subjects=None, **columns):
    """A psifr long table from lists of study and recall items (psifr's ``table_from_lists``).

    Each keyword is a column: a pair (study values, recall values) of lists of lists, or study
    values alone (recall rows then left empty, as psifr's raw tables leave them).
    """
    subjects = [1] * len(study) if subjects is None else subjects
    rows = []
    for n, (subject, items, recalled) in enumerate(zip(subjects, study, recall)):
        number = 1 + sum(s == subject for s in subjects[:n])
        for phase, seq in (("study", items), ("recall", recalled)):
            for position, item in enumerate(seq):
                row = {"subject": subject, "list": number, "trial_type": phase, "position": position + 1,
                       "item": str(item)}
                for name, values in columns.items():
                    pair = values if isinstance(values, tuple) else (values, None)
                    source = pair[0] if phase == "study" else pair[1]
                    row[name] = np.nan if source is None else source[n][position]
                rows.append(row)
    return pd.DataFrame(rows)


def _positions(n_items, outputs, **study_columns):
    """One list of items named by serial position 1..n, recalled at the given positions."""
    recall = [[str(p) if p > 0 else "x" for p in outputs]]
    return _table([[str(p) for p in range(1, n_items + 1)]], recall,
                  **{name: [list(values)] for name, values in study_columns.items()})


def _counts(result):
    return result["actual"].values.tolist(), result["possible"].values.tolist()


# --- psifr tests/test_lag_stats.py --------------------------------------------------------

_LAG_OUTPUTS = [1, 3, 4, 8, 5, 4, 7, 6]
_LAG_CATEGORY = [1, 1, 2, 2, 1, 1, 2, 2]
_LAG_BLOCK = [1, 1, 2, 2, 3, 3, 4, 4]


def test_lag_count():
    """psifr tests/test_lag_stats.py::test_lag_count"""
    crp = cmr.lag_crp(_positions(8, _LAG_OUTPUTS), by=None)
    assert crp["lag"].values.tolist() == list(range(-7, 8))
    assert _counts(crp) == ([0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0],
                            [0, 1, 1, 0, 1, 2, 3, 0, 3, 3, 3, 3, 2, 1, 1])


def test_lag_count_category():
    """psifr tests/test_lag_stats.py::test_lag_count_category"""
    table = _positions(8, _LAG_OUTPUTS, category=_LAG_CATEGORY)
    within = cmr.lag_crp(table, by=None, test_key="category", test=_same)
    assert _counts(within) == ([0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0],
                               [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 2, 1, 0, 0])
    across = cmr.lag_crp(table, by=None, test_key="category", test=_differ)
    assert _counts(across) == ([0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0],
                               [0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1])


def test_lag_count_block():
    """psifr tests/test_lag_stats.py::test_lag_count_block"""
    crp = cmr.lag_crp(_positions(8, _LAG_OUTPUTS, block=_LAG_BLOCK), by=None, lag_key="block")
    assert crp["lag"].values.tolist() == [-3, -2, -1, 0, 1, 2, 3]
    assert _counts(crp) == ([0, 0, 2, 1, 1, 1, 0], [2, 0, 5, 3, 6, 6, 2])


def test_lag_count_block_unique():
    """psifr tests/test_lag_stats.py::test_lag_count_block_unique"""
    crp = cmr.lag_crp(_positions(8, _LAG_OUTPUTS, block=_LAG_BLOCK), by=None, lag_key="block", count_unique=True)
    assert _counts(crp) == ([0, 0, 2, 1, 1, 1, 0], [2, 0, 4, 3, 3, 3, 1])


def test_compound_lag_count():
    """psifr tests/test_lag_stats.py::test_compound_lag_count"""
    crp = cmr.lag_crp_compound(_positions(4, [4, 1, 2, 3]), by=None)
    assert crp["previous_lag"].values.tolist() == crp["lag"].values.tolist() == [-3, -2, -1, 0, 1, 2, 3]
    actual, possible = np.zeros((7, 7), int), np.zeros((7, 7), int)
    actual[0, 4] = actual[4, 4] = 1  # -3 then +1; +1 then +1
    possible[0, [4, 5]] = possible[4, 4] = 1
    assert np.array_equal(crp["actual"].values, actual)
    assert np.array_equal(crp["possible"].values, possible)


def test_input_pairs():
    """psifr tests/test_lag_stats.py::test_input_pairs (rows: the serial position recalled first)"""
    crp = cmr.input_crp(_positions(4, [4, 1, 2, 3]), by=None)
    assert crp["actual"].values.tolist() == [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert crp["possible"].values.tolist() == [[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 0]]


def test_rank_lag():
    """psifr tests/test_lag_stats.py::test_rank_lag (psifr's per-transition ranks, averaged)"""
    rank = cmr.lag_rank(_positions(6, [6, 2, 1, 5, 4]), by=None)
    assert rank["rank"].item() == pytest.approx(np.mean([1 / 4, 5 / 6, 0, 1]))
    assert int(rank["n_transitions"]) == 4


def _lag_rank_list():
    """psifr's lag-rank list: items 1..6 in two categories, recalled 6 2 1 5 4."""
    return _positions(6, [6, 2, 1, 5, 4], category=[1, 1, 1, 2, 2, 2])


def test_rank_lag_within():
    """psifr tests/test_lag_stats.py::test_rank_lag_within (ranks [0.5, NaN]: the NaN is not averaged)"""
    rank = cmr.lag_rank(_lag_rank_list(), by=None, test_key="category", test=_same)
    assert (rank["rank"].item(), int(rank["n_transitions"])) == (0.5, 1)


def test_rank_lag_across():
    """psifr tests/test_lag_stats.py::test_rank_lag_across (ranks [0.5, 0])"""
    rank = cmr.lag_rank(_lag_rank_list(), by=None, test_key="category", test=_differ)
    assert (rank["rank"].item(), int(rank["n_transitions"])) == (0.25, 2)


def test_percentile_rank():
    """psifr tests/test_lag_stats.py::test_percentile_rank, as distance ranks (1 - psifr's percentile)

    Four lists: item 0 recalled first, then the item at distance 1, 2, 3 or 4 of the four left.
    """
    distances = np.zeros((5, 5))
    distances[0, 1:] = distances[1:, 0] = [1, 2, 3, 4]
    study = [[str(i) for i in range(5)]] * 4
    table = _table(study, [["0", str(k)] for k in range(1, 5)], index=[list(range(5))] * 4)
    rank = cmr.distance_rank(table, "index", distances, by="trial")
    np.testing.assert_allclose(rank["rank"].values, 1 - np.array([0, 1 / 3, 2 / 3, 1]), rtol=0, atol=1e-15)


# --- psifr tests/test_category_stats.py -----------------------------------------------------


def test_category_count():
    """psifr tests/test_category_stats.py::test_category_count"""
    table = _positions(8, [1, 3, 4, 8, 5, 4, 2, 7, 6], category=[1, 1, 1, 1, 2, 2, 2, 2])
    crp = cmr.category_crp(table, category_key="category", by=None)
    assert (int(crp["actual"]), int(crp["possible"])) == (4, 5)


_ROENKER = ["aaaaabacbbbbcbcccc", "aaaaabbbbccccabaaaacccccabcbbbbbccccccaaabbbbccaabbaba", "aacccccacbbcccccbb",
            "aaaaacbcccccccabbbcccccbcccccbbbbbcccaabcbccccccaaaacc", "aaaefbbbefcccedfdd",
            "aaaaadedbbbcbaaaaeeedbecccfffecccccddddedebffffffbbdeb", "abeeeecedffffffedf",
            "abbddddedfcccdeeeeedefdffffffcfffeefffffdceeeeeffffffd"]
_STRICKER = ["aabb", "aaaa", "aaaabbbb", "aabbccdd", "aaaabbbbcccc", "aaabbbcccddd", "aabbcdcd", "aaaacdcd",
             "aabbabab", "aaabbbcccdddabcd"]


def _recalled_categories(recalled, study_categories):
    """Lists whose recalls have the given categories: the k-th recall of a category is that
    category's k-th studied item (which items does not matter to ARC and LBC)."""
    study, recall = [], []
    for seq, cats in zip(recalled, study_categories):
        study.append([f"{c}{k}" for k, c in enumerate(cats)])
        seen = {c: [k for k, s in enumerate(cats) if s == c] for c in set(cats)}
        recall.append([f"{c}{seen[c].pop(0)}" for c in seq])
    categories = [list(cats) for cats in study_categories]
    return _table(study, recall, category=categories)


def test_arc1():
    """psifr tests/test_category_stats.py::test_arc1 (Roenker et al. 1971; each list studies what it recalls)"""
    clustering = cmr.category_clustering(_recalled_categories(_ROENKER, _ROENKER), by="trial")
    expected = [0.5, 0.5, 0.49295775, 0.5, 0.5, 0.5, 0.49295775, 0.5]
    np.testing.assert_allclose(clustering["arc"].values, expected, rtol=1e-7)


def test_arc2():
    """psifr tests/test_category_stats.py::test_arc2 (Stricker et al. 2002)"""
    clustering = cmr.category_clustering(_recalled_categories(_STRICKER, [list("abcd") * 4] * 10), by="trial")
    expected = [1.00, np.nan, 1.00, 1.00, 1.00, 1.00, 0.33, 0.33, -0.33, 0.55]
    np.testing.assert_allclose(clustering["arc"].values, expected, rtol=0.011)


def test_lbc():
    """psifr tests/test_category_stats.py::test_lbc (Stricker et al. 2002, psifr's corrected values)"""
    clustering = cmr.category_clustering(_recalled_categories(_STRICKER, [list("abcd") * 4] * 10), by="trial")
    expected = [1.40, 2.40, 4.60, 2.60, 6.80, 5.80, 0.60, 1.60, 0.60, 5.00]
    np.testing.assert_allclose(clustering["lbc"].values, expected)


# --- psifr tests/test_distance_stats.py ------------------------------------------------------

_BLOCKS = np.array([[0, 1, 1, 1, 2, 2, 2, 2], [1, 0, 1, 1, 2, 2, 2, 2], [1, 1, 0, 1, 2, 2, 2, 2],
                    [1, 1, 1, 0, 2, 2, 2, 2], [2, 2, 2, 2, 0, 3, 3, 3], [2, 2, 2, 2, 3, 0, 3, 3],
                    [2, 2, 2, 2, 3, 3, 0, 3], [2, 2, 2, 2, 3, 3, 3, 0]], dtype=float)


def _indexed(recalled_items, index=range(8), test=(1, 1, 2, 2, 2, 2, 1, 1)):
    """One list of items 0..7 (item i at position i + 1, with row ``index[i]``), recalled by item."""
    items = [str(i) for i in range(8)]
    return _table([items], [[str(i) for i in recalled_items]], index=[list(index)], test=[list(test)])


def test_distance_count():
    """psifr tests/test_distance_stats.py::test_distance_count"""
    crp = cmr.distance_crp(_indexed([3, 2, 1, 7, 0, 6, 5]), "index", _BLOCKS, [0.5, 1.5, 2.5, 3.5], by=None)
    assert _counts(crp) == ([2, 3, 1], [6, 16, 5])


def test_distance_count_unique():
    """psifr tests/test_distance_stats.py::test_distance_count_unique"""
    table = _indexed([3, 2, 1, 7, 0, 6, 5])
    assert _counts(cmr.distance_crp(table, "index", _BLOCKS, [0.5, 2.5, 3.5], by=None)) == ([5, 1], [22, 5])
    unique = cmr.distance_crp(table, "index", _BLOCKS, [0.5, 2.5, 3.5], count_unique=True, by=None)
    assert _counts(unique) == ([5, 1], [5, 2])


def test_rank_distance():
    """psifr tests/test_distance_stats.py::test_rank_distance (per-transition ranks, averaged)"""
    rank = cmr.distance_rank(_indexed([3, 2, 1, 7, 0, 6, 5]), "index", _BLOCKS, by=None)
    expected = [1 - 1 / 6, 1 - 0.5 / 5, 1 - 2.5 / 4, 1 - 0 / 3, 1 - 1 / 2, 1 - 0.5 / 1]
    assert rank["rank"].item() == pytest.approx(np.mean(expected)) and int(rank["n_transitions"]) == 6


def test_rank_distance_within():
    """psifr tests/test_distance_stats.py::test_rank_distance_within (psifr's NaN: no rank, not averaged)"""
    rank = cmr.distance_rank(_indexed([3, 2, 1, 7, 0, 6, 5]), "index", _BLOCKS, by=None, test_key="test", test=_same)
    assert rank["rank"].item() == pytest.approx(np.mean([1 - 0 / 2, 1 - 1.5 / 2, 1 - 0 / 1]))
    assert int(rank["n_transitions"]) == 3


def test_rank_distance_across():
    """psifr tests/test_distance_stats.py::test_rank_distance_across"""
    rank = cmr.distance_rank(_indexed([3, 2, 1, 7, 0, 6, 5]), "index", _BLOCKS, by=None, test_key="test",
                             test=_differ)
    assert rank["rank"].item() == pytest.approx(np.mean([1 - 0.5 / 3, 1 - 0.5 / 1]))


def test_rank_distance_shifted():
    """psifr tests/test_distance_stats.py::test_rank_distance_shifted (rows averaged over transitions)"""
    distances = _BLOCKS.copy()
    distances[3, 1] = distances[1, 3] = 4
    shifted = cmr.distance_rank_shifted(_indexed([4, 3, 1, 7, 3, 0, 6, 2]), "index", distances, 2, by=None)
    assert shifted["shift"].values.tolist() == [-2, -1]
    np.testing.assert_allclose(shifted["rank"].values, np.mean([[0.8, 0.0], [0.25, 0.25], [1.0, 1.0]], axis=0))


_WINDOW_DISTANCES = np.array([[0, 3, 1, 1, 2, 2, 2, 2], [3, 0, 1, 1, 2, 2, 2, 2], [1, 1, 0, 4, 2, 2, 2, 2],
                              [1, 1, 4, 0, 2, 2, 2, 2], [2, 2, 2, 2, 0, 5, 3, 3], [2, 2, 2, 2, 5, 0, 3, 3],
                              [2, 2, 2, 2, 3, 3, 0, 6], [2, 2, 2, 2, 3, 3, 6, 0]], dtype=float)
_WINDOW_INDEX = [4, 5, 6, 7, 0, 1, 2, 3]


def _by_position(outputs, index=_WINDOW_INDEX):
    return _positions(8, outputs, index=index)


def test_rank_distance_window():
    """psifr tests/test_distance_stats.py::test_rank_distance_window"""
    window = cmr.distance_rank_window(_by_position([4, 2, 1, 7, 5, 3, 4]), "index", _WINDOW_DISTANCES, [-1, 0, 1],
                                      by=None)
    expected = np.array([[0.125, 0.125, 0.375], [0, 1, 1], [0, 0, 0]])  # transitions x window lags
    np.testing.assert_allclose(window["rank"].values, expected.mean(axis=0))
    assert window["n"].values.tolist() == [3, 3, 3]


def test_rank_distance_window_exclude_prev():
    """psifr tests/test_distance_stats.py::test_rank_distance_window_exclude_prev"""
    table = _by_position([4, 2, 1, 7, 5, 6, 8])
    window = cmr.distance_rank_window(table, "index", _WINDOW_DISTANCES, [-1, 0, 1], by=None)
    np.testing.assert_allclose(window["rank"].values, np.mean([[0.125, 0.125, 0.375], [0, 1, 1], [1, 1, 0]], axis=0))
    window = cmr.distance_rank_window(table, "index", _WINDOW_DISTANCES, [-1, 0, 1], by=None,
                                      exclude_prev_window=True)
    np.testing.assert_allclose(window["rank"].values, np.mean([[0.125, 0.125, 0.375], [0, 1, 1]], axis=0))
    assert window["n"].values.tolist() == [2, 2, 2]


# --- psifr tests/test_output_stats.py --------------------------------------------------------


def test_count_output():
    """psifr tests/test_output_stats.py::test_count_output (rows output position, columns serial position)"""
    items = [["1", "2", "3", "4"]] * 2
    nth = cmr.pnr(_table(items, [["4", "3"], ["4", "1", "2", "3"]]), by=None)
    assert nth["actual"].values.tolist() == [[0, 0, 0, 2], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    assert nth["possible"].values.tolist() == [[2, 2, 2, 2], [2, 2, 2, 0], [0, 1, 1, 0], [0, 0, 1, 0]]


# --- psifr tests/test_maskers.py: the masker steps, as the counts they produce ------------------

_MASK_OUTPUTS = [1, 3, 4, 8, 5, 4, 7, 6]
_MASK_CATEGORY = [1, 1, 1, 1, 2, 2, 2, 2]


def _lag_counts_of(steps, n_items):
    """Lag counts from psifr's expected masker steps (previous, current, possible positions)."""
    actual, possible = np.zeros(2 * n_items - 1, int), np.zeros(2 * n_items - 1, int)
    for prev, curr, pool in steps:
        actual[curr - prev + n_items - 1] += 1
        for p in pool:
            possible[p - prev + n_items - 1] += 1
    return actual.tolist(), possible.tolist()


def test_output():
    """psifr tests/test_maskers.py::test_output (each output's recalled and available positions, as PNR counts)"""
    steps = [(1, [1, 2, 3, 4, 5, 6, 7, 8]), (3, [2, 3, 4, 5, 6, 7, 8]), (4, [2, 4, 5, 6, 7, 8]),
             (8, [2, 5, 6, 7, 8]), (5, [2, 5, 6, 7]), (7, [2, 6, 7]), (6, [2, 6])]
    nth = cmr.pnr(_positions(8, _MASK_OUTPUTS), by=None)
    actual, possible = np.zeros((8, 8), int), np.zeros((8, 8), int)
    for output, (recalled, pool) in enumerate(steps):
        actual[output, recalled - 1] = 1
        possible[output, np.array(pool) - 1] = 1
    assert np.array_equal(nth["actual"].values, actual)  # the repeat of 4 takes no output (psifr's valid recalls)
    assert np.array_equal(nth["possible"].values, possible)


def test_position():
    """psifr tests/test_maskers.py::test_position"""
    steps = [(1, 3, [2, 3, 4, 5, 6, 7, 8]), (3, 4, [2, 4, 5, 6, 7, 8]), (4, 8, [2, 5, 6, 7, 8]),
             (8, 5, [2, 5, 6, 7]), (7, 6, [2, 6])]
    assert _counts(cmr.lag_crp(_positions(8, _MASK_OUTPUTS), by=None)) == _lag_counts_of(steps, 8)


def test_category():
    """psifr tests/test_maskers.py::test_category (same-category steps and steps where one was possible)"""
    steps = [(1, 1, [1, 1, 1, 2, 2, 2, 2]), (1, 1, [1, 1, 2, 2, 2, 2]), (1, 2, [1, 2, 2, 2, 2]),
             (2, 2, [1, 2, 2, 2]), (2, 2, [1, 2])]
    crp = cmr.category_crp(_positions(8, _MASK_OUTPUTS, category=_MASK_CATEGORY), category_key="category", by=None)
    assert int(crp["actual"]) == sum(prev == curr for prev, curr, _ in steps)
    assert int(crp["possible"]) == sum(prev in pool for prev, _, pool in steps)


def test_position_cond_category():
    """psifr tests/test_maskers.py::test_position_cond_category"""
    steps = [(1, 3, [2, 3, 4]), (3, 4, [2, 4]), (8, 5, [5, 6, 7]), (7, 6, [6])]
    crp = cmr.lag_crp(_positions(8, _MASK_OUTPUTS, category=_MASK_CATEGORY), by=None, test_key="category",
                      test=_same)
    assert _counts(crp) == _lag_counts_of(steps, 8)


def test_category_cond_position():
    """psifr tests/test_maskers.py::test_category_cond_position (a test on the serial position: lag under 4)"""
    steps = [(1, 1, [1, 1, 1]), (1, 1, [1, 1, 2, 2]), (2, 2, [2, 2, 2]), (2, 2, [2])]
    crp = cmr.category_crp(_positions(8, _MASK_OUTPUTS, category=_MASK_CATEGORY), category_key="category", by=None,
                           test_key="input", test=lambda x, y: np.abs(x - y) < 4)
    assert int(crp["actual"]) == sum(prev == curr for prev, curr, _ in steps)
    assert int(crp["possible"]) == sum(prev in pool for prev, _, pool in steps)


def _random_distances(n):
    """Symmetric distances without ties, so every rank is exact."""
    upper = np.triu(np.random.default_rng(11).permutation(n * n).reshape(n, n).astype(float) + 1, 1)
    return upper + upper.T


def _rank(distances, prev, curr, pool):
    """psifr's ``1 - percentile_rank(distance to curr, distances to pool)``, ties at their average rank."""
    actual, possible = distances[prev - 1, curr - 1], distances[prev - 1, np.asarray(pool) - 1]
    return 1 - ((possible < actual).sum() + ((possible == actual).sum() - 1) / 2) / (len(possible) - 1)


def test_sequences_position():
    """psifr tests/test_maskers.py::test_sequences_position (the sequences, as shifted distance ranks)"""
    prev = [[1, 3], [3, 4], [4, 8]]
    curr = [[3, 4], [4, 8], [8, 5]]
    poss = [[[2, 3, 4, 5, 6, 7, 8], [2, 4, 5, 6, 7, 8]], [[2, 4, 5, 6, 7, 8], [2, 5, 6, 7, 8]],
            [[2, 5, 6, 7, 8], [2, 5, 6, 7]]]
    distances = _random_distances(8)
    # psifr ranks the last "to" item among the last possible ones, from each earlier "from" item
    expected = [[_rank(distances, p[-shift], c[-1], q[-1]) for shift in (2, 1)] for p, c, q in zip(prev, curr, poss)]
    shifted = cmr.distance_rank_shifted(_positions(8, _MASK_OUTPUTS, index=range(8)), "index", distances, 2, by=None)
    np.testing.assert_allclose(shifted["rank"].values, np.mean(expected, axis=0), rtol=0, atol=1e-12)
    assert shifted["n_transitions"].values.tolist() == [3, 3]


_WINDOW_OUTPUTS = [16, 15, 9, 1, 4, 8, 13, 14, 4, 7, 5]


def _window_ranks(prev, curr, poss, **options):
    """Our window ranks beside psifr's, computed from its expected masker steps."""
    distances = _random_distances(16)
    expected = [[_rank(distances, p, c, q) for p in ps] for ps, c, q in zip(prev, curr, poss)]
    table = _positions(16, _WINDOW_OUTPUTS, index=range(16), category=[1] * 8 + [2] * 8)
    window = cmr.distance_rank_window(table, "index", distances, [-1, 0, 1], by=None, **options)
    np.testing.assert_allclose(window["rank"].values, np.mean(expected, axis=0), rtol=0, atol=1e-12)
    assert window["n"].values.tolist() == [len(curr)] * 3


def test_windows_position():
    """psifr tests/test_maskers.py::test_windows_position (the window steps, as distance ranks)"""
    prev = [[14, 15, 16], [8, 9, 10], [3, 4, 5], [7, 8, 9], [6, 7, 8]]
    curr = [9, 1, 8, 13, 5]
    poss = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14],
            [2, 6, 7, 8, 10, 11, 12, 13, 14], [2, 3, 5, 6, 10, 11, 12, 13, 14], [2, 3, 5, 10, 11, 12]]
    _window_ranks(prev, curr, poss)


def test_windows_position_exclude_prev():
    """psifr tests/test_maskers.py::test_windows_position_exclude_prev"""
    prev = [[8, 9, 10], [3, 4, 5], [7, 8, 9], [6, 7, 8]]
    curr = [1, 8, 13, 5]
    poss = [[1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14], [2, 6, 7, 8, 10, 11, 12, 13, 14],
            [2, 3, 5, 6, 10, 11, 12, 13, 14], [2, 3, 5, 10, 11, 12]]
    _window_ranks(prev, curr, poss, exclude_prev_window=True)


def test_windows_position_cond_category():
    """psifr tests/test_maskers.py::test_windows_position_cond_category"""
    prev = [[14, 15, 16], [3, 4, 5], [6, 7, 8]]
    curr = [9, 8, 5]
    poss = [[9, 10, 11, 12, 13], [2, 6, 7, 8], [2, 3, 5]]
    _window_ranks(prev, curr, poss, test_key="category", test=_same)


# --- psifr tests/test_fr.py ------------------------------------------------------------------


@pytest.fixture()
def raw():
    """psifr's raw fixture: two lists of three, an intrusion ('empty') and a repeat ('pillow')."""
    return pd.DataFrame({
        "subject": [1] * 12,
        "list": [1] * 6 + [2] * 6,
        "trial_type": ["study"] * 3 + ["recall"] * 3 + ["study"] * 3 + ["recall"] * 3,
        "position": [1, 2, 3] * 4,
        "item": ["absence", "hollow", "pupil", "hollow", "pupil", "empty",
                 "fountain", "piano", "pillow", "pillow", "fountain", "pillow"],
        "item_index": [0, 1, 2, 1, 2, np.nan, 3, 4, 5, 5, 3, 5],
        "task": [1, 2, 1, 2, 1, np.nan, 1, 2, 1, 1, 1, 1],
        "block": [1, 2, 2, 2, 2, np.nan, 1, 1, 2, 2, 1, 2],
    })


_DISTANCES = np.array([[0, 1, 2, 2, 2, 2], [1, 0, 1, 2, 2, 2], [2, 1, 0, 2, 2, 2], [2, 2, 2, 0, 2, 3],
                       [2, 2, 2, 2, 0, 2], [2, 2, 2, 3, 2, 0]], dtype=float)
_DISTANCES2 = np.array([[0, 1, 3, 3, 3, 3], [1, 0, 3, 3, 3, 3], [3, 3, 0, 2, 1, 2], [3, 3, 2, 0, 2, 2],
                        [3, 3, 1, 2, 0, 2], [3, 3, 2, 2, 2, 0]], dtype=float)


def test_merge(raw):
    """psifr tests/test_fr.py::test_merge (correct recall, forgotten item, intrusion, repeat)"""
    events = cmr.from_table(raw)
    # pupil recalled from input 3; piano (input 2) never; 'empty' an intrusion (-1); pillow again at output 3
    assert events["recalls"].values.tolist() == [[2, 3, -1], [3, 1, 3]]
    assert events["study_item"].values[1].tolist() == ["fountain", "piano", "pillow"]
    assert cmr.spc(events, by="trial")["actual"].values.tolist() == [[0, 1, 1], [1, 0, 1]]


def test_pli(raw):
    """psifr tests/test_fr.py::test_pli (a prior-list intrusion at list lag 1; a future-list one is extra-list)"""
    data = raw.copy()
    data.loc[3:5, "item"] = ["hollow", "pupil", "fountain"]
    data.loc[9:11, "item"] = ["pillow", "fountain", "pupil"]
    rates = cmr.intrusion_rates(data, by=None)
    assert (int(rates["n_prior_list"]), int(rates["n_extra_list"])) == (1, 1)
    # list lag 1 for pupil (psifr's prior_list 1); -1 marks the extra-list one (psifr's prior_list NaN)
    assert intrusion_list_lags(cmr.from_table(data)).tolist() == [[0, 0, -1], [0, 0, 1]]


def test_split_lists(raw):
    """psifr tests/test_fr.py::test_split_lists (recalled input positions; intrusions are -1 here, NaN in psifr)"""
    events = cmr.from_table(raw)
    assert events["recalls"].values[0].tolist() == [2, 3, -1]
    assert events["study_position"].values.tolist() == [1, 2, 3]


def test_spc(raw):
    """psifr tests/test_fr.py::test_spc"""
    assert cmr.spc(raw, by=None)["prob"].values.tolist() == [0.5, 0.5, 1]


def test_pnr(raw):
    """psifr tests/test_fr.py::test_pnr"""
    prob = cmr.pnr(raw, by=None)["prob"].values.ravel()
    np.testing.assert_array_equal(prob, [0, 0.5, 0.5, 0.5, 0, 1, np.nan, np.nan, np.nan])


def test_pli_list_lag():
    """psifr tests/test_fr.py::test_pli_list_lag"""
    study = [["tree", "cat"], ["absence", "hollow"], ["fountain", "piano"], ["pillow", "pupil"]] * 2
    recall = [["tree", "cat"], ["hollow", "absence"], ["fountain", "hollow"], ["absence", "piano", "cat"],
              ["tree", "cat"], ["absence", "hollow"], ["fountain", "piano"], ["pillow", "pupil"]]
    table = _table(study, recall, subjects=[1] * 4 + [2] * 4)
    expected = {1: ([2, 0], [2 / 3, 0], [0.5, np.nan]),
                2: ([2, 1, 0, 0], [1, 0.5, 0, 0], [0.5, 0.25, np.nan, np.nan]),
                3: ([1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1 / 3, 1 / 3, 1 / 3, np.nan, np.nan, np.nan])}
    for max_lag, (count, per_list, prob) in expected.items():
        stat = cmr.pli_list_lag(table, max_lag)
        assert stat["count"].values.ravel().tolist() == count
        np.testing.assert_allclose(stat["per_list"].values.ravel(), per_list, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(stat["prob"].values.ravel(), prob)


def test_lag_crp(raw):
    """psifr tests/test_fr.py::test_lag_crp"""
    crp = cmr.lag_crp(raw, by=None)
    assert crp["lag"].values.tolist() == [-2, -1, 0, 1, 2]
    assert _counts(crp) == ([1, 0, 0, 1, 0], [1, 2, 0, 1, 0])
    np.testing.assert_array_equal(crp["profile"].values, [1.0, 0.0, np.nan, 1.0, np.nan])


def test_lag_crp_query_input(raw):
    """psifr tests/test_fr.py::test_lag_crp_query_input"""
    crp = cmr.lag_crp(raw, by=None, item_query="input != 2")
    assert _counts(crp) == ([1, 0, 0, 0, 0], [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(crp["profile"].values, [1.0, np.nan, np.nan, np.nan, np.nan])


def test_lag_crp_query_output(raw):
    """psifr tests/test_fr.py::test_lag_crp_query_output"""
    crp = cmr.lag_crp(raw, by=None, item_query="output > 1 or not recall")
    assert _counts(crp) == ([0] * 5, [0] * 5)
    assert np.isnan(crp["profile"].values).all()


def test_lag_crp_block(raw):
    """psifr tests/test_fr.py::test_lag_crp_block"""
    crp = cmr.lag_crp(raw, by=None, lag_key="block", count_unique=True)
    assert crp["lag"].values.tolist() == [-1, 0, 1]
    assert _counts(crp) == ([1, 1, 0], [2, 1, 0])
    np.testing.assert_array_equal(crp["profile"].values, [0.5, 1.0, np.nan])


def test_lag_crp_cat(raw):
    """psifr tests/test_fr.py::test_lag_crp_cat"""
    crp = cmr.lag_crp(raw, by=None, test_key="task", test=_same)
    assert _counts(crp) == ([1, 0, 0, 0, 0], [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(crp["profile"].values, [1.0, np.nan, np.nan, np.nan, np.nan])


def test_lag_crp_compound():
    """psifr tests/test_fr.py::test_lag_crp_compound"""
    study = [["absence", "hollow", "pupil", "fountain"], ["tree", "cat", "house", "dog"]]
    recall = [["fountain", "hollow", "absence"], ["mouse", "cat", "tree", "house", "dog"]]
    crp = cmr.lag_crp_compound(_table(study, recall), by=None)
    actual, possible = np.zeros((7, 7), int), np.zeros((7, 7), int)
    actual[1, 2] = actual[2, 5] = actual[5, 4] = 1  # -2 then -1; -1 then +2; +2 then +1
    possible[1, [2, 4]] = possible[2, [5, 6]] = possible[5, 4] = 1
    assert np.array_equal(crp["actual"].values, actual)
    assert np.array_equal(crp["possible"].values, possible)


def test_input_crp():
    """psifr tests/test_fr.py::test_input_crp

    psifr's flat array, read with rows = the item recalled first (4 -> 1, 1 -> 2, 2 -> 3), as
    ``previous`` here. psifr's own table labels it transposed (its ``previous=2, current=1``
    holds 1 -> 2) and sorts by ``current``, so its flat array is this matrix all the same.
    """
    crp = cmr.input_crp(_table([["absence", "hollow", "pupil", "fountain"]],
                               [["fountain", "absence", "hollow", "pupil"]]), by=None)
    assert crp["actual"].values.tolist() == [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert crp["possible"].values.tolist() == [[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 0]]


def test_distance_crp(raw):
    """psifr tests/test_fr.py::test_distance_crp"""
    crp = cmr.distance_crp(raw, "item_index", _DISTANCES2, [0.5, 1.5, 2.5, 3.5], by=None)
    assert _counts(crp) == ([0, 1, 1], [1, 2, 1])
    np.testing.assert_array_equal(crp["prob"].values, [0, 0.5, 1])


def test_distance_crp_unique(raw):
    """psifr tests/test_fr.py::test_distance_crp_unique"""
    crp = cmr.distance_crp(raw, "item_index", _DISTANCES2, [0.5, 1.5, 2.5, 3.5], count_unique=True, by=None)
    assert _counts(crp) == ([0, 1, 1], [1, 1, 1])
    np.testing.assert_array_equal(crp["prob"].values, [0, 1, 1])


def test_category_crp(raw):
    """psifr tests/test_fr.py::test_category_crp"""
    crp = cmr.category_crp(raw, category_key="task")
    assert (float(crp["prob"][0]), int(crp["actual"][0]), int(crp["possible"][0])) == (1.0, 1, 1)


def test_category_clustering():
    """psifr tests/test_fr.py::test_category_clustering"""
    clustering = cmr.category_clustering(_recalled_categories(["aaabbbcccddd", "aabbcdcd"], [list("abcd") * 4] * 2))
    np.testing.assert_allclose(clustering["arc"].values[0], 0.667, rtol=0.011)
    np.testing.assert_allclose(clustering["lbc"].values[0], 3.2, rtol=0.011)


def test_lag_rank(raw):
    """psifr tests/test_fr.py::test_lag_rank"""
    assert cmr.lag_rank(raw)["rank"].values.tolist() == [0.25]


def test_distance_rank(raw):
    """psifr tests/test_fr.py::test_distance_rank"""
    assert cmr.distance_rank(raw, "item_index", _DISTANCES)["rank"].values.tolist() == [0.25]


def test_distance_rank_shifted():
    """psifr tests/test_fr.py::test_distance_rank_shifted"""
    distances = _BLOCKS.copy()
    distances[3, 1] = distances[1, 3] = 4
    stat = cmr.distance_rank_shifted(_indexed([4, 3, 1, 7, 3, 0, 6, 2]), "index", distances, 2)
    np.testing.assert_allclose(stat["rank"].values.ravel(), [0.683333, 0.416667], atol=1e-6)


def test_distance_rank_window():
    """psifr tests/test_fr.py::test_distance_rank_window (its three cases and the asymmetry)"""
    distances = _WINDOW_DISTANCES.copy()
    distances[4:6, 6:8] = distances[6:8, 4:6] = 1
    stat = cmr.distance_rank_window(_by_position([4, 2, 1, 7, 5, 3, 4], index=range(8)), "index", distances,
                                    [-1, 0, 1])
    np.testing.assert_allclose(stat["rank"].values.ravel(),
                               np.mean([[0.875, 0.875, 0.375], [0, 1, 1], [0, 0, 0]], axis=0))
    # psifr's pool_index case: the items' rows in the distance matrix are 4 5 6 7 0 1 2 3
    table = _by_position([4, 2, 1, 7, 5, 6, 8])
    stat = cmr.distance_rank_window(table, "index", _WINDOW_DISTANCES, [-1, 0, 1])
    np.testing.assert_allclose(stat["rank"].values.ravel(),
                               np.mean([[0.125, 0.125, 0.375], [0, 1, 1], [1, 1, 0]], axis=0))
    stat = cmr.distance_rank_window(table, "index", _WINDOW_DISTANCES, [-1, 0, 1], exclude_prev_window=True)
    np.testing.assert_allclose(stat["rank"].values.ravel(), np.mean([[0.125, 0.125, 0.375], [0, 1, 1]], axis=0))
    asym = cmr.distance_rank_window_asym(table, "index", _WINDOW_DISTANCES)
    np.testing.assert_allclose(asym["asym"].values.ravel(), [np.mean([0.25, 1, -1])])
