"""Old public names keep working for one release, each with a DeprecationWarning that names the new one."""
from __future__ import annotations

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
}


@pytest.mark.parametrize("name", ["recall_ablation", "head_sets", "ablation_table", "validate_llm_recall_ablation"])
def test_recall_ablation_names_under_llm_recall_warn_and_are_the_moved_ones(name):
    from icl_cmr.analyses.memory import llm_recall
    from icl_cmr.analyses.causal import recall

    with pytest.warns(DeprecationWarning, match=rf"llm_recall\.{name} is deprecated .*causal\.recall\.{name}"):
        old = getattr(llm_recall, name)
    assert old is getattr(recall, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        llm_recall.no_such_name  # noqa: B018


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


def test_set_losses_under_its_former_module_warns_and_is_the_engine():
    from icl_cmr.adapters.lm import ablation_engine, interventions

    with pytest.warns(DeprecationWarning, match=r"interventions\.set_losses is deprecated .*ablation_engine\.set_losses"):
        old = interventions.set_losses
    assert old is ablation_engine.set_losses
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        interventions.no_such_name  # noqa: B018


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
