"""psifr's analyses beyond the plain lag-CRP: exact against psifr, and psifr's own hand-worked cases.

Each psifr result is computed once per module (psifr takes seconds per analysis); the fast
tests use a few subjects of each bundled data set, the slow test every subject.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import RecallDataError
from tests.conftest import require



def _same(a, b):
    return a == b


def _psifr(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # psifr's nanmean over subjects without transitions warns
        return call(*args, **kwargs)


def _morton(n_subjects):
    fr = require("psifr.fr")
    raw = fr.sample_data("Morton2013")
    if n_subjects:
        raw = raw[raw["subject"].isin(np.unique(raw["subject"])[:n_subjects])]
    raw = raw.assign(item_index=raw["item_number"] - 1,
                     block=np.where(raw["trial_type"] == "study", (raw["position"] - 1) // 3 + 1, np.nan))
    merged = fr.merge_free_recall(raw, study_keys=["category", "item_index", "block"])
    return raw, merged, fr.sample_distances("Morton2013")[1]


@pytest.fixture(scope="module")
def morton():
    """A few subjects of psifr's Morton2013 (categories, distances, sessions): raw, merged, distances."""
    return _morton(4)


def _to_array(frame, index, column):
    return frame.set_index(index)[column].to_xarray().values


def _equal_counts(ours, ref, index, transpose=None):
    actual, possible = (_to_array(ref, index, c).astype(np.int64) for c in ("actual", "possible"))
    if transpose:
        actual, possible = actual.transpose(transpose), possible.transpose(transpose)
    assert np.array_equal(ours["actual"].values, actual)
    assert np.array_equal(ours["possible"].values, possible)


def _close(ours, ref, atol=1e-12):
    np.testing.assert_allclose(ours, ref, atol=atol, rtol=0, equal_nan=True)


# --- every analysis against psifr on Morton2013 -------------------------------------------


def check_masked_lag_crps(raw, merged):
    fr = require("psifr.fr")
    events = cmr.from_table(raw)
    for options in ({"test_key": "category", "test": _same},
                    {"item_query": "input <= 12 or category == 'obj'"},
                    {"lag_key": "block"}, {"lag_key": "block", "count_unique": True}):
        ours = cmr.lag_crp(events, **options)
        ref = _psifr(fr.lag_crp, merged, **options)
        ours = ours.sel(lag=np.unique(ref["lag"]).astype(np.int64))
        _equal_counts(ours, ref, ["subject", "lag"])
        _close(ours["profile"].values, _to_array(ref, ["subject", "lag"], "prob"))
    for options in ({"test_key": "category", "test": _same}, {"item_query": "input > 6"}):
        _equal_counts(cmr.lag_crp_compound(events, **options), _psifr(fr.lag_crp_compound, merged, **options),
                      ["subject", "previous", "current"])
    query = "input <= 12 or category == 'obj'"
    for options in ({"test_key": "category", "test": _same}, {"item_query": query}):
        ranks = _psifr(fr.lag_rank, merged, **options)["rank"].to_numpy()
        _close(cmr.lag_rank(events, **options)["rank"].values, ranks)
    _equal_counts(cmr.pnr(events, item_query=query), _psifr(fr.pnr, merged, item_query=query),
                  ["subject", "output", "input"])


def check_category_and_input(raw, merged):
    fr = require("psifr.fr")
    events = cmr.from_table(raw)
    ours = cmr.category_crp(events, category_key="category")
    ref = _psifr(fr.category_crp, merged, "category")
    _equal_counts(ours, ref, ["subject"])
    _close(ours["prob"].values, ref["prob"].to_numpy())
    ours = cmr.category_crp(events, category_key="category", item_query="input > 4", test_key="input", test=lambda a, b: b > a)
    ref = _psifr(fr.category_crp, merged, "category", item_query="input > 4", test_key="input", test=lambda a, b: b > a)
    _equal_counts(ours, ref, ["subject"])
    clustering = cmr.category_clustering(events, category_key="category")
    ref = _psifr(fr.category_clustering, merged, "category")
    _close(clustering["lbc"].values, ref["lbc"].to_numpy())
    _close(clustering["arc"].values, ref["arc"].to_numpy())
    # psifr 0.10 labels its input-CRP table transposed (row previous=i, current=j counts j -> i)
    _equal_counts(cmr.input_crp(events), _psifr(fr.input_crp, merged), ["subject", "previous", "current"],
                  transpose=(0, 2, 1))


