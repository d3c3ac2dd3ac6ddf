"""Every export is lossless or names what it leaves out, and docs/schema.md's export table is what the code writes.

One small dataset of every registered kind (and of the variants of a kind whose variables differ)
is exported in each of its layouts; every data variable must be a column of one of them or be
named on the "left out" line of the default export, with the layout that holds it.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr.schema import known_kinds, provenance_attrs
from cmr.tables import layouts, left_out, left_out_line, table_variables
from tests.conftest import REPO_ROOT, attention_pattern_example, require
from tests.cmr.test_tables import heads_dataset

FAST_DE = {"maxiter": 2, "popsize": 4}


def _events():
    table = cmr.simulate_free_recall(cmr.default_parameters(), 8, 6, subjects=["01", "02", "10"], rng=3)
    return cmr.from_table(table)


def _recall_events():
    """A language model's recall: per recall its segment and category, per list the counts, prompt, answer, segments."""
    from icl_cmr.adapters.recall_text import recall_dataset, recall_table

    lists = [["river", "candle", "lamp"], ["drug", "pebble", "bacon"]]
    answers = ["Sure! The words were river, zebra, river", "drug, pebble, bacon, drug, pebble, bacon"]
    table = recall_table(lists, answers, "m|greedy|0", prompts=["Study this list:\nriver", "Study this list:\ndrug"])
    return recall_dataset(table, source="tests")


def _timed():
    timed = cmr.from_recall_matrix([[2, 3, 1], [1, 2, 0]], 3)
    timed["recall_rt"] = (("trial", "output_position"), [[0.8, 2.0, 4.1], [1.1, 1.9, float("nan")]])
    return timed


def _fit(events, names=("B_rec",)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cmr.errors.FitWarning)  # two generations may end at a bound
        return cmr.fit_recall(events, cmr.FitSpec(list(names)), rng=0, progress=False, polish=False,
                              de_options=FAST_DE)


def _null():
    lags = np.arange(-5, 6)
    values = np.random.default_rng(0).normal(size=(3, lags.size))
    units = xr.Dataset({"profile": (("unit", "lag"), values)}, coords={"unit": np.arange(3), "lag": lags},
                       attrs={**provenance_attrs("lag_profile", "tests"), "profile_kind": "attention_score"})
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 0.75], [0.0, 0.3], lags=range(-5, 6))
    return cmr.cmr_like_null(units, grid, objective="paper", n_null=5, n_bank=50)


def _pattern(n_words=6):
    return attention_pattern_example(n_words)


def _memory_battery():
    """Three serial-position lists and one DRM list, answered by a script."""
    from icl_cmr.analyses.memory import battery as mb

    pool = [f"word{k:03d}" for k in range(60)]
    trials = [("serial_position", x, x, "") for x in mb.serial_lists(pool, n_lists=3, list_length=8, rng=4)]
    words = mb.drm_lists()
    lure = next(iter(words))
    trials.append(("drm", words[lure][:8], words[lure][:8], lure))
    answers = ["Here are the words: " + ", ".join(t[1][:3]) + ", zebra" for t in trials]
    return mb.battery_from_answers(trials, answers, model="m")


def _repetition_heads():
    from tests.adapters.test_repetition_heads import _planted, _prompts

    return _planted(_prompts(n_prompts=3), target=1.0)


def _dissociation():
    """All three experiments of a ``dissociation`` file from synthetic per-head and per-set effects."""
    from icl_cmr.analyses.causal import dissociation as dis
    from icl_cmr.analyses.causal.dissociation_io import combine
    from icl_cmr.analyses.causal.regression import head_regression
    from tests.analyses.test_causal_dissociation import _ablation, _sources

    table = dis.head_table(*_sources(n_layers=4, n_heads=5))
    rng = np.random.default_rng(1)
    y = 0.8 * table["induction_score"].values - 0.1 * table["distance"].values
    per_passage = y[None, None, :, :, None] + rng.normal(0, 0.05, (1, 1, 4, 5, 3))
    effects = xr.Dataset({"head_effect": (("measure", "mode", "layer", "head", "passage"), per_passage),
                          "head_mean_effect": (("measure", "mode", "layer", "head"), per_passage.mean(-1))},
                         coords={"measure": ["bigram"], "mode": ["zero"], "layer": np.arange(4), "head": np.arange(5),
                                 "passage": np.arange(3)})
    heads = head_regression(effects, table, n_boot=20, n_perm=20, rng=0)
    randoms = dis.random_set_regression(_ablation(table, n_sets=12, size=3), table, named_head=(1, 0))
    set_effects = {"cmr_not_induction": (rng.normal(1.0, 0.1, (1, 1, 3)), rng.normal(0, 0.1, (1, 1, 9, 3))),
                   "induction_only": (rng.normal(0, 0.1, (1, 1, 3)), rng.normal(0, 0.1, (1, 1, 9, 3)))}
    sets = dis.set_statistics(set_effects, {"cmr_not_induction": 2, "induction_only": 1},
                              {"cmr_not_induction": "L1.H0,L2.H0", "induction_only": "L3.H1"},
                              {"cmr_not_induction": "stratified", "induction_only": "layer"}, measures=("bigram",))
    return combine([sets, heads, randoms])


