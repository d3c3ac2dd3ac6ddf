"""One name per concept, options by keyword: a psifr-style call means the same here or fails loudly.

psifr's ``fr.lag_crp(df, lag_key="input")`` takes ``lag_key`` second; were ``by`` second here,
``cmr.lag_crp(df, "input")`` would silently group by an ``input`` column. Every analysis takes
its data positionally (and what psifr also requires at the same position); everything else is
keyword-only, and a psifr keyword an analysis does not take is a TypeError, never ignored.
"""
from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

import cmr
from tests.conftest import require

#: public analysis -> the arguments it takes positionally (the data, and what psifr requires there)
POSITIONAL = {
    "lag_crp": ("events",),
    "lag_crp_compound": ("events",),
    "input_crp": ("events",),
    "lag_rank": ("events",),
    "spc": ("events",),
    "pnr": ("events",),
    "pfr": ("events",),
    "category_crp": ("events",),
    "category_clustering": ("events",),
    "distance_crp": ("events", "index_key", "distances", "edges"),
    "distance_rank": ("events", "index_key", "distances"),
    "distance_rank_shifted": ("events", "index_key", "distances", "max_shift"),
    "distance_rank_window": ("events", "index_key", "distances", "window_lags"),
    "distance_rank_window_asym": ("events", "index_key", "distances"),
    "pli_list_lag": ("events", "max_lag"),
    "intrusion_rates": ("events",),
    "irt": ("events",),
    "lag_crl": ("events",),
    "stop_probability": ("events",),
    "run_analyses": ("events",),
    "analyses_table": ("events",),
    "rep_crp": ("events",),
    "neighbor_crp": ("events",),
    "spacing_recall": ("events",),
    "first_presentation_bias": ("events",),
    "shuffled_control": ("events",),
    "from_presentations": ("recalls", "presentations"),
    "lag_counts": ("recalls", "list_length"),
    "to_dataframe": ("ds",),
    "fit_profiles": ("profiles", "grid"),
    "cmr_like_null": ("profiles", "grid"),
    "structureless_profiles": ("n_profile", "n_lag"),
    "textbook_teacher_forced_grid": ("grid",),
    "paper_mc_grid": ("beta_enc", "beta_rec", "gamma"),
    "paper_teacher_forced_grid": ("beta_enc", "beta_rec", "gamma"),
    "paper_lag_distribution": ("beta_enc", "beta_rec", "gamma"),
    "default_parameters": (),
    "similarity_from_distances": ("distances",),
}


@pytest.mark.parametrize("name", sorted(POSITIONAL))
def test_only_the_data_is_positional(name):
    parameters = inspect.signature(getattr(cmr, name)).parameters.values()
    positional = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    assert positional == POSITIONAL[name]
    assert not any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _table():
    """Two subjects, one list of six each, with categories, recall times and item indices."""
    rows = []
    for subject, recalled in ((1, ["w3", "w4", "w1", "x", "w6"]), (2, ["w6", "w5", "w2"])):
        for position in range(1, 7):
            rows.append(dict(subject=subject, list=1, trial_type="study", position=position, item=f"w{position}",
                             category="ab"[position % 2], item_index=position - 1, rt=np.nan))
        for output, item in enumerate(recalled, start=1):
            rows.append(dict(subject=subject, list=1, trial_type="recall", position=output, item=item,
                             category=np.nan, item_index=np.nan, rt=1.5 * output))
    return pd.DataFrame(rows)


DISTANCES = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0))) / 5.0
EDGES = [0.0, 0.3, 0.6, 1.0]