def check_distances(raw, merged, distances):
    fr = require("psifr.fr")
    events = cmr.from_table(raw)
    upper = distances[np.triu_indices_from(distances, 1)]
    edges = np.percentile(upper, np.linspace(1, 99, 10))
    for count_unique in (False, True):
        ours = cmr.distance_crp(events, "item_index", distances, edges, count_unique=count_unique)
        ref = _psifr(fr.distance_crp, merged, "item_index", distances, edges, count_unique=count_unique)
        _equal_counts(ours, ref, ["subject", "center"])
        _close(ours["prob"].values, _to_array(ref, ["subject", "center"], "prob"))
    _close(cmr.distance_rank(events, "item_index", distances)["rank"].values,
           _psifr(fr.distance_rank, merged, "item_index", distances)["rank"].to_numpy())
    ours = cmr.distance_rank_shifted(events, "item_index", distances, 3)
    ref = _psifr(fr.distance_rank_shifted, merged, "item_index", distances, 3)
    _close(ours["rank"].values, _to_array(ref, ["subject", "shift"], "rank"))
    ours = cmr.distance_rank_window(events, "item_index", distances, [-1, 0, 1])
    ref = _psifr(fr.distance_rank_window, merged, "item_index", distances, [-1, 0, 1])
    _close(ours["rank"].values, _to_array(ref, ["subject", "lag"], "rank"))
    assert np.array_equal(ours["n"].values, _to_array(ref, ["subject", "lag"], "n"))
    ours = cmr.distance_rank_window_asym(events, "item_index", distances, exclude_prev_window=True)
    ref = _psifr(fr.distance_rank_window_asym, merged, "item_index", distances, exclude_prev_window=True)
    _close(ours["asym"].values, ref["asym"].to_numpy())
    assert np.array_equal(ours["n"].values, ref["n"].to_numpy())


def check_peers(raw, merged):
    fr = require("psifr.fr")
    events = cmr.from_table(raw)
    for options in ({"item_query": "input <= 8"}, {"test_key": "input", "test": lambda a, b: (a <= 8) == (b <= 8)}):
        ours = cmr.lag_crp(events, **options)
        _equal_counts(ours, _psifr(fr.lag_crp, merged, **options), ["subject", "lag"])
    _equal_counts(cmr.input_crp(events), _psifr(fr.input_crp, merged), ["subject", "previous", "current"],
                  transpose=(0, 2, 1))
    _equal_counts(cmr.pnr(events, item_query="input > 4"), _psifr(fr.pnr, merged, item_query="input > 4"),
                  ["subject", "output", "input"])


def test_masked_lag_crps_equal_psifr(morton):
    check_masked_lag_crps(*morton[:2])


def test_category_and_input_crps_equal_psifr(morton):
    check_category_and_input(*morton[:2])


def test_distance_analyses_equal_psifr(morton):
    check_distances(*morton)


def test_peers_masks_equal_psifr():
    fr = require("psifr.fr")
    raw = fr.sample_data("peers_notask")
    raw = raw[raw["subject"].isin(np.unique(raw["subject"])[:6])]
    check_peers(raw, fr.merge_free_recall(raw))


@pytest.mark.slow
def test_every_analysis_equals_psifr_on_the_full_bundled_data():
    fr = require("psifr.fr")
    raw, merged, distances = _morton(None)
    check_masked_lag_crps(raw, merged)
    check_category_and_input(raw, merged)
    check_distances(raw, merged, distances)
    peers = fr.sample_data("peers_notask")
    check_peers(peers, fr.merge_free_recall(peers))


# --- psifr's hand-worked cases (its tests and docstrings) ---------------------------------


def _one_list(study, recalled, **columns):
    rows = [(1, 1, "study", i + 1, str(item)) for i, item in enumerate(study)]
    rows += [(1, 1, "recall", i + 1, str(item)) for i, item in enumerate(recalled)]
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])
    for name, values in columns.items():
        table[name] = list(values) + [np.nan] * len(recalled)
    return table