@pytest.fixture(scope="module")
def results():
    """name -> a small dataset; the names start with the dataset's kind."""
    events = _events()
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 0.75], [0.0, 0.3], list_length=20)
    crp = cmr.lag_crp(events)
    fit_a, fit_b = _fit(events, ["B_rec"]), _fit(events, ["B_enc"])
    cv = {name: cmr.cross_validate(events, cmr.FitSpec([p]), n_folds=2, rng=3, progress=False, de_options=FAST_DE)
          for name, p in (("a", "B_rec"), ("b", "B_enc"))}
    out = {
        "events": events,
        "events recall": _recall_events(),
        "lag_profile crp": crp,
        "lag_profile crp by list": cmr.lag_crp(events, by="trial"),
        "lag_profile compound": cmr.lag_crp_compound(events),
        "lag_profile heads": heads_dataset(),
        "lag_profile grid": grid,
        "recall_stat spc": cmr.spc(events),
        "recall_stat pfr": cmr.pfr(events),
        "recall_stat pnr": cmr.pnr(events),
        "recall_stat lag_rank": cmr.lag_rank(events),
        "recall_stat input_crp": cmr.input_crp(events),
        "recall_stat stop_probability": cmr.stop_probability(events),
        "recall_stat intrusion_rates": cmr.intrusion_rates(events),
        "recall_stat irt": cmr.irt(_timed(), time_key="rt", by=None),
        "recall_stat analysis_set": cmr.run_analyses(events, analyses=["lag_crp", "spc", "pfr", "lag_rank"]),
        "profile_fit": cmr.fit_profiles(crp, grid, objective="lsq", lags=cmr.RECALL_LAGS),
        "recall_fit": fit_a,
        "recall_cv": cv["a"],
        "model_comparison": cmr.compare_models({"a": fit_a, "b": fit_b}, cv=cv),
        "predictive_check": cmr.posterior_predictive(events, cmr.default_parameters(), n_rep=1, rng=0),
        "cmr_states": cmr.record_states(events.isel(trial=slice(0, 3)), cmr.default_parameters()),
        "circuit_trace": cmr.attention_circuit(None, list_length=4, recalls=[2, 3]),
        "profile_null": _null(),
        "attention_pattern": _pattern(),
        "dissociation": _dissociation(),
        "memory_battery": _memory_battery(),
        "repetition_heads": _repetition_heads(),
    }
    return out


@pytest.fixture(scope="module")
def model_results():
    """The kinds a language model makes, from a random tiny model."""
    require("torch")
    from icl_cmr.adapters.lm.causal_composition import path_ablation
    from icl_cmr.adapters.lm.composition import composition_scores
    from icl_cmr.adapters.lm.loading import tiny_model
    from icl_cmr.analyses.causal.ablation import run_ablation
    from icl_cmr.analyses.causal.recall import recall_ablation

    model = tiny_model()
    scores = composition_scores(model, n_baseline=10)
    passages = np.random.default_rng(0).integers(2, 60, size=(3, 30))
    sets = {"top_cmr": [(1, 0)], "top_induction": [(1, 1)], "random_0": [(0, 2)], "random_1": [(0, 3)]}
    return {
        "composition": scores,
        "path_ablation": path_ablation(model, [(1, 0), (1, 1)], n_words=12, n_prompts=1, composition=scores),
        "ablation": run_ablation(model.bridge, passages, [(1, 0)], n_random=3, early=4, late=25, window=2,
                                 modes=("zero",), measures="icl", progress=False),
        "llm_recall_ablation": recall_ablation(model, sets, n_lists=2, list_length=4, rng=5),
    }


def _all(results, model_results_or_none):
    return {**results, **(model_results_or_none or {})}


@pytest.fixture(scope="module")
def every(results, request):
    try:
        lm = request.getfixturevalue("model_results")
    except pytest.skip.Exception:
        lm = None
    return _all(results, lm)


def test_every_registered_kind_has_a_case(every):
    assert set(known_kinds()) <= {name.split()[0] for name in every}


def _rolled(ds, name):
    """``ds`` with the values of ``name`` shifted by one place (same values, other cells)."""
    changed = ds.copy()
    values = np.asarray(ds[name].values)
    changed[name] = (ds[name].dims, np.roll(values.reshape(-1), 1).reshape(values.shape))
    return changed


def _changes(ds, name) -> bool:
    values = pd.Series(np.asarray(ds[name].values).reshape(-1))
    return not values.equals(pd.Series(np.roll(values.to_numpy(), 1)))


