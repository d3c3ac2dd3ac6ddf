"""Composition scores (Elhage et al. 2021): a hand-built model's closed form, brute force, baseline."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require



def _model():
    require("torch")
    from icl_cmr.adapters.lm.loading import tiny_model

    return tiny_model(n_layers=2)  # 4 query heads, 2 key/value heads, d_model 32, d_head 8


def _set(model, layer: int, name: str, value: np.ndarray) -> None:
    import torch

    for pname, param in model.bridge.named_parameters():
        if f"layers.{layer}." in pname and f".{name}." in pname + ".":
            with torch.no_grad():
                param.copy_(torch.as_tensor(value, dtype=param.dtype))
            return
    raise KeyError(name)


COS, SIN = float(np.float32(0.6)), float(np.float32(0.8))  # as the float32 model stores them


def _hand_built():
    """Layer 0 head 0 copies dims 0-7 into 8-15; layer 1 reads 8-15 with its query (head 0),
    key (heads 2, 3: one key/value head) or value (heads 0, 1: one key/value head)."""
    model = _model()
    d, dh = 32, 8
    eye = np.eye(d)
    block = {name: eye[:, 8 * i: 8 * i + 8] for i, name in enumerate("abcd")}  # (d_model, d_head) bases
    zeros_qo = np.zeros((4 * dh, d))
    # HF layouts: q_proj (heads*d_head, d_model), k/v_proj (kv*d_head, d_model), o_proj (d_model, heads*d_head)
    v0 = np.zeros((2 * dh, d))
    v0[:dh] = block["a"].T
    o0 = np.zeros((d, 4 * dh))
    o0[:, :dh] = block["b"]
    _set(model, 0, "v_proj", v0)
    _set(model, 0, "o_proj", o0)
    _set(model, 0, "q_proj", zeros_qo)
    _set(model, 0, "k_proj", np.zeros((2 * dh, d)))
    _set(model, 0, "input_layernorm", np.where(np.arange(d) < 8, 3.0, 1.0))  # a scale no score sees
    q1 = np.zeros((4 * dh, d))
    q1[:dh] = (COS * block["b"] + SIN * block["c"]).T
    q1[2 * dh:3 * dh] = block["c"].T
    q1[3 * dh:] = block["a"].T
    k1 = np.zeros((2 * dh, d))
    k1[:dh] = block["d"].T
    k1[dh:] = block["b"].T
    v1 = np.zeros((2 * dh, d))
    v1[:dh] = (SIN * block["b"] + COS * block["c"]).T
    o1 = np.zeros((d, 4 * dh))
    o1[:, :dh] = block["a"]
    o1[:, dh:2 * dh] = block["a"]
    for name, value in (("q_proj", q1), ("k_proj", k1), ("v_proj", v1), ("o_proj", o1)):
        _set(model, 1, name, value)
    _set(model, 1, "input_layernorm", np.where((np.arange(d) >= 8) & (np.arange(d) < 16), 2.0, 1.0))
    return model


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_a_hand_built_model_has_its_closed_form_composition(dtype, rtol):
    from icl_cmr.adapters.lm import composition

    model = _hand_built()
    w = composition.head_weights(model)
    score = composition.composition_from_weights(w["W_Q"], w["W_K"], w["W_V"], w["W_O"], w["kv_of_head"],
                                                 dtype=dtype)["score"][:, 1, :, 0, 0]  # (Q/K/V, later head)
    root8 = np.sqrt(8.0)
    # the layer-1 norm doubles dims 8-15: Q reads 2 cos b + sin c, V writes from 2 sin b + cos c
    q_head0 = 2 * COS / (root8 * np.sqrt(4 * COS ** 2 + SIN ** 2))
    v_head01 = 2 * SIN / (root8 * np.sqrt(4 * SIN ** 2 + COS ** 2))
    expected = np.array([
        [q_head0, np.nan, 0.0, 0.0],  # Q: head 1 has no query (W_QK = 0)
        [0.0, np.nan, 1 / root8, 1 / root8],  # K: heads 2 and 3 share the key head that reads dims 8-15
        [v_head01, v_head01, np.nan, np.nan],  # V: heads 0 and 1 share the value head; 2, 3 have none
    ])
    np.testing.assert_allclose(score, expected, rtol=rtol, atol=1e-6 if dtype == np.float32 else 1e-14)
    assert np.isnan(composition.composition_from_weights(w["W_Q"], w["W_K"], w["W_V"], w["W_O"])["score"][:, 1, :, 0, 1]).all()


def test_scores_of_a_random_model_equal_the_full_matrix_definition():
    from icl_cmr.adapters.lm import composition
    from icl_cmr.adapters.lm.loading import tiny_model

    require("torch")
    w = composition.head_weights(tiny_model(n_layers=3, rng=4))
    score = composition.composition_from_weights(w["W_Q"], w["W_K"], w["W_V"], w["W_O"], dtype=np.float64)["score"]
    kv = w["W_Q"].shape[1] // w["W_K"].shape[1]
    fro = np.linalg.norm
    for layer in (1, 2):
        for head in range(4):
            qk = w["W_Q"][layer, head] @ w["W_K"][layer, head // kv].T
            ov_later = w["W_V"][layer, head // kv] @ w["W_O"][layer, head]
            for source_layer in range(layer):
                for source_head in range(4):
                    ov = w["W_V"][source_layer, source_head // kv] @ w["W_O"][source_layer, source_head]
                    want = [fro(ov @ qk) / (fro(ov) * fro(qk)), fro(ov @ qk.T) / (fro(ov) * fro(qk)),
                            fro(ov @ ov_later) / (fro(ov) * fro(ov_later))]
                    np.testing.assert_allclose(score[:, layer, head, source_layer, source_head], want, rtol=1e-12)
    assert np.isnan(score[:, 0]).all() and np.isnan(score[:, 1, :, 1:]).all()  # only earlier layers compose


def test_the_random_baseline_has_mean_square_one_over_d_model():
    from icl_cmr.adapters.lm import composition

    base = composition.random_composition_baseline(48, 6, n_samples=600, rng=3)
    mean_square = (base["samples"] ** 2).mean(axis=1)
    standard_error = (base["samples"] ** 2).std(axis=1, ddof=1) / np.sqrt(600)
    assert base["expected_mean_square"] == 1 / 48
    assert (np.abs(mean_square - 1 / 48) < 4 * standard_error).all()
    # and the baseline is far below a composed pair: 1/sqrt(8) = 0.35 in the hand-built model
    assert (base["mean"] < 0.2).all()


def test_composition_dataset_of_a_model_validates_and_round_trips(tmp_path):
    import cmr
    from icl_cmr.adapters.lm import composition

    ds = composition.composition_scores(_model(), n_baseline=20)
    assert ds.attrs["icl_cmr_kind"] == "composition"
    assert ds["score"].sizes == {"composition": 3, "layer": 2, "head": 4, "source_layer": 2, "source_head": 4}
    cmr.save_dataset(ds, tmp_path / "composition.nc")
    back = cmr.load_dataset(tmp_path / "composition.nc")
    np.testing.assert_array_equal(back["score"].values, ds["score"].values)
