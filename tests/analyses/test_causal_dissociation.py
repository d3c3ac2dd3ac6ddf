"""Does CMR-likeness explain ablation effects beyond induction? Stratified sets, single-head
regressions and random-set regressions.

Oracles: the composition of every stratified random set counted cell by cell; synthetic
per-head effects with a planted CMR effect (recovered) or none (an interval covering 0 and a
permutation p that is not small); random sets with a planted effect of one member head; and the
command end to end on a tiny random Llama.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from cmr.errors import ParameterError, SchemaError
from icl_cmr.analyses.causal import dissociation as dis
from icl_cmr.analyses.causal.dissociation_io import combine, experiment_view, summary_lines
from icl_cmr.analyses.causal.regression import head_regression, nested_regression, ols_table

N_LAYERS, N_HEADS = 30, 9


def _sources(seed=0, n_layers=N_LAYERS, n_heads=N_HEADS):
    """Synthetic heads and fits datasets: induction scores skewed low, profiles peaking at -2, 0 or +1."""
    rng = np.random.default_rng(seed)
    coords = {"layer": np.arange(n_layers), "head": np.arange(n_heads)}
    grid = ("layer", "head")
    heads = xr.Dataset({"induction_score": (grid, rng.beta(0.5, 4, (n_layers, n_heads))),
                        "previous_token_score": (grid, rng.random((n_layers, n_heads)) * 0.3),
                        "duplicate_token_score": (grid, rng.random((n_layers, n_heads)) * 0.3)}, coords=coords)
    lags = np.arange(-5, 6)
    profile = rng.normal(0, 1, (n_layers, n_heads, lags.size))
    peaks = rng.choice([3, 5, 6], (n_layers, n_heads))  # lags -2, 0, +1
    np.put_along_axis(profile, peaks[..., None], 6.0, axis=-1)
    fits = xr.Dataset({"distance": (grid, rng.random((n_layers, n_heads))),
                       "profile": (("layer", "head", "lag"), profile),
                       "parameters": (("layer", "head", "parameter"), rng.random((n_layers, n_heads, 3)))},
                      coords={**coords, "lag": lags, "parameter": ["beta_enc", "beta_rec", "gamma"]})
    return heads, fits


@pytest.fixture(scope="module")
def table():
    return dis.head_table(*_sources())


def test_head_table_flags_and_peaks(table):
    heads, fits = _sources()
    assert (table["cmr_like"].values == (fits["distance"].values < 0.5)).all()
    assert (table["induction"].values == (heads["induction_score"].values >= 0.1)).all()
    assert set(np.unique(table["peak_lag"].values)) == {-2.0, 0.0, 1.0}
    targets = dis.target_sets(table)
    lag0, lag1 = set(targets["cmr_lag0"]), set(targets["cmr_lag1"])
    assert lag0 and lag1 and not lag0 & lag1 and lag0 | lag1 < set(targets["cmr_not_induction"])
    for layer, head in targets["cmr_not_induction"]:
        row = table.sel(layer=layer, head=head)
        assert int(row["cmr_like"]) == 1 and float(row["induction_score"]) < 0.1
    for layer, head in targets["induction_only"]:
        row = table.sel(layer=layer, head=head)
        assert int(row["cmr_like"]) == 0 and float(row["induction_score"]) >= 0.1
    with pytest.raises(SchemaError, match="strict definition of CMR-like needs a profile_null"):
        dis.head_table(heads, fits, definition="strict")


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n_bins=st.integers(2, 5))
def test_stratified_sets_match_the_layer_and_induction_composition_exactly(table, seed, n_bins):
    targets = dis.target_sets(table)
    nulls = dis.null_sets(table, targets, n_sets=25, rng=seed, n_bins=n_bins)
    bins, edges = dis.induction_bins(table["induction_score"].values.ravel(), threshold=0.1, n_bins=n_bins)
    assert 0.1 in edges  # induction heads never share a bin with others
    bin_of = dict(zip(((int(l), int(h)) for l in table["layer"].values for h in table["head"].values), bins))
    induction = table["induction"].to_series().to_dict()
    for name, (family, sets, log_count) in nulls.items():
        def cells(heads):
            return Counter((l, bin_of[(l, h)]) if family == "stratified" else (l,) for l, h in heads)

        assert family == ("layer" if name == "induction_only" else "stratified")
        assert len(sets) == 25 and log_count > 0
        for heads in sets:
            assert len(set(heads)) == len(heads) == len(targets[name])
            assert cells(heads) == cells(targets[name])
        if family == "stratified":  # the sets of the CMR targets hold no induction head
            assert not any(induction[head] for heads in sets for head in heads)


def test_the_target_is_one_possible_draw():
    strata = {(0, h): 0 for h in range(3)} | {(1, h): 1 for h in range(3)}
    sets, log_count = dis.stratified_sets([(0, 1), (1, 2)], strata, n_sets=400, rng=0)
    assert np.isclose(log_count, np.log10(9))
    assert set(map(tuple, sets)) == {((0, a), (1, b)) for a in range(3) for b in range(3)}


def _effects(table, y, measure="bigram"):
    return xr.Dataset({"head_mean_effect": (("measure", "mode", "layer", "head"), y.reshape(1, 1, *y.shape))},
                      coords={"measure": [measure], "mode": ["zero"], "layer": table["layer"].values,
                              "head": table["head"].values})


def test_the_regression_recovers_a_cmr_effect_beyond_induction(table):
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.05, table["distance"].shape)
    y = 0.8 * table["induction_score"].values - 0.1 * table["distance"].values + noise
    out = head_regression(_effects(table, y), table, n_boot=200, n_perm=200, rng=0).isel(measure=0, mode=0)
    # the population partial R^2: var(0.1 U(0, 1)) / (var(0.1 U(0, 1)) + 0.05^2) = 0.25
    assert float(out["head_partial_r2_adjusted"]) == pytest.approx(0.25, abs=0.07) and float(out["head_ci_low"]) > 0.1
    assert float(out["head_permutation_pvalue"]) == pytest.approx(1 / 201)
    assert float(out["head_r2_full"]) > float(out["head_r2_base"])
    coefficient = out["head_cmr_coefficient"].sel(feature="distance")
    assert float(coefficient) == pytest.approx(-0.1 * float(table["distance"].std()), rel=0.15)
    assert abs(float(out["head_cmr_coefficient"].sel(feature="beta_enc"))) < 0.01


def test_effects_of_induction_alone_leave_nothing_to_the_cmr_features(table):
    rng = np.random.default_rng(2)
    y = (0.8 * table["induction_score"].values + 0.02 * table["layer"].values[:, None]
         + rng.normal(0, 0.05, table["distance"].shape))
    out = head_regression(_effects(table, y), table, n_boot=200, n_perm=200, rng=0).isel(measure=0, mode=0)
    assert float(out["head_r2_base"]) > 0.5
    assert float(out["head_ci_low"]) < 0 < float(out["head_ci_high"])
    assert abs(float(out["head_partial_r2_adjusted"])) < 0.02
    assert float(out["head_permutation_pvalue"]) > 0.1


def test_nested_regression_is_calibrated_under_the_null():
    rng = np.random.default_rng(3)
    pvalues = []
    for _ in range(40):
        base = np.column_stack([np.ones(60), rng.normal(size=60)])
        extra = rng.normal(size=(60, 2)) + base[:, 1:] * 0.5  # correlated with the baseline
        y = base[:, 1] + rng.normal(size=60)
        pvalues.append(nested_regression(base, extra, y, n_boot=0, n_perm=99, rng=1)["permutation_pvalue"])
    assert 0.02 < np.mean(np.asarray(pvalues) <= 0.1) < 0.3  # 40 draws: rate 0.1 expected
    with pytest.raises(ParameterError, match="needs base"):
        nested_regression(np.ones((5, 1)), np.ones((4, 1)), np.ones(5))


def _ablation(table, n_sets=200, size=8, seed=0, effect=0.5):
    rng = np.random.default_rng(seed)
    heads = [(int(l), int(h)) for l in table["layer"].values for h in table["head"].values]
    sets = [sorted(heads[i] for i in rng.choice(len(heads), size, replace=False)) for _ in range(n_sets)]
    induction = table["induction_score"].to_series().to_dict()
    y = np.array([effect * ((16, 0) in s) + 0.3 * np.mean([induction[h] for h in s]) for s in sets])
    y = y + rng.normal(0, 0.05, n_sets)
    return xr.Dataset({"set_layer": (("head_set", "member"), np.array([[l for l, _ in s] for s in sets])),
                       "set_head": (("head_set", "member"), np.array([[h for _, h in s] for s in sets])),
                       "measure_mean_effect": (("measure", "mode", "head_set"), y[None, None, :])},
                      coords={"family": ("head_set", ["random"] * n_sets), "measure": ["bigram"], "mode": ["zero"]})


def test_random_set_regression_recovers_a_planted_member_effect(table):
    out = dis.random_set_regression(_ablation(table), table).isel(measure=0, mode=0)
    named = out.sel(predictor="has_named_head")
    assert float(named["random_estimate"]) == pytest.approx(0.5, abs=0.05)
    assert float(named["random_t_pvalue"]) < 1e-10 and float(named["random_holm_pvalue"]) < 1e-10
    assert float(out["random_estimate"].sel(predictor="mean_induction")) == pytest.approx(0.3, abs=0.15)
    assert float(out["random_t_pvalue"].sel(predictor="n_cmr_like")) > 0.01
    assert 0 < int(out["random_has_named_head"].sum()) < 200
    none = dis.random_set_regression(_ablation(table, effect=0.0, seed=5), table).isel(measure=0, mode=0)
    assert float(none["random_t_pvalue"].sel(predictor="has_named_head")) > 0.01
    with pytest.raises(ParameterError, match="L29.H9 is not in the head table"):
        dis.random_set_regression(_ablation(table), table, named_head=(29, 9))


def test_set_statistics_rank_a_planted_set_first_and_combine(table):
    rng = np.random.default_rng(4)
    effects = {"cmr_not_induction": (rng.normal(1.0, 0.1, (1, 1, 6)), rng.normal(0, 0.1, (1, 1, 59, 6))),
               "induction_only": (rng.normal(0, 0.1, (1, 1, 6)), rng.normal(0, 0.1, (1, 1, 59, 6)))}
    ds = dis.set_statistics(effects, {"cmr_not_induction": 3, "induction_only": 2},
                            {"cmr_not_induction": "L1.H0,L2.H0,L3.H0", "induction_only": "L1.H1,L2.H1"},
                            {"cmr_not_induction": "stratified", "induction_only": "layer"}, measures=("bigram",))
    top = ds.sel(target="cmr_not_induction").isel(measure=0, mode=0)
    assert float(top["set_rank"]) == 1 and float(top["set_rank_pvalue"]) == pytest.approx(1 / 60)
    assert float(top["set_holm_pvalue"]) == pytest.approx(1 / 60)  # the only primary test
    assert np.isnan(float(ds["set_holm_pvalue"].sel(target="induction_only").isel(measure=0, mode=0)))
    combined = combine([ds])
    lines = summary_lines(combined)
    assert "rank 1 of 60 stratified sets" in lines[0] and "family: primary" in lines[0]
    assert "family: all measures" in lines[1]
    assert experiment_view(combined, "sets")["set_rank"].dims == ("target", "measure", "mode")


def test_dissociate_runs_end_to_end_on_a_tiny_model(tl, tmp_path, capsys, monkeypatch):
    from cmr.io import load_dataset
    from icl_cmr.analyses.cli import main

    model_dir = tmp_path / "tiny"
    hf_model, tokenizer = tl.tiny_hf_model(rng=0, n_layers=3, n_heads=8)
    hf_model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    assert main(["heads", str(model_dir), "--n-words", "12", "--n-prompts", "2", "--no-progress",
                 "-o", str(tmp_path / "heads.nc")]) == 0
    assert main(["fit", str(tmp_path / "heads.nc"), "--objective", "lsq", "-o", str(tmp_path / "fits.nc")]) == 0
    words = sorted(w.lstrip("Ġ") for w in tokenizer.get_vocab() if w.startswith("Ġ") and w[1:].isalpha())
    rng = np.random.default_rng(0)
    phrases = [" ".join(rng.choice(words, 4)) for _ in range(6)]  # repeated phrases: bigrams recur
    (tmp_path / "text.txt").write_text(" ".join(rng.choice(phrases, 60)))
    heads = load_dataset(tmp_path / "heads.nc")
    threshold = float(np.quantile(heads["induction_score"].values, 0.75))
    argv = ["dissociate", str(model_dir), "--heads-from", str(tmp_path / "heads.nc"), "--fits-from",
            str(tmp_path / "fits.nc"), "--text", str(tmp_path / "text.txt"), "--n-passages", "3", "--n-tokens", "40",
            "--max-per-article", "0", "--n-sets", "4", "--repeat-length", "20", "--layer-terms", "linear",
            "--induction-threshold", f"{threshold:.6f}", "--n-boot", "20", "--n-perm", "20", "--device", "cpu",
            "--time-budget", "600", "-o", str(tmp_path / "d.nc")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    result = load_dataset(tmp_path / "d.nc", dis.KIND)
    assert result.attrs["experiments"] == "sets,heads"
    assert result.attrs["cmr_like_rule"].startswith("CMR distance below 0.5")
    assert result["head_effect"].sizes == {"head_measure": 2, "head_mode": 2, "layer": 3, "head": 8, "passage": 3}
    assert np.isfinite(result["head_effect"].sel(head_measure="repeated_tokens").values).all()
    assert np.isfinite(result["head_n_rows"].values).all() and (result["head_n_rows"].values == 24).all()
    assert "heads repeated_tokens resample: CMR features beyond the baseline over 24 heads" in out
    assert "family: primary" in out and "sets induction_only" in out
    again = ["--effects-from", str(tmp_path / "d.nc"), "--experiments", "heads", "-o", str(tmp_path / "e.nc")]
    assert main([*argv[:-2], *again]) == 0
    reused = load_dataset(tmp_path / "e.nc", dis.KIND)
    np.testing.assert_array_equal(reused["head_partial_r2"].values, result["head_partial_r2"].values)
    assert main([*argv[:-2], "--experiments", "random_sets", "-o", str(tmp_path / "f.nc")]) == 1
    assert "random_sets experiment needs --ablation-from" in capsys.readouterr().err
    # a budget spent by the heads experiment keeps it: the file is written without the sets
    from icl_cmr.analyses.causal.head_effects import BudgetSpent

    def spent(*args, **kwargs):
        raise BudgetSpent("the time budget ran out before the first passage; give a longer budget")

    monkeypatch.setattr(dis, "set_experiment", spent)
    assert main([*argv[:-2], "-o", str(tmp_path / "g.nc")]) == 0, capsys.readouterr().err
    assert "sets: not run: the time budget ran out after the heads experiment" in capsys.readouterr().out
    assert load_dataset(tmp_path / "g.nc", dis.KIND).attrs["experiments"] == "heads"


def test_set_effects_refuse_a_budget_spent_before_the_first_passage(tiny):
    import time

    from icl_cmr.analyses.causal.head_effects import set_effects

    passages = np.random.default_rng(0).integers(3, 40, size=(2, 24))
    with pytest.raises(ParameterError, match="time budget ran out before the first passage"):
        set_effects(tiny.bridge, passages, [[(0, 1)]], modes=("zero",), measures=("bigram",), deadline=time.monotonic() - 1,
                    progress=False)
    effects, done = set_effects(tiny.bridge, passages, [[(0, 1)], [(1, 0), (1, 2)]], modes=("zero", "resample"),
                                measures=("repeated_tokens",), repeat_length=8, progress=False)
    assert effects.shape == (1, 2, 2, 2) and done == 2 and np.isfinite(effects).all()
    with pytest.raises(ParameterError, match="measures must be among bigram, repeated_tokens"):
        set_effects(tiny.bridge, passages, [[(0, 1)]], measures=("icl",))


def test_set_effects_give_the_repeated_tokens_the_deadline_too(tiny, monkeypatch):
    """--time-budget is wall time: the repeated-token passages stop at the deadline as the natural-text ones do."""
    import time

    from icl_cmr.analyses.causal import head_effects

    seen = []
    real = head_effects.set_losses

    def spy(*args, deadline=None, **kwargs):
        seen.append(deadline)
        return real(*args, deadline=deadline, **kwargs)

    monkeypatch.setattr(head_effects, "set_losses", spy)
    passages = np.random.default_rng(0).integers(3, 40, size=(3, 24))
    deadline = time.monotonic() + 3600
    effects, done = head_effects.set_effects(tiny.bridge, passages, [[(0, 1)]], modes=("zero",), repeat_length=8,
                                             deadline=deadline, progress=False)
    assert len(seen) == 2 and seen[1] == deadline and seen[0] < deadline
    assert effects.shape == (2, 1, 1, 3) and done == 3
