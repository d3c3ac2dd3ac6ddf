"""The ablation engine's direct path on Gemma 3 (gemma3-270m) against one bridge pass per condition.

Gemma 3 alternates sliding-window and full-attention layers, each type with its own mask and its
own rotary frequencies, and scales its embeddings. The model's window (512 tokens) covers every
position of a study passage (512 tokens with BOS), so there the sliding-window mask equals the
causal mask; the window is narrowed to 16 tokens here (in the bridge's model, before the engine
copies it) so that a sliding-window layer run with the full causal mask, or with the global rotary
frequencies, gives other losses.

Tolerance: both paths run the same float32 weights but in another order (the engine batches the
conditions, resumes at the first ablated layer and projects only the scored positions); over 18
layers and a 262,144-token log-sum-exp the losses differ by at most 4.3e-5 nats here (2.8e-5
unablated; 2.5e-5 with the model's own window on two 128-token passages), so 1e-4 is the bound.
Ablation effects are 0.5-4 nats; a sliding-window layer given the full causal mask moves the
losses by up to 4.3 (unablated) to 7.0 nats, the global rotary frequencies in every layer by 2.9 to 6.1.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.conftest import REQUIRE_ALL, require

# loading gemma3-270m (its 262,144-token embedding dequantised from the GGUF) takes most of a minute:
# a long check, run with -m slow
pytestmark = [pytest.mark.slow, pytest.mark.integration]

WINDOW = 16
N_TOKENS = 64
TOLERANCE = 1e-4
# (1, 2): a sliding-window layer; (5, 0): the first full-attention layer; a set across both types
SETS = [[(1, 2)], [(5, 0)], [(3, 1), (11, 3)]]


@pytest.fixture(scope="module")
def gemma():
    torch = require("torch")
    require("transformer_lens")
    require("gguf")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.loading import load_model
    from icl_cmr.adapters.text_corpus import load_passages

    torch.set_num_threads(1)
    try:
        model = load_model("gemma3-270m")
    except ModelNotAvailableError as exc:
        if REQUIRE_ALL:
            pytest.fail(f"gemma3-270m is required (ICL_CMR_REQUIRE_ALL=1): {exc}")
        pytest.skip(f"gemma3-270m not installed: {exc}")
    hf = model.bridge.original_model
    hf.config.sliding_window = WINDOW
    for module in hf.modules():
        if getattr(module, "sliding_window", None) is not None:
            module.sliding_window = WINDOW
    passages = load_passages(tokenizer=model.tokenizer, n_passages=2, n_tokens=N_TOKENS, rng=0)
    return model.bridge, passages


def test_direct_engine_runs_gemma3_as_the_bridge(gemma):
    from icl_cmr.adapters.lm import ablation_engine, interventions

    bridge, passages = gemma
    plain = interventions.plain_model(bridge)
    assert plain.config.model_type == "gemma3_text" and ablation_engine._direct(plain)
    types = plain.config.layer_types
    assert types[1] == types[3] == "sliding_attention" and types[5] == types[11] == "full_attention"
    assert plain.config.sliding_window == WINDOW < N_TOKENS
    targets = np.arange(1, N_TOKENS)
    donors = np.array([1, 0])
    direct = ablation_engine.set_losses(bridge, passages, targets, SETS, modes=("zero", "resample"), donors=donors,
                                        batch_size=4)
    reference = ablation_engine._bridge_set_losses(bridge, passages, targets, SETS, ("zero", "resample"), None, donors)
    np.testing.assert_allclose(direct[0], reference[0], rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(direct[1], reference[1], rtol=0, atol=TOLERANCE)
    assert np.all(np.abs(direct[1] - direct[0]).max(axis=(-1, -2)) > 0.1)  # every condition changes the losses


def test_sliding_layers_see_their_window(gemma):
    torch = require("torch")
    from icl_cmr.adapters.lm import ablation_engine, interventions

    bridge, passages = gemma
    plain = interventions.plain_model(bridge)
    with torch.inference_mode():
        hidden = plain.model.embed_tokens(torch.as_tensor(passages[:1]))
        position_ids = torch.arange(N_TOKENS).unsqueeze(0)
        masks, rotary = ablation_engine._layer_inputs(plain, hidden, position_ids)
    # sdpa masks are boolean (True: attend) or None (causal); the window keeps WINDOW keys per query
    sliding, full = masks[1], masks[5]
    assert sliding is not None and sliding[0, 0].sum(-1).max().item() == WINDOW
    assert full is None or bool(torch.equal(full[0, 0], torch.ones(N_TOKENS, N_TOKENS, dtype=torch.bool).tril()))
    assert not torch.equal(rotary[1][0], rotary[5][0])  # local and global rotary frequencies
    assert masks[1] is masks[3] and rotary[1] is rotary[3] and rotary[5] is rotary[11]
