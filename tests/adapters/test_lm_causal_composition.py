"""Path-level ablation: the recomputed attention equals the model's own, with and without edits."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require


@pytest.fixture(scope="module")
def tiny():
    require("torch")
    from icl_cmr.adapters.lm.loading import tiny_model

    return tiny_model(n_layers=3, rng=1)


def _library_split_pass(model, tokens, layer, head, path, removed, read="pattern"):
    """The target head's pattern (``read="pattern"``) or z (``"z"``) from the library's own forward pass
    with its split q/k/v input edited."""
    import torch

    slot = head if path == "Q" else head // (model.n_heads // int(model.bridge.W_K.shape[1]))
    got = {}

    def subtract(tensor, hook):
        tensor = tensor.clone()
        tensor[:, :, slot] -= removed
        return tensor

    def keep(tensor, hook):
        got[read] = (tensor[:, head] if read == "pattern" else tensor[:, :, head]).detach()

    model.bridge.set_use_split_qkv_input(True)
    try:
        with torch.no_grad():
            model.bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_{path.lower()}_input", subtract),
                                                           (f"blocks.{layer}.attn.hook_{read}", keep)])
    finally:
        model.bridge.set_use_split_qkv_input(False)
    return got[read]


def _library_pattern(model, tokens, layer, head, path, removed):
    """The target head's pattern from the library's own forward pass with its split q/k input edited."""
    return _library_split_pass(model, tokens, layer, head, path, removed).numpy()


@pytest.fixture(scope="module")
def tiny_gpt2():
    require("torch")
    from icl_cmr.adapters.lm.loading import tiny_model

    return tiny_model(n_layers=3, rng=1, architecture="gpt2")


@pytest.mark.parametrize("architecture", ["llama", "gpt2"])
@pytest.mark.parametrize("path", ["Q", "K"])
def test_recomputed_ablation_equals_the_librarys_split_input_pass(tiny, tiny_gpt2, path, architecture):
    """Llama (RMSNorm, rotary, grouped-query) and GPT-2 (LayerNorm with biases, absolute positions)."""
    import torch

    from icl_cmr.adapters.lm import causal_composition as path_ablation
    from icl_cmr.adapters.lm.extraction import make_prompts

    tiny = tiny if architecture == "llama" else tiny_gpt2
    made = make_prompts(tiny, n_words=12, n_prompts=2, rng=0)
    tokens = torch.as_tensor(made.tokens)
    layer, head = 2, 3
    ds = path_ablation.path_ablation(tiny, [(layer, head)], n_words=12, n_prompts=2, rng=0, lags=range(-2, 3))
    # removing every earlier head's direct output from the one path, through the library's own hooks
    z = {}

    def keep_z(tensor, hook):
        z[int(hook.name.split(".")[1])] = tensor.detach()

    with torch.no_grad():
        tiny.bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{e}.attn.hook_z", keep_z) for e in range(layer)])
    w_o = tiny.bridge.W_O.detach()
    every = sum(z[e][:, :, g] @ w_o[e, g] for e in range(layer) for g in range(tiny.n_heads))
    pattern = _library_pattern(tiny, tokens, layer, head, path, every)
    k = np.arange(11)
    induction = pattern[:, 13 + k, 2 + k].mean()
    p = ["Q", "K"].index(path)
    np.testing.assert_allclose(float(ds["induction_all"][0, p]), induction, rtol=1e-5)
    single = _library_pattern(tiny, tokens, layer, head, path, z[1][:, :, 2] @ w_o[1, 2])
    base = float(ds["base_induction"][0])
    np.testing.assert_allclose(float(ds["source_drop"][0, p, 1, 2]), 1 - single[:, 13 + k, 2 + k].mean() / base,
                               rtol=1e-4, atol=1e-6)
    assert np.isnan(ds["source_drop"].values[0, :, layer:]).all()
    # the moved part: each earlier head's attention with its diagonal (attention to the position itself) zeroed
    pattern, value = {}, {}

    def keep(store):
        def hook(tensor, hook):
            store[int(hook.name.split(".")[1])] = tensor.detach()
        return hook

    with torch.no_grad():
        tiny.bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{e}.attn.hook_{name}", keep(store)) for e in range(layer)
                                                      for name, store in (("pattern", pattern), ("v", value))])
    group = tiny.n_heads // value[0].shape[2]
    off_diagonal = 1.0 - torch.eye(tokens.shape[1])
    moved = [[(pattern[e][:, g] * off_diagonal) @ value[e][:, :, g // group] @ w_o[e, g] for g in range(tiny.n_heads)]
             for e in range(layer)]
    assert max(float(torch.diagonal(pattern[e], dim1=-2, dim2=-1).max()) for e in range(layer)) > 0.05
    every_moved = _library_pattern(tiny, tokens, layer, head, path, sum(sum(heads) for heads in moved))
    np.testing.assert_allclose(float(ds["induction_moved"][0, p]), every_moved[:, 13 + k, 2 + k].mean(), rtol=1e-5)
    single = _library_pattern(tiny, tokens, layer, head, path, moved[1][2])
    np.testing.assert_allclose(float(ds["source_drop_moved"][0, p, 1, 2]), 1 - single[:, 13 + k, 2 + k].mean() / base,
                               rtol=1e-4, atol=1e-6)
    assert not np.allclose(ds["source_drop_moved"].values[0, :, :layer], ds["source_drop"].values[0, :, :layer])


@pytest.mark.parametrize("architecture", ["llama", "gpt2"])
def test_the_value_path_equals_the_librarys_split_input_pass(tiny, tiny_gpt2, architecture):
    """The head's output with earlier heads removed from its value input only, through the library's
    own hook_v_input, against the dataset's value drops (whole output and one head alone)."""
    import torch

    from icl_cmr.adapters.lm import causal_composition as path_ablation
    from icl_cmr.adapters.lm.extraction import make_prompts

    tiny = tiny if architecture == "llama" else tiny_gpt2
    tokens = torch.as_tensor(make_prompts(tiny, n_words=12, n_prompts=2, rng=0).tokens)
    layer, head = 2, 3
    ds = path_ablation.path_ablation(tiny, [(layer, head)], n_words=12, n_prompts=2, rng=0, lags=range(-2, 3))
    w_o = tiny.bridge.W_O.detach()
    z = {}

    def keep_z(tensor, hook):
        z[int(hook.name.split(".")[1])] = tensor.detach()

    with torch.no_grad():
        tiny.bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{e}.attn.hook_z", keep_z) for e in range(layer + 1)])
    scored = 13 + np.arange(11)

    def head_output(removed):
        return (_library_split_pass(tiny, tokens, layer, head, "V", removed, read="z")[:, scored] @ w_o[layer, head]).double()

    clean = (z[layer][:, scored, head] @ w_o[layer, head]).double()
    np.testing.assert_allclose(head_output(torch.zeros(())).numpy(), clean.numpy(), rtol=1e-4, atol=1e-4)

    def drop(removed):
        return 1.0 - float((head_output(removed) * clean).sum() / (clean ** 2).sum())

    every = sum(z[e][:, :, g] @ w_o[e, g] for e in range(layer) for g in range(tiny.n_heads))
    np.testing.assert_allclose(float(ds["value_drop_all"][0]), drop(every), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(ds["value_source_drop"][0, 1, 2]), drop(z[1][:, :, 2] @ w_o[1, 2]),
                               rtol=1e-4, atol=1e-6)
    assert abs(float(ds["value_drop_all"][0])) > 1e-3
    assert np.isnan(ds["value_source_drop"].values[0, layer:]).all()