def test_psifr_lag_count_with_a_category_test():
    # psifr tests/test_lag_crp.py: 8 items in two categories, recalled 1 3 4 8 5 4 7 6
    table = _one_list(range(1, 9), [1, 3, 4, 8, 5, 4, 7, 6], category=[1, 1, 1, 1, 2, 2, 2, 2])
    plain = cmr.lag_crp(table, by=None)
    assert plain["actual"].values.tolist() == [0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0]
    assert plain["possible"].values.tolist() == [0, 1, 1, 0, 1, 2, 3, 0, 3, 3, 3, 3, 2, 1, 1]
    within = cmr.lag_crp(table, by=None, test_key="category", test=_same)
    assert within["actual"].values.tolist() == [0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    assert within["possible"].values.tolist() == [0, 0, 0, 0, 1, 1, 3, 0, 2, 1, 1, 0, 0, 0, 0]


def test_psifr_distance_docstring_examples():
    # psifr stats.count_distance / rank_distance / rank_distance_shifted docstrings
    distances = np.array([[0, 1, 2, 2, 2], [1, 0, 2, 2, 2], [2, 2, 0, 3, 3], [2, 2, 3, 0, 2], [2, 2, 3, 2, 0]], float)
    four = _one_list(range(1, 5), [4, 2, 3, 1], index=[0, 1, 2, 3])
    crp = cmr.distance_crp(four, "index", distances[:4, :4], [0.5, 1.5, 2.5, 3.5], by=None)
    assert crp["actual"].values.tolist() == [0, 3, 0] and crp["possible"].values.tolist() == [1, 4, 1]
    rank = cmr.distance_rank(four, "index", distances[:4, :4], by=None)
    assert float(rank["rank"]) == pytest.approx((0.75 + 0.0) / 2) and int(rank["n_transitions"]) == 2
    five = _one_list(range(1, 6), [4, 2, 3, 1], index=[0, 1, 2, 3, 4])
    shifted = cmr.distance_rank_shifted(five, "index", distances, 2, by=None)
    assert shifted["rank"].values.tolist() == [0.5, 0.625]  # psifr rows [0, 0.25] and [1, 1], averaged
    assert shifted["shift"].values.tolist() == [-2, -1]


def test_psifr_input_crp_docstring_example_with_previous_first():
    table = _one_list(range(1, 5), [4, 2, 3, 1])
    crp = cmr.input_crp(table, by=None)
    made = {(p, c) for p, c in zip(*np.nonzero(crp["actual"].values))}
    assert made == {(3, 1), (1, 2), (2, 0)}  # 4 -> 2, 2 -> 3, 3 -> 1 (0-based)
    assert crp["possible"].values[3].tolist() == [1, 1, 1, 0]


# --- lab exports ----------------------------------------------------------------------------


def _lab_export(raw):
    """Morton2013 as a lab might export it: lists numbered again per session, distractor rows,
    recalls typed in lower case with a trailing space."""
    messy = raw.copy()
    first = messy.groupby(["subject", "session"])["list"].transform("min")
    messy["list"] = messy["list"] - first + 1
    recall = messy["trial_type"] == "recall"
    messy.loc[recall, "item"] = messy.loc[recall, "item"].str.lower() + " "
    distractor = messy.drop_duplicates(["subject", "session", "list"]).assign(trial_type="distractor", item="7+4",
                                                                              position=1)
    return pd.concat([distractor, messy], ignore_index=True)


def test_lab_export_with_options_equals_psifr_on_the_clean_table(morton):
    fr = require("psifr.fr")
    raw, merged, _ = morton
    messy = _lab_export(raw)
    with pytest.raises(RecallDataError, match=r"normalize_items=True.*--normalize-items"):
        cmr.from_table(messy, list_keys=["session"])
    with pytest.raises(RecallDataError, match=r"duplicate study position.*list_keys"):
        cmr.from_table(messy, normalize_items=True)
    events = cmr.from_table(messy, list_keys=["session"], normalize_items=True)
    assert events.attrs["ignored_trial_types"] == '{"distractor": %d}' % (4 * 48)
    assert events["session"].dims == ("trial",)
    ours = cmr.lag_crp(events)
    _equal_counts(ours, _psifr(fr.lag_crp, merged), ["subject", "lag"])
    _equal_counts(cmr.category_crp(events), _psifr(fr.category_crp, merged, "category"), ["subject"])
    # psifr's merged (scored) table reads as its raw one
    again = cmr.lag_crp(cmr.from_table(merged))
    assert np.array_equal(again["actual"].values, ours["actual"].values)
    assert np.array_equal(again["possible"].values, ours["possible"].values)


# --- intrusions -------------------------------------------------------------------------------


def _pli_equal(ours, ref):
    ref = ref.set_index(["subject", "list_lag"])
    assert np.array_equal(ours["count"].values, ref["count"].to_xarray().values)
    _close(ours["per_list"].values, ref["per_list"].to_xarray().values)
    _close(ours["prob"].values, ref["prob"].to_xarray().values)


def _once(merged):
    """psifr's merged table with each intrusion once, at its most recent earlier list."""
    return merged.sort_values("prior_list", na_position="first").drop_duplicates(
        ["subject", "list", "item", "output", "input"], keep="last").sort_values(["subject", "list", "input"])


def test_pli_list_lag_equals_psifr_counting_each_intrusion_once(morton):
    fr = require("psifr.fr")
    peers = fr.sample_data("peers_notask")
    peers = peers[peers["subject"].isin(np.unique(peers["subject"])[:20])]
    _pli_equal(cmr.pli_list_lag(peers, 3), _psifr(fr.pli_list_lag, _once(fr.merge_free_recall(peers)), 3))
    raw = morton[0]
    merged = fr.merge_free_recall(raw)
    ours = cmr.pli_list_lag(raw, 3)
    _pli_equal(ours, _psifr(fr.pli_list_lag, _once(merged), 3))
    # psifr itself writes an intrusion once per list that studied the item and counts every copy
    repeated = _psifr(fr.pli_list_lag, merged, 3).set_index(["subject", "list_lag"])["prob"].to_xarray().values
    assert not np.allclose(repeated, ours["prob"].values, rtol=0, atol=1e-12, equal_nan=True)


def test_intrusion_rates_hand_worked():
    table = pd.DataFrame(
        [(1, 1, "study", 1, "a"), (1, 1, "study", 2, "b"), (1, 1, "recall", 1, "b"), (1, 1, "recall", 2, "z"),
         (1, 2, "study", 1, "c"), (1, 2, "study", 2, "d"), (1, 2, "recall", 1, "a"), (1, 2, "recall", 2, "d"),
         (1, 2, "recall", 3, "d"), (1, 2, "recall", 4, "q")],
        columns=["subject", "list", "trial_type", "position", "item"])
    rates = cmr.intrusion_rates(table, by=None)
    counts = {name: int(rates[name]) for name in ("n_lists", "n_recalls", "n_correct", "n_repeats", "n_prior_list",
                                                  "n_extra_list")}
    assert counts == {"n_lists": 2, "n_recalls": 6, "n_correct": 2, "n_repeats": 1, "n_prior_list": 1,
                      "n_extra_list": 2}
    assert float(rates["intrusion_share"]) == 0.5
    lags = cmr.pli_list_lag(table, 1, by=None)
    assert lags["count"].values.tolist() == [1] and lags["prob"].values.tolist() == [0.5]


# --- beyond psifr: latencies and stopping -------------------------------------------------------


def _timed():
    rows = [(1, 1, "study", 1, "a", np.nan), (1, 1, "study", 2, "b", np.nan), (1, 1, "study", 3, "c", np.nan),
            (1, 1, "recall", 1, "b", 1.0), (1, 1, "recall", 2, "c", 2.5), (1, 1, "recall", 3, "z", 3.0),
            (1, 1, "recall", 4, "a", 4.0), (1, 2, "study", 1, "d", np.nan), (1, 2, "study", 2, "e", np.nan),
            (1, 2, "study", 3, "f", np.nan)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "rt"])


