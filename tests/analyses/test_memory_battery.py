"""The memory battery: each effect's statistic on planted answers, the verdict words, 1 - W1, files, a tiny run."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cmr.errors import ParameterError
from icl_cmr.analyses.memory import battery as mb
from icl_cmr.analyses.memory import effects as me

POOL = [f"word{k:03d}" for k in range(200)]


def _rows(table):
    return {row["statistic"]: row for row in table}


def test_verdict_words():
    assert me.verdict(0.2, 0.1, 0.3) == "present"
    assert me.verdict(-0.2, -0.3, -0.1) == "reversed"
    assert me.verdict(-0.2, -0.3, -0.1, direction=-1) == "present"
    assert me.verdict(0.0, -0.01, 0.01, margin=0.05) == "absent"
    assert me.verdict(0.0, -0.2, 0.2, margin=0.05) == "not detected"
    assert me.verdict(np.nan, np.nan, np.nan) == "not detected"


def test_planted_primacy_without_recency():
    lists = mb.serial_lists(POOL, n_lists=12, list_length=16, rng=1)
    rng = np.random.default_rng(0)
    # positions 1-3 always, the middle half the time, the last three never; first recall always position 1
    answers = [", ".join(items[:3] + [w for w in items[3:13] if rng.random() < 0.5]) for items in lists]
    ds = mb.battery_from_answers([("serial_position", x, x, "") for x in lists], answers)
    rows = _rows(me.serial_position_rows(ds))
    assert rows["primacy"]["verdict"] == "present" and rows["primacy"]["estimate"] > 0.3
    assert rows["recency"]["verdict"] == "reversed"
    assert rows["pfr_end_minus_start"]["estimate"] == -1 and rows["pfr_end_minus_start"]["verdict"] == "reversed"
    scores = me.position_scores(ds["recalls"].values, ds["list_length"].values)
    assert np.allclose(scores["p_recall"], [(3 + len(a.split(",")) - 3) / 16 for a in answers])


def test_a_subject_at_floor_gets_no_verdict():
    lists = mb.serial_lists(POOL, n_lists=10, list_length=16, rng=2)
    ds = mb.battery_from_answers([("serial_position", x, x, "") for x in lists], ["Sure!"] * 9 + [lists[9][0]])
    people = pd.DataFrame(dict(p_recall=[0.6, 0.7], primacy=[0.1, 0.2], recency=[0.2, 0.3], crp_forward=[0.4, 0.5],
                               crp_backward=[0.2, 0.3]))
    out = me.battery_effects(ds, fit=True, human_data=(people, people, None, None))  # no CMR fit at floor
    assert "cmr_value" not in out and set(out["verdict"].values) == {"not detected"} and "floor (0.6%" in str(out["floor"].values[0])
    assert out.sel(measure="p_recall")["likeness"].item() == "goes against human-likeness"
    assert out.sel(measure="primacy")["likeness"].item() == "not detected"


def test_planted_list_length_effect():
    trials, answers = [], []
    for length, n in ((10, 6), (20, 8), (30, 10), (40, 12)):
        for items in mb.serial_lists(POOL, n_lists=5, list_length=length, rng=length):
            trials.append((f"length_{length}", items, items, ""))
            answers.append(", ".join(items[:n]))
    rows = _rows(me.list_length_rows(mb.battery_from_answers(trials, answers)))
    assert rows["n_recalled_per_10_words"]["estimate"] == pytest.approx(2.0)
    assert rows["n_recalled_per_10_words"]["verdict"] == "present"
    assert rows["p_recall_per_10_words"]["verdict"] == "present"  # the probability falls, as in people
    flat = [", ".join(t[1][:5]) for t in trials]  # five words whatever the length: the number does not rise
    rows = _rows(me.list_length_rows(mb.battery_from_answers(trials, flat)))
    assert rows["n_recalled_per_10_words"]["verdict"] == "absent"


def test_planted_list_strength_effect():
    design = mb.strength_lists(POOL, n_lists=8, list_length=12, rng=3)
    trials, answers = [], []
    for condition, pairs in design.items():
        for items, shown in pairs:
            trials.append((condition, items, shown, ""))
            strong = [w for w in items if shown.count(w) == 2]
            # mixed lists: only the strong items come back; pure lists: every item
            answers.append(", ".join(strong if condition == "strength_mixed" else items))
    for items, shown in design["strength_mixed"]:
        assert sum(shown.count(w) == 2 for w in items) == 6 and all(a != b for a, b in zip(shown, shown[1:]))
    rows = _rows(me.list_strength_rows(mb.battery_from_answers(trials, answers)))
    assert rows["mixed_strong_minus_weak"]["estimate"] == 1 and rows["mixed_strong_minus_weak"]["verdict"] == "present"
    assert rows["weak_mixed_minus_pure"]["estimate"] == -1 and rows["weak_mixed_minus_pure"]["verdict"] == "present"
    assert rows["pure_strong_minus_weak"]["verdict"] == "absent"


def test_drm_lists_and_a_planted_lure():
    lists = mb.drm_lists()
    assert len(lists) == 8 and all(len(words) == 15 for words in lists.values())
    assert lists["sleep"][:3] == ["bed", "rest", "awake"] and not set(lists) & {w for ws in lists.values() for w in ws}
    trials = [("drm", words, words, lure) for lure, words in lists.items()] * 2
    answers = [", ".join(words[:5] + [lure]) for _, words, _, lure in trials]
    ds = mb.battery_from_answers(trials, answers)
    assert ds["lure_recalled"].values.all()
    rows = _rows(me.drm_rows(ds))
    assert rows["critical_lure_rate"]["estimate"] == 1
    assert rows["lure_minus_other_lures"]["verdict"] == "present" and rows["lure_minus_other_lures"]["p_value"] < 1e-4
    none = mb.battery_from_answers(trials, [", ".join(t[1][:5]) for t in trials])
    assert _rows(me.drm_rows(none))["critical_lure_rate"]["verdict"] == "absent"


def _line_similarity(n):
    """Items on a line: similarity falls with distance."""
    x = np.arange(n, dtype=float)
    return 1 - np.abs(x[:, None] - x[None, :]) / n


def test_semantic_rank_by_hand_and_against_the_shuffled_null():
    items = [f"w{k}" for k in range(8)]
    similarity, index_of = _line_similarity(8), {w: k for k, w in enumerate(items)}
    # from w0 the nearest available item is always chosen: rank 1; from the far end first: rank 0 then 1
    means, counts = me.semantic_ranks(np.array([[1, 2, 3, 0], [8, 1, 0, 0]]), [items, items], similarity, index_of)
    assert means[0] == 1 and counts[0] == 2
    assert means[1] == 0 and counts[1] == 1
    rng = np.random.default_rng(0)
    trials, answers = [], []
    for _ in range(12):
        shown = [items[i] for i in rng.permutation(8)]
        start = int(rng.integers(0, 4))
        trials.append(("semantic", shown, shown, ""))
        answers.append(", ".join(items[start:start + 4]))  # neighbours in meaning, in any studied order
    ds = mb.battery_from_answers(trials, answers)
    rows = _rows(me.semantic_rows(ds, n_perm=200, similarity=(similarity, index_of))[0])
    assert rows["rank_minus_shuffled"]["verdict"] == "present" and rows["rank_minus_shuffled"]["p_value"] < 0.01
    silent = mb.battery_from_answers(trials, ["Now recall as many words"] * len(trials))  # no transition at all
    rows = _rows(me.semantic_rows(silent, n_perm=20, similarity=(similarity, index_of))[0])
    assert rows["rank_minus_shuffled"]["verdict"] == "not detected" and np.isnan(rows["rank_minus_shuffled"]["p_value"])


def test_human_likeness_is_one_minus_w1_beside_people_lists():
    rng = np.random.default_rng(1)
    subjects = rng.normal(0.5, 0.05, 100)
    lists = rng.normal(0.5, 0.15, 1000)
    near = me.human_likeness(rng.normal(0.5, 0.15, 30), subjects, lists)
    far = me.human_likeness(np.full(30, 0.95), subjects, lists)
    assert near["likeness"] == "within people's range"
    assert far["likeness"] == "goes against human-likeness"
    assert far["one_minus_w1"] == pytest.approx(1 - (0.95 - subjects.mean()), abs=1e-9)


def test_battery_file_round_trip_rescore_and_combine(tmp_path):
    from cmr.io import load_dataset, save_dataset

    lists = mb.serial_lists(POOL, n_lists=3, list_length=16, rng=4)
    trials = [("serial_position", x, x, "") for x in lists]
    ds = mb.battery_from_answers(trials, ["Here are the words: " + ", ".join(x[:4]) + ", zebra" for x in lists],
                                 model="m")
    path = save_dataset(ds, tmp_path / "battery.nc")
    back = load_dataset(path, kind=mb.KIND)
    assert list(back["answer"].values) == list(ds["answer"].values)
    assert (mb.rescore(back)["recalls"].values == ds["recalls"].values).all()
    assert mb.combine([back, back]).sizes["trial"] == 6
    events = mb.condition_events(ds, "serial_position")
    assert (events["recalls"].values[:, :5] == [1, 2, 3, 4, -1]).all()
    with pytest.raises(ParameterError, match="no trials of condition"):
        mb.condition_events(ds, "drm")


def test_bad_design_is_refused():
    with pytest.raises(ParameterError, match="effects must be among"):
        mb.check_design(effects=["nonsense"])
    with pytest.raises(ParameterError, match="n_lists must be >= 1"):
        mb.check_design(n_lists=0)
    with pytest.raises(ParameterError, match="two distinct list lengths"):
        mb.check_design(lengths=(10,))
    with pytest.raises(ParameterError, match="one answer per trial"):
        mb.battery_from_answers([("drm", ["a"], ["a"], "b")], [])


@pytest.mark.parametrize("argv, message", [
    (["--effects", "nonsense", "-o", "out.nc"], "effects must be among"),
    (["--lengths", "10,x", "-o", "out.nc"], "--lengths must be comma-separated integers"),
    (["--n-lists", "0", "-o", "out.nc"], "--n-lists must be an integer >= 1"),
    (["-o", "out.csv"], "-o must name a .nc file"),
])
def test_recall_battery_command_rejects_bad_input_in_one_line(argv, message, tmp_path, monkeypatch, capsys):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["recall-battery", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not list(tmp_path.iterdir())


def test_tiny_model_takes_the_battery(tiny):
    ds = mb.run_battery(tiny, effects=["serial_position", "list_strength", "drm"], pool=POOL, n_lists=3,
                        drm_orders=1, n_strength_lists=1, strength_length=4, max_new_tokens=6, batch_size=4)
    assert list(dict.fromkeys(ds["condition"].values)) == ["serial_position", *mb.STRENGTH_CONDITIONS, "drm"]
    assert ds.sizes["trial"] == 3 + 3 + 8 and all(isinstance(a, str) for a in ds["answer"].values)
    assert ds["presentations"].values[3:6, :4].sum(axis=1).tolist() == [4, 6, 8]
    subjects = pd.DataFrame(dict(p_recall=[0.5, 0.6], primacy=[0.1, 0.2], recency=[0.2, 0.3], crp_forward=[0.4, 0.5],
                                 crp_backward=[0.2, 0.3]))
    out = me.battery_effects(ds, fit=False, human_data=(subjects, subjects, None, None))
    assert set(out["effect"].values) == {"serial_position", "list_strength", "drm"}
    assert set(out["verdict"].values) <= {"present", "reversed", "absent", "not detected", "descriptive"}
    assert out.sel(statistic=(out["statistic"] == "studied_recall"))["verdict"].item() == "descriptive"
    assert any(line.startswith("human-likeness") for line in me.verdict_lines(out))
