"""Attention extraction: prompts, hooked passes, lag profiles and head scores, OV copying scores.

Extraction (:func:`extract_heads`): one forward pass per prompt with hooks on every layer's
``attn.hook_attn_scores`` and ``attn.hook_pattern`` only; each hook keeps just the parts of
its layer's attention that the per-head lag statistics read
(:func:`icl_cmr.adapters.head_profiles.attention_blocks`), so no (query, key) matrix leaves the
device. Models come from :mod:`icl_cmr.adapters.lm.loading`. torch is imported inside
functions, so importing this module is cheap.
"""
from __future__ import annotations

import numpy as np

from cmr.checks import index, integer, seed_of
from cmr.deprecation import keyword_only, renamed_keywords

from .. import head_profiles, prompts
from ..errors import PromptError
from ._model_files import LoadedModel, with_run_record
from .loading import as_loaded_model, measure_peak_memory

__all__ = [
    "log_prior",
    "make_prompts",
    "attention_pass",
    "attention_blocks_pass",
    "attention_pattern",
    "copying_scores",
    "extract_heads",
    "forward_passes",
]


def log_prior(model: LoadedModel) -> np.ndarray:
    """Log-probability of every token right after BOS alone: the model's unigram prior, (vocab,).

    The log-softmax runs in float64 on the host, from the logits in float32.
    """
    import torch

    with torch.no_grad():
        logits = model.bridge(torch.tensor([[model.bos_id]], device=model.device), return_type="logits")
        return torch.log_softmax(logits[0, -1].float().cpu().double(), dim=-1).numpy()


@renamed_keywords(seed="rng")
def make_prompts(model: LoadedModel, *, n_words: int = 100, n_prompts: int = 5, rng=0,
                 words=None) -> prompts.PromptSet:
    """Repeated-list prompts for ``model`` (see :mod:`icl_cmr.adapters.prompts`).

    ``rng`` (default 0): an int is the seed of the permutations; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy. The seed used is the
    result's ``seed``. ``words`` (optional): your own word list (strings with their leading
    space) instead of the top-``n_words`` of the model's unigram prior; each must be exactly
    one token.
    """
    seed = seed_of(rng)
    settings = {"n_words": n_words, "n_prompts": n_prompts, "seed": seed}
    if words is None:
        word_ids, texts = prompts.select_words(model.tokenizer, log_prior(model), n_words)
        selection = prompts.WORD_RULE
    else:
        texts = tuple(words)
        unknown = model.tokenizer.unk_token_id
        encoded = [model.tokenizer.encode(w, add_special_tokens=False) for w in texts]
        # -1 marks a word that is not one known token; check_single_tokens then names it
        word_ids = np.array([e[0] if len(e) == 1 and e[0] != unknown else -1 for e in encoded], dtype=np.int64)
        selection = "user-supplied word list"
        settings["n_words"] = len(texts)
    prompts.check_single_tokens(model.tokenizer, word_ids, texts)
    made = prompts.build_prompts(word_ids, texts, n_prompts=n_prompts, rng=seed, bos_id=model.bos_id,
                                 n_ctx=model.n_ctx, settings=settings)
    return prompts.PromptSet(made.tokens, made.permutations, made.word_ids, made.words, made.seed,
                             selection, made.settings)


def _hooked_pass(model: LoadedModel, tokens, keep) -> np.ndarray:
    """Forward pass with ``keep(tensor, hook)`` on every layer's attention scores and pattern.

    Returns the next-token loss, float64 (seq - 1,): log-softmax of the float32 logits on the
    device, then float64 on the host.
    """
    import torch

    tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64)).reshape(1, -1).to(model.device)

    def wanted(name):
        return name.startswith("blocks.") and name.endswith(("attn.hook_attn_scores", "attn.hook_pattern"))

    with torch.no_grad():
        logits = model.bridge.run_with_hooks(tokens, fwd_hooks=[(wanted, keep)], return_type="logits")
        logp = torch.log_softmax(logits[0, :-1].float(), dim=-1)
        loss = -logp.gather(-1, tokens[0, 1:, None])[:, 0]
    return loss.cpu().double().numpy()


