"""Attention arrays -> lag profiles (pure numpy; no model): hand cases, psifr oracle, properties."""
from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_cmr.adapters import head_profiles as hp
from cmr.errors import ProfileError, RecallDataError
from icl_cmr.adapters.errors import PromptError
from cmr.crp import lag_counts
from cmr.testing import recall_matrices
from tests.conftest import require


def _attention(n_layers, n_heads, n_words, rng):
    """Random causal scores and their softmax, (layer, head, 2N+1, 2N+1); future keys = -3e38."""
    seq = 2 * n_words + 1
    scores = rng.normal(size=(n_layers, n_heads, seq, seq))
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    scores[..., future] = -3.4e38
    shifted = np.where(future, -np.inf, scores)
    probs = np.exp(shifted - shifted.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return scores, probs


def _dataset(prompts_attention, n_words, lags, **kw):
    summaries = [hp.prompt_summary(s, p, n_words, lags) for s, p in prompts_attention]
    return hp.head_profile_dataset(hp.pool_summaries(summaries), lags=lags, n_words=n_words, model="m", **kw)


# --- hand-worked ------------------------------------------------------------------------


def test_lag_block_picks_second_copy_queries_and_first_copy_keys():
    n = 3  # positions: BOS 0, copy 1 at 1..3, copy 2 at 4..6
    values = np.arange(49, dtype=float).reshape(1, 1, 7, 7)  # value = 7*query + key
    block = hp.lag_block(values, n, np.array([-1, 0, 1]))
    expected = np.array([
        [np.nan, 7 * 4 + 1, 7 * 4 + 2],  # query 4 (word 1): keys -, 1, 2
        [7 * 5 + 1, 7 * 5 + 2, 7 * 5 + 3],  # query 5 (word 2): keys 1, 2, 3
        [7 * 6 + 2, 7 * 6 + 3, np.nan],  # query 6 (word 3): keys 2, 3, - (4 is copy 2)
    ])
    np.testing.assert_array_equal(block[0, 0], expected)


def test_explicit_causal_mask_makes_library_fill_values_irrelevant():
    rng = np.random.default_rng(0)
    scores, probs = _attention(2, 3, 6, rng)
    lags = hp.lag_range(5, 6)
    seq = scores.shape[-1]
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    other = scores.copy()
    other[..., future] = np.inf  # a different library version's mask value
    a = hp.prompt_summary(scores, probs, 6, lags)
    b = hp.prompt_summary(other, probs, 6, lags)
    for key in ("score", "prob"):
        for x, y in zip(a[key], b[key]):
            np.testing.assert_array_equal(x, y)


def test_perfect_induction_head_scores_one_at_lag_plus_one():
    n = 5
    seq = 2 * n + 1
    probs = np.zeros((1, 1, seq, seq))
    probs[0, 0, 0, 0] = 1.0
    for q in range(1, seq):
        target = q - n + 1 if q > n else q - 1  # second copy: the induction target; else previous
        probs[0, 0, q, target] = 1.0
    scores = np.log(np.where(probs > 0, probs, 1e-300))
    ds = _dataset([(scores, probs)], n, hp.lag_range(3, n))
    head = ds.isel(model=0, checkpoint=0, layer=0, head=0)
    # Query k = N-1 has its target at N+1 (copy 2), outside the block: the mean is over k < N-1.
    assert float(head.induction_score) == 1.0
    assert float(head.duplicate_token_score) == 0.0
    np.testing.assert_array_equal(head.prob_profile.sel(lag=1).values, 1.0)
    assert int(head.n_samples.sel(lag=1)) == n - 1
    np.testing.assert_array_equal(head.soft_crp.values, [0, 0, 0, np.nan, 1, 0, 0])
    np.testing.assert_array_equal(head.soft_possible.values, [1, 2, 3, 0, 4, 3, 2])
    # previous-token: copy 1 attends to the previous token, copy 2 never does
    assert float(head.previous_token_score) == 0.5


def test_teacher_forced_rule_allows_only_forward_lags():
    from_pos, unavailable = hp.teacher_forced_transitions(4, rule="teacher_forced")
    weights = np.full((1, 4, 4), 0.25)
    lags, actual, possible = hp.soft_lag_counts(from_pos, weights, unavailable, 3)
    np.testing.assert_array_equal(possible[0], [0, 0, 0, 0, 3, 2, 1])
    # step 1 spreads 1 over 3 items, step 2 over 2, step 3 all on lag +1
    np.testing.assert_allclose(actual[0], [0, 0, 0, 0, 1 / 3 + 1 / 2 + 1, 1 / 3 + 1 / 2, 1 / 3])


def test_pooled_moments_equal_direct_mean_and_sem_over_all_samples():
    rng = np.random.default_rng(1)
    n, lags = 7, hp.lag_range(4, 7)
    prompts = [_attention(2, 2, n, rng) for _ in range(3)]
    ds = _dataset(prompts, n, lags)
    blocks = np.concatenate([hp.lag_block(s, n, lags) for s, _ in prompts], axis=2)  # all samples
    mean = np.nanmean(blocks, axis=2)
    count = np.sum(~np.isnan(blocks), axis=2)
    sem = np.nanstd(blocks, axis=2, ddof=1) / np.sqrt(count)
    np.testing.assert_allclose(ds.profile.values[0, 0], mean, rtol=1e-12)
    np.testing.assert_allclose(ds.sem.values[0, 0], sem, rtol=1e-10)
    np.testing.assert_array_equal(ds.n_samples.values[0, 0], count)
    pblocks = np.concatenate([hp.lag_block(p, n, np.array([1])) for _, p in prompts], axis=2)
    np.testing.assert_allclose(ds.induction_score.values[0, 0], np.nanmean(pblocks, axis=2)[..., 0], rtol=1e-12)


def test_dataset_schema_dims_and_netcdf_round_trip(tmp_path):
    from cmr.io import load_dataset, save_dataset

    rng = np.random.default_rng(2)
    n = 9
    lags = hp.lag_range(8, n)
    ds = _dataset([_attention(3, 2, n, rng)], n, lags, copying_score=rng.uniform(-1, 1, (3, 2)),
                  position_loss=rng.uniform(0, 5, 2 * n), provenance={"seed": 3})
    assert ds.profile.dims == ("model", "checkpoint", "layer", "head", "lag")
    assert ds.copying_score.dims == ("model", "checkpoint", "layer", "head")
    assert ds.attrs["profile_kind"] == "attention_score"
    assert ds.soft_crp.attrs["profile_kind"] == "soft_lag_crp"
    assert json.loads(ds.attrs["provenance"])["lags"] == list(range(-8, 9))
    path = save_dataset(ds, tmp_path / "heads.nc")
    back = load_dataset(path, kind="lag_profile")
    assert back.identical(ds)


def test_select_profile_gives_plain_lag_profiles():
    rng = np.random.default_rng(3)
    ds = _dataset([_attention(1, 2, 6, rng)], 6, hp.lag_range(2, 6))
    prob = hp.select_profile(ds, which="prob")
    assert prob.attrs["profile_kind"] == "attention_prob"
    np.testing.assert_array_equal(prob.profile.values, ds.prob_profile.values)
    soft = hp.select_profile(ds, which="soft_lag_crp")
    assert soft.attrs["profile_kind"] == "soft_lag_crp" and soft.possible.dtype == np.int64
    with pytest.raises(PromptError, match="which must be one of"):
        hp.select_profile(ds, which="logits")


# --- the one-hot oracle: attention built from recall sequences ---------------------------


def _one_hot_counts(recalls, length, max_lag):
    from_pos, weights, unavailable = hp.recall_sequence_transitions(recalls, length)
    return hp.soft_lag_counts(from_pos, weights, unavailable, max_lag)


def test_one_hot_attention_from_human_recalls_gives_psifr_lag_crp_exactly():
    fr = require("psifr.fr")
    from icl_cmr.adapters.recall_data import load_recall_data
    from cmr.events import to_recall_matrix

    events = load_recall_data("psifr:Morton2013")
    recalls, lengths = to_recall_matrix(events)
    subjects = events["subject"].values
    merged = fr.merge_free_recall(fr.sample_data("Morton2013"))
    ref_all = fr.lag_crp(merged).reset_index()
    for subject in np.unique(subjects):
        mine = subjects == subject
        lags, actual, possible = _one_hot_counts(recalls[mine], lengths[mine], int(lengths.max()) - 1)
        ref = ref_all[ref_all.subject == subject]
        np.testing.assert_array_equal(ref["lag"].to_numpy().astype(np.int64), lags)
        np.testing.assert_array_equal(ref["actual"].to_numpy(), actual)  # float sums of exact ones
        np.testing.assert_array_equal(ref["possible"].to_numpy(), possible)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(ref["prob"].to_numpy(), actual / possible)


#: random recall matrices with intrusions, repeats and padding
RECALL_MATRICES = recall_matrices(list_length=(1, 9), n_trials=(1, 4), n_outputs=(1, 12))


@settings(max_examples=40, deadline=None)
@given(RECALL_MATRICES)
def test_one_hot_counts_equal_lag_counts_on_any_sequence(data):
    recalls, length = data
    lags, actual, possible = _one_hot_counts(recalls, length, max(length - 1, 0))
    ref_lags, ref_actual, ref_possible = lag_counts(recalls, length)
    np.testing.assert_array_equal(lags, ref_lags)
    np.testing.assert_array_equal(actual, ref_actual.sum(axis=0))
    np.testing.assert_array_equal(possible, ref_possible.sum(axis=0))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**31 - 1))
