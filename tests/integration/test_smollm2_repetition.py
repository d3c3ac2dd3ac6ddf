"""SmolLM2 on lists with repeated words: its strongest later-presentation head keeps its preference (2 prompts)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_smollm2


@pytest.fixture(scope="module")
def repetition_heads():
    require_smollm2()
    from icl_cmr.adapters.lm.loading import load_model
    from icl_cmr.adapters.lm.repetition import extract_repetition_heads

    return extract_repetition_heads(load_model("smollm2-135m"), n_prompts=2, rng=0).isel(model=0, checkpoint=0)


def test_l17_h5_moves_to_the_second_presentations_neighbour(repetition_heads):
    # over 40 prompts L17.H5's bias was negative in 40 of 40 (docs/repetition.md, "Heads")
    head = repetition_heads.sel(layer=17, head=5)
    assert (head["prompt_bias"].values < 0).all()
    crp = head["repcrp"].sel(lag=1).values
    assert crp[1] > 0.3 and crp[1] > crp[0] + 0.1


def test_every_head_is_read_and_the_attention_on_a_massed_repeat_is_a_probability(repetition_heads):
    assert repetition_heads.sizes["layer"] * repetition_heads.sizes["head"] == 270
    occurrence = repetition_heads["occurrence_attention"].sel(repeat_kind="massed", occurrence=[1, 2]).values
    assert np.isfinite(occurrence).all() and (occurrence >= 0).all() and (occurrence <= 1).all()
