"""A researcher's own models: what is read, and what is refused in one line before any long work.

Read: a local directory, a Hugging Face causal language model object with its tokenizer, and a
TransformerBridge the user booted; each gives the head profiles of the same model loaded by
``load_model``, value for value. Refused with one ``ModelNotAvailableError`` line naming the
reason: a model without attention (Mamba) and a masked language model (BERT), before
TransformerLens boots them; any other object with one ``ParameterError`` line naming what is
accepted.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require

SETTINGS = {"n_words": 10, "n_prompts": 2, "lags": 3}
NO_ATTENTION = "it has no attention layers (MambaForCausalLM), and the lag profiles read attention heads"
MASKED = "it is a masked language model (BertForMaskedLM), not a causal one"
REFUSED = [pytest.param("mamba", NO_ATTENTION, id="mamba"), pytest.param("bert", MASKED, id="bert")]


def _tiny_mamba(vocab_size):
    from transformers import MambaConfig, MambaForCausalLM

    return MambaForCausalLM(MambaConfig(vocab_size=vocab_size, hidden_size=16, state_size=4, num_hidden_layers=2,
                                        expand=2, conv_kernel=2, bos_token_id=1, eos_token_id=0, pad_token_id=0))


def _tiny_bert(vocab_size):
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64))


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
    """Model directories (weights, config.json, a word-level tokenizer) of a tiny Llama, Mamba and BERT."""
    require("torch")
    require("transformer_lens")
    import torch

    from icl_cmr.adapters.lm.loading import tiny_hf_model

    root = tmp_path_factory.mktemp("user-models")
    llama, tokenizer = tiny_hf_model()
    made = {"llama": llama}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        made.update(mamba=_tiny_mamba(len(tokenizer)), bert=_tiny_bert(len(tokenizer)))
    for kind, model in made.items():
        model.save_pretrained(root / kind)
        tokenizer.save_pretrained(root / kind)
    return {kind: root / kind for kind in made}


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): None if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def _one_line(error_class, call) -> str:
    with pytest.raises(error_class) as info:
        call()
    assert type(info.value) is error_class
    assert "\n" not in str(info.value), "the message must be one line"
    return str(info.value)


@pytest.fixture
def no_boot(monkeypatch):
    """Make booting a TransformerBridge fail the test: a refusal must come before it."""
    from transformer_lens.model_bridge import TransformerBridge

    def boot(*args, **kwargs):
        raise AssertionError("TransformerLens was asked to boot a model that is refused")

    monkeypatch.setattr(TransformerBridge, "boot_transformers", boot)


# --- refused architectures ----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "reason"), REFUSED)
def test_load_model_refuses_before_booting(directories, kind, reason, no_boot):
    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.loading import load_model

    before = _snapshot(directories[kind])
    message = _one_line(ModelNotAvailableError, lambda: load_model(str(directories[kind])))
    assert message.startswith(f"model directory {str(directories[kind])!r} cannot be loaded: {reason}")
    assert _snapshot(directories[kind]) == before


@pytest.mark.parametrize(("kind", "reason"), REFUSED)
def test_heads_command_refuses_in_one_line(directories, kind, reason, tmp_path, capsys, no_boot):
    from icl_cmr.analyses.cli import main

    before = _snapshot(directories[kind])
    output = tmp_path / "heads.nc"
    assert main(["heads", str(directories[kind]), "-o", str(output), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"icl-cmr heads: error: model directory {str(directories[kind])!r} cannot be loaded: "
                          f"{reason}")
    assert list(tmp_path.iterdir()) == [] and _snapshot(directories[kind]) == before


def test_a_booted_model_without_attention_hooks_is_refused(directories, monkeypatch):
    """A model type not known to lack attention still boots; its missing hooks are then named."""
    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.loading import load_model

    monkeypatch.setattr("icl_cmr.adapters.lm._model_files.ATTENTION_FREE_TYPES", ())
    message = _one_line(ModelNotAvailableError, lambda: load_model(str(directories["mamba"])))
    assert f"cannot be loaded: {NO_ATTENTION}" in message


def test_refused_objects_name_the_reason(directories):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformer_lens.model_bridge import TransformerBridge

    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.extraction import extract_heads

    tokenizer = AutoTokenizer.from_pretrained(directories["mamba"])
    mamba = AutoModelForCausalLM.from_pretrained(directories["mamba"])
    bridge = TransformerBridge.boot_transformers("my-mamba", hf_model=mamba, tokenizer=tokenizer)
    assert _one_line(ModelNotAvailableError, lambda: extract_heads(bridge, **SETTINGS)) == (
        f"model 'my-mamba' cannot be read: {NO_ATTENTION}")
    bert = _tiny_bert(len(tokenizer))
    message = _one_line(ModelNotAvailableError, lambda: extract_heads((bert, tokenizer), **SETTINGS))
    assert message == f"model 'BertForMaskedLM' cannot be read: {MASKED}: the lag profiles assume each word " \
        "attends only to the words before it"


# --- the user's own objects ---------------------------------------------------------------------


def _data(heads):
    return {name: heads[name].values for name in heads.data_vars}


def _same(reference, other):
    assert reference.keys() == other.keys()
    for name, values in reference.items():
        np.testing.assert_array_equal(other[name], values, err_msg=name, strict=True)


def test_own_objects_give_the_profiles_of_load_model(directories):
    from transformer_lens.model_bridge import TransformerBridge

    from icl_cmr.adapters.lm.extraction import attention_pattern, copying_scores, extract_heads
    from icl_cmr.adapters.lm.loading import as_loaded_model, load_model, tiny_hf_model

    loaded = load_model(str(directories["llama"]))
    reference = _data(extract_heads(loaded, **SETTINGS))
    pattern = attention_pattern(loaded, 1, 2, n_words=10)
    copying = copying_scores(loaded)

    model, tokenizer = tiny_hf_model()  # the same weights, as an object the user built
    heads = extract_heads((model, tokenizer), **SETTINGS)
    _same(reference, _data(heads))
    assert heads["model"].values.tolist() == ["LlamaForCausalLM"]
    named = extract_heads(as_loaded_model(*tiny_hf_model(), name="my-llama"), **SETTINGS)
    _same(reference, _data(named))
    assert named["model"].values.tolist() == ["my-llama"]

    bridge = TransformerBridge.boot_transformers("my-llama", hf_model=tiny_hf_model()[0],
                                                 tokenizer=tiny_hf_model()[1])
    _same(reference, _data(extract_heads(bridge, **SETTINGS)))
    np.testing.assert_array_equal(copying_scores(bridge), copying, strict=True)
    _same(_data(pattern), _data(attention_pattern(bridge, 1, 2, n_words=10)))


def test_other_objects_are_refused_in_one_line():
    require("torch")
    require("transformer_lens")
    import torch
    from transformers import LlamaModel

    from cmr.errors import ParameterError
    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.extraction import copying_scores, extract_heads
    from icl_cmr.adapters.lm.loading import as_loaded_model, tiny_hf_model

    accepted = ("model must be a LoadedModel (load_model), a TransformerLens TransformerBridge, or a Hugging Face "
                "causal language model object with its tokenizer; got ")
    assert _one_line(ParameterError, lambda: extract_heads("gpt2")) == accepted + \
        "the name 'gpt2' (load it with load_model)"
    assert _one_line(ParameterError, lambda: copying_scores(torch.nn.Linear(2, 2))) == accepted + "a Linear"
    model, tokenizer = tiny_hf_model()
    assert _one_line(ParameterError, lambda: extract_heads(model)) == (
        "a LlamaForCausalLM needs its tokenizer: pass (model, tokenizer) or as_loaded_model(model, tokenizer); "
        "got no tokenizer")
    assert _one_line(ParameterError, lambda: as_loaded_model(model, tokenizer, name=3)) == (
        "name must be a non-empty string; got 3")
    doubled, _ = tiny_hf_model()
    doubled.to(torch.float64)
    assert _one_line(ParameterError, lambda: extract_heads((doubled, tokenizer))) == (
        "the LlamaForCausalLM runs in float64; expected one of float32, bfloat16, float16 (convert it first, "
        "e.g. model.to(torch.float32))")
    assert _one_line(ModelNotAvailableError, lambda: as_loaded_model(LlamaModel(model.config), tokenizer)) == (
        "model 'LlamaModel' cannot be read: it has no language-model head (LlamaModel); load it with "
        "AutoModelForCausalLM, which gives the model with its head")