def test_every_variable_is_in_a_table_or_named_left_out(every, monkeypatch):
    import cmr.tables as tables

    for name, ds in every.items():
        kept, missing = set(table_variables(ds)), left_out(ds)
        assert set(map(str, ds.data_vars)) == kept | set(missing), name
        assert not kept & set(missing), name
        line = left_out_line(ds, option="--layout ")
        for variable, holder in missing.items():
            assert variable in table_variables(ds, layout=holder) and f"--layout {holder}" in line, (name, variable)
            assert re.search(rf"[:,;] {variable}\b", line), (name, variable)
        if name.startswith("events"):
            continue  # psifr's table is built from the events themselves: only the variable lists apply
        # the table a variable is said to be in holds its values: shifting them changes the table
        monkeypatch.setattr(tables, "validate", lambda ds, kind=None: ds)  # a shifted count may exceed its total
        for variable in map(str, ds.data_vars):
            layout = missing.get(variable, "auto")
            if _changes(ds, variable):
                before = cmr.to_dataframe(ds, layout=layout)
                after = cmr.to_dataframe(_rolled(ds, variable), layout=layout)
                assert not before.equals(after), (name, variable, layout)
        monkeypatch.undo()


def _unlisted(ds, layout):
    """The variables of ``ds`` that the table of ``layout`` does not list and whose shift changes them."""
    listed = set(table_variables(ds, layout=layout))
    return [variable for variable in map(str, ds.data_vars) if variable not in listed and _changes(ds, variable)]


def test_a_table_holds_exactly_the_variables_it_lists(every, monkeypatch):
    import cmr.tables as tables

    monkeypatch.setattr(tables, "validate", lambda ds, kind=None: ds)
    for name, ds in every.items():
        if name.startswith("events"):
            continue
        for layout in layouts(ds):
            try:
                before = cmr.to_dataframe(ds, layout=layout)
            except cmr.errors.SchemaError:
                continue  # a pooled result has no per-unit table
            unlisted = _unlisted(ds, layout)
            shifted = ds
            for variable in unlisted:  # all at once: the table must not move; if it does, name the variable
                shifted = _rolled(shifted, variable)
            if unlisted and not before.equals(cmr.to_dataframe(shifted, layout=layout)):
                for variable in unlisted:
                    after = cmr.to_dataframe(_rolled(ds, variable), layout=layout)
                    assert before.equals(after), (name, layout, variable)
                pytest.fail(f"{name}, {layout}: shifting {unlisted} together changes the table")


def test_the_fixed_exports(every):
    check = every["predictive_check"]
    assert {"spc", "pfr", "spc_group"} <= set(cmr.to_dataframe(check, layout="spc").columns)
    assert "left out: spc, spc_group" in left_out_line(check)
    if "ablation" in every:
        ablation = every["ablation"]
        table = cmr.to_dataframe(ablation)
        assert list(table.columns[:4]) == ["mode", "head_set", "passage", "family"]
        assert len(table) == ablation.sizes["mode"] * ablation.sizes["head_set"] * ablation.sizes["passage"]
        causal = cmr.to_dataframe(every["path_ablation"], layout="drop_all")
        assert {"drop_all", "drop_moved", "induction_all", "base_induction"} <= set(causal.columns)
        statistic = cmr.to_dataframe(every["llm_recall_ablation"], layout="statistic")
        assert len(statistic) == every["llm_recall_ablation"]["statistic"].size


def test_export_prints_the_left_out_line_and_takes_a_variable_layout(every, tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    check = every["predictive_check"]
    source = cmr.save_dataset(check, tmp_path / "check.nc")
    assert main(["export", str(source), "-o", str(tmp_path / "check.csv")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == left_out_line(check, option="--layout ")
    assert main(["export", str(source), "--layout", "pfr", "-o", str(tmp_path / "pfr.csv")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == left_out_line(check, layout="pfr", option="--layout ")
    assert main(["export", str(source), "--layout", "nothing", "-o", str(tmp_path / "x.csv")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("icl-cmr export: error: layout must be one of auto, units, long")
    assert not (tmp_path / "x.csv").exists()


DOC_ROW = re.compile(r"^\| `([a-z_]+(?: [a-z_ ]+)?)` \| (.*) \| (.*) \|$")


def _doc_rows() -> dict:
    text = (REPO_ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    section = text.split("### What each export keeps", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): (m.group(2), m.group(3)) for m in map(DOC_ROW.match, section.splitlines()) if m}


def doc_cells(ds):
    """The two cells of a result's row of docs/schema.md's export table, from the code."""
    layout = "units" if ds.attrs["icl_cmr_kind"] in ("profile_fit", "recall_fit") else "auto"
    names = ", ".join(table_variables(ds, layout="auto"))
    groups: dict[str, list[str]] = {}
    for variable, holder in left_out(ds).items():
        groups.setdefault(holder, []).append(variable)
    rest = "; ".join(f"{', '.join(v)} (`{h}`)" for h, v in groups.items()) or "nothing"
    return f"{layout}: {names}" if ds.attrs["icl_cmr_kind"] != "events" else f"psifr: {names}", rest


def test_the_export_table_of_the_schema_matches_the_code(every):
    rows = _doc_rows()
    for name, ds in every.items():
        assert rows.get(name) == doc_cells(ds), name