def test_latencies_and_stopping_hand_worked():
    table = _timed()
    # only b -> c joins two correct first recalls: 1.5 s at output 2, lag +1
    np.testing.assert_array_equal(cmr.irt(table, by=None)["irt"].values, [np.nan, 1.5, np.nan, np.nan])
    crl = cmr.lag_crl(table, by=None)
    assert crl["crl"].sel(lag=1).item() == 1.5 and int(crl["n_transitions"].sum()) == 1
    stop = cmr.stop_probability(table, by=None)
    assert stop["actual"].values.tolist() == [1, 0, 0, 0, 1]  # list 2 stops at once, list 1 after 4 recalls
    assert stop["possible"].values.tolist() == [2, 1, 1, 1, 1]
    with pytest.raises(cmr.errors.ParameterError, match="no numeric recall-time column 'onset'.*rt"):
        cmr.irt(table, time_key="onset")


def test_run_analyses_in_one_dataset_and_table(morton):
    from cmr.analysis_set import analyses_table, run_analyses

    raw, _, distances = morton
    combined = run_analyses(raw, analyses="lag_crp,category_crp,distance_rank", distances=distances, index_key="item_index")
    direct = cmr.category_crp(raw)
    assert np.array_equal(combined["category_crp_actual"].values, direct["actual"].values)
    assert combined.sizes["lag_crp_lag"] == 47
    table = analyses_table(raw, analyses=["category_crp", "pli_list_lag"])
    assert set(table["analysis"]) == {"category_crp", "pli_list_lag"}
    assert str(table["count"].dtype) == "Int64"
    with pytest.raises(cmr.errors.ParameterError, match="distance_crp needs an item distance matrix"):
        run_analyses(raw, analyses=["distance_crp"])


