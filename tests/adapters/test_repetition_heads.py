"""Heads on lists with repeated words (pure numpy): prompts, neighbour accounting, planted preferences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_cmr.adapters import repetition_heads as rh
from icl_cmr.adapters.errors import PromptError

POOL = np.arange(100, 160)
WORDS = [f" w{i}" for i in range(POOL.size)]


def _prompts(n_prompts=8, seed=0, **design):
    return rh.build_repetition_prompts(POOL, WORDS, n_prompts=n_prompts, rng=seed, bos_id=1, n_ctx=512, **design)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), n_massed=st.integers(0, 4), n_spaced=st.integers(0, 6), n_thrice=st.integers(0, 2))
def test_prompts_follow_the_design(seed, n_massed, n_spaced, n_thrice):
    made = _prompts(n_prompts=2, seed=seed, list_length=36, n_massed=n_massed, n_spaced=n_spaced, n_thrice=n_thrice,
                    min_spacing=6, max_spacing=10)
    n_distinct = 36 - n_massed - n_spaced - 2 * n_thrice
    assert made.tokens.shape == (2, 1 + 36 + n_distinct)
    for p in range(2):
        pres, rec, tokens = made.presentation[p], made.recalls[p], made.tokens[p]
        assert tokens[0] == 1
        firsts = np.unique(pres)
        assert sorted(rec.tolist()) == firsts.tolist()  # each distinct word recalled once
        assert (pres[firsts - 1] == firsts).all()  # presentation_item holds each word's first position
        np.testing.assert_array_equal(tokens[1:37], tokens[pres])  # every presentation is the same token
        np.testing.assert_array_equal(tokens[37:], tokens[rec])
        assert np.unique(tokens[1:37]).size == n_distinct  # distinct items are distinct tokens
        gaps = {1: [], 2: [], 3: []}
        for item in firsts:
            pos = rh.study_positions(pres, item)
            gaps[pos.size].append(np.diff(pos))
        assert len(gaps[3]) == n_thrice and len(gaps[2]) == n_massed + n_spaced
        assert sum(int(g[0] == 1) for g in gaps[2]) == n_massed
        assert all(6 <= g.min() and g.max() <= 10 for g in gaps[3] + [g for g in gaps[2] if g[0] != 1])
        assert (made.kind[p] >= 0).sum() == 2 * (n_massed + n_spaced) + 3 * n_thrice


def test_same_seed_same_prompts_and_bad_designs_are_refused():
    np.testing.assert_array_equal(_prompts(seed=3).tokens, _prompts(seed=3).tokens)
    with pytest.raises(PromptError, match="need 43 study positions; list_length is 40"):
        _prompts(n_massed=10, n_spaced=10, n_thrice=1)
    with pytest.raises(PromptError, match="the word pool has only 5"):
        rh.build_repetition_prompts(POOL[:5], WORDS[:5], bos_id=1, n_ctx=512)
    with pytest.raises(PromptError, match="longer than the model's context of 40"):
        rh.build_repetition_prompts(POOL, WORDS, bos_id=1, n_ctx=40)
    with pytest.raises(PromptError, match="cannot place"):
        _prompts(list_length=12, n_massed=0, n_spaced=4, n_thrice=0, min_spacing=10, max_spacing=11)


# a hand-made list: A at positions 1 and 5 (spaced by 4), everything else once; min_lag 2
PRES = np.array([1, 2, 3, 4, 1, 6, 7])
KIND = np.array([1, -1, -1, -1, 1, -1, -1])


def _hand_probs(recalls):
    probs = np.zeros((1, 1, recalls.size, PRES.size))
    probs[0, 0, :, :] = 1.0 / PRES.size
    step = int(np.flatnonzero(recalls == 1)[0])
    probs[0, 0, step] = [0.0, 0.5, 0.1, 0.0, 0.0, 0.3, 0.1]  # first+1 (pos 2) 0.5, second+1 (pos 6) 0.3
    return probs


def test_neighbour_accounting_on_a_hand_made_list():
    recalls = np.array([1, 2, 3, 4, 6, 7])
    out = rh.repetition_summary(_hand_probs(recalls), PRES, recalls, KIND, min_lag=2)
    assert out["n_tabulated"] == 1  # only A is repeated
    centre = PRES.size - 1
    actual, possible = out["actual"][0, 0], out["possible"][0, 0]
    # from position 1: lags +1..+6 to positions 2..7, position 5 (A itself) unavailable
    np.testing.assert_allclose(actual[0, centre + 1:], [0.5, 0.1, 0.0, 0.0, 0.3, 0.1])
    np.testing.assert_array_equal(possible[0, centre + 1:], [1, 1, 1, 0, 1, 1])
    # from position 5: lags -3..-1 to 2..4, +1..+2 to 6..7; lag -4 (A's first presentation) unavailable
    np.testing.assert_allclose(actual[1, centre - 4:centre + 3], [0.0, 0.5, 0.1, 0.0, 0.0, 0.3, 0.1])
    np.testing.assert_array_equal(possible[1, centre - 4:centre + 3], [0, 1, 1, 1, 0, 1, 1])
    assert possible[2].sum() == 0  # A has no third presentation
    assert rh.first_bias(actual, possible) == pytest.approx(0.5 - 0.3)
    total, count = out["occurrence"]
    spaced = total[0, 0, 1] / np.maximum(count[0, 0, 1], 1)
    np.testing.assert_allclose(spaced[:2], [[0.0, 0.0, 0.5], [0.0, 0.0, 0.3]])  # offsets -1, 0, +1
    np.testing.assert_array_equal(count[0, 0, 1, :2], [[0, 1, 1], [1, 1, 1]])  # position 0 does not exist


def test_teacher_forced_rule_removes_words_already_recalled():
    recalls = np.array([6, 2, 1, 3, 4, 7])  # 6 (second presentation + 1) and 2 (first + 1) come before A
    out = rh.repetition_summary(_hand_probs(recalls), PRES, recalls, KIND, min_lag=2, rule="teacher_forced")
    centre = PRES.size - 1
    assert out["possible"][0, 0, 0, centre + 1] == 0 and out["possible"][0, 0, 1, centre + 1] == 0
    # available: positions 3, 4, 7 with weights 0.1, 0, 0.1 -> renormalised 0.5, 0, 0.5
    np.testing.assert_allclose(out["actual"][0, 0, 0, centre + 2:centre + 4], [0.5, 0.0])
    with pytest.raises(PromptError, match="rule must be one of query_only, teacher_forced; got 'x'"):
        rh.unavailable_positions(PRES, recalls, rule="x")


def test_massed_and_close_repeats_are_not_tabulated():
    pres = np.array([1, 1, 3, 4, 3, 6])  # massed 1, 3 at positions 3 and 5 (2 apart)
    assert rh.tabulated_queries(pres, np.array([1, 3, 4, 6]), min_lag=2).size == 0
    assert rh.tabulated_queries(pres, np.array([1, 3, 4, 6]), min_lag=1).tolist() == [1]


def _planted(made, target):
    """Attention of three heads: on the first presentation's +1, the second's +1, and uniform."""
    sums = []
    for p in range(made.tokens.shape[0]):
        pres, rec = made.presentation[p], made.recalls[p]
        probs = np.full((1, 3, rec.size, pres.size), 0.001)
        probs[0, 2] = 1.0
        for s, item in enumerate(rec):
            pos = rh.study_positions(pres, item)
            for h, r in ((0, 0), (1, 1)):
                if r < pos.size and pos[r] < pres.size:
                    probs[0, h, s, pos[r]] = target  # column pos[r] is study position pos[r] + 1
        sums.append(rh.repetition_summary(probs, pres, rec, made.kind[p]))
    return rh.repetition_heads_dataset(rh.pool_repetition(sums), list_length=made.list_length, model="planted")


def test_a_head_planted_on_the_first_presentation_prefers_it():
    made = _prompts(n_prompts=8)
    ds = _planted(made, target=1.0).isel(model=0, checkpoint=0, layer=0)
    bias, p = ds["first_bias"].values, ds["first_p"].values
    assert bias[0] > 0.9 and bias[1] < -0.9 and abs(bias[2]) < 1e-3
    assert p[0] == pytest.approx(2 / 2**8) and p[1] == pytest.approx(2 / 2**8)
    assert ds["n_first"].values.tolist()[:2] == [8, 0]
    # the positional control keys the same positions from another word's query: no preference there
    assert np.abs(ds["control_bias"].values).max() < 0.02
    assert ds["control_p"].values[0] == pytest.approx(2 / 2**8)
    crp = ds["repcrp"].sel(lag=1).values
    assert crp[0, 0] > 0.9 and crp[0, 1] < 0.05 and crp[1, 1] > 0.9
    occurrence = ds["occurrence_attention"].sel(repeat_kind="spaced", offset=1).values
    assert occurrence[0, 0] == 1.0 and occurrence[0, 1] == 0.001


def test_a_planted_head_no_stronger_than_the_rest_is_not_significant():
    made = _prompts(n_prompts=8)
    ds = _planted(made, target=0.001).isel(model=0, checkpoint=0, layer=0)  # all attention flat
    assert np.abs(ds["first_bias"].values).max() < 1e-3
    assert (ds["first_p"].fillna(1.0).values > 0.05).all()


def test_dataset_round_trips_through_netcdf(tmp_path):
    from cmr.io import load_dataset, write_result

    ds = _planted(_prompts(n_prompts=3), target=1.0)
    back = load_dataset(write_result(ds, tmp_path / "rep.nc"))
    assert back.attrs["icl_cmr_kind"] == "repetition_heads"
    np.testing.assert_array_equal(back["repcrp_possible"].values, ds["repcrp_possible"].values)


def test_recall_pass_attention_of_the_wrong_shape_is_refused():
    with pytest.raises(PromptError, match=r"shape \(layer, head, M=6, L=7\)"):
        rh.repetition_summary(np.zeros((1, 1, 7, 7)), PRES, np.array([1, 2, 3, 4, 6, 7]), KIND)


def test_one_hot_attention_on_the_next_recall_gives_the_human_rep_crp_counts():
    """The recall pass as a recall sequence: one-hot weights on the next recall reproduce cmr.rep_crp exactly."""
    from cmr import repetition

    made = _prompts(n_prompts=4, seed=5, list_length=30, n_massed=2, n_spaced=4, n_thrice=1)
    rng = np.random.default_rng(0)
    recalls, sums = [], []
    for p in range(4):
        pres = made.presentation[p]
        firsts = np.unique(pres)
        repeated = [i for i in firsts if rh.study_positions(pres, i).size > 1]
        once = [i for i in firsts if rh.study_positions(pres, i).size == 1]
        # every repeated word is followed by a once-presented one, so each next recall has one position
        order = [x for pair in zip(rng.permutation(repeated), rng.permutation(once)) for x in pair]
        order = np.array(order + [i for i in once if i not in order])
        probs = np.zeros((1, 1, order.size, pres.size))
        for s in range(order.size - 1):
            probs[0, 0, s, rh.study_positions(pres, order[s + 1]) - 1] = 1.0
        recalls.append(order)
        sums.append(rh.repetition_summary(probs, pres, order, made.kind[p], rule="teacher_forced"))
    pooled = rh.pool_repetition(sums)
    events = repetition.from_presentations(np.array(recalls), made.presentation)
    people = repetition.rep_crp(events, by=None, size=3, max_lag=None)
    np.testing.assert_array_equal(pooled["possible"][0, 0], people["possible"].values)
    np.testing.assert_allclose(pooled["actual"][0, 0], people["actual"].values)
    assert people["actual"].values.sum() > 0
    bias = repetition.first_presentation_bias(events, control=False)
    pooled_bias = rh.first_bias(pooled["actual"][0, 0], pooled["possible"][0, 0])
    people_crp = people["prob"].sel(lag=1).values
    assert pooled_bias == pytest.approx(people_crp[0] - people_crp[1])
    assert float(bias["bias"].values[0]) == pytest.approx(pooled_bias)


def test_tiny_model_recall_pass_attention_is_the_cut_of_the_full_pattern(tl, tiny):
    from icl_cmr.adapters.lm import repetition

    design = dict(list_length=20, n_massed=1, n_spaced=2, n_thrice=1, min_spacing=6, max_spacing=8)
    made = repetition.make_repetition_prompts(tiny, n_words=20, n_prompts=2, rng=1, **design)
    _, probs, _ = tl.attention_pass(tiny, made.tokens[1])
    cut = repetition.recall_pass_attention(tiny, made.tokens[1], made.list_length)
    np.testing.assert_array_equal(cut, probs[:, :, 21:, 1:21])
    ds = repetition.extract_repetition_heads(tiny, n_words=20, n_prompts=2, rng=1, **design)
    assert ds.sizes["layer"] == 2 and ds.sizes["head"] == 4 and ds.sizes["prompt"] == 2
    summary = rh.repetition_summary(cut, made.presentation[1], made.recalls[1], made.kind[1])
    np.testing.assert_allclose(ds["prompt_bias"].isel(model=0, checkpoint=0, prompt=1).values,
                               rh.first_bias(summary["actual"], summary["possible"]))
