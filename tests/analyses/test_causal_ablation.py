"""Causal ablation: head sets, hooks at the head output, ICL scores and paired statistics.

A tiny random Llama (2 layers, 4 query heads, 2 key/value heads: grouped-query attention) stands
in for a language model; weight surgery on a copy (zeroing the head's columns of the output
projection) is the oracle for zero ablation at ``hook_z``.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from icl_cmr.adapters.lm import interventions
from icl_cmr.analyses.causal import ablation
from cmr.errors import ParameterError, SchemaError
from cmr.io import load_dataset, save_dataset
from tests.conftest import require

EARLY, LATE, WINDOW = 5, 20, 2


@pytest.fixture(scope="module")
def tiny():
    torch = require("torch")
    require("transformer_lens")
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformer_lens.model_bridge import TransformerBridge

    torch.set_num_threads(1)
    vocab = {f"w{i}": i for i in range(1, 64)} | {"<bos>": 0}
    core = Tokenizer(models.WordLevel(vocab, unk_token="w1"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", eos_token="<bos>", unk_token="w1",
                                        add_bos_token=True, name_or_path="tiny-word-level")
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    reference = copy.deepcopy(model)
    bridge = TransformerBridge.boot_transformers("tiny-llama", hf_model=model, tokenizer=tokenizer)
    passages = np.random.default_rng(1).integers(1, 64, size=(5, 32))
    return bridge, reference, passages


def _reference_losses(model, passages, targets, bos=0):
    import torch

    with torch.inference_mode():
        ids = torch.cat([torch.zeros((len(passages), 1), dtype=torch.long), torch.as_tensor(passages)], 1)
        logp = torch.log_softmax(model(ids).logits.double(), -1)
        return np.stack([[-logp[p, t, passages[p, t]].item() for t in targets] for p in range(len(passages))])


def test_zero_ablation_at_hook_z_equals_weight_surgery(tiny):
    bridge, reference, passages = tiny
    targets = np.arange(1, 30)
    base, _ = interventions.passage_losses(bridge, passages, targets, batch_size=2)
    np.testing.assert_allclose(base, _reference_losses(reference, passages, targets), rtol=0, atol=1e-5)
    heads = [(1, 1), (0, 3)]
    ablated, _ = interventions.passage_losses(bridge, passages, targets, heads=heads, mode="zero", batch_size=2)
    surgery = copy.deepcopy(reference)
    d_head = 8
    for layer, head in heads:
        surgery.model.layers[layer].self_attn.o_proj.weight.data[:, head * d_head:(head + 1) * d_head] = 0
    np.testing.assert_allclose(ablated, _reference_losses(surgery, passages, targets), rtol=0, atol=1e-5)
    assert np.abs(ablated - base).max() > 1e-3  # ablating heads changes the outputs
    again, _ = interventions.passage_losses(bridge, passages, targets, batch_size=3)
    np.testing.assert_array_equal(again, base)  # hooks are removed afterwards


def test_mean_ablation_uses_the_heads_mean_output(tiny):
    bridge, reference, passages = tiny
    import torch

    targets = np.arange(1, 30)
    _, means = interventions.passage_losses(bridge, passages, targets, capture_means=True, batch_size=2)
    length = targets.max() + 1
    ids = torch.cat([torch.zeros((len(passages), 1), dtype=torch.long), torch.as_tensor(passages[:, : length - 1])], 1)
    with torch.inference_mode():
        _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n.endswith("attn.hook_z"))
    expected = cache["blocks.1.attn.hook_z"][:, 1:].double().mean(dim=(0, 1)).numpy()
    np.testing.assert_allclose(means[1], expected, atol=1e-6)
    zero, _ = interventions.passage_losses(bridge, passages, targets, heads=[(1, 2)], mode="zero")
    mean, _ = interventions.passage_losses(bridge, passages, targets, heads=[(1, 2)], mode="mean", means=means)
    assert np.abs(zero - mean).max() > 1e-4
    # oracle: mean ablation = zero ablation plus the constant W_O-projected mean added after attention
    surgery = copy.deepcopy(reference)
    o_proj = surgery.model.layers[1].self_attn.o_proj
    shift = o_proj.weight.data[:, 16:24].double() @ torch.as_tensor(means[1, 2])
    o_proj.weight.data[:, 16:24] = 0
    o_proj.bias = torch.nn.Parameter(shift.float())
    np.testing.assert_allclose(mean, _reference_losses(surgery, passages, targets), atol=1e-5)
    with pytest.raises(ParameterError, match="means"):
        interventions.passage_losses(bridge, passages, targets, heads=[(1, 2)], mode="mean")


def test_set_losses_equal_one_bridge_pass_per_set(tiny, monkeypatch):
    # the engine (plain model, resumed at each set's first layer, conditions batched) against
    # passage_losses through the bridge, itself checked against weight surgery above
    bridge, _, passages = tiny
    from icl_cmr.adapters.lm import ablation_engine, interventions

    plain = interventions.plain_model(bridge)
    assert plain is not None and interventions.plain_model(bridge) is plain  # a Llama: built once
    shared = {p.data_ptr() for p in bridge.original_model.parameters()}
    assert all(p.data_ptr() in shared for p in plain.parameters())  # no second copy of the weights
    targets = np.arange(1, 30)
    sets = [[(1, 1), (0, 3)], [(1, 2)], [(0, 0), (1, 0)]]
    base, losses, means = ablation_engine.set_losses(bridge, passages, targets, sets, modes=("zero", "mean"), batch_size=4)
    reference_base, reference_means = interventions.passage_losses(bridge, passages, targets, capture_means=True)
    np.testing.assert_allclose(base, reference_base, rtol=0, atol=1e-5)
    np.testing.assert_allclose(means, reference_means, rtol=0, atol=1e-6)
    for m, mode in enumerate(("zero", "mean")):
        for s, heads in enumerate(sets):
            expected, _ = interventions.passage_losses(bridge, passages, targets, heads=heads, mode=mode, means=reference_means)
            np.testing.assert_allclose(losses[m, s], expected, rtol=0, atol=1e-5)
    assert np.abs(losses[0, 0] - base).max() > 1e-3
    import time

    late = ablation_engine.set_losses(bridge, passages, targets, sets, modes=("zero",), deadline=time.monotonic() - 1)
    assert late[0].shape == (0, targets.size) and late[1].shape == (1, 3, 0, targets.size)  # no passage starts
    zero_only = ablation_engine.set_losses(bridge, passages, targets, sets, modes=("zero",))
    np.testing.assert_allclose(zero_only[0], base, rtol=0, atol=1e-6)
    np.testing.assert_allclose(zero_only[1][0], losses[0], rtol=0, atol=1e-6)
    assert zero_only[2] is None
    with pytest.raises(ParameterError, match="time budget"):
        ablation.run_ablation(bridge, passages, [(1, 0)], n_random=2, n_matched=0, early=EARLY, late=LATE,
                              window=WINDOW, measures="icl", time_budget_s=-1.0, progress=False)
    monkeypatch.setattr(interventions, "plain_model", lambda bridge: None)  # models outside the direct families
    fallback = ablation_engine.set_losses(bridge, passages, targets, sets[:1], modes=("zero",))
    np.testing.assert_allclose(fallback[1][0, 0], losses[0, 0], rtol=0, atol=1e-5)


def test_run_ablation_dataset_round_trip(tiny, tmp_path):
    bridge, _, passages = tiny
    articles = [7, 7, 2, 9, 9]  # passages 0-1 and 3-4 are windows of one article each
    ds = ablation.run_ablation(bridge, passages, [(1, 0), (1, 3)], n_random=3, n_matched=2, control_heads=[(0, 1), (1, 2)],
                               rng=4, early=EARLY, late=LATE, window=WINDOW, batch_size=3, n_boot=200, measures="icl",
                               progress=False,
                               info={"model": "tiny"}, articles=articles)
    assert ds.sizes == {"mode": 2, "head_set": 7, "passage": 5, "member": 2, "comparison": 6}
    assert ds["article"].values.tolist() == articles and ds.attrs["n_articles"] == 3
    assert list(ds["family"].values) == ["top", "induction"] + ["random"] * 3 + ["layer_matched"] * 2
    assert list(ds["set_layer"].sel(head_set="top").values) == [1, 1]
    assert all(list(ds["set_layer"].sel(head_set=f"matched_{i:03d}").values) == [1, 1] for i in range(2))
    effects = ds["icl_score"] - ds["baseline_icl_score"]
    np.testing.assert_allclose(ds["mean_effect"], effects.mean("passage"))
    zero = effects.sel(mode="zero")
    top = zero.sel(head_set="top").values
    by_article = zero.groupby(zero["article"]).mean()  # the unit of the contrasts: article means
    top_articles = by_article.sel(head_set="top").values
    assert ds["mean_difference"].sel(mode="zero", comparison="top_vs_none") == pytest.approx(top_articles.mean())
    assert int(ds["n_units"].sel(mode="zero", comparison="top_vs_none")) == 3
    random_names = [f"random_{i:03d}" for i in range(3)]
    random = zero.sel(head_set=random_names).mean("passage").values
    row = ds.sel(mode="zero", comparison="top_vs_random")
    # the primary statistic: the top set's place among the random sets' mean effects over passages
    assert float(row["rank_pvalue"]) == pytest.approx((1 + np.sum(random >= top.mean())) / 4)
    assert float(row["z"]) == pytest.approx((top.mean() - random.mean()) / random.std(ddof=1))
    assert float(row["mean_difference"]) == pytest.approx(
        top_articles.mean() - by_article.sel(head_set=random_names).values.mean())
    assert float(row["ci_low"]) <= float(row["mean_difference"]) <= float(row["ci_high"])
    assert np.isnan(row["cohens_dz"]) and np.isnan(row["wilcoxon_pvalue"])  # no paired test against a family
    assert np.isnan(ds["rank_pvalue"].sel(comparison="top_vs_none")).all()
    ranks = ds["rank_pvalue"].values
    np.testing.assert_allclose(ds["holm_rank_pvalue"].values, cmr.holm(ranks), equal_nan=True)
    assert float(ds["empirical_pvalue"].sel(mode="zero")) == float(row["rank_pvalue"])
    lines = ablation.summary_lines(ds)
    assert len(lines) == 12
    fixed = [line for line in lines if "_vs_random" not in line and "_vs_layer_matched" not in line]
    assert len(fixed) == 6 and all(line.count("family: primary") == 1 for line in fixed)
    # 3 articles: a t interval, but too few for the bootstrap d_z interval, which says so instead of [+nan, +nan]
    assert all("nan" not in line and f"d_z {float(ds['cohens_dz'].sel(mode=line.split()[0], comparison=line.split()[1][:-1])):+.2f} "
               f"[no interval: needs {ablation.MIN_BOOTSTRAP_PASSAGES} articles]" in line for line in fixed)
    against_sets = sorted(set(lines) - set(fixed))
    assert all(line.count("family: primary") == 2 and " rank " in line and "crossed" in line for line in against_sets)
    # the rank test's power for each set against a family, from the family's own between-set spread
    from icl_cmr.analyses.causal.power import power_lines

    ranked = power_lines(ds)
    assert 0 < len(ranked) <= 6  # 2 modes x (top vs random, top vs layer-matched, induction vs random)
    assert all(line.startswith("rank power ") and "between-set sd" in line for line in ranked)
    from icl_cmr.analyses.study.report import ablation_summary

    whole = ablation_summary(ds, [(1, 0), (1, 3)])
    summary = whole["modes"]["zero"]
    assert summary["top_vs_layer_matched"]["n_null"] == 2 and summary["empirical_pvalue"] == float(row["rank_pvalue"])
    # the random family alone: neither the induction control nor the layer-matched sets
    assert whole["n_random"] == 3
    assert summary["random_effect_mean"] == pytest.approx(random.mean())
    path = save_dataset(ds, tmp_path / "ablation.nc")
    back = load_dataset(path, kind="ablation")
    xr.testing.assert_identical(back, ds)
    with pytest.raises(SchemaError):
        save_dataset(ds.drop_vars("baseline_icl_score"), tmp_path / "bad.nc")


def test_scored_positions_must_fit_the_passage(tiny):
    bridge, _, passages = tiny
    with pytest.raises(ParameterError, match="windows"):
        ablation.run_ablation(bridge, passages, [(0, 0)], n_random=1, early=5, late=40, window=2, progress=False)


# --- head sets ------------------------------------------------------------------------------


def test_parse_heads():
    assert ablation.parse_heads("L18.H6, L17.H3,l2h0") == [(18, 6), (17, 3), (2, 0)]
    for bad in ("", "18.6", "L1.H2,L1.H2"):
        with pytest.raises(ParameterError):
            ablation.parse_heads(bad)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), layer_matched=st.booleans(),
       target=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7)), min_size=1, max_size=8, unique=True))
def test_random_sets_are_seeded_disjoint_or_layer_matched(seed, layer_matched, target):
    sets = ablation.random_head_sets(6, 8, target, n_sets=5, rng=seed, layer_matched=layer_matched)
    assert sets == ablation.random_head_sets(6, 8, target, n_sets=5, rng=seed, layer_matched=layer_matched)
    for heads in sets:
        assert len(heads) == len(set(heads)) == len(target)
        if layer_matched:  # same heads per layer, drawn among all of the layer's heads
            assert sorted(l for l, _ in heads) == sorted(l for l, _ in target)
        else:
            assert not set(heads) & set(target)


def test_random_sets_depend_on_the_seed_and_refuse_heads_outside_the_model():
    target = [(0, 0), (3, 1)]
    assert ablation.random_head_sets(30, 9, target, n_sets=20, rng=0) != ablation.random_head_sets(30, 9, target, n_sets=20, rng=1)
    # a layer holding more top heads than others still gets layer-matched sets
    matched = ablation.random_head_sets(4, 3, [(2, 0), (2, 1)], n_sets=40, rng=0, layer_matched=True)
    assert {tuple(s) for s in matched} <= {((2, 0), (2, 1)), ((2, 0), (2, 2)), ((2, 1), (2, 2))}
    assert len({tuple(s) for s in matched}) == 3
    with pytest.raises(ParameterError, match="outside the model"):
        ablation.random_head_sets(4, 3, [(4, 0)], n_sets=2, rng=0)
    with pytest.raises(ParameterError, match="control set"):
        ablation.head_sets(4, 3, [(0, 0)], control_heads=[(1, 0), (1, 1)])


def test_top_heads_picks_smallest_finite_distance():
    from icl_cmr.adapters.head_ranking import top_heads

    distance = np.array([[0.9, 0.1, np.nan], [0.05, 0.7, 0.3]])
    fits = xr.Dataset({"distance": (("model", "layer", "head"), distance[None])},
                      coords={"layer": [0, 1], "head": [0, 1, 2], "model": ["m"]})
    assert top_heads(fits, n_heads=3) == [(1, 0), (0, 1), (1, 2)]
    assert top_heads(fits, fraction=0.1) == [(1, 0)]
    assert top_heads(fits, n_heads=3, composing=True) == [(1, 0), (1, 2), (1, 1)]  # never layer 0
    with pytest.raises(ParameterError, match="finite"):
        top_heads(fits, n_heads=6)
    with pytest.raises(ParameterError, match="3 of 6 heads have a finite distance"):
        top_heads(fits, n_heads=4, composing=True)
    with pytest.raises(SchemaError, match="no variable"):
        top_heads(fits, variable="cmr_distance")
    with pytest.warns(DeprecationWarning, match="top_heads_from_fits is deprecated .*head_ranking.top_heads"):
        assert ablation.top_heads_from_fits(fits, fraction=0.5, variable="distance", largest=True) == top_heads(
            fits, fraction=0.5, largest=True)


# --- statistics -----------------------------------------------------------------------------


def test_paired_statistics_match_scipy():
    from scipy import stats

    rng = np.random.default_rng(3)
    top = rng.normal(0.3, 1.0, 40)
    random_mean = rng.normal(0.0, 1.0, 40)
    result = ablation.paired_statistics(top - random_mean)
    expected = stats.ttest_rel(top, random_mean)
    assert result["t_statistic"] == pytest.approx(expected.statistic, rel=1e-12)
    assert result["t_pvalue"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert result["wilcoxon_pvalue"] == pytest.approx(stats.wilcoxon(top, random_mean).pvalue, rel=1e-12)
    d = top - random_mean
    assert result["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)


def test_statistics_of_degenerate_samples_are_nan_not_invented():
    result = ablation.paired_statistics(np.zeros(10))
    assert result["mean_difference"] == 0.0
    assert np.isnan(result["t_pvalue"]) and np.isnan(result["wilcoxon_pvalue"]) and np.isnan(result["cohens_dz"])


def test_rank_pvalue_hand_case():
    assert ablation.rank_pvalue(0.5, [0.1, 0.2, 0.6, 0.5]) == pytest.approx(3 / 5)  # a tie counts against
    assert ablation.rank_pvalue(1.0, np.zeros(50)) == pytest.approx(1 / 51)
    with pytest.raises(ParameterError):
        ablation.rank_pvalue(1.0, [])


@pytest.mark.parametrize("n_null", [1, 19, 50])
def test_rank_pvalue_is_exact_under_exchangeability(n_null):
    # Known answer: when the top set is one more draw from the null (exchangeable), each of the
    # n + 1 draws is the "top" equally often, so p takes each value k / (n + 1) exactly once and
    # P(p <= alpha) = floor(alpha (n + 1)) / (n + 1) exactly, with no simulation error.
    values = np.random.default_rng(n_null).normal(size=n_null + 1)
    p = np.array([ablation.rank_pvalue(values[i], np.delete(values, i)) for i in range(n_null + 1)])
    np.testing.assert_allclose(np.sort(p), np.arange(1, n_null + 2) / (n_null + 1), rtol=0, atol=1e-15)
    for alpha in (0.01, 0.05, 0.1, 0.5):
        assert np.mean(p <= alpha) == pytest.approx(np.floor(alpha * (n_null + 1) + 1e-9) / (n_null + 1), abs=1e-15)


def test_rank_pvalue_on_seeded_exchangeable_draws_is_uniform():
    # the same by simulation: 4,000 experiments of 1 + 50 exchangeable set effects
    draws = np.random.default_rng(7).normal(size=(4000, 51))
    p = np.array([ablation.rank_pvalue(row[0], row[1:]) for row in draws])
    assert np.mean(p <= 0.05) == pytest.approx(2 / 51, abs=0.01)  # exact rate 2/51 = 0.039
    assert np.mean(p <= 1 / 51) == pytest.approx(1 / 51, abs=0.007)


@pytest.mark.parametrize("n_random, n_matched, n_modes, control", [
    (50, 0, 1, False), (50, 20, 1, True), (100, 50, 1, True), (50, 50, 2, True), (120, 50, 2, True), (3, 0, 1, False)])
def test_holm_rank_floor_is_the_best_case_of_the_design(n_random, n_matched, n_modes, control):
    # every rank test at its smallest possible p: 1 / (n + 1) for its own null family
    best = [1 / (n_random + 1)] + ([1 / (n_matched + 1)] if n_matched else []) + ([1 / (n_random + 1)] if control else [])
    family = np.array(best * n_modes)
    assert family.size == ablation.rank_family_size(n_matched=n_matched, n_modes=n_modes, control=control)
    floor = ablation.holm_rank_floor(n_random, n_matched=n_matched, n_modes=n_modes, control=control)
    assert np.nanmin(cmr.holm(family)) == pytest.approx(floor)
    assert (floor < 0.05) == (n_random >= 20 * family.size or n_matched >= 20 * family.size)


def test_effect_intervals_match_scipy_and_cover_dz():
    from scipy import stats

    d = np.random.default_rng(2).normal(0.4, 1.0, 60)
    out = ablation.effect_intervals(d, n_boot=2000, rng=0)
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert out["ci_low"] == pytest.approx(ci.low, rel=1e-12) and out["ci_high"] == pytest.approx(ci.high, rel=1e-12)
    dz = d.mean() / d.std(ddof=1)
    assert out["dz_ci_low"] < dz < out["dz_ci_high"]
    assert out == ablation.effect_intervals(d, n_boot=2000, rng=0)  # seeded
    assert np.isnan(ablation.effect_intervals(d[:2])["ci_low"])
    few = ablation.effect_intervals(d[:ablation.MIN_BOOTSTRAP_PASSAGES - 1])
    assert np.isfinite(few["ci_low"]) and np.isnan(few["dz_ci_low"])