@pytest.mark.parametrize("drops, expected", [
    ((0.05, 0.9), "K"), ((0.9, 0.05), "Q"), ((0.5, 0.6), "mixed"), ((0.1, 0.1), "neither"), ((0.3, 0.7), "K"),
    ((-0.3, 0.99), "K"),
])
def test_classification_rules(drops, expected):
    from icl_cmr.adapters.lm.causal_composition import classify

    assert classify(*drops) == expected


def test_bad_target_heads_get_one_typed_error(tiny):
    from cmr.errors import ParameterError
    from icl_cmr.adapters.lm.causal_composition import path_ablation

    for heads in ([], [(0, 1)], [(3, 0)], [(1, 9)]):
        with pytest.raises(ParameterError):
            path_ablation(tiny, heads, n_words=8, n_prompts=1)


def test_the_command_refuses_a_bad_output_before_loading_a_model(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    assert main(["composition", "-o", str(tmp_path / "scores.txt")]) == 1
    assert "error" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_commands_tables_read_both_datasets(tiny):
    from icl_cmr.adapters.lm import causal_composition, composition
    from icl_cmr.analyses.commands.composition import causal_table, composition_summary

    scores = composition.composition_scores(tiny, n_baseline=10)
    summary = composition_summary(scores)
    assert [line.split(":")[0].strip() for line in summary.splitlines()] == ["Q", "K", "V"]
    causal = causal_composition.path_ablation(tiny, [(2, 1), (1, 0)], n_words=8, n_prompts=1, composition=scores)
    assert np.isfinite(causal["source_composition"].values[0, :, :2]).all()
    table = causal_table(causal).splitlines()
    assert table[1].split()[0] == "L2.H1" and table[2].split()[0] == "L1.H0"
    assert table[1].split()[5] in ("K", "Q", "mixed", "neither", "weak")
    assert table[0].split()[5] == "class" and table[1].split()[4] == f"{float(causal['value_drop_moved'][0]):.3f}"


def test_the_composition_figures_draw_both_datasets(tiny):
    require("matplotlib")
    from icl_cmr.adapters.lm import causal_composition, composition
    from icl_cmr.analyses import plots

    scores = composition.composition_scores(tiny, n_baseline=10)
    assert len(plots.composition_matrix(scores).axes) == 4  # three panels and the colour bar
    causal = causal_composition.path_ablation(tiny, [(2, 1)], n_words=8, n_prompts=1)
    assert [t.get_text() for t in plots.causal_composition(causal).axes[0].get_xticklabels()][0].startswith("L2.H1")


def test_the_study_report_section_states_the_classes(tiny):
    import types

    from icl_cmr.adapters.lm import causal_composition, composition
    from icl_cmr.analyses.study import report

    scores = composition.composition_scores(tiny, n_baseline=10)
    causal = causal_composition.path_ablation(tiny, [(2, 1), (1, 0)], n_words=8, n_prompts=1)
    distance = np.full((3, 4), 0.3)
    summary = report.composition_stage_summary(scores, causal, {(2, 1): ["induction"], (1, 0): ["cmr_like"]},
                                               distance)
    lines = report._composition_section(types.SimpleNamespace(summaries={"composition": summary}))
    rows = [line for line in lines if line.startswith("| L")]
    assert [row.split("|")[1].strip() for row in rows] == ["L2.H1", "L1.H0"]
    assert rows[1].split("|")[2].strip() == "cmr-like"
    classes = [row.split("|")[7].strip() for row in rows]
    assert any(line.startswith("Classes of the tested heads") for line in lines)
    assert ("none of the tested heads is Q-composed" in "\n".join(lines)) == ("Q" not in classes)
