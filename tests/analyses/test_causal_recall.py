"""Paired ablation during recall: the target head set ranked among random sets, labels, the command."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.errors import OutputError, ParameterError


def test_set_statistics_by_hand():
    from icl_cmr.analyses.causal.recall import STATS, set_statistics

    # effects (set, list, measure): the target lowers the measure by 3 per list, random sets by 0, 1, 2 and 4
    per_list = {"none": 0.0, "top2": -3.0, "random0": 0.0, "random1": -1.0, "random2": -2.0, "random3": -4.0}
    effect = np.array([[[v], [v]] for v in per_list.values()])
    effect[3, 1, 0] = np.nan  # random1 undefined on list 2: its mean is over list 1 alone
    families = ["none", "target", "random", "random", "random", "random"]
    comparisons, statistic, means = set_statistics(effect, list(per_list), families)
    assert comparisons == [f"{n}_vs_none" for n in list(per_list)[1:]] + ["top2_vs_random"]
    row = dict(zip(STATS, statistic[-1, 0]))
    assert means[:, 0].tolist() == list(per_list.values())
    assert row["rank"] == 2 and row["n_null"] == 4  # only random3 (-4) is lower than -3
    assert row["rank_pvalue"] == pytest.approx(2 / 5)  # (1 + #{random <= -3}) / (1 + 4)
    assert row["rank_pvalue_upper"] == pytest.approx(4 / 5)  # (1 + #{random >= -3}) / 5
    null = np.array([0.0, -1.0, -2.0, -4.0])
    assert row["z"] == pytest.approx((-3 - null.mean()) / null.std(ddof=1))
    # secondary: the target's per-list effect minus the random sets' mean per list ((0-2-4)/3 on list 2)
    assert row["mean_difference"] == pytest.approx(np.mean([-3 - (-7 / 4), -3 - (-6 / 3)]))
    none = dict(zip(STATS, statistic[0, 0]))
    assert np.isnan(none["rank_pvalue"]) and none["mean_difference"] == -3 and none["n_lists"] == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=12), st.floats(-5, 5))
def test_rank_p_is_the_exact_permutation_p_of_a_loss(null, target):
    from icl_cmr.analyses.causal.recall import set_statistics

    values = [0.0, target, *null]
    effect = np.array(values)[:, None, None]
    families = ["none", "target"] + ["layer_matched"] * len(null)
    _, statistic, _ = set_statistics(effect, [f"s{i}" for i in range(len(values))], families)
    from icl_cmr.analyses.causal.recall import STATS

    row = dict(zip(STATS, statistic[-1, 0]))
    assert row["rank_pvalue"] == pytest.approx((1 + sum(v <= target for v in null)) / (1 + len(null)))
    assert 1 / (1 + len(null)) <= row["rank_pvalue"] <= 1 and row["rank"] == 1 + sum(v < target for v in null)


def test_rank_test_sets_are_those_of_ablate():
    from icl_cmr.analyses.causal import ablation
    from icl_cmr.analyses.causal.recall import rank_test_sets

    target = [(3, 1), (2, 0), (3, 4)]
    sets = rank_test_sets(target, 5, 6, n_random=7, rng=3)
    expected, _, families = ablation.head_sets(5, 6, target, n_random=7, n_matched=0, rng=3)
    assert list(sets) == ["top3"] + [f"random{i}" for i in range(7)]
    assert sets["top3"] == target and list(sets.values())[1:] == expected[1:]
    matched = rank_test_sets(target, 5, 6, n_random=4, layer_matched=True, rng=3)
    assert list(matched)[1:] == [f"layer_matched{i}" for i in range(4)]
    assert all(sorted(l for l, _ in s) == [2, 3, 3] for s in list(matched.values())[1:])
    with pytest.raises(ParameterError, match="n_random"):
        rank_test_sets(target, 5, 6, n_random=0)


def _scripted_answers(monkeypatch, harmful):
    """The model recalls each list in order, one word less per ablated head, none with a ``harmful`` head."""
    from icl_cmr.adapters.lm import recall_task

    def answers(model, lists, *, heads=(), return_cut=False, **options):
        heads = list(heads)
        keep = 0 if set(heads) & set(harmful) else max(len(lists[0]) - len(heads), 0)
        texts = [", ".join(items[:keep]) for items in lists]
        return (texts, [""] * len(texts)) if return_cut else texts

    monkeypatch.setattr(recall_task, "generate_answers", answers)


def test_ablated_recall_is_labelled_by_its_set(tiny, monkeypatch):
    from icl_cmr.analyses.memory.llm_recall import model_recall

    _scripted_answers(monkeypatch, harmful=[])
    lists = [["cat", "dog", "sun", "hat"]] * 2
    intact, _ = model_recall(tiny, lists=lists, pool=["cat", "dog", "sun", "hat"])
    ablated, table = model_recall(tiny, lists=lists, pool=["cat", "dog", "sun", "hat"], heads=[(1, 0), (0, 2)])
    named, _ = model_recall(tiny, lists=lists, pool=["cat", "dog", "sun", "hat"], heads=[(1, 0)], head_set="ablate:top1")
    assert set(intact["subject"].values) == {"tiny-llama|greedy|0"}
    assert set(ablated["subject"].values) == set(table["subject"]) == {"tiny-llama|greedy|0|ablate:L1.H0+L0.H2"}
    assert set(named["subject"].values) == {"tiny-llama|greedy|0|ablate:top1"}
    cmr.validate(ablated)
    assert ablated["n_correct"].values.tolist() == [2, 2]


def test_recall_lm_sets_from_ranks_the_target_among_random_sets(tiny, tmp_path, monkeypatch, capsys):
    """End to end on the tiny model with scripted answers: ablating the target's heads stops the recall,
    random sets of 2 heads cost 2 words unless they hold a target head; the rank test says so."""
    from cmr.io import load_dataset, save_dataset
    from icl_cmr.analyses.cli import main

    heads = tiny_heads(tiny)
    save_dataset(heads, tmp_path / "heads.nc")
    target = [(1, 3), (0, 1)]  # the two largest induction scores below
    monkeypatch.setattr("icl_cmr.adapters.lm.loading.load_model", lambda *a, **k: tiny)
    _scripted_answers(monkeypatch, harmful=target)
    (tmp_path / "pool.txt").write_text("\n".join(f"w{c}{d}" for c in "abcdefgh" for d in "xyz"))
    argv = ["recall-lm", "--sets-from", str(tmp_path / "heads.nc"), "--rank-by", "induction_score", "--n-heads", "2",
            "--n-random", "9", "--n-lists", "3", "--list-length", "6", "--pool", str(tmp_path / "pool.txt"),
            "--seed", "4", "-o", str(tmp_path / "abl.nc"), "--events-out", str(tmp_path / "events.csv")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    result = load_dataset(tmp_path / "abl.nc", kind="llm_recall_ablation")
    assert result["heads"].sel(head_set="top2").item() == "L1.H3,L0.H1"
    assert list(result["head_set"].values) == ["none", "top2"] + [f"random{i}" for i in range(9)]
    stat = result["statistic"].sel(comparison="top2_vs_random", measure="n_correct")
    hits = sum(bool(set(map(tuple, _parse(h))) & set(target)) for h in result["heads"].values[2:])
    assert float(stat.sel(stat="set_effect")) == -6
    assert float(stat.sel(stat="rank_pvalue")) == pytest.approx((1 + hits) / 10)  # ties with random sets that hit a target head
    assert "top2_vs_random n_correct: rank test among 9 random sets" in out and " z " in out
    assert "secondary: paired t" in out
    import pandas as pd

    subjects = set(pd.read_csv(tmp_path / "events.csv")["subject"])
    assert subjects == {"tiny-llama|greedy|0"} | {f"tiny-llama|greedy|0|ablate:{n}" for n in result["head_set"].values[1:]}
    assert "sets_from" in result.attrs["provenance"] and result.attrs["random_sets"] == "uniform among all heads"


def _parse(text):
    from icl_cmr.analyses.causal.ablation import parse_heads

    return parse_heads(text)


def tiny_heads(tiny):
    """A heads dataset of the tiny model with set induction scores (L1.H3 first, then L0.H1)."""
    from icl_cmr.adapters.lm.extraction import extract_heads

    heads = extract_heads(tiny, n_words=12, n_prompts=1, rng=0)
    scores = np.zeros(heads["induction_score"].shape)
    flat = scores.reshape(-1, 2, 4)
    flat[:, 1, 3], flat[:, 0, 1] = 0.9, 0.8
    return heads.assign(induction_score=heads["induction_score"].copy(data=scores))


@pytest.mark.parametrize("extra, error, message", [
    (["-o", "abl.csv"], OutputError, "must end in .nc"),
    (["--decoding", "sample", "-o", "abl.nc"], ParameterError, "greedy decoding"),
    (["--n-random", "0", "-o", "abl.nc"], ParameterError, "n-random"),
])
def test_recall_lm_sets_from_refuses_bad_options(extra, error, message, tmp_path, monkeypatch, capsys):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["recall-lm", "--sets-from", "fits.nc", *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_recall_lm_set_options_need_sets_from(tmp_path, monkeypatch, capsys):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["recall-lm", "--layer-matched", "-o", "r.csv"]) == 1
    assert "--layer-matched needs --sets-from" in capsys.readouterr().err