def _host(tensor) -> np.ndarray:
    import torch

    return tensor.detach().to(torch.float32).cpu().numpy()


def attention_pass(model: LoadedModel, tokens):
    """One forward pass: scores, probabilities and next-token loss for one prompt.

    Parameters
    ----------
    tokens : int (seq,)

    Returns
    -------
    scores, probs : float32 (layer, head, seq, seq)
        Pre-softmax scores (scaled by the model's 1/sqrt(d_head); entries after the query
        are whatever the library fills in: mask them, see head_profiles.lag_block) and
        post-softmax probabilities, copied to the host in float32 (exact for bfloat16 and
        float16 models). With grouped-query attention the library expands keys per query
        head (query head h reads key/value head h // group). Whole matrices of every layer:
        :func:`attention_blocks_pass` keeps only what the head statistics need.
    loss : float64 (seq - 1,), cross-entropy (nats) of the token at positions 1..seq-1.
    """
    seq = int(np.asarray(tokens).size)
    shape = (model.n_layers, model.n_heads, seq, seq)
    scores = np.empty(shape, dtype=np.float32)
    probs = np.empty(shape, dtype=np.float32)

    def keep(tensor, hook):
        layer = int(hook.name.split(".")[1])
        dest = scores if hook.name.endswith("hook_attn_scores") else probs
        dest[layer] = _host(tensor[0])

    loss = _hooked_pass(model, tokens, keep)
    return scores, probs, loss


def attention_blocks_pass(model: LoadedModel, tokens, n_words: int, lags):
    """One forward pass keeping only the attention the head statistics read, cut on the device.

    Each layer's hook cuts its (head, query, key) scores and probabilities down to the parts
    :func:`icl_cmr.adapters.head_profiles.attention_blocks` names (the lag block of the scores,
    the second-copy block of the probabilities, their previous-token diagonal) and copies
    only those to the host in float32: (N x n_lags + N^2 + 2N) values per head instead of
    2 (2N+1)^2. Equal, value for value, to cutting the output of :func:`attention_pass`.

    Parameters
    ----------
    tokens : int (2N+1,), a repeated-list prompt (BOS, copy 1, copy 2)
    n_words : int, N
    lags : int (n_lags,)

    Returns
    -------
    blocks : dict of float32 arrays, for :func:`icl_cmr.adapters.head_profiles.block_summary`
    loss : float64 (2N,), as :func:`attention_pass`
    """
    import torch

    seq = int(np.asarray(tokens).size)
    if seq != 2 * n_words + 1:
        raise PromptError(f"a prompt of N={n_words} words has 2N+1 = {2 * n_words + 1} tokens; got {seq}")
    lags = np.asarray(lags, dtype=np.int64)
    query, key, _ = head_profiles.lag_indices(n_words, lags)
    query_index = torch.as_tensor(query[:, None], device=model.device)
    key_index = torch.as_tensor(key, device=model.device)
    position = torch.arange(1, seq, device=model.device)
    cut = {name: [None] * model.n_layers for name in ("score_lags", "second_copy", "previous")}

    def keep(tensor, hook):
        # copies on the device, in the model's dtype; one transfer per part after the pass
        layer = int(hook.name.split(".")[1])
        values = tensor[0]
        if hook.name.endswith("hook_attn_scores"):
            cut["score_lags"][layer] = values[:, query_index, key_index]
        else:
            cut["second_copy"][layer] = values[:, n_words + 1:, 1:n_words + 1].clone()
            cut["previous"][layer] = values[:, position, position - 1]

    loss = _hooked_pass(model, tokens, keep)
    return {name: _host(torch.stack(parts)) for name, parts in cut.items()}, loss


