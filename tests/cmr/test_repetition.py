"""Lists with repeated study items: reading, the schema, the analyses' conventions or refusals by
name, and the repetition analyses against jaxcmr's definitions (its own test cases, ported)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import cmr
from cmr.errors import RecallDataError, SchemaError
from cmr.repetition import (first_presentation_bias, from_presentations, has_repeats, neighbor_crp,
                            presentation_items, rep_crp, shuffled_control, spacing_recall)


def _table(study, recalled, subject=1, lst=1, **extra):
    rows = [(subject, lst, "study", i + 1, item) for i, item in enumerate(study)]
    rows += [(subject, lst, "recall", i + 1, item) for i, item in enumerate(recalled)]
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])
    for name, values in extra.items():
        table[name] = values
    return table


def _repeated():
    return cmr.from_table(pd.concat([_table("ABCBD", ["B", "D", "X"]), _table("ABC", ["C"], lst=2)]))


# --- reading --------------------------------------------------------------------------------------


def test_a_psifr_table_with_a_repeat_keeps_each_presentation_and_scores_recalls_to_the_first():
    events = _repeated()
    assert events["study_item"].values[0].tolist() == ["A", "B", "C", "B", "D"]
    assert events["presentation_item"].values.tolist() == [[1, 2, 3, 2, 5], [1, 2, 3, 0, 0]]
    assert events["recalls"].values.tolist() == [[2, 5, -1], [3, 0, 0]]
    assert events.attrs["repeated_items"] == 1 and has_repeats(events)
    back = cmr.to_table(events)
    assert back["item"].tolist()[:5] == list("ABCBD")
    assert cmr.from_table(back)["presentation_item"].equals(events["presentation_item"])


def test_repeat_free_tables_have_no_map_and_read_as_one_to_list_length():
    events = cmr.from_table(_table("ABC", ["C", "A"]))
    assert "presentation_item" not in events and events.attrs["repeated_items"] == 0
    assert presentation_items(events).tolist() == [[1, 2, 3]] and not has_repeats(events)
    older = events.drop_attrs() if hasattr(events, "drop_attrs") else events
    assert presentation_items(older).tolist() == [[1, 2, 3]]


def test_a_recall_matrix_with_presentations_reads_any_presentation_as_the_item():
    # jaxcmr's recalls may name either presentation of a repeated item
    events = from_presentations([[3, 2, 0], [1, -1, 0]], [[7, 8, 7], [5, 6, 0]], subject=[1, 2])
    assert events["presentation_item"].values.tolist() == [[1, 2, 1], [1, 2, 0]]
    assert events["recalls"].values.tolist() == [[1, 2], [1, -1]]
    assert events["list_length"].values.tolist() == [3, 2]
    with pytest.raises(RecallDataError, match="0 only as padding"):
        from_presentations([[1]], [[0, 1]])


def test_the_schema_checks_the_map():
    events = _repeated()
    for bad, why in (([[1, 2, 3, 1, 5], [1, 2, 3, 0, 0]], "other item"), ([[1, 2, 3, 4, 5], [1, 2, 3, 0, 0]], "not first"),
                     ([[1, 2, 3, 2, 5], [1, 2, 3, 4, 0]], "beyond list_length"),
                     ([[1, 2, 3, 2, 6], [1, 2, 3, 0, 0]], "after itself")):
        broken = events.copy()
        broken["presentation_item"] = (("trial", "study_position"), np.array(bad))
        with pytest.raises(SchemaError, match="presentation_item must give each presentation"):
            cmr.validate(broken)
        assert why


# --- every analysis: a convention or a refusal by name --------------------------------------------


def _events_for_all(repeats=True):
    table = pd.concat([_table("ABCBD" if repeats else "ABCHD", ["B", "D", "A"]), _table("EFG", ["G", "E"], lst=2)])
    table["category"] = np.where(table["item"].isin(list("ABE")), "x", "y")
    table["rt"] = np.arange(len(table), dtype=float)
    table["index"] = table["item"].map({k: i for i, k in enumerate("ABCDEFGH")}).astype(float)
    return cmr.from_table(table)


_DISTANCES = np.abs(np.subtract.outer(np.arange(8.0), np.arange(8.0)))

REFUSED = {
    "lag_crp": lambda e: cmr.lag_crp(e),
    "lag_crp_compound": lambda e: cmr.lag_crp_compound(e),
    "input_crp": lambda e: cmr.input_crp(e),
    "lag_rank": lambda e: cmr.lag_rank(e),
    "category_crp": lambda e: cmr.category_crp(e),
    "category_clustering": lambda e: cmr.category_clustering(e),
    "distance_crp": lambda e: cmr.distance_crp(e, "index", _DISTANCES, [0, 1, 3, 7]),
    "distance_rank": lambda e: cmr.distance_rank(e, "index", _DISTANCES),
    "distance_rank_window": lambda e: cmr.distance_rank_window(e, "index", _DISTANCES, [1]),
    "distance_rank_shifted": lambda e: cmr.distance_rank_shifted(e, "index", _DISTANCES, 1),
    "distance_rank_window_asym": lambda e: cmr.distance_rank_window_asym(e, "index", _DISTANCES),
    "lag_crl": lambda e: cmr.lag_crl(e, time_key="rt"),
    "spc with item_query, test_key or test": lambda e: cmr.spc(e, test_key="category", test=lambda v: v == "x"),
    "pnr with item_query, test_key or test": lambda e: cmr.pfr(e, test_key="category", test=lambda v: v == "x"),
}
HANDLED = {
    "spc": lambda e, d: cmr.spc(e),
    "pfr": lambda e, d: cmr.pfr(e),
    "pnr": lambda e, d: cmr.pnr(e),
    "intrusion_rates": lambda e, d: cmr.intrusion_rates(e),
    "pli_list_lag": lambda e, d: cmr.pli_list_lag(e, 1),
    "irt": lambda e, d: cmr.irt(e, time_key="rt"),
    "stop_probability": lambda e, d: cmr.stop_probability(e),
    "to_table": lambda e, d: cmr.to_table(e),
    "to_recall_matrix": lambda e, d: cmr.to_recall_matrix(e),
    "rep_crp": lambda e, d: rep_crp(e, min_lag=1),
    "neighbor_crp": lambda e, d: neighbor_crp(e, min_lag=1, control=False),
    "spacing_recall": lambda e, d: spacing_recall(e),
    "run_analyses": lambda e, d: cmr.run_analyses(e, analyses="all"),
    "write_result": lambda e, d: cmr.write_result(e, d / "events.csv"),
}
CMR = {  # the CMR likelihoods handle repeats where they support them, else refuse them by name
    "log_likelihood": lambda e: cmr.log_likelihood(e, cmr.default_parameters()),
    "cmr2_log_likelihood": lambda e: cmr.cmr2_log_likelihood(e, cmr.default_cmr2_parameters()),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_analyses_without_a_convention_refuse_repeats_by_name(name):
    with pytest.raises(RecallDataError, match=rf"^{name} does not handle repeated study items \(subject 1, list 1 "
                                              r"studies 'B' at positions 2 and 4\); use cmr\.repetition analyses or "
                                              r"drop the repeats$"):
        REFUSED[name](_events_for_all())


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_refusing_analyses_still_run_on_repeat_free_lists(name):
    REFUSED[name](_events_for_all(repeats=False))


@pytest.mark.parametrize("name", sorted(HANDLED))
def test_analyses_with_a_convention_run_on_repeats(name, tmp_path):
    assert HANDLED[name](_events_for_all(), tmp_path) is not None


@pytest.mark.parametrize("name", sorted(CMR))
def test_cmr_likelihoods_handle_repeats_or_refuse_them_by_name(name):
    try:
        result = CMR[name](_events_for_all())
    except RecallDataError as exc:
        assert "does not handle repeated study items (subject 1, list 1 studies 'B' at positions 2 and 4)" in str(exc)
    else:
        assert np.isfinite(np.asarray(result["logl"])).all()


def test_spc_and_pfr_credit_every_presentation_of_a_recalled_item():
    # jaxcmr tests/test_pnr.py: presentations [1, 2, 1], recall [1] -> PFR [1, 0, 1]
    events = from_presentations([[1, 0], [1, 0]], [[1, 2, 1], [1, 2, 1]])
    np.testing.assert_array_equal(cmr.pfr(events, by=None)["prob"].values, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(cmr.spc(events, by=None)["prob"].values, [1.0, 0.0, 1.0])
    # the second recall: item 2 was the only one left
    events = from_presentations([[3, 2]], [[1, 2, 1]])
    np.testing.assert_array_equal(cmr.pnr(events, by=None)["prob"].values[:2], [[1, 0, 1], [np.nan, 1, np.nan]])


# --- the repetition analyses: jaxcmr's cases --------------------------------------------------------


def test_rep_crp_of_jaxcmr_simple_repeated_list():
    # jaxcmr tests/test_repcrp.py: presentations [1, 2, 1, 2], recalls [1, 2] and [2, 1], min_lag 1
    events = from_presentations([[1, 2, 0, 0], [2, 1, 0, 0]], [[1, 2, 1, 2]] * 2)
    prob = rep_crp(events, by=None, min_lag=1, max_lag=None)["prob"]
    assert prob.shape == (2, 7)
    finite = prob.values[np.isfinite(prob.values)]
    assert finite.size == 6 and (finite == 1.0).all()
    assert np.isnan(prob.sel(lag=0)).all()
    # from the first presentation of item 1 (position 1), item 2 lies at lags +1 and +3
    np.testing.assert_array_equal(prob.sel(presentation=1).values, [np.nan, np.nan, 1, np.nan, 1, np.nan, 1])


def test_rep_crp_only_counts_transitions_from_spaced_items():
    events = from_presentations([[1, 2, 0, 0]], [[1, 2, 1, 2]])
    assert int(rep_crp(events, by=None, min_lag=2)["possible"].sum()) == 0  # spacing 2 is not > 2


def test_neighbor_crp_of_jaxcmr_repeated_item():
    # jaxcmr tests/test_repneighborcrp.py: presentations [1, 2, 3, 4, 5, 1, 6, 7], recalls [7, 1];
    # item 1 at i=1 and j=6; the transition from j+1=7 to item 1 is scored from i: lags 0 and +5
    events = from_presentations([[7, 1, 0, 0]], [[1, 2, 3, 4, 5, 1, 6, 7]])
    result = neighbor_crp(events, by=None, direction="j2i", use_lag2=False, max_lag=None, control=False)
    assert result["prob"].shape == (15,)
    lags = result["lag"].values
    assert lags[result["actual"].values > 0].tolist() == [0, 5]
    assert lags[result["possible"].values > 0].tolist() == [0, 1, 2, 3, 4, 5, 7]
    none = neighbor_crp(events, by=None, direction="i2j", use_lag2=False, control=False)
    assert int(none["possible"].sum()) == 0  # no transition from i+1


def test_spacing_recall_of_jaxcmr_repeated_item():
    # jaxcmr tests/test_rpl.py: presentations [1, 2, 1, 3], recall [1]: the repeated item (distance 2)
    # has probability 1, the once-presented items 0
    events = from_presentations([[1, 0, 0]], [[1, 2, 1, 3]])
    result = spacing_recall(events, by=None)
    assert result["prob_by_distance"].values[[0, 2]].tolist() == [0.0, 1.0]
    assert np.isnan(result["prob_by_distance"].values[[1, 3]]).all()
    assert result["actual"].values.tolist() == [0, 0, 1, 0, 0]
    assert result["possible"].values.tolist() == [2, 0, 1, 0, 0]
    assert result["prob"].values[0] == 0.0 and np.isnan(result["prob"].values[2])  # distance 3 of bin 1-2 is absent


def test_first_presentation_bias_test_matches_jaxcmr_numbers():
    # jaxcmr tests/test_repcrp.py::test_first_second_bias: +1 rates of 3 subjects
    observed_first, observed_second = np.array([0.8, 0.9, 0.7]), np.array([0.3, 0.2, 0.4])
    control = np.array([0.3, 0.2, 0.4])
    bias, control_bias = observed_first - observed_second, control - control
    assert np.isclose((bias - control_bias).mean(), 0.5)
    from cmr.repetition import _paired

    t, p = _paired(bias, control_bias)
    expected = stats.ttest_rel(bias, control_bias)
    assert np.isclose(t, expected.statistic) and np.isclose(p, expected.pvalue) and t > 0


def _two_kinds():
    """Two subjects, each with repeat-free lists and lists with a spaced repeat."""
    pres = np.array([[1, 2, 3, 4, 5, 6, 7, 8]] * 2 + [[1, 2, 3, 4, 5, 6, 1, 7]] * 2)
    recalls = np.array([[1, 2, 3, 0], [4, 5, 6, 0], [1, 2, 7, 0], [8, 2, 3, 0]])
    return from_presentations(np.tile(recalls, (2, 1)), np.tile(pres, (2, 1)), subject=[1] * 4 + [2] * 4)


def test_shuffled_control_lays_repeat_free_recalls_on_lists_with_repeats():
    events = _two_kinds()
    control = shuffled_control(events, n_shuffles=3, rng=0)
    assert control.sizes["trial"] == 12 and set(control["control_shuffle"].values) == {0, 1, 2}
    assert (control["presentation_item"].values == [1, 2, 3, 4, 5, 6, 1, 8]).all()
    # a recall of position 7 of a repeat-free list is the repeated item, scored to position 1
    sources = {(1, 2, 3): [1, 2, 3], (4, 5, 6): [4, 5, 6]}
    for row in control["recalls"].values:
        assert tuple(row[:3]) in sources
    with pytest.raises(RecallDataError, match="needs subjects with both"):
        shuffled_control(events.isel(trial=[2, 3]))


def test_neighbor_crp_and_bias_with_a_control():
    events = _two_kinds()
    result = neighbor_crp(events, min_lag=4, control=True, n_shuffles=2)
    assert set(result.data_vars) >= {"control_prob", "t_stat", "p_value", "mean_difference"}
    bias = first_presentation_bias(events, min_lag=4, n_shuffles=2)
    assert bias.attrs["stat_kind"] == "first_presentation_bias" and "effect" in bias
    assert bias.attrs["n_subjects"] == int(np.isfinite(bias["effect"].values).sum())


def test_results_are_netcdf_safe(tmp_path):
    events = _two_kinds()
    for result in (rep_crp(events, min_lag=4), spacing_recall(events), neighbor_crp(events, control=False),
                   first_presentation_bias(events, control=False)):
        cmr.save_dataset(result, tmp_path / "r.nc")
        assert cmr.load_dataset(tmp_path / "r.nc").equals(result)
    cmr.save_dataset(_repeated(), tmp_path / "e.nc")
    assert isinstance(cmr.load_dataset(tmp_path / "e.nc"), xr.Dataset)


def test_the_design_fills_every_spacing_bin_and_keeps_control_lists():
    from cmr.designs import repetition_design

    design = repetition_design(n_subjects=2, n_control=1, n_mixed=3, rng=3)
    assert design.sizes["trial"] == 8 and design.attrs["repeated_items"] == 1
    result = spacing_recall(design, by=None)
    assert result["possible"].values.tolist() == [2 * (24 + 3 * 12), 2 * 2, 2 * 4, 2 * 6, 2 * 6]
    assert result["actual"].values.sum() == 0  # a template: nothing recalled
    repeats = (presentation_items(design) != np.arange(1, 25)).any(axis=1)
    assert repeats.sum() == 6  # the other 2 lists are repeat-free controls


def test_the_embedded_simulated_set_reads_with_its_documented_design():
    from importlib import resources

    with resources.as_file(resources.files("icl_cmr.data") / "repetition_simulated.csv") as path:
        events = cmr.from_table(pd.read_csv(path))
    assert events.sizes["trial"] == 72 and set(events["list_length"].values) == {24}
    repeats = (presentation_items(events) != np.arange(1, 25)).any(axis=1)
    assert repeats.sum() == 48  # 8 mixed lists of 6 subjects; 4 control lists each
    assert spacing_recall(events, by=None)["possible"].values.tolist() == [6 * (96 + 8 * 12), 36, 72, 90, 90]


# --- loaders of the user's own copies -------------------------------------------------------------


def _jaxcmr_arrays():
    return {
        "pres_itemnos": np.array([[5, 6, 5, 7], [1, 2, 3, 0], [8, 9, 8, 9]]),
        "recalls": np.array([[3, 2, 99, 0], [1, 0, 0, 0], [2, 1, 0, 0]]),  # 99: out of the list, an intrusion
        "subject": np.array([[2], [1], [2]]),
        "list_type": np.array([[4], [1], [3]]),
    }


def _check_loaded(events):
    assert events["subject"].values.tolist() == [1, 2, 2]
    assert events["presentation_item"].values.tolist() == [[1, 2, 3, 0], [1, 2, 1, 4], [1, 2, 1, 2]]
    assert events["recalls"].values.tolist() == [[1, 0, 0], [1, 2, -1], [2, 1, 0]]
    assert events["list_type"].values.tolist() == [1, 4, 3]


def test_a_jaxcmr_hdf5_file_loads_with_its_arrays_transposed_back(tmp_path):
    h5py = pytest.importorskip("h5py")
    from icl_cmr.adapters.repetition_data import load_repetition_data

    path = tmp_path / "LohnasKahana2014.h5"
    with h5py.File(path, "w") as handle:
        for name, values in _jaxcmr_arrays().items():
            handle.create_dataset(f"data/{name}", data=values.T)  # jaxcmr's files hold the MATLAB order
    _check_loaded(load_repetition_data(path))
    from icl_cmr.adapters.recall_data import load_recall_data

    _check_loaded(load_recall_data(path))


def test_an_hdf5_file_with_data_outside_itself_is_refused(tmp_path):
    h5py = pytest.importorskip("h5py")
    from cmr.errors import FileFormatError
    from icl_cmr.adapters.repetition_data import load_repetition_data

    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as handle:
        handle["recalls"] = np.ones((2, 2))
    path = tmp_path / "linked.h5"
    with h5py.File(path, "w") as handle:
        handle.create_dataset("data/pres_itemnos", data=np.ones((2, 2)))
        handle["data/recalls"] = h5py.ExternalLink(str(other), "recalls")
    with pytest.raises(FileFormatError, match="outside the file"):
        load_repetition_data(path)


def test_npz_and_csv_copies_load_too(tmp_path):
    from icl_cmr.adapters.repetition_data import load_repetition_data

    arrays = {name: values.reshape(values.shape[0], -1) if name != "subject" else values.ravel()
              for name, values in _jaxcmr_arrays().items()}
    np.savez(tmp_path / "HowardKahana2005.npz", **arrays)
    events = load_repetition_data(tmp_path / "HowardKahana2005.npz")
    _check_loaded(events)
    from icl_cmr.adapters.recall_data import load_recall_data

    _check_loaded(load_recall_data(tmp_path / "HowardKahana2005.npz"))  # every command's reader
    cmr.to_table(events).to_csv(tmp_path / "copy.csv", index=False)
    again = load_recall_data(tmp_path / "copy.csv")
    assert again["presentation_item"].values.tolist() == events["presentation_item"].values.tolist()
    simulated = load_recall_data("icl-cmr:repetition")
    assert simulated.sizes["trial"] == 72 and simulated.attrs["repeated_items"] == 1


def test_recall_analyses_command_runs_the_repetition_analyses(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    out = tmp_path / "rep.nc"
    assert main(["recall-analyses", "icl-cmr:repetition", "--analyses", "rep_crp,spacing_recall", "-o", str(out)]) == 0
    result = cmr.load_dataset(out)
    assert "spacing_recall_prob" in result and "rep_crp_prob" in result
    assert main(["recall-analyses", "icl-cmr:repetition", "--analyses", "lag_crp", "-o", str(out)]) == 1
    assert "lag_crp does not handle repeated study items" in capsys.readouterr().err
    everything = cmr.run_analyses(load_repetition_events(), analyses="all")
    assert "lag_crp" not in everything.attrs["analyses"] and "first_presentation_bias" in everything.attrs["analyses"]


def load_repetition_events():
    from icl_cmr.adapters.recall_data import load_recall_data

    return load_recall_data("icl-cmr:repetition")


@st.composite
def _lists_with_repeats(draw):
    """A few lists: item numbers by position (some repeated) and recalls of studied or unstudied items."""
    n_lists = draw(st.integers(1, 3))
    tables = []
    for lst in range(1, n_lists + 1):
        study = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
        recalled = draw(st.lists(st.integers(1, 9), max_size=6, unique=True))
        tables.append(_table([f"w{i}" for i in study], [f"w{i}" for i in recalled], lst=lst))
    return pd.concat(tables, ignore_index=True)


@settings(max_examples=30, deadline=None)
@given(_lists_with_repeats())
def test_every_presentation_is_kept_and_each_recall_scored_to_its_first_presentation(table):
    events = cmr.from_table(table, max_intrusion_share=1.0)
    pres = presentation_items(events)
    study = events["study_item"].values
    for t in range(events.sizes["trial"]):
        items = [x for x in study[t] if x]
        first = {item: items.index(item) + 1 for item in items}
        assert pres[t, :len(items)].tolist() == [first[item] for item in items]
        for recall, item in zip(events["recalls"].values[t], events["recall_item"].values[t]):
            if recall != 0:
                assert recall == first.get(item, -1)
    again = cmr.from_table(cmr.to_table(events), max_intrusion_share=1.0)
    assert (presentation_items(again) == pres).all() and (again["recalls"].values == events["recalls"].values).all()
    # the serial position curve of a repeated item is its recall at each presentation
    spc = cmr.spc(events, by="trial")["prob"].values
    recalled = [set(r[r > 0].tolist()) for r in events["recalls"].values]
    expected = np.array([[float(p in recalled[t]) if p else np.nan for p in row] for t, row in enumerate(pres)])
    np.testing.assert_array_equal(spc, expected[:, :spc.shape[1]])
