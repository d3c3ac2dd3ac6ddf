"""The causal composition test classifies known circuits: a hand-built model with one K-composed and
one Q-composed induction head (default suite), and the two trained toys (slow)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import require

N_POSITIONS = 32
GAIN = 6.0


def hand_built_induction_model(directory):
    """A two-layer GPT-2 saved in ``directory`` and loaded back through the library's loader.

    Residual blocks: token one-hot T, position one-hot P, previous token PT, and EP, the position
    after the earlier copy of the current token. Layer 0: head 0 is a previous-token head (query
    P_i, key P_{j+1}, value T -> PT), head 1 a duplicate-token head (query and key the token, the
    key's own position subtracted so a token does not match itself; value P_j -> EP as P_{j+1}).
    Layer 1: head 0 is a K-composed induction head (query T, key PT), head 1 a Q-composed one
    (query EP, key P). MLPs are zero. Every vector written into the residual stream (embeddings,
    head outputs) also writes minus its sum into one spare dimension that nothing reads, so the
    stream always has zero mean and the LayerNorm only rescales it: scores are as designed.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from icl_cmr.adapters.transformer_lens import load_model, tiny_hf_model

    _, tokenizer = tiny_hf_model(n_words=24)
    v, n = len(tokenizer), N_POSITIONS
    token, position, previous, earlier = 0, v, v + n, 2 * v + n
    spare = 2 * v + 2 * n
    d = spare + 2
    d_head = d // 2
    config = GPT2Config(vocab_size=v, n_positions=n, n_embd=d, n_layer=2, n_head=2, n_inner=4, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=1, tie_word_embeddings=False)
    model = GPT2LMHeadModel(config)
    eye_v, eye_n = torch.eye(v), torch.eye(n)
    shift = torch.as_tensor(np.eye(n, k=1), dtype=torch.float32)  # row vector e_j -> e_{j+1}

    def write(target, col, matrix):
        """Rows of ``target`` write ``matrix`` at residual column ``col`` and minus its row sums at the spare one."""
        target[:matrix.shape[0], col:col + matrix.shape[1]] = matrix
        target[:matrix.shape[0], spare] = -matrix.sum(1)

    def head(layer, h, query, key, value=None, out=None):
        """Each of query/key/value: (first residual row, matrix); out: (first residual column, matrix)."""
        block = model.transformer.h[layer].attn
        for part, (row, matrix) in enumerate((query, key) + ((value,) if value else ())):
            col = part * d + h * d_head
            block.c_attn.weight[row:row + matrix.shape[0], col:col + matrix.shape[1]] = matrix
        if out:
            write(block.c_proj.weight[h * d_head:], *out)

    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
        write(model.transformer.wte.weight, token, eye_v)
        write(model.transformer.wpe.weight, position, eye_n)
        head(0, 0, (position, GAIN * eye_n), (position, GAIN * shift), (token, eye_v), (previous, eye_v))
        self_match = torch.block_diag(GAIN * eye_v, GAIN * eye_n), torch.block_diag(GAIN * eye_v, -GAIN * eye_n)
        head(0, 1, (token, self_match[0]), (token, self_match[1]), (position, eye_n), (earlier, shift))
        head(1, 0, (token, GAIN * eye_v), (previous, GAIN * eye_v))
        head(1, 1, (earlier, GAIN * eye_n), (position, GAIN * eye_n))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return load_model(str(directory))


@pytest.fixture(scope="module")
def hand_built(tmp_path_factory):
    require("torch")
    return hand_built_induction_model(tmp_path_factory.mktemp("hand_built"))


def test_the_causal_test_tells_k_from_q_composition_in_a_hand_built_model(hand_built):
    from icl_cmr.adapters.causal_composition import induction_scores, path_ablation

    scores = induction_scores(hand_built, n_words=8, n_prompts=2)
    assert scores[1].min() > 0.9 and scores[0].max() < 0.1
    causal = path_ablation(hand_built, [(1, 0), (1, 1)], n_words=8, n_prompts=2, lags=range(-2, 3))
    assert list(causal["composition_class"].values) == ["K", "Q"]
    assert list(causal["upstream"].values) == ["0.0/K", "0.1/Q"]
    drops = causal["drop_all"].sel(path=["Q", "K"]).values
    assert drops[0, 1] > 0.8 and abs(drops[0, 0]) < 0.05  # K head: only its key path matters
    assert drops[1, 0] > 0.8 and abs(drops[1, 1]) < 0.05  # Q head: only its query path matters


def test_weight_composition_scores_point_to_the_same_circuits(hand_built):
    from icl_cmr.adapters.composition import composition_scores

    score = composition_scores(hand_built, n_baseline=10)["score"]
    k = score.sel(composition="K", layer=1, source_layer=0)  # (head, source_head)
    q = score.sel(composition="Q", layer=1, source_layer=0)
    assert float(k.sel(head=0, source_head=0)) > 0.1 and float(q.sel(head=1, source_head=1)) > 0.1
    assert float(q.sel(head=0).max()) < 0.02 and float(k.sel(head=1).max()) < 0.02