@renamed_keywords(seed="rng")
def attention_pattern(model: LoadedModel, layer: int, head: int, *, n_words: int = 100, rng=0,
                      prompt: int = 0):
    """One head's attention over one repeated-list prompt (the study's Fig. 3b), all positions.

    The prompt is prompt number ``prompt`` of :func:`make_prompts` with the same ``n_words``
    and ``rng``, i.e. one of the prompts :func:`extract_heads` reads.

    Returns
    -------
    xarray.Dataset of kind ``attention_pattern``, dims (query, key) = (2N+1, 2N+1)
        ``prob`` and ``score`` (pre-softmax, NaN on masked keys), token strings as coords;
        attrs ``layer``, ``head``, ``n_words``, ``prompt``, ``layout``
        (:func:`icl_cmr.adapters.head_profiles.attention_pattern_dataset`).
    """
    model = as_loaded_model(model)
    shape = f"({model.n_layers} layers x {model.n_heads} heads)"
    index(layer, f"layer {shape}", model.n_layers)
    index(head, f"head {shape}", model.n_heads)
    integer(prompt, "prompt", minimum=0)
    seed = seed_of(rng)
    made = make_prompts(model, n_words=n_words, n_prompts=int(prompt) + 1, rng=seed)
    scores, probs, _ = attention_pass(model, made.tokens[prompt])
    listed = [made.words[i] for i in made.permutations[prompt]]
    bos = model.tokenizer.convert_ids_to_tokens(model.bos_id)
    info = model.provenance()
    info["prompt_selection"] = made.selection
    return head_profiles.attention_pattern_dataset(
        scores[layer, head], probs[layer, head], tokens=[bos, *listed, *listed], n_words=made.n_words,
        layer=layer, head=head, model=model.name, prompt=prompt, rng=seed, provenance=info,
    )


def _norm_weight(module, size):
    """Scale vector of a (RMS/Layer)Norm bridge on the host in float64, or ones when it has none."""
    import torch

    for pname, param in module.named_parameters():
        if pname.endswith("weight") and param.ndim == 1 and param.shape[0] == size:
            return param.detach().to("cpu", torch.float64)
    return torch.ones(size, dtype=torch.float64)


#: vocabulary rows per float32 matmul of U E: bounds each temporary to 2^16 x d_model floats
_VOCAB_CHUNK = 1 << 16


def _vocab_product(unembed, embed):
    """``U E`` (d_model, d_model) in float64 on the host: float32 matmuls on the device, by vocabulary chunk."""
    total = None
    for start in range(0, int(embed.shape[0]), _VOCAB_CHUNK):
        stop = start + _VOCAB_CHUNK
        part = (unembed[:, start:stop].float() @ embed[start:stop].float()).cpu().double()
        total = part if total is None else total + part
    return total


@keyword_only
def copying_scores(model: LoadedModel, *, token_ids=None) -> np.ndarray:
    """OV-circuit copying score of every head: ``sum(lambda) / sum(|lambda|)``.

    ``lambda`` are the eigenvalues of the OV circuit ``E diag(w_ln1) W_V W_O diag(w_lnf) U``
    restricted to ``token_ids`` (default: the whole vocabulary, as the paper), computed as the
    eigenvalues of the d_head x d_head matrix ``W_O (U E) W_V`` (same non-zero spectrum, by
    eig(AB) = eig(BA)); no vocab x vocab matrix is formed. Norm scale weights are folded in
    (as TransformerLens' fold_ln does); the per-token RMS factor is not. Query head h uses
    key/value head h // (n_heads / n_kv_heads).

    Where it runs: ``U E`` is a float32 product on the model's device (in vocabulary chunks
    of 65,536 tokens, each accumulated in float64); the d_model-sized OV products and the
    eigenvalues are float64 on the host CPU, one layer at a time, from the model's weights
    in its own dtype.

    Returns
    -------
    float64 (layer, head)
    """
    import torch

    model = as_loaded_model(model)
    bridge = model.bridge
    d_model = int(model.cfg.d_model)
    with torch.no_grad():
        if token_ids is None and model.vocab_product is not None:
            vocab_product = model.vocab_product
        else:
            embed = bridge.W_E.detach()  # (vocab, d_model)
            unembed = bridge.W_U.detach()  # (d_model, vocab)
            if token_ids is not None:
                idx = torch.as_tensor(np.asarray(token_ids, dtype=np.int64), device=embed.device)
                embed, unembed = embed[idx], unembed[:, idx.to(unembed.device)]
            vocab_product = _norm_weight(bridge.ln_final, d_model)[:, None] * _vocab_product(unembed, embed)
            if token_ids is None:
                model.vocab_product = vocab_product  # computed once per loaded model
        w_v = bridge.W_V.detach()  # (layer, kv_head, d_model, d_head), model dtype, on the device
        w_o = bridge.W_O.detach()  # (layer, head, d_head, d_model)
        kv_of_head = torch.arange(model.n_heads) // (model.n_heads // w_v.shape[1])
        small = []
        for layer in range(model.n_layers):
            scale = _norm_weight(bridge.blocks[layer].ln1, d_model)[:, None]
            product_v = vocab_product @ (scale * w_v[layer].to("cpu", torch.float64))  # (kv_head, d_model, d_head)
            small.append(w_o[layer].to("cpu", torch.float64) @ product_v[kv_of_head])  # (head, d_head, d_head)
        eig = torch.linalg.eigvals(torch.stack(small))  # (layer, head, d_head)
        out = (eig.sum(-1).real / eig.abs().sum(-1)).numpy()
    return out

