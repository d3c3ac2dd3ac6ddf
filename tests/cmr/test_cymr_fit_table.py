"""cymr's fit table as it comes: fit_indiv's (subject, rep) rows, the best rep of each subject."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import ParameterError


def _events():
    return cmr.from_table(cmr.simulate_free_recall(cmr.default_parameters(), 8, 6, subjects=2, rng=3))


def _fit_indiv_table(subjects, reps=3, seed=0):
    """A table shaped as cymr's Recall.fit_indiv returns it: ``pd.DataFrame(d).T`` of dicts keyed by
    (subject, rep), index names (subject, rep), object columns, n and k as int."""
    rng = np.random.default_rng(seed)
    d = {}
    for subject in subjects:
        for rep in range(reps):
            row = cmr.default_parameters()
            row["B_enc"] = float(rng.uniform(0.3, 0.9))
            row["T"] = float(rng.uniform(0.05, 0.5))
            row.update(logl=float(-100 - rng.uniform(0, 10)), n=48, k=2)
            d[(subject, rep)] = row
    table = pd.DataFrame(d).T
    table.index.rename(["subject", "rep"], inplace=True)
    return table.astype({"n": int, "k": int})


def _best_by_hand(table):
    """cymr.fit.get_best_results, transcribed."""
    rows = []
    for subject in table.index.get_level_values("subject").unique():
        res = table.loc[subject].reset_index()
        rows.append(res.loc[[pd.to_numeric(res["logl"]).argmax()]].assign(subject=subject))
    return pd.concat(rows).set_index("subject")


def test_the_best_rep_of_each_subject_is_used():
    events = _events()
    subjects = sorted(set(events["subject"].values.tolist()))
    table = _fit_indiv_table(subjects)
    got = cmr.log_likelihood(events, table)
    want = cmr.log_likelihood(events, _best_by_hand(table))
    np.testing.assert_array_equal(got["logl"].values, want["logl"].values)
    # and it differs from using any other rep: the choice matters
    worst = table.groupby(level="subject", group_keys=False).apply(
        lambda t: t.iloc[[int(pd.to_numeric(t["logl"]).to_numpy().argmin())]]).droplevel("rep")
    assert not np.array_equal(cmr.log_likelihood(events, worst)["logl"].values, got["logl"].values)


def test_cymrs_own_best_results_agree_when_cymr_is_installed():
    fit = pytest.importorskip("cymr.fit")
    table = _fit_indiv_table(["a", "b"], reps=4, seed=2)
    best = fit.get_best_results(table)
    from cmr.textbook.parameter_sets import parameters_by_subject

    ours = parameters_by_subject(table)
    theirs = parameters_by_subject(best)
    assert ours == theirs


def test_a_subject_column_and_one_row_each_is_read_too():
    from cmr.textbook.parameter_sets import parameters_by_subject

    table = pd.DataFrame({"subject": [1, 2], "B_enc": [0.5, 0.6], "T": [0.1, 0.2]})
    assert parameters_by_subject(table) == {"1": {"B_enc": 0.5, "T": 0.1}, "2": {"B_enc": 0.6, "T": 0.2}}


def test_several_rows_without_logl_are_refused_in_one_line():
    from cmr.textbook.parameter_sets import parameters_by_subject

    table = _fit_indiv_table(["a"], reps=2).drop(columns="logl")
    with pytest.raises(ParameterError, match=r"several rows for subject\(s\) 'a' and no 'logl' column") as info:
        parameters_by_subject(table)
    assert "\n" not in str(info.value)


def test_a_multi_index_without_a_subject_level_is_refused():
    from cmr.textbook.parameter_sets import parameters_by_subject

    table = _fit_indiv_table(["a"], reps=2)
    table.index = table.index.set_names(["participant", "rep"])
    with pytest.raises(ParameterError, match="needs a level named 'subject'"):
        parameters_by_subject(table)
