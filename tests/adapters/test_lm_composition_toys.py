"""The causal composition test classifies known circuits: a hand-built model with one K-composed and
one Q-composed induction head (default suite), and the two trained toys (slow)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import require

N_POSITIONS = 32
GAIN = 6.0


def hand_built_induction_model(directory, relay: bool = False):
    """A two-layer GPT-2 saved in ``directory`` and loaded back through the library's loader.

    Residual blocks: token one-hot T, position one-hot P, previous token PT, and EP, the position
    after the earlier copy of the current token. Layer 0: head 0 is a previous-token head (query
    P_i, key P_{j+1}, value T -> PT), head 1 a duplicate-token head (query and key the token, the
    key's own position subtracted so a token does not match itself; value P_j -> EP as P_{j+1}).
    Layer 1: head 0 is a K-composed induction head (query T, key PT), head 1 a Q-composed one
    (query EP, key P). MLPs are zero. Every vector written into the residual stream (embeddings,
    head outputs) also writes minus its sum into one spare dimension that nothing reads, so the
    stream always has zero mean and the LayerNorm only rescales it: scores are as designed.

    ``relay``: a third layer-0 head attends to the position itself (query P_i, key P_j) and
    copies its position into a block OP; the Q-composed head reads its key from OP instead of P.
    Its key then depends on an earlier head that moves nothing between positions.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from icl_cmr.adapters.lm.loading import load_model, tiny_hf_model

    _, tokenizer = tiny_hf_model(n_words=24)
    v, n = len(tokenizer), N_POSITIONS
    token, position, previous, earlier, own = 0, v, v + n, 2 * v + n, 2 * v + 2 * n
    spare = own + (n if relay else 0)
    n_head = 3 if relay else 2
    d = max(spare + 2, n_head * (v + n))  # every head holds a (token, position) block
    d += -d % n_head
    d_head = d // n_head
    config = GPT2Config(vocab_size=v, n_positions=n, n_embd=d, n_layer=2, n_head=n_head, n_inner=4, resid_pdrop=0.0,
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
        head(1, 1, (earlier, GAIN * eye_n), (own if relay else position, GAIN * eye_n))
        if relay:
            head(0, 2, (position, GAIN * eye_n), (position, GAIN * eye_n), (position, eye_n), (own, eye_n))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return load_model(str(directory))


@pytest.fixture(scope="module")
def hand_built(tmp_path_factory):
    require("torch")
    return hand_built_induction_model(tmp_path_factory.mktemp("hand_built"))


def test_the_causal_test_tells_k_from_q_composition_in_a_hand_built_model(hand_built):
    from icl_cmr.adapters.lm.causal_composition import induction_scores, path_ablation

    scores = induction_scores(hand_built, n_words=8, n_prompts=2)
    assert scores[1].min() > 0.9 and scores[0].max() < 0.1
    causal = path_ablation(hand_built, [(1, 0), (1, 1)], n_words=8, n_prompts=2, lags=range(-2, 3))
    assert list(causal["composition_class"].values) == ["K", "Q"]
    assert list(causal["upstream"].values) == ["0.0/K", "0.1/Q"]
    assert list(causal["whole_output_class"].values) == ["K", "Q"]
    for part in ("all", "moved"):  # no head here attends to itself: the two ablations agree
        drops = causal[f"drop_{part}"].sel(path=["Q", "K"]).values
        assert drops[0, 1] > 0.8 and abs(drops[0, 0]) < 0.05  # K head: only its key path matters
        assert drops[1, 0] > 0.8 and abs(drops[1, 1]) < 0.05  # Q head: only its query path matters


@pytest.fixture(scope="module")
def hand_built_relay(tmp_path_factory):
    require("torch")
    return hand_built_induction_model(tmp_path_factory.mktemp("hand_built_relay"), relay=True)


def test_a_key_that_reads_its_own_position_through_an_earlier_head_is_not_k_composition(hand_built_relay):
    """The Q-composed head's key reads its position from a layer-0 head that attends to itself:
    removing that head's whole output from the key abolishes the induction (whole-output class
    mixed), removing only what it moved from other positions does not (class Q, through the
    duplicate-token head alone)."""
    from icl_cmr.adapters.lm.causal_composition import induction_scores, path_ablation

    scores = induction_scores(hand_built_relay, n_words=8, n_prompts=2)
    assert scores[1, :2].min() > 0.9
    causal = path_ablation(hand_built_relay, [(1, 0), (1, 1)], n_words=8, n_prompts=2, lags=range(-2, 3))
    assert list(causal["whole_output_class"].values) == ["K", "mixed"]
    assert list(causal["composition_class"].values) == ["K", "Q"]
    assert list(causal["upstream"].values) == ["0.0/K", "0.1/Q"]
    assert float(causal["drop_all"].sel(path="K")[1]) > 0.8
    assert abs(float(causal["drop_moved"].sel(path="K")[1])) < 0.05
    assert float(causal["source_drop"].sel(path="K", source_layer=0, source_head=2)[1]) > 0.8


def test_weight_composition_scores_point_to_the_same_circuits(hand_built):
    from icl_cmr.adapters.lm.composition import composition_scores

    score = composition_scores(hand_built, n_baseline=10)["score"]
    k = score.sel(composition="K", layer=1, source_layer=0)  # (head, source_head)
    q = score.sel(composition="Q", layer=1, source_layer=0)
    assert float(k.sel(head=0, source_head=0)) > 0.1 and float(q.sel(head=1, source_head=1)) > 0.1
    assert float(q.sel(head=0).max()) < 0.02 and float(k.sel(head=1).max()) < 0.02


def test_the_class_against_cmr_distance_figure_marks_each_class(hand_built):
    require("matplotlib")
    import xarray as xr
    from matplotlib.colors import to_hex

    from cmr.profile_fit import fit_profiles
    from cmr.schema import provenance_attrs
    from icl_cmr.adapters.lm.causal_composition import path_ablation
    from icl_cmr.adapters.lm.extraction import extract_heads
    from icl_cmr.analyses import plots
    from icl_cmr.analyses.plots.composition import CLASS_COLOURS

    causal = path_ablation(hand_built, [(1, 0), (1, 1)], n_words=8, n_prompts=1, lags=range(-2, 3))
    heads = extract_heads(hand_built, n_words=8, n_prompts=1, lags=3)
    lags = np.arange(-3, 4)  # a synthetic one-parameter grid (a bump at lag +1) keeps the fit offline
    widths = np.array([0.5, 1.0, 2.0])
    grid = xr.Dataset({"profile": (("width", "lag"), np.exp(-((lags[None] - 1) ** 2) / (2 * widths[:, None] ** 2)))},
                      coords={"width": widths, "lag": lags})
    grid.attrs.update(provenance_attrs("lag_profile", "test"), profile_kind="synthetic", unit_kind="cmr_parameters")
    fits = fit_profiles(heads.sel(layer=[1]), grid, objective="lsq", lags=3)  # a layer-0 head is constant
    fig = plots.composition_against_cmr({"hand-built": causal}, {"hand-built": fits})
    points = [c for c in fig.axes[0].collections if len(c.get_offsets())]
    assert [to_hex(c.get_facecolor()[0]) for c in points] == [to_hex(CLASS_COLOURS["K"]), to_hex(CLASS_COLOURS["Q"])]
    distance = fits["distance"].sel(layer=1, head=1).squeeze()
    np.testing.assert_allclose(points[1].get_offsets()[0], [float(distance),
                                                             float(causal["base_induction"][1])])
    with pytest.raises(ValueError, match="same labels"):
        plots.composition_against_cmr({"a": causal}, {"b": fits})


@pytest.mark.slow
def test_the_default_toy_is_k_composed_through_its_previous_token_head(tmp_path):
    """The default recipe at seed 0, its quick length (1500 steps; minutes): both layer-1 induction
    heads are K-composed, and the one upstream head is layer 0's previous-token head."""
    causal, heads = _trained_toy(tmp_path, "copies")
    assert set(causal["composition_class"].values) == {"K"}
    source = int(heads["previous_token_score"].sel(layer=0).argmax("head"))
    assert float(heads["previous_token_score"].sel(layer=0, head=source)) > 0.5
    assert all(upstream.split()[0] == f"0.{source}/K" for upstream in causal["upstream"].values)


@pytest.mark.slow
def test_the_position_blind_toy_is_q_composed_through_its_duplicate_token_heads(tmp_path):
    """The position-blind recipe at seed 0, 1500 steps: layer 0 has duplicate-token heads and no
    previous-token head; the layer-1 induction heads are Q-composed through them. Their keys read
    their own position relayed by the duplicate-token heads' attention to the key token itself,
    so the whole-output ablation calls them mixed (docs/circuit.md)."""
    causal, heads = _trained_toy(tmp_path, "position-blind")
    assert float(heads["previous_token_score"].sel(layer=0).max()) < 0.05
    assert float(heads["duplicate_token_score"].sel(layer=0).min()) > 0.3
    assert set(causal["composition_class"].values) == {"Q"}
    assert set(causal["whole_output_class"].values) == {"mixed"}
    for upstream in causal["upstream"].values:
        assert set(upstream.split()) <= {"0.0/Q", "0.1/Q"} and upstream != "-"


def _trained_toy(directory, recipe):
    """A recipe's toy at seed 0 trained for 1500 steps: the causal test of its layer-1 induction heads
    (induction score >= 0.2) and its layer-0 head scores."""
    require("torch")
    import torch

    from icl_cmr.adapters.lm import toy_model
    from icl_cmr.adapters.lm.causal_composition import induction_scores, path_ablation
    from icl_cmr.adapters.lm.loading import load_model
    from icl_cmr.adapters.lm.extraction import extract_heads

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        settings = dataclasses.replace(toy_model.recipe_settings(recipe, quick=True), n_checkpoints=2)
        toy_model.train_toy(directory, settings=settings, progress=False, log=lambda _: None)
    finally:
        torch.set_num_threads(threads)
    step, checkpoint = toy_model.list_checkpoints(directory)[-1]
    model = load_model(str(checkpoint))
    induction = induction_scores(model, n_words=20, n_prompts=4)
    tested = [(1, h) for h in range(model.n_heads) if induction[1, h] >= 0.2]
    assert tested, f"no layer-1 induction head at step {step}: {induction.round(3).tolist()}"
    causal = path_ablation(model, tested, n_words=20, n_prompts=4)
    heads = extract_heads(model, n_prompts=4, words=toy_model.prompt_words(directory, 20), lags=5)
    return causal, heads.squeeze(drop=True)
