"""Which heads prefer the first presentation (Holm over heads), people beside them, and the command's refusals."""
from __future__ import annotations

import numpy as np
import pytest

from cmr.errors import ParameterError
from icl_cmr.adapters import repetition_heads as rh
from icl_cmr.analyses.cli import main
from icl_cmr.analyses.heads.first_presentation import compare_with_people, head_preferences, with_people


def _planted(n_prompts=8):
    """Three heads: attention on the first presentation's +1, on the second's +1, flat."""
    made = rh.build_repetition_prompts(np.arange(100, 160), [f" w{i}" for i in range(60)], n_prompts=n_prompts,
                                       rng=2, bos_id=1, n_ctx=512)
    sums = []
    for p in range(n_prompts):
        pres, rec = made.presentation[p], made.recalls[p]
        probs = np.full((1, 3, rec.size, pres.size), 0.001)
        for s, item in enumerate(rec):
            pos = rh.study_positions(pres, item)
            for h in (0, 1):
                if h < pos.size and pos[h] < pres.size:
                    probs[0, h, s, pos[h]] = 1.0
        sums.append(rh.repetition_summary(probs, pres, rec, made.kind[p]))
    return rh.repetition_heads_dataset(rh.pool_repetition(sums), list_length=made.list_length, model="planted")


def test_planted_heads_get_their_preference_after_holm():
    out = head_preferences(_planted())
    assert out["preference"].values.ravel().tolist() == ["first", "later", "neither"]
    # 8 of 8 prompts: p = 2 / 2^8 each, times 3 heads (Holm's first step) = 0.023
    assert out["first_holm"].values.ravel()[0] == pytest.approx(3 * 2 / 2**8)
    assert (out.attrs["n_preference_first"], out.attrs["n_preference_later"]) == (1, 1)
    assert head_preferences(_planted(), alpha=0.01)["preference"].values.ravel().tolist() == ["neither"] * 3
    with pytest.raises(ParameterError, match="alpha must be a number in"):
        head_preferences(_planted(), alpha=1.5)


def test_people_who_move_to_the_first_presentations_neighbour_have_a_positive_bias():
    from cmr.repetition import from_presentations

    rng = np.random.default_rng(0)
    pres = [[1, 2, 3, 4, 5, 6, 1, 8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6, 7, 3, 9, 10, 11, 12]]
    recalls, presentations, subjects = [], [], []
    for subject in (1, 2, 3):
        for row in pres:
            row = np.array(row)
            item = next(i for i in np.unique(row) if (row == i).sum() == 2)
            rest = [i for i in np.unique(row) if i not in (item, item + 1)]
            recalls.append([item, item + 1, *rng.permutation(rest)])  # from the repeat to its first neighbour
            presentations.append(row)
            subjects.append(subject)
    events = from_presentations(np.array(recalls), np.array(presentations), subject=np.array(subjects))
    heads = _planted()
    comparison = compare_with_people(heads, events, min_lag=4, source="hand-made")
    assert comparison["people_mean_bias"] == pytest.approx(1.0)
    assert comparison["people_n_subjects"] == 3
    assert comparison["heads_share_same_sign"] == pytest.approx(1 / 3)
    tagged = with_people(heads, comparison)
    assert tagged.attrs["people_source"] == "hand-made" and tagged.attrs["people_mean_bias"] == pytest.approx(1.0)


def _one_error_line(capsys, argv, *needles):
    assert main([str(a) for a in argv]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and "Traceback" not in err, err
    assert all(n in lines[0] for n in needles), lines[0]


def test_a_design_that_does_not_fit_fails_before_the_model_loads(capsys, tmp_path):
    _one_error_line(capsys, ["repetition-heads", "--n-massed", "30", "-o", tmp_path / "r.nc"],
                    "need 82 study positions; list_length is 40")
    _one_error_line(capsys, ["repetition-heads", "--list-length", "20", "--n-spaced", "6", "--n-massed", "0",
                             "--n-thrice", "0", "--min-spacing", "15", "-o", tmp_path / "r.nc"], "cannot place")
    _one_error_line(capsys, ["repetition-heads", "-o", tmp_path / "r.txt"])


def test_plot_draws_the_repetition_crp_and_each_heads_preference(tmp_path, capsys):
    from cmr.io import write_result
    from icl_cmr.analyses.plots import first_presentation_heads
    from icl_cmr.analyses.plots.standard import figure_function

    heads = _planted()
    assert figure_function(heads) == "first_presentation_heads"
    left, right = first_presentation_heads(heads, n_heads=2).axes
    assert len(left.lines) == 4  # two heads, first and second presentation
    drawn = {c.get_label(): c.get_offsets().shape[0] for c in right.collections}
    assert drawn == {"neither (1)": 1, "later (1)": 1, "first (1)": 1}
    source = write_result(heads, tmp_path / "rep.nc")
    assert main(["plot", str(source), "-o", str(tmp_path / "rep.png")]) == 0
    assert (tmp_path / "rep.png").stat().st_size > 0
    assert "first_presentation_heads of the repetition_heads dataset" in capsys.readouterr().out