def test_cli_recall_analyses_reads_a_lab_export(tmp_path, morton):
    from icl_cmr.analyses.cli import main

    raw = morton[0]
    path = tmp_path / "lab.csv"
    _lab_export(raw).to_csv(path, index=False)
    assert main(["recall-analyses", str(path), "-o", str(tmp_path / "x.csv"), "--analyses", "lag_crp"]) == 1
    out = tmp_path / "lab.nc"
    assert main(["recall-analyses", str(path), "--list-keys", "session", "--normalize-items", "--analyses",
                 "lag_crp,category_crp,stop_probability", "-o", str(out)]) == 0
    result = cmr.load_dataset(out)
    assert np.array_equal(result["category_crp_actual"].values, cmr.category_crp(raw)["actual"].values)


def test_docs_page_examples_run(capsys):
    import re

    from tests.conftest import REPO_ROOT

    require("psifr")
    text = (REPO_ROOT / "docs" / "recall-analyses.md").read_text()
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        exec(compile(block, "recall-analyses.md", "exec"), namespace)  # noqa: S102 - our own documentation
    printed = [float(line) for line in capsys.readouterr().out.split()]
    assert printed[0] == pytest.approx(0.78, abs=0.005) and printed[1] == pytest.approx(0.63, abs=0.005)


def test_every_figure_draws(morton):
    import io

    from icl_cmr.analyses import plots

    raw, _, distances = morton
    events = cmr.from_table(raw)
    stats = {
        "distance_crp": cmr.distance_crp(events, "item_index", distances, np.linspace(0.3, 1.0, 8)),
        "distance_rank_shifted": cmr.distance_rank_shifted(events, "item_index", distances, 3),
        "distance_rank_window": cmr.distance_rank_window(events, "item_index", distances, [-1, 1]),
        "pli_list_lag": cmr.pli_list_lag(events, 3),
        "stop_probability": cmr.stop_probability(events, by=None),
        "category_crp": {"by subject": cmr.category_crp(events), "by list": cmr.category_crp(events, by="trial")},
        "category_clustering": cmr.category_clustering(events),
        "distance_rank": cmr.distance_rank(events, "item_index", distances),
        "input_crp": cmr.input_crp(events),
        "irt": cmr.irt(_timed(), by=None),
        "lag_crl": cmr.lag_crl(_timed()),
    }
    for name, stat in stats.items():
        fig = getattr(plots, name)(stat)
        fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(cmr.errors.SchemaError, match="expected stat_kind 'distance_crp'"):
        plots.distance_crp(stats["distance_rank"])


