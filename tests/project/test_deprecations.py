"""Old public names keep working for one release, each with a DeprecationWarning that names the new one."""
from __future__ import annotations

import functools
import subprocess
import sys

import pytest

MOVED = {
    "icl_cmr.adapters.transformer_lens": ("icl_cmr.adapters.lm.loading", "load_model"),
    "icl_cmr.adapters.interventions": ("icl_cmr.adapters.lm.ablation_engine", "set_losses"),
    "icl_cmr.adapters.composition": ("icl_cmr.adapters.lm.composition", "composition_scores"),
    "icl_cmr.adapters.causal_composition": ("icl_cmr.adapters.lm.causal_composition", "path_ablation"),
    "icl_cmr.adapters.toy_model": ("icl_cmr.adapters.lm.toy_model", "train_toy"),
    "icl_cmr.adapters.free_recall_task": ("icl_cmr.adapters.lm.recall_task", "generate_answers"),
    "icl_cmr.analyses.ablation": ("icl_cmr.analyses.causal.ablation", "run_ablation"),
    "icl_cmr.analyses.ablation_measures": ("icl_cmr.analyses.causal.measures", "MEASURES"),
    "icl_cmr.analyses.ablation_power": ("icl_cmr.analyses.causal.power", "rank_test_power"),
    "icl_cmr.analyses.ablation_stats": ("icl_cmr.analyses.causal.statistics", "crossed_contrast"),
    # the recall ablation left llm_recall for causal/recall.py; the old module re-exports both homes
    "icl_cmr.analyses.llm_recall": ("icl_cmr.analyses.causal.recall", "head_sets"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_under_its_old_name_with_a_warning(old):
    new, name = MOVED[old]
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    from {old} import {name} as old_name\n"
        f"new = importlib.import_module({new!r})\n"
        f"assert old_name is new.{name}, 'not the same object'\n"
        "assert [w.category.__name__ for w in caught] == ['DeprecationWarning'], caught\n"
        f"assert {new!r} in str(caught[0].message), caught[0].message\n"
        "assert caught[0].filename == '<string>', caught[0].filename\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stdout + done.stderr


def test_the_old_transformer_lens_module_has_both_halves():
    code = (
        "import warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import icl_cmr.adapters.transformer_lens as tl\n"
        "print(all(hasattr(tl, n) for n in ('load_model', 'tiny_model', 'extract_heads', 'make_prompts', 'set_threads')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stdout + done.stderr


# --- icl_cmr.analyses: seeds are named ``rng``, options are keyword-only ----------------------------

def _analyses_data():
    """Small inputs for the analyses' renamed and keyword-only functions."""
    import numpy as np

    rng = np.random.default_rng(7)
    return dict(
        differences=rng.normal(0.3, 1.0, 24),
        effects=rng.normal(0.0, 1.0, (1, 6, 12)) + np.r_[0.8, 0.5, 0, 0, 0, 0][None, :, None],
        families=["top", "induction", "random", "random", "random", "random"],
        units=rng.normal(0.2, 1.0, 16),
        null=rng.normal(0.0, 1.0, (5, 16)),
        base=np.column_stack([np.ones(30), rng.normal(size=30)]),
        extra=rng.normal(size=(30, 1)),
        y=rng.normal(size=30),
        scores=np.r_[rng.uniform(0, 0.09, 20), rng.uniform(0.1, 1, 4)],
        target=[(0, 1), (1, 2)],
        strata={(l, h): (l,) for l in range(3) for h in range(4)},
        pool=[f"w{i}" for i in range(40)],
    )


def _renamed_seed_cases():
    """(name, call taking the seed's keyword and value): each old ``seed=`` has become ``rng=``."""
    from icl_cmr.analyses.causal import ablation, dissociation, measures, recall, regression, statistics
    from icl_cmr.analyses.memory import battery, effects

    d = _analyses_data()
    return {
        "causal.statistics.effect_intervals": lambda **s: statistics.effect_intervals(d["differences"], n_boot=200, **s),
        "causal.statistics.comparison_statistics": lambda **s: statistics.comparison_statistics(
            d["effects"], d["families"], n_boot=100, **s),
        "causal.ablation.random_head_sets": lambda **s: ablation.random_head_sets(4, 5, d["target"], n_sets=6, **s),
        "causal.ablation.head_sets": lambda **s: ablation.head_sets(4, 5, d["target"], n_random=3, n_matched=2, **s),
        "causal.recall.rank_test_sets": lambda **s: recall.rank_test_sets(d["target"], 4, 5, n_random=3, **s),
        "causal.dissociation.stratified_sets": lambda **s: dissociation.stratified_sets(
            d["target"], d["strata"], n_sets=5, **s),
        "causal.measures.repeated_token_passages": lambda **s: measures.repeated_token_passages(
            60, {0, 1}, n_passages=3, repeat_length=5, **s),
        "causal.regression.nested_regression": lambda **s: regression.nested_regression(
            d["base"], d["extra"], d["y"], n_boot=50, n_perm=50, **s),
        "memory.battery.serial_lists": lambda **s: battery.serial_lists(d["pool"], n_lists=3, list_length=5, **s),
        "memory.battery.strength_lists": lambda **s: battery.strength_lists(d["pool"], n_lists=2, list_length=4, **s),
        "memory.battery.battery_design": lambda **s: battery.battery_design(
            effects=("serial_position", "list_length"), pool=d["pool"], n_lists=2, list_length=4, lengths=(3, 5),
            n_length_lists=2, **s),
        "memory.effects.bootstrap_ci": lambda **s: effects.bootstrap_ci(d["units"], n_boot=200, **s),
        "memory.effects.human_likeness": lambda **s: effects.human_likeness(
            d["units"][:8], d["units"][8:], d["null"].ravel(), n_draws=50, **s),
    }


@pytest.mark.parametrize("name", sorted(_renamed_seed_cases()))
def test_an_analysis_seed_keyword_warns_and_gives_the_rng_result(name):
    import numpy as np

    call = _renamed_seed_cases()[name]
    new = call(rng=3)
    with pytest.warns(DeprecationWarning, match=r"keyword 'seed' is deprecated .*use 'rng'") as caught:
        old = call(seed=3)
    assert caught[0].filename == __file__  # the warning points at the caller
    np.testing.assert_equal(old, new)
    np.testing.assert_equal(call(rng=np.random.default_rng(3)), call(rng=np.random.default_rng(3)))


def _positional_cases():
    """(name, old positional call, the same call by keyword): options passed by position still work."""
    import numpy as np

    from icl_cmr.analyses.causal import ablation, design, dissociation, power, regression, statistics

    d = _analyses_data()
    return {
        "crossed_contrast(effects, null, level)": (
            lambda: statistics.crossed_contrast(d["units"], d["null"], 0.9),
            lambda: statistics.crossed_contrast(d["units"], d["null"], level=0.9)),
        "effect_intervals(differences, n_boot, seed)": (
            lambda: statistics.effect_intervals(d["differences"], 200, 3),
            lambda: statistics.effect_intervals(d["differences"], n_boot=200, rng=3)),
        "random_head_sets(..., n_sets, seed, layer_matched)": (
            lambda: ablation.random_head_sets(4, 5, d["target"], 6, 2, True),
            lambda: ablation.random_head_sets(4, 5, d["target"], n_sets=6, rng=2, layer_matched=True)),
        "induction_bins(scores, threshold, n_bins)": (
            lambda: dissociation.induction_bins(d["scores"], 0.1, 3),
            lambda: dissociation.induction_bins(d["scores"], threshold=0.1, n_bins=3)),
        "paired_t_power(n, effect, sd, alpha)": (
            lambda: power.paired_t_power(20, 0.5, 1.0, 0.01),
            lambda: power.paired_t_power(20, 0.5, 1.0, alpha=0.01)),
        "rank_family_size(n_matched, n_modes, control, n_measures)": (
            lambda: power.rank_family_size(50, 2, True, 3),
            lambda: power.rank_family_size(n_matched=50, n_modes=2, control=True, n_measures=3)),
        "design_matrix(columns, categorical)": (
            lambda: regression.design_matrix([d["y"]], np.repeat([0, 1, 2], 10)),
            lambda: regression.design_matrix([d["y"]], categorical=np.repeat([0, 1, 2], 10))),
        "AblationDesign.fitted_measures(n_tokens, n_ctx)": (
            lambda: design.AblationDesign().fitted_measures(64, 128),
            lambda: design.AblationDesign().fitted_measures(n_tokens=64, n_ctx=128)),
    }


@pytest.mark.parametrize("name", sorted(_positional_cases()))
def test_an_analysis_option_passed_by_position_warns_and_gives_the_keyword_result(name):
    import numpy as np

    old_call, new_call = _positional_cases()[name]
    new = new_call()
    with pytest.warns(DeprecationWarning, match=r"by position is deprecated .*pass (it|them) by keyword") as caught:
        old = old_call()
    assert caught[0].filename == __file__
    np.testing.assert_equal(old, new)


def test_holm_under_its_former_homes_warns_and_gives_cmr_holm():
    import numpy as np

    import cmr
    from icl_cmr.analyses.causal import ablation, statistics

    p = [0.01, 0.04, 0.03, 0.005, np.nan]
    for old in (statistics.holm, ablation.holm):
        with pytest.warns(DeprecationWarning, match=r"causal\.statistics\.holm is deprecated .*use cmr\.holm"):
            np.testing.assert_array_equal(old(p), cmr.holm(p))


def test_the_former_benjamini_hochberg_mask_warns_and_is_the_adjusted_p_at_its_level():
    import numpy as np

    import cmr
    from icl_cmr.analyses.reproduce import null_shares

    p = np.array([0.001, 0.02, 0.039, 0.04, 0.3])
    with pytest.warns(DeprecationWarning, match=r"null_shares\.benjamini_hochberg is deprecated .*cmr\.benjamini_hochberg"):
        mask = null_shares.benjamini_hochberg(p, q=0.05)
    assert mask.tolist() == (cmr.benjamini_hochberg(p) <= 0.05).tolist() == [True, True, True, True, False]


# --- one name per idea: seed -> rng, options after the data keyword-only --------------------

#: every public function whose ``seed`` became ``rng``: module, name
RENAMED_SEED = [
    ("cmr", "shuffled_control"), ("cmr", "neighbor_crp"), ("cmr", "first_presentation_bias"),
    ("cmr", "repetition_design"), ("cmr.paper.simulate", "point_seeds"), ("cmr.paper.simulate", "point_generator"),
    ("cmr.textbook.fit", "unit_seeds"), ("cmr.testing", "run_check"), ("cmr.testing", "check_recall_model"),
    ("cmr.testing.spacing", "fit_check"),
    ("icl_cmr.adapters.prompts", "build_prompts"), ("icl_cmr.adapters.repetition_heads", "build_repetition_prompts"),
    ("icl_cmr.adapters.text_corpus", "load_passages"), ("icl_cmr.adapters.head_profiles", "attention_pattern_dataset"),
    ("icl_cmr.adapters.recall_text", "subject_label"), ("icl_cmr.adapters.lm.ablation_engine", "donor_passages"),
    ("icl_cmr.adapters.lm.causal_composition", "induction_scores"),
    ("icl_cmr.adapters.lm.causal_composition", "path_ablation"),
    ("icl_cmr.adapters.lm.composition", "composition_dataset"), ("icl_cmr.adapters.lm.extraction", "make_prompts"),
    ("icl_cmr.adapters.lm.extraction", "attention_pattern"), ("icl_cmr.adapters.lm.extraction", "extract_heads"),
    ("icl_cmr.adapters.lm.loading", "tiny_hf_model"), ("icl_cmr.adapters.lm.loading", "tiny_model"),
    ("icl_cmr.adapters.lm.recall_task", "study_lists"), ("icl_cmr.adapters.lm.recall_task", "generate_answers"),
    ("icl_cmr.adapters.lm.repetition", "make_repetition_prompts"),
    ("icl_cmr.adapters.lm.repetition", "extract_repetition_heads"),
]


def _function(module, name):
    import importlib

    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module, name", RENAMED_SEED, ids=[name for _, name in RENAMED_SEED])
def test_seed_is_the_deprecated_name_of_rng(module, name):
    import inspect

    function = _function(module, name)
    assert "rng" in inspect.signature(function).parameters and "seed" not in inspect.signature(function).parameters
    with pytest.raises(TypeError, match="'seed' \\(the deprecated name\\) and 'rng'"):
        function(seed=1, rng=1)  # refused before anything runs: the alias is in place


@functools.lru_cache(maxsize=1)
def _repeated_events():
    import cmr

    design = cmr.repetition_design(n_subjects=2, n_control=2, n_mixed=3, rng=7)
    return cmr.from_table(cmr.simulate_experiment(design, cmr.default_parameters(), rng=3))


def _tokens(text):
    return [sum(map(ord, word)) % 997 for word in text.split()]


#: calls by the old keyword: (module, name, data arguments, other keywords); the seed value is 5
OLD_SEED_CALLS = [
    ("cmr", "repetition_design", (), dict(n_subjects=2, n_control=1, n_mixed=2)),
    ("cmr", "shuffled_control", (_repeated_events,), dict(n_shuffles=2)),
    ("cmr", "neighbor_crp", (_repeated_events,), dict(n_shuffles=2)),
    ("cmr", "first_presentation_bias", (_repeated_events,), dict(n_shuffles=2, control=True)),
    ("cmr.paper.simulate", "point_generator", (), {}),
    ("cmr.textbook.fit", "unit_seeds", (), dict(labels=["a", 2], n_restarts=2)),
    ("icl_cmr.adapters.prompts", "build_prompts", ([3, 4, 5, 6], list("abcd")), dict(n_prompts=3, bos_id=1, n_ctx=9)),
    ("icl_cmr.adapters.repetition_heads", "build_repetition_prompts", (list(range(80)), [str(i) for i in range(80)]),
     dict(n_prompts=2, bos_id=1, n_ctx=512)),
    ("icl_cmr.adapters.lm.ablation_engine", "donor_passages", (9,), {}),
    ("icl_cmr.adapters.lm.recall_task", "study_lists", ([f"w{i}" for i in range(30)],), dict(n_lists=3, list_length=4)),
    ("icl_cmr.adapters.recall_text", "subject_label", ("model", "greedy"), {}),
]


def _same(old, new):
    import numpy as np
    import xarray as xr

    if isinstance(new, xr.Dataset):  # the same, but for the time of creation in the provenance
        xr.testing.assert_equal(old, new)
        assert {k: v for k, v in old.attrs.items() if k != "provenance"} == \
            {k: v for k, v in new.attrs.items() if k != "provenance"}
    elif isinstance(new, np.random.Generator):
        np.testing.assert_array_equal(old.random(4), new.random(4))
    elif hasattr(new, "tokens"):
        np.testing.assert_array_equal(old.tokens, new.tokens)
    else:
        np.testing.assert_equal(old, new)


@pytest.mark.parametrize("module, name, data, options", OLD_SEED_CALLS, ids=[c[1] for c in OLD_SEED_CALLS])
def test_the_old_seed_keyword_warns_and_gives_the_same_result(module, name, data, options):
    function = _function(module, name)
    data = tuple(d() if callable(d) else d for d in data)
    new = function(*data, rng=5, **options)
    with pytest.warns(DeprecationWarning, match=rf"{name}: the keyword 'seed' is deprecated .*use 'rng'"):
        old = function(*data, seed=5, **options)
    _same(old, new)


def _profiles():
    import numpy as np
    import xarray as xr

    lags = np.arange(-3, 4)
    return xr.Dataset({"profile": (("head", "lag"), np.linspace(0.0, 1.0, 14).reshape(2, 7))},
                      coords={"head": [0, 1], "lag": lags}, attrs={"icl_cmr_kind": "lag_profile"})


#: options still passed by position: (module, name, positional call, the same by keyword)
POSITIONAL_CALLS = [
    ("cmr", "paper_beta", ((0.4, "rec"), {}), ((0.4,), dict(phase="rec"))),
    ("cmr", "textbook_beta", ((0.4, "rec"), {}), ((0.4,), dict(phase="rec"))),
    ("cmr", "lag_window", (([-1, 0, 1], 5), {}), (([-1, 0, 1],), dict(longest=5))),
    ("cmr", "uniform_attention_prob", ((20, [1, 2, 3]), {}), ((20,), dict(lags=[1, 2, 3]))),
    ("cmr", "study_order", ((["b", "a", "b"], None), {}), ((["b", "a", "b"],), dict(within=None))),
    ("cmr.textbook.crossval", "list_folds", (([1, 1, 1, 2, 2], 2), dict(rng=4)), (([1, 1, 1, 2, 2],), dict(n_folds=2, rng=4))),
    ("cmr.testing.reference", "teacher_forced_reference", ((0.5, 0.6, 0.2, 20, 3), {}),
     ((0.5, 0.6, 0.2), dict(list_length=20, max_lag=3))),
    ("cmr.textbook.parameters", "fit_bounds", ((["B_enc"], {"B_enc": (0.1, 0.9)}), {}),
     ((["B_enc"],), dict(bounds={"B_enc": (0.1, 0.9)}))),
    ("cmr.schema", "batch_dims", ((_profiles, "lag"), {}), ((_profiles,), dict(core="lag"))),
    ("icl_cmr.adapters.head_ranking", "rank_heads", (([[0.2, 0.9], [0.5, 0.1]], 2), {}),
     (([[0.2, 0.9], [0.5, 0.1]],), dict(n=2))),
    ("icl_cmr.adapters.repetition_heads", "sign_test", (([[1.0, -1.0], [2.0, 3.0], [1.0, 0.0]], 1), {}),
     (([[1.0, -1.0], [2.0, 3.0], [1.0, 0.0]],), dict(axis=1))),
    ("icl_cmr.adapters.lm.recall_task", "recall_prompt", ((["cat", "dog"], "serial"), {}),
     ((["cat", "dog"],), dict(task="serial"))),
    ("icl_cmr.adapters.lm.recall_task", "study_lists", (([f"w{i}" for i in range(30)], 3, 4), dict(rng=2)),
     (([f"w{i}" for i in range(30)],), dict(n_lists=3, list_length=4, rng=2))),
    ("icl_cmr.adapters.lm.ablation_engine", "donor_passages", ((9, 3), {}), ((9,), dict(rng=3))),
]


@pytest.mark.parametrize("module, name, positional, keywords", POSITIONAL_CALLS, ids=[c[1] for c in POSITIONAL_CALLS])
def test_an_option_passed_by_position_warns_and_gives_the_same_result(module, name, positional, keywords):
    function = _function(module, name)

    def call(args_kwargs):
        args, kwargs = args_kwargs
        return function(*(a() if callable(a) else a for a in args), **kwargs)

    new = call(keywords)
    with pytest.warns(DeprecationWarning, match=rf"{name}: passing .* by position is deprecated"):
        old = call(positional)
    _same(old, new)


def test_load_passages_takes_its_sizes_and_seed_by_keyword(tmp_path):
    import numpy as np

    from icl_cmr.adapters.text_corpus import load_passages

    (tmp_path / "a.txt").write_text(" ".join(f"w{i}" for i in range(900)), encoding="utf-8")
    new = load_passages(tmp_path, _tokens, n_passages=3, n_tokens=100, rng=2)
    with pytest.warns(DeprecationWarning) as caught:
        old = load_passages(tmp_path, _tokens, 3, 100, seed=2)
    messages = sorted(str(w.message) for w in caught)
    assert any("passing n_passages, n_tokens by position" in m for m in messages), messages
    assert any("the keyword 'seed' is deprecated" in m for m in messages), messages
    np.testing.assert_array_equal(old, new)
