"""Measures with power beside the ICL score, resample ablation and the power calculation.

Oracles: a plain TransformerLens implementation of resample ablation (``run_with_hooks`` with
a hook that puts the donor passage's cached ``hook_z`` into the ablated heads' slices), the
bridge's own losses for the extra positions, hand-worked bigram and repeated-token cases, and
SciPy / a simulation for the power of the paired t-test.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from cmr.errors import ParameterError
from cmr.io import load_dataset, save_dataset
from cmr.multiple_comparisons import holm
from icl_cmr.adapters.lm import ablation_engine, interventions
from icl_cmr.analyses.causal import ablation
from icl_cmr.analyses.causal import measures as ablation_measures
from icl_cmr.analyses.causal import power as ablation_power

EARLY, LATE, WINDOW = 5, 40, 2


@pytest.fixture(scope="module")
def passages():
    return np.random.default_rng(4).integers(3, 40, size=(4, 60))


def _resample_by_hooks(bridge, passages, targets, heads, donors):
    """Resample ablation the plain TransformerLens way: cache the donor's hook_z, overwrite the heads' slices."""
    import torch

    ids = torch.cat([torch.full((len(passages), 1), int(bridge.tokenizer.bos_token_id)), torch.as_tensor(passages)], 1)
    with torch.inference_mode():
        _, cache = bridge.run_with_cache(ids, names_filter=lambda name: name.endswith("attn.hook_z"))
        out = np.empty((len(passages), len(targets)))
        for p in range(len(passages)):
            def make(layer, p=p):
                def hook(z, hook):
                    z = z.clone()
                    for h in sorted(h for l, h in heads if l == layer):
                        z[:, :, h] = cache[f"blocks.{layer}.attn.hook_z"][int(donors[p]), :, h]
                    return z
                return hook
            layers = sorted({l for l, _ in heads})
            logits = bridge.run_with_hooks(ids[p:p + 1], fwd_hooks=[(f"blocks.{l}.attn.hook_z", make(l)) for l in layers])
            logp = torch.log_softmax(logits[0].double(), -1)
            out[p] = [-logp[t, passages[p, t]].item() for t in targets]  # BOS first: row t predicts text token t
    return out


def test_resample_equals_transformer_lens_hooks(tiny, passages):
    targets = np.arange(1, 60)
    donors = ablation_engine.donor_passages(len(passages), rng=3)
    sets = [[(1, 1), (0, 3)], [(1, 2)]]
    base, losses, _ = ablation_engine.set_losses(tiny.bridge, passages, targets, sets, modes=("zero", "resample"),
                                               batch_size=3, donors=donors)
    for s, heads in enumerate(sets):
        expected = _resample_by_hooks(tiny.bridge, passages, targets, heads, donors)
        np.testing.assert_allclose(losses[1, s], expected, rtol=0, atol=2e-5)
        assert np.abs(losses[1, s] - base).max() > 1e-3 and np.abs(losses[1, s] - losses[0, s]).max() > 1e-3
    # a zero row batched beside resample rows computes as without them
    zero_only = ablation_engine.set_losses(tiny.bridge, passages, targets, sets, modes=("zero",), batch_size=3)
    np.testing.assert_array_equal(zero_only[1][0], losses[0])


def test_resample_through_the_bridge_equals_the_engine(tiny, passages, monkeypatch):
    targets = np.arange(1, 60)
    donors = ablation_engine.donor_passages(len(passages), rng=0)
    direct = ablation_engine.set_losses(tiny.bridge, passages, targets, [[(1, 1), (0, 2)]], modes=("resample",), donors=donors)
    monkeypatch.setattr(interventions, "plain_model", lambda bridge: None)  # models outside the direct families
    bridged = ablation_engine.set_losses(tiny.bridge, passages, targets, [[(1, 1), (0, 2)]], modes=("resample",), donors=donors)
    np.testing.assert_allclose(bridged[1], direct[1], rtol=0, atol=2e-5)


def test_donors_are_a_seeded_derangement():
    donors = ablation_engine.donor_passages(7, rng=5)
    assert sorted(donors.tolist()) == list(range(7)) and not np.any(donors == np.arange(7))
    np.testing.assert_array_equal(donors, ablation_engine.donor_passages(7, rng=5))
    with pytest.raises(ParameterError, match="at least 2 passages"):
        ablation_engine.donor_passages(1, rng=0)


def test_bad_donors_are_one_typed_line(tiny, passages):
    for donors in (None, np.arange(4), np.array([1, 2, 3])):
        with pytest.raises(ParameterError) as caught:
            ablation_engine.set_losses(tiny.bridge, passages, [1, 2], [[(0, 1)]], modes=("resample",), donors=donors)
        assert "\n" not in str(caught.value) and "donor" in str(caught.value)


def test_extra_targets_leave_the_scored_losses_bit_for_bit(tiny, passages):
    targets = ablation.scored_positions(EARLY, LATE, WINDOW, 60)
    extra = np.arange(1, LATE + WINDOW + 1)
    sets = [[(1, 1), (0, 3)], [(0, 0)]]
    plain = ablation_engine.set_losses(tiny.bridge, passages, targets, sets, modes=("zero", "mean"))
    base, losses, means, more = ablation_engine.set_losses(tiny.bridge, passages, targets, sets, modes=("zero", "mean"),
                                                         extra_targets=extra)
    np.testing.assert_array_equal(base, plain[0])
    np.testing.assert_array_equal(losses, plain[1])
    reference, _ = interventions.passage_losses(tiny.bridge, passages, extra)
    np.testing.assert_allclose(more["base"], reference, rtol=0, atol=2e-5)
    ablated, _ = interventions.passage_losses(tiny.bridge, passages, extra, heads=sets[0], mode="mean", means=means)
    np.testing.assert_allclose(more["losses"][1, 0], ablated, rtol=0, atol=2e-5)


def test_bigram_completions_by_hand():
    #          t: 0  1  2  3  4  5  6
    passage = [[7, 8, 9, 7, 8, 9, 8]]
    # (7, 8) first at t=1, again at t=4; (8, 9) at t=2, again at t=5; (9, 8) only at t=6
    mask = ablation_measures.bigram_completions(passage, np.arange(1, 7))
    assert mask.tolist() == [[False, False, False, True, True, False]]
    losses = np.array([[1.0, 1.0, 1.0, 3.0, 5.0, 2.0]])
    # completing tokens (t = 4, 5): mean 4; the others (t = 1, 2, 3, 6): mean 1.25
    score = ablation_measures.measure_scores("bigram", losses, np.arange(1, 7), passages=passage)
    assert score.tolist() == [4.0 - 1.25]
    assert np.isnan(ablation_measures.measure_scores("bigram", losses[:, :2], [1, 2], passages=passage)).all()


def test_repeated_token_passages():
    rep = ablation_measures.repeated_token_passages(20, [0, 3], n_passages=50, repeat_length=6, rng=2)
    assert rep.shape == (50, 12) and rep.dtype == np.int64
    np.testing.assert_array_equal(rep[:, :6], rep[:, 6:])
    assert not np.isin(rep, [0, 3]).any() and rep.max() < 20
    np.testing.assert_array_equal(rep, ablation_measures.repeated_token_passages(20, [0, 3], n_passages=50, repeat_length=6, rng=2))


def test_repeated_tokens_score_is_second_copy_minus_first_copy():
    # repeat length 4: first copy tokens 1..3, second copy tokens 5..7 (token 4, the second copy's first, left out)
    positions = ablation_measures.repeated_positions(4)
    assert positions.tolist() == [1, 2, 3, 5, 6, 7]
    losses = np.array([[6.0, 7.0, 8.0, 1.0, 2.0, 3.0],   # copying works: second copy 2, first copy 7
                       [9.0, 9.0, 9.0, 9.0, 9.0, 9.0]])  # damage without copying: the same loss on both copies
    score = ablation_measures.measure_scores("repeated_tokens", losses, positions, repeat_length=4)
    assert score.tolist() == [2.0 - 7.0, 0.0]
    first, second = ablation_measures.copy_losses(losses, positions, repeat_length=4)
    assert first.tolist() == [7.0, 9.0] and second.tolist() == [2.0, 9.0]
    # a uniform rise of the loss (non-specific damage) leaves the score as it was
    np.testing.assert_array_equal(
        ablation_measures.measure_scores("repeated_tokens", losses + 1.5, positions, repeat_length=4), score)
    with pytest.raises(ParameterError, match="repeat_length"):
        ablation_measures.measure_scores("repeated_tokens", losses, positions)


def test_wide_icl_scores():
    positions = np.arange(1, 11)
    losses = np.arange(1.0, 11.0)[None]  # loss(t) = t
    score = ablation_measures.measure_scores("wide_icl", losses, positions, wide_early=(2, 4), wide_late=(8, 10))
    assert score.tolist() == [9.0 - 3.0]


def test_run_ablation_measures_keep_the_icl_score(tiny, passages, tmp_path):
    kw = dict(n_random=3, n_matched=2, control_heads=[(0, 0), (0, 1)], early=EARLY, late=LATE, window=WINDOW,
              rng=1, n_boot=50, progress=False)
    plain = ablation.run_ablation(tiny.bridge, passages, [(1, 0), (1, 3)], modes=("zero", "mean"), measures="icl",
                                  **kw)
    assert "measure" not in plain.dims
    full = ablation.run_ablation(tiny.bridge, passages, [(1, 0), (1, 3)], modes=("zero", "mean", "resample"),
                                 measures="all", wide_early=(3, 10), wide_late=(30, 42), repeat_length=12, **kw)
    for name in ("icl_score", "baseline_icl_score", "rank_pvalue", "t_pvalue"):
        np.testing.assert_array_equal(full[name].sel(mode=["zero", "mean"]).values if "mode" in full[name].dims
                                      else full[name].values, plain[name].values)
    assert full["measure"].values.tolist() == list(ablation_measures.MEASURES)
    np.testing.assert_array_equal(full["measure_score"].sel(measure="icl").values, full["icl_score"].values)
    np.testing.assert_array_equal(full["measure_rank_pvalue"].sel(measure="icl").values, full["rank_pvalue"].values)
    conventions = json.loads(full.attrs["measure_conventions"])
    assert "> 0: ablation hurts" in conventions["bigram"] and "BOS not counted" in conventions["repeated_tokens"]
    assert "0-based" in str(full["measure_definition"].sel(measure="wide_icl").values)
    # Holm over measures x modes x comparisons: 4 x 3 x (top, matched, control) rank tests
    ranks = full["measure_rank_pvalue"].values
    assert np.isfinite(ranks).sum() == 4 * 3 * 3
    np.testing.assert_allclose(full["measure_holm_rank_pvalue"].values, holm(ranks), equal_nan=True)
    effects = full["measure_score"] - full["baseline_measure_score"]
    np.testing.assert_allclose(full["measure_mean_effect"].values, effects.mean("passage").values)
    # the repeated-token score subtracts the first copy; both copies' losses are kept beside it
    first, second = full["repeated_first_copy_loss"], full["repeated_second_copy_loss"]
    np.testing.assert_allclose(full["measure_score"].sel(measure="repeated_tokens").values, (second - first).values)
    np.testing.assert_allclose(full["baseline_measure_score"].sel(measure="repeated_tokens").values,
                               (full["baseline_repeated_second_copy_loss"] - full["baseline_repeated_first_copy_loss"]).values)
    lines = ablation_power.power_lines(full)
    paired = [line for line in lines if line.startswith("power ")]
    ranked = [line for line in lines if line.startswith("rank power ")]
    assert paired and all("units for 80% power at alpha 0.05/" in line for line in paired)
    assert all("_vs_random" not in line and "_vs_layer_matched" not in line for line in paired)
    assert ranked and all("between-set sd" in line and "in the limit of many units" in line for line in ranked)
    assert len(paired) + len(ranked) == len(lines)
    path = save_dataset(full, tmp_path / "abl.nc")
    back = load_dataset(path, "ablation")
    np.testing.assert_array_equal(back["measure_score"].values, full["measure_score"].values)
    assert back.attrs["measure_conventions"] == full.attrs["measure_conventions"]
    # the figure: one row per mode, one column per measure, each titled with its own rank p and z
    from icl_cmr.analyses import plots

    fig = plots.ablation_result(full)
    assert len(fig.axes) == 3 * 4
    panel = fig.axes[4 * 0 + 2]  # zero ablation, bigram
    row = full.sel(measure="bigram", mode="zero", comparison="top_vs_random")
    assert panel.get_title() == (f"bigram, zero: rank p = {float(row['measure_rank_pvalue']):.3f}, "
                                 f"z = {float(row['measure_z']):+.2f}")
    top = next(line for line in panel.lines if line.get_label() == "top CMR-like set")
    assert top.get_xdata()[0] == pytest.approx(float(full["measure_mean_effect"].sel(measure="bigram", mode="zero",
                                                                                      head_set="top")))
    assert len(plots.ablation_result(full, measures=["icl", "repeated_tokens"]).axes) == 3 * 2
    # the report's summary carries the measures beside the ICL score, JSON-safe
    from icl_cmr.analyses.study.report import ablation_summary

    summary = json.loads(json.dumps(ablation_summary(full, [(1, 0), (1, 3)])))
    assert sorted(summary["measures"]) == ["bigram", "repeated_tokens", "wide_icl"]
    entry = summary["measures"]["bigram"]["zero"]["top_vs_random"]
    assert entry["rank_pvalue"] == pytest.approx(float(row["measure_rank_pvalue"]))
    assert "measures" not in ablation_summary(plain, [(1, 0), (1, 3)])
    with pytest.raises(ParameterError, match="measures must be among"):
        plots.ablation_result(plain, measures="bigram")


def test_power_of_the_paired_t_test():
    from scipy import stats

    # G*Power's classic: d_z 0.5 at alpha 0.05 two-sided needs 34 pairs for 80%
    assert ablation_power.passages_for_power(0.5, 1.0) == 34
    n = ablation_power.passages_for_power(0.18, 0.1, alpha=0.05, m=12)
    assert ablation_power.paired_t_power(n, 0.18, 0.1, alpha=0.05 / 12) >= 0.8 > ablation_power.paired_t_power(
        n - 1, 0.18, 0.1, alpha=0.05 / 12)
    # a simulation agrees with the noncentral t
    rng = np.random.default_rng(0)
    draws = rng.normal(0.3, 1.0, size=(4000, 25))
    hits = np.mean(stats.ttest_1samp(draws, 0.0, axis=1).pvalue < 0.05)
    assert abs(hits - ablation_power.paired_t_power(25, 0.3, 1.0)) < 0.03


def test_random_sets_for_the_holm_floor():
    for m in (1, 3, 6, 24):
        n = ablation_power.random_sets_for_holm(m)
        assert ablation_power.holm_rank_floor(n, n_measures=m) < 0.05 <= ablation_power.holm_rank_floor(n - 1, n_measures=m)
    assert ablation_power.rank_family_size(n_matched=0, n_modes=1, control=True, n_measures=3) == 6 and ablation_power.random_sets_for_holm(6) == 120


def test_design_presets_are_the_documented_ones():
    from icl_cmr.analyses.causal.design import PRESETS, AblationDesign

    # docs/ablation.md: icl-cmr ablate's defaults, --design cpu, --design study; run_layout: the demo stage
    assert (AblationDesign().n_passages, AblationDesign().n_random, AblationDesign().n_matched) == (300, 120, 50)
    assert (AblationDesign().modes, AblationDesign().measures, AblationDesign().dtype) == (("zero", "mean"), "all",
                                                                                           "float32")
    cpu = PRESETS["cpu"]
    assert (cpu.n_passages, cpu.n_random, cpu.n_matched, cpu.modes, cpu.dtype) == (24, 120, 0, ("zero",), "float32")
    assert cpu.measures == ("icl", "bigram", "repeated_tokens")
    study = PRESETS["study"]
    assert (study.n_passages, study.n_random, study.n_matched, study.modes, study.measures) == (
        300, 1000, 1000, ("zero", "mean"), ("icl",))
    demo = PRESETS["demo"]
    assert (demo.n_passages, demo.n_random, demo.n_matched, demo.modes) == (6, 50, 0, ("zero",))
    assert "icl" in demo.measures and {"bigram", "repeated_tokens"} & set(demo.measures)
    assert AblationDesign.preset("study", n_passages=9, n_random=None).n_random == 1000  # None keeps the field
    for bad in (dict(n_random=0), dict(modes=("zero", "half")), dict(measures="bigram,induction"),
                dict(top_fraction=0.0), dict(wide_early="20")):
        with pytest.raises(ParameterError):
            AblationDesign(**bad)
    with pytest.raises(ParameterError, match="presets: cpu, study, demo"):
        AblationDesign.preset("gpu")
    with pytest.raises(ParameterError, match="unknown design fields"):
        AblationDesign().replace(n_sets=3)
    # "all" leaves out what cannot fit, with a note; named measures that cannot fit are an error
    measures, notes = AblationDesign(repeat_length=200).fitted_measures(n_tokens=32, n_ctx=256)
    assert measures == ("icl", "bigram") and len(notes) == 2
    with pytest.raises(ParameterError, match="exceed the model's context of 256"):
        cpu.replace(repeat_length=200).fitted_measures(n_ctx=256)


def test_cli_designs_and_measures(tmp_path, capsys):
    from icl_cmr.analyses.causal.design import PRESETS, AblationDesign
    from icl_cmr.analyses.cli import build_parser, main
    from icl_cmr.analyses.commands.ablate import build_design

    parse = build_parser().parse_args
    for name in PRESETS:  # a preset alone builds exactly that preset
        assert build_design(parse(["ablate", "--design", name, "--heads", "L1.H0", "-o", "a.nc"])) == PRESETS[name]
    mine = build_design(parse(["ablate", "--design", "study", "--n-passages", "9", "--heads", "L1.H0", "-o", "a.nc"]))
    assert mine == PRESETS["study"].replace(n_passages=9)
    plain = build_design(parse(["ablate", "--heads", "L1.H0", "-o", "a.nc"]))
    assert plain == AblationDesign()  # no options: the documented defaults, nothing else
    given = build_design(parse(["ablate", "--heads", "L1.H0", "--mode", "all", "--measures", "bigram", "--early", "7",
                                "--wide-late", "300:400", "-o", "a.nc"]))
    assert given == AblationDesign(modes=("zero", "mean", "resample"), measures=("icl", "bigram"), early=7,
                                   wide_late=(300, 400))
    for argv, expected in ((["--measures", "bigram,induction"], "measures must be among"),
                           (["--wide-late", "400:600"], "--wide-late must satisfy")):
        assert main(["ablate", "--heads", "L1.H0", *argv, "-o", str(tmp_path / "a.nc")]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("icl-cmr ablate: error: ") and expected in err
    assert list(tmp_path.iterdir()) == []


def test_cli_default_measures_leave_out_what_cannot_fit(tl, tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    model_dir = tmp_path / "tiny"
    hf_model, tokenizer = tl.tiny_hf_model(rng=0)
    hf_model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    words = [w.lstrip("Ġ") for w in tokenizer.get_vocab() if w.startswith("Ġ") and w[1:].isalpha()]
    text = tmp_path / "text.txt"
    text.write_text("".join(" " + w for w in np.random.default_rng(0).choice(sorted(words), 400)))
    common = [str(model_dir), "--heads", "L1.H2", "--text", str(text), "--n-passages", "3", "--n-tokens", "32",
              "--early", "5", "--late", "20", "--window", "2", "--n-random", "2", "--n-matched", "0", "--mode", "zero"]
    assert main(["ablate", *common, "--repeat-length", "200", "-o", str(tmp_path / "a.nc")]) == 0
    out = capsys.readouterr().out
    assert "note: wide_icl left out" in out and "note: repeated_tokens left out" in out  # the tiny context is 256
    result = load_dataset(tmp_path / "a.nc", "ablation")
    assert result["measure"].values.tolist() == ["icl", "bigram"]
    assert main(["ablate", *common, "--measures", "repeated_tokens", "--repeat-length", "200",
                 "-o", str(tmp_path / "b.nc")]) == 1
    line = capsys.readouterr().err.split("\n")[-2]  # the weights' loading bar comes first
    assert line.startswith("icl-cmr ablate: error: repeated_tokens") and "exceed the model's context of 256" in line
    assert not (tmp_path / "b.nc").exists()
    # one text file is one article: at most --max-per-article (4) of its windows unless the cap is lifted
    many = [a if a != "3" else "6" for a in common]
    assert main(["ablate", *many, "--measures", "icl", "-o", str(tmp_path / "c.nc")]) == 1
    line = capsys.readouterr().err.split("\n")[-2]
    assert "at most 4 per document" in line and "--max-per-article" in line
    assert main(["ablate", *many, "--max-per-article", "-1", "-o", str(tmp_path / "c.nc")]) == 1
    assert "--max-per-article must be an integer >= 0" in capsys.readouterr().err


def test_the_run_ablation_stage_uses_the_demo_design():
    from icl_cmr.analyses.causal.design import PRESETS
    from icl_cmr.analyses.study.layout import DEMO_SETTINGS
    from icl_cmr.analyses.study.stages import ablation_design

    assert ablation_design(DEMO_SETTINGS) == PRESETS["demo"]
    assert ablation_design({**DEMO_SETTINGS, "ablation_random": 7}) == PRESETS["demo"].replace(n_random=7)
    with pytest.raises(ParameterError, match="modes"):
        ablation_design({**DEMO_SETTINGS, "ablation_modes": ["half"]})