#: the required arguments of each analysis after the data, and one more positional argument
#: that psifr's users might pass (its second positional argument, or ours before)
CALLS = {
    "lag_crp": ((), "input"),
    "lag_crp_compound": ((), "input"),
    "input_crp": ((), "input"),
    "lag_rank": ((), "input"),
    "spc": ((), "subject"),
    "pnr": ((), "subject"),
    "pfr": ((), "subject"),
    "category_crp": ((), "category"),
    "category_clustering": ((), "category"),
    "distance_crp": (("item_index", DISTANCES, EDGES), None),
    "distance_rank": (("item_index", DISTANCES), "subject"),
    "distance_rank_shifted": (("item_index", DISTANCES, 2), "subject"),
    "distance_rank_window": (("item_index", DISTANCES, [-1, 0, 1]), "subject"),
    "distance_rank_window_asym": (("item_index", DISTANCES), "subject"),
    "pli_list_lag": ((1,), "subject"),
    "intrusion_rates": ((), "subject"),
    "irt": ((), "rt"),
    "lag_crl": ((), "rt"),
    "stop_probability": ((), "subject"),
    "run_analyses": ((), "spc"),
    "analyses_table": ((), "spc"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_option_passed_by_position_is_a_type_error(name):
    required, extra = CALLS[name]
    function = getattr(cmr, name)
    function(_table(), *required)  # the data and psifr's required arguments are enough
    with pytest.raises(TypeError, match="positional argument"):
        function(_table(), *required, extra)


def test_psifr_lag_key_second_is_a_type_error_not_a_grouping():
    with pytest.raises(TypeError, match="positional argument"):
        cmr.lag_crp(_table(), "input")
    # the keyword means what it means in psifr: lags are differences of the input column
    default, keyed = cmr.lag_crp(_table()), cmr.lag_crp(_table(), lag_key="input")
    np.testing.assert_array_equal(default["actual"].values, keyed["actual"].values)
    np.testing.assert_array_equal(default["possible"].values, keyed["possible"].values)


@pytest.mark.parametrize("name", sorted(n for n in CALLS if n not in ("run_analyses", "analyses_table", "intrusion_rates",
                                                                     "irt", "lag_crl", "stop_probability")))
def test_a_psifr_keyword_we_do_not_take_is_a_type_error(name):
    fr = require("psifr.fr")
    ours = set(inspect.signature(getattr(cmr, name)).parameters)
    psifr_name = "pnr" if name == "pfr" else name  # psifr's first recall is its pnr at output 1
    theirs = [p for p in inspect.signature(getattr(fr, psifr_name)).parameters.values() if p.name != "df"]
    missing = [p for p in theirs if p.name not in ours]
    required, _ = CALLS[name]
    for parameter in missing:
        value = "input" if parameter.default is inspect.Parameter.empty else parameter.default
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{parameter.name}'"):
            getattr(cmr, name)(_table(), *required, **{parameter.name: value})


@pytest.mark.parametrize("name", ["lag_crp_compound", "input_crp", "lag_rank", "distance_crp"])
def test_psifr_keywords_we_lack_exist(name):
    """The check above is not empty: these psifr options have no counterpart here."""
    fr = require("psifr.fr")
    ours = set(inspect.signature(getattr(cmr, name)).parameters)
    assert set(inspect.signature(getattr(fr, name)).parameters) - ours - {"df"}


def test_the_analysis_table_refuses_unknown_options_as_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'lag_key'"):
        cmr.analyses_table(_table(), analyses="lag_crp", lag_key="input")
    table = cmr.analyses_table(_table(), analyses="spc,lag_crp", lags=2, by=None)
    assert set(table["analysis"]) == {"spc", "lag_crp"}


# --- renamed public names keep a deprecated alias for one release -------------------------


def test_paper_crp_is_the_paper_lag_distribution():
    new = cmr.paper_lag_distribution(0.6, 0.75, 0.3, n_trials=20, rng=1, lags=3)
    with pytest.warns(DeprecationWarning, match="cmr.paper_lag_distribution"):
        old = cmr.paper_crp(0.6, 0.75, 0.3, n_trials=20, rng=1, lags=3)
    assert old.identical(new)
    np.testing.assert_allclose(new["profile"].sum(), 1.0)
    assert "paper_crp" not in cmr.__all__ and "paper_lag_distribution" in cmr.__all__


def test_closed_form_crp_is_the_closed_form_lag_distribution():
    import cmr.paper

    new = cmr.paper.closed_form_lag_distribution(0.4, 0.0, 2, 100, 8)
    with pytest.warns(DeprecationWarning, match="cmr.paper.closed_form_lag_distribution"):
        old = cmr.paper.closed_form_crp(0.4, 0.0, 2, 100, 8)
    np.testing.assert_array_equal(old, new)
    assert "closed_form_crp" not in cmr.paper.__all__


def test_variant_beta_is_paper_beta():
    beta = np.linspace(0.0, 1.0, 11)
    with pytest.warns(DeprecationWarning, match="cmr.paper_beta"):
        old = cmr.variant_beta(beta, "rec")
    np.testing.assert_array_equal(old, cmr.paper_beta(beta, phase="rec"))
    assert "variant_beta" not in cmr.__all__ and "paper_beta" in cmr.__all__


def test_context_decay_calls_the_paper_model_paper():
    assert cmr.context_decay(0.3) == cmr.context_decay(0.3, "paper") == pytest.approx(0.7, abs=0)
    with pytest.warns(DeprecationWarning, match="model='paper'"):
        old = cmr.context_decay(0.3, "variant", "rec")
    assert old == cmr.context_decay(0.3, "paper", "rec")
    with pytest.raises(cmr.errors.ParameterError, match="paper, textbook"):
        cmr.context_decay(0.3, "study")


# --- one name per variable ------------------------------------------------------------------


def test_lag_profiles_say_profile_and_recall_statistics_say_prob():
    """``profile`` is the values of every lag profile (not all are probabilities); psifr's ``prob`` elsewhere."""
    table = _table()
    for result in (cmr.lag_crp(table), cmr.lag_crp_compound(table)):
        assert result.attrs["icl_cmr_kind"] == "lag_profile" and "profile" in result and "prob" not in result
    for result in (cmr.spc(table), cmr.pnr(table), cmr.pfr(table), cmr.input_crp(table),
                   cmr.category_crp(table), cmr.stop_probability(table)):
        assert result.attrs["icl_cmr_kind"] == "recall_stat" and "prob" in result and "profile" not in result
    assert list(cmr.to_dataframe(cmr.lag_crp(table)).columns) == ["subject", "lag", "profile", "sem", "actual",
                                                                   "possible"]
    assert list(cmr.to_dataframe(cmr.spc(table)).columns) == ["subject", "serial_position", "prob", "actual",
                                                               "possible"]


def test_to_dataframe_of_events_is_to_table():
    events = cmr.from_table(_table())
    pd.testing.assert_frame_equal(cmr.to_dataframe(events), cmr.to_table(events))