@renamed_keywords(seed="rng")
def extract_heads(model: LoadedModel, *, n_words: int = 100, n_prompts: int = 5, rng=0,
                  lags=8, soft_rule: str = "query_only", checkpoint: int = -1, words=None,
                  progress=None):
    """Lag profiles and head scores of every head of ``model`` (see docs/heads.md).

    Parameters
    ----------
    model : LoadedModel, TransformerBridge or Hugging Face causal language model
        Anything :func:`icl_cmr.adapters.lm.loading.as_loaded_model` accepts; a Hugging Face
        model goes with its tokenizer, as ``(model, tokenizer)``.
    n_words, n_prompts, rng : prompt settings (:func:`make_prompts`)
    lags : int K (lags -K..K) or a sequence of lags (:func:`cmr.lag_window`); within +-(n_words-1)
    soft_rule : rule of the soft-transition lag-CRP (``head_profiles.SOFT_CRP_RULES``)
    checkpoint : int, stored as the ``checkpoint`` coordinate (-1: the released model)
    words : optional list of words (with leading space) instead of the prior's top-N
    progress : optional callable, called with 1 after each prompt (e.g. ``tqdm.update``)

    Returns
    -------
    xarray.Dataset of kind ``lag_profile`` with dims (model, checkpoint, layer, head, lag);
    its attrs (and provenance) record ``device``, ``dtype``, ``peak_memory_bytes`` and
    ``peak_memory_measure`` (:func:`measure_peak_memory`).
    """
    model = as_loaded_model(model)
    with measure_peak_memory(model.device) as memory:
        lags = head_profiles.lag_range(lags, n_words if words is None else len(words))
        made = make_prompts(model, n_words=n_words, n_prompts=n_prompts, rng=rng, words=words)
        head_profiles.teacher_forced_transitions(made.n_words, rule=soft_rule)  # unknown rule: PromptError
        summaries, losses = [], []
        for row in made.tokens:
            blocks, loss = attention_blocks_pass(model, row, made.n_words, lags)
            summaries.append(head_profiles.block_summary(blocks, made.n_words, lags, soft_rule=soft_rule))
            losses.append(loss)
            if progress is not None:
                progress(1)
        copying = copying_scores(model)
    info = model.provenance()
    info.update(
        prompt={
            "n_words": made.n_words, "n_prompts": made.n_prompts, "seed": made.seed,
            "selection": made.selection, "words": list(made.words), "bos_id": model.bos_id,
            "layout": "BOS + copy 1 (positions 1..N) + copy 2 (N+1..2N)",
        },
        copying_score_tokens="full vocabulary",
    )
    heads = head_profiles.head_profile_dataset(
        head_profiles.pool_summaries(summaries), lags=lags, n_words=made.n_words, model=model.name,
        checkpoint=checkpoint, copying_score=copying,
        position_loss=np.mean(losses, axis=0), provenance=info, soft_rule=soft_rule,
    )
    return with_run_record(heads, device=model.device, dtype=model.dtype, **memory)


def forward_passes(model: LoadedModel, tokens) -> None:
    """Plain forward passes of the bridge over each row of ``tokens`` (a timing reference)."""
    import torch

    with torch.no_grad():
        for row in np.asarray(tokens, dtype=np.int64):
            model.bridge(torch.as_tensor(row[None]).to(model.device), return_type="logits")