def test_soft_counts_conserve_mass_and_mirror_under_reversal(n, seed):
    rng = np.random.default_rng(seed)
    weights = rng.uniform(size=(2, n, n))
    from_pos, unavailable = hp.teacher_forced_transitions(n, rule="query_only")
    lags, actual, possible = hp.soft_lag_counts(from_pos, weights, unavailable, n - 1)
    np.testing.assert_allclose(actual.sum(axis=-1), n)  # each step distributes exactly 1
    assert possible.sum(axis=-1).tolist() == [n * (n - 1)] * 2
    # reversing the list order mirrors the lags
    rev = weights[:, ::-1, ::-1].copy()
    _, actual_rev, possible_rev = hp.soft_lag_counts(from_pos, rev, unavailable, n - 1)
    np.testing.assert_allclose(actual_rev, actual[:, ::-1], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(possible_rev, possible[:, ::-1])


# --- bad input --------------------------------------------------------------------------


def test_window_wider_than_the_list_is_a_prompt_error():
    assert hp.lag_range(8, 9).tolist() == list(range(-8, 9))
    with pytest.raises(PromptError, match="wider than the list of N=8 words"):
        hp.lag_range(8, 8)
    assert hp.lag_range([-2, 1, 3], 10).tolist() == [-2, 1, 3]
    with pytest.raises(ProfileError, match="strictly increasing"):
        hp.lag_range((3, -3), 10)
    with pytest.raises(ProfileError, match="lags must be None"):
        hp.lag_range("wide", 10)


def test_bad_shapes_and_rules_are_typed_errors():
    with pytest.raises(PromptError, match="2\\*N\\+1 = 7"):
        hp.lag_block(np.zeros((1, 1, 5, 5)), 3, np.array([0]))
    with pytest.raises(PromptError, match="soft-CRP rule"):
        hp.teacher_forced_transitions(4, rule="psifr")
    with pytest.raises(RecallDataError, match="non-negative"):
        hp.soft_lag_counts(np.array([1]), -np.ones((1, 2)), np.zeros((1, 2), bool), 1)


# --- the command line: published profiles (no model) ---------------------------------------


def test_cli_heads_published_writes_the_same_layout(tmp_path, capsys):
    from icl_cmr.analyses.cli import main
    from cmr.io import load_dataset
    from tests.conftest import published_path

    table = published_path("head_profiles.csv.gz")
    out = tmp_path / "gpt2.nc"
    assert main(["heads", "--published", str(table), "--model", "gpt2-small", "-o", str(out)]) == 0
    ds = load_dataset(out, kind="lag_profile")
    assert ds.profile.dims == ("model", "checkpoint", "layer", "head", "lag")
    assert (ds.sizes["layer"], ds.sizes["head"]) == (12, 12)
    assert "wrote" in capsys.readouterr().out
    # without PATH: the installed copy, the same values
    assert main(["heads", "--published", "--model", "gpt2-small", "-o", str(tmp_path / "installed.nc")]) == 0
    xr.testing.assert_identical(load_dataset(tmp_path / "installed.nc")["profile"], ds["profile"])
    # a model name and --published together is a user error, reported without a traceback
    assert main(["heads", "smollm2-135m", "--published", str(table), "--model", "gpt2-small", "-o", str(out)]) == 1
    assert "not both" in capsys.readouterr().err
