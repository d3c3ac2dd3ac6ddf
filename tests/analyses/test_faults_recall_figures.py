"""Recall analyses that a command could not draw or read as asked: lag-CRPs of short lists, the
sets of ``recall-analyses`` (the category CRP among them), ``--max-intrusion-share`` on every
command that reads recall tables, and replicas of lists labelled from 0 in ``fit-population
--check``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import ProfileError
from icl_cmr.analyses.cli import main


def _lists(length: int, n_lists: int = 6, subjects=(1, 2), category: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(length)
    rows = []
    for subject in subjects:
        for k in range(1, n_lists + 1):
            items = [f"s{subject}l{k}w{p}" for p in range(1, length + 1)]
            rows += [(subject, k, "study", p, w, "ab"[p % 2]) for p, w in enumerate(items, 1)]
            rows += [(subject, k, "recall", p, w, "ab"[items.index(w) % 2 ^ 1])
                     for p, w in enumerate(rng.permutation(items)[: max(2, length - 1)], 1)]
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "category"])
    return table if category else table.drop(columns="category")


def _drawn_lags(fig) -> list[int]:
    return sorted({int(x) for line in fig.axes[0].get_lines() for x in line.get_xdata()})


@pytest.mark.parametrize("length", [2, 3, 4, 5, 6, 8])
def test_lag_crp_of_short_lists_is_drawn(tmp_path, capsys, length):
    """icl-cmr plot draws -5..5 cut to the lags the lists have (lists of 2 items: -1 and 1)."""
    _lists(length).to_csv(tmp_path / "r.csv", index=False)
    assert main(["lag-crp", str(tmp_path / "r.csv"), "-o", str(tmp_path / "crp.nc")]) == 0
    assert main(["plot", str(tmp_path / "crp.nc"), "-o", str(tmp_path / "crp.png")]) == 0
    assert (tmp_path / "crp.png").stat().st_size > 0
    from icl_cmr.analyses import plots

    reach = min(5, length - 1)
    assert _drawn_lags(plots.lag_crp(cmr.load_dataset(tmp_path / "crp.nc"))) == \
        [lag for lag in range(-reach, reach + 1) if lag != 0]
    if length <= 5:  # a window asked for explicitly must be there, and the message names the data
        with pytest.raises(ProfileError, match=r"^the lag-CRP lacks lags \[.*\] of the requested window"):
            plots.lag_crp(cmr.load_dataset(tmp_path / "crp.nc"), lags=5)


SETS = {
    "with_categories": (True, "all", ["lag_crp", "spc", "pfr", "input_crp", "pli_list_lag", "stop_probability",
                                      "category_crp", "category_clustering"]),
    "category_crp_alone": (True, "category_crp", ["category_crp"]),
    "without_categories": (False, "lag_crp,spc,lag_rank", ["lag_crp", "spc"]),
}


@pytest.mark.parametrize("case", list(SETS), ids=list(SETS))
def test_recall_analyses_sets_are_drawn(tmp_path, capsys, case):
    category, analyses, panels = SETS[case]
    _lists(6, category=category).to_csv(tmp_path / "r.csv", index=False)
    assert main(["recall-analyses", str(tmp_path / "r.csv"), "--analyses", analyses, "-o", str(tmp_path / "s.nc")]) == 0
    assert main(["plot", str(tmp_path / "s.nc"), "-o", str(tmp_path / "s.png")]) == 0
    assert "analysis_set of the recall_stat dataset" in capsys.readouterr().out
    from icl_cmr.analyses.plots import standard_figure

    fig = standard_figure(cmr.load_dataset(tmp_path / "s.nc"), chance=0.5 if category else None)
    assert [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")] == panels
    if category:  # the panel is the category CRP of the data, as cmr.category_crp gives it
        from cmr.analysis_set import analysis_of

        direct = cmr.category_crp(cmr.from_table(pd.read_csv(tmp_path / "r.csv")))
        np.testing.assert_array_equal(analysis_of(cmr.load_dataset(tmp_path / "s.nc"), "category_crp")["prob"],
                                      direct["prob"])


def _intrusive_table(path):
    """160 recalls of which 120 match no studied item: refused at the default share (0.5)."""
    rows = []
    for k in range(1, 41):
        rows += [(1, k, "study", p, w) for p, w in enumerate("abcd", 1)]
        rows += [(1, k, "recall", p, w) for p, w in enumerate("xyza", 1)]
    pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]).to_csv(path, index=False)


READERS = {
    "lag-crp": lambda t: ["lag-crp", t / "r.csv", "-o", t / "o.nc"],
    "spc": lambda t: ["spc", t / "r.csv", "-o", t / "o.nc"],
    "recall-analyses": lambda t: ["recall-analyses", t / "r.csv", "--analyses", "spc", "-o", t / "o.nc"],
    "loglik": lambda t: ["loglik", t / "r.csv", "--params", t / "p.json"],
}


@pytest.mark.parametrize("share, accepted", [(None, False), ("0.9", True), ("1", True), ("1.5", False)],
                         ids=["default", "0.9", "1", "out_of_range"])
@pytest.mark.parametrize("command", list(READERS), ids=list(READERS))
def test_max_intrusion_share_is_an_option(tmp_path, capsys, command, share, accepted):
    import json

    _intrusive_table(tmp_path / "r.csv")
    (tmp_path / "p.json").write_text(json.dumps(cmr.default_parameters()))
    argv = [str(a) for a in READERS[command](tmp_path)] + ([] if share is None else ["--max-intrusion-share", share])
    code = main(argv)
    err = capsys.readouterr().err.strip()
    if accepted:
        assert code == 0, err
    else:
        assert code == 1 and len(err.splitlines()) == 1
        assert ("give --max-intrusion-share 1" in err) if share is None else \
            ("--max-intrusion-share must be a number in [0, 1]; got 1.5" in err)


def test_fit_population_check_of_lists_labelled_from_0(tmp_path, capsys):
    """Replicas were numbered list + rep * max(list): with lists 0..N-1 two replicas shared a label
    and the check failed with 'duplicate study position ... --list-keys'."""
    table = _lists(4, n_lists=4)
    table["list"] -= 1
    table.to_csv(tmp_path / "r.csv", index=False)
    assert main(["fit-population", str(tmp_path / "r.csv"), "--free", "B_enc", "--max-iter", "1", "--check-reps", "2",
                 "--check", str(tmp_path / "check.nc"), "-o", str(tmp_path / "pop.nc")]) == 0, capsys.readouterr().err
    check = cmr.load_dataset(tmp_path / "check.nc")
    assert check.attrs["n_rep"] == 2 and np.isfinite(check["spc"].sel(source="model").values).all()