def test_pnr_with_a_test_of_single_items_where_psifr_fails():
    fr = require("psifr.fr")
    table = _one_list(["a", "b", "c"], ["c", "b", "a"], category=["x", "y", "x"])
    with pytest.raises(IndexError):  # psifr 0.10 indexes the pool after removing the recalled item
        fr.pnr(fr.merge_free_recall(table, study_keys=["category"]), test_key="category", test=lambda v: v == "x")
    nth = cmr.pnr(table, by=None, test_key="category", test=lambda v: v == "x")
    # c at output 1 (a and c possible), b fails the test but takes output 2, a at output 3
    assert nth["actual"].values.tolist() == [[0, 0, 1], [0, 0, 0], [1, 0, 0]]
    assert nth["possible"].values.tolist() == [[1, 0, 1], [0, 0, 0], [1, 0, 0]]


def test_recall_matrix_files_through_the_loader_and_the_cli(tmp_path, capsys):
    from icl_cmr.adapters.recall_data import load_recall_data
    from icl_cmr.analyses.cli import main

    np.save(tmp_path / "ok.npy", np.array([[2, 1, 3, 0], [1, -1, 0, 0]]))
    events = load_recall_data(tmp_path / "ok.npy", list_length=3)
    assert events["recalls"].values.tolist() == [[2, 1, 3], [1, -1, 0]]
    np.savez(tmp_path / "ok.npz", recalls=np.array([[2, 1, 3]]), list_length=np.array([3]))
    assert load_recall_data(tmp_path / "ok.npz").sizes["trial"] == 1
    with pytest.raises(RecallDataError, match="give the list length"):
        load_recall_data(tmp_path / "ok.npy")
    np.save(tmp_path / "zero.npy", np.array([[0, 1, 2], [1, 0, 2]]))
    assert main(["lag-crp", str(tmp_path / "zero.npy"), "--list-length", "3", "-o", str(tmp_path / "x.csv")]) == 1
    assert "positions look 0-based: add 1" in capsys.readouterr().err
    assert main(["lag-crp", str(tmp_path / "ok.npy"), "--list-length", "3", "-o", str(tmp_path / "x.csv")]) == 0


def test_spc_with_masks_hand_worked():
    table = _one_list(["a", "b", "c", "d"], ["c", "x", "a", "c"], category=["x", "y", "x", "y"])
    plain = cmr.spc(table, by=None)
    assert plain["actual"].values.tolist() == [1, 0, 1, 0] and plain["possible"].values.tolist() == [1, 1, 1, 1]
    masked = cmr.spc(table, by=None, item_query="input > 1", test_key="category", test=lambda v: v == "x")
    assert masked["actual"].values.tolist() == [0, 0, 1, 0] and masked["possible"].values.tolist() == [0, 0, 1, 0]
    same = cmr.spc(table, by=None, item_query="input > 0")
    assert same["actual"].values.tolist() == plain["actual"].values.tolist()


def test_lag_key_labels_not_starting_at_one_lose_no_transition(morton):
    fr = require("psifr.fr")
    raw = morton[0].assign(block=lambda t: t["block"] - 1)  # blocks 0..7
    merged = fr.merge_free_recall(raw, study_keys=["block"])
    ours = cmr.lag_crp(raw, lag_key="block", by=None)
    assert ours["lag"].values.tolist() == list(range(-7, 8))
    assert int(ours["actual"].sum()) == int(cmr.lag_crp(raw, by=None)["actual"].sum())  # every transition
    # psifr bins lags -(max - 1)..max - 1 of the label's maximum (7) and folds lag 7 into lag 6
    ref = _psifr(fr.lag_crp, merged, lag_key="block").groupby("lag")[["actual"]].sum()
    assert ref.index.min() == -6 and ref.index.max() == 6
    assert int(ref.loc[6, "actual"]) == int(ours["actual"].sel(lag=[6, 7]).sum())
    assert int(ref["actual"].sum()) < int(ours["actual"].sum())  # lag -7 is lost
