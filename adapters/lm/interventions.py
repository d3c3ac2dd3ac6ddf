"""Interventions on a TransformerBridge: head ablation and next-token losses at chosen positions.

Heads are ablated at their output before the output projection: the hook
``blocks.{layer}.attn.hook_z`` (shape batch x position x query head x d_head; grouped-query
models expose one slice per query head, so query heads are ablated). Zero ablation sets the
head's slice to 0; mean ablation sets it to the head's mean output over every text position of
the same passages (measured in the unablated pass); resample ablation (:func:`set_losses`) sets
it to the head's output on a donor passage at the same positions. Only the logits at the scored positions are
computed (the body of the Hugging Face model runs under the bridge's hooks, then the output
embedding is applied to those positions), which saves the vocabulary projection elsewhere.

Device and dtype: passages go to the device of the bridge's weights and run in their dtype
(mean head outputs are applied there in that dtype); the losses are a float64 log-softmax on
the host of the logits copied in float32. torch is imported inside the functions, so
importing this module is cheap.
"""
from __future__ import annotations

import contextlib

import numpy as np

from cmr.errors import ParameterError

__all__ = ["MODES", "DIRECT_FAMILIES", "geometry", "placement", "bos_id", "ablation_hooks", "scored_logits", "passage_losses",
           "plain_model", "output_projections", "zeroed_heads", "host_logprob",
           "full_logit_losses", "SET_MODES"]

#: ablation modes of one pass: replace a head's output by zeros or by its mean output
MODES = ("zero", "mean")
#: modes of :func:`set_losses`: also ``resample``, each head's output taken from a donor passage
SET_MODES = (*MODES, "resample")


def geometry(bridge) -> tuple[int, int]:
    return int(bridge.cfg.n_layers), int(bridge.cfg.n_heads)


def placement(bridge):
    """``(device, dtype)`` of the bridge's floating-point weights (torch objects)."""
    for param in bridge.parameters():
        if param.is_floating_point():
            return param.device, param.dtype
    import torch

    return torch.device("cpu"), torch.float32


def host_logprob(logits, gold):
    """Log-probability of ``gold`` (host int64) in float64, from float32 copies of ``logits``, returned on the host.

    On a CUDA device the float64 log-softmax runs there and only the gathered values travel: copying
    the whole vocabulary of every scored position to the host (5 GB for 64 conditions x 199 scored
    positions of a 49,152-token vocabulary) made such batches 30 times slower than their forward
    passes. On the CPU the arithmetic is the same as before, so CPU results stay bit for bit; other
    devices (mps has no float64) copy to the host."""
    import torch

    if logits.device.type == "cuda":
        logp = torch.log_softmax(logits.float().double(), dim=-1)
        return logp.gather(-1, gold.to(logits.device).unsqueeze(-1)).squeeze(-1).cpu()
    logp = torch.log_softmax(logits.float().cpu().double(), dim=-1)
    return logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)


def bos_id(bridge):
    tokenizer = getattr(bridge, "tokenizer", None)
    return getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None


def ablation_hooks(heads, mode, means):
    """fwd_hooks replacing the chosen heads' slices of hook_z (zero or their mean output)."""
    import torch

    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))
    hooks = []
    for layer, head_list in sorted(by_layer.items()):
        index = torch.tensor(sorted(head_list), dtype=torch.long)
        fill = None if mode == "zero" else torch.as_tensor(means[layer][sorted(head_list)])
        cast = {}  # the fill in the activations' device and dtype, made once

        def hook(z, hook, index=index, fill=fill, cast=cast):
            z = z.clone()
            if fill is None:
                z[:, :, index.to(z.device), :] = 0.0
            else:
                key = (z.device, z.dtype)
                if key not in cast:
                    cast[key] = fill.to(dtype=z.dtype, device=z.device)
                z[:, :, index.to(z.device), :] = cast[key]
            return z

        hooks.append((f"blocks.{layer}.attn.hook_z", hook))
    return hooks


def scored_logits(bridge, input_ids, predict_index):
    """Logits at ``predict_index`` only (batch, n_index, vocab), with the bridge's hooks active."""
    import torch

    model = getattr(bridge, "original_model", None)
    body = getattr(model, "base_model", None) if model is not None else None
    head = model.get_output_embeddings() if model is not None and hasattr(model, "get_output_embeddings") else None
    if body is None or head is None or body is model:
        return bridge(input_ids)[:, predict_index]  # generic path: full logits
    hidden = body(input_ids=input_ids).last_hidden_state[:, predict_index]
    logits = head(hidden)
    cap = float(getattr(bridge.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def passage_losses(bridge, passages, targets, *, heads=(), mode="zero", means=None, batch_size=4,
                   capture_means=False, progress=None) -> tuple[np.ndarray, np.ndarray | None]:
    """Next-token losses (nats) at text positions ``targets`` of every passage.

    Parameters
    ----------
    bridge : transformer_lens.model_bridge.TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
        Token ids without special tokens (:func:`icl_cmr.adapters.text_corpus.load_passages`).
    targets : sequence of int
        0-based text positions whose loss is wanted (each >= 1 unless a BOS is prepended).
    heads : sequence of (layer, head)
        Heads to ablate; empty for the unablated model.
    mode : {"zero", "mean"}
    means : ndarray, shape (n_layer, n_head, d_head), optional
        Mean head outputs, needed for ``mode="mean"``.
    capture_means : bool
        Also return the mean ``hook_z`` per head over all text positions (n_layer, n_head, d_head).
    progress : tqdm bar, optional
        Advanced by one per batch.

    Returns
    -------
    losses : ndarray, shape (n_passage, len(targets))
    means : ndarray or None
    """
    import torch

    if mode not in MODES:
        raise ParameterError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if heads and mode == "mean" and means is None:
        raise ParameterError("mean ablation needs the mean head outputs (means=...)")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    bos = bos_id(bridge)
    offset = 1 if bos is not None else 0
    if targets.min() + offset < 1 or targets.max() >= passages.shape[1]:
        raise ParameterError(
            f"scored positions must lie in {1 - offset}..{passages.shape[1] - 1}; got {targets.min()}..{targets.max()}"
        )
    length = int(targets.max()) + offset  # input positions needed: BOS + text up to the last target - 1
    device, _ = placement(bridge)
    predict_index = torch.as_tensor(targets + offset - 1, device=device)
    hooks = list(ablation_hooks(heads, mode, means)) if heads else []
    n_layers, n_heads = geometry(bridge)
    sums, count = None, 0
    if capture_means:
        sums = [None] * n_layers

        def make_capture(layer):
            def capture(z, hook):
                # summed in float32 on the device (bfloat16 sums would round), then float64 on the host
                part = z[:, offset:].sum(dim=(0, 1), dtype=torch.float32).cpu().double()
                sums[layer] = part if sums[layer] is None else sums[layer] + part
                return z
            return capture

        hooks += [(f"blocks.{l}.attn.hook_z", make_capture(l)) for l in range(n_layers)]
    out = np.empty((passages.shape[0], targets.size), dtype=np.float64)
    with torch.inference_mode(), bridge.hooks(fwd_hooks=hooks):
        for start in range(0, passages.shape[0], int(batch_size)):
            chunk = torch.as_tensor(passages[start:start + int(batch_size)])
            text = chunk[:, : length - offset]
            if offset:
                text = torch.cat([torch.full((chunk.shape[0], 1), int(bos), dtype=torch.long), text], dim=1)
            logits = scored_logits(bridge, text.to(device), predict_index)
            gold = chunk[:, torch.as_tensor(targets)]
            out[start:start + chunk.shape[0]] = (-host_logprob(logits, gold)).numpy()
            count += chunk.shape[0] * (length - offset)
            if progress is not None:
                progress.update(1)
    mean_out = None
    if capture_means:
        mean_out = np.stack([(s / count).numpy() for s in sums]).astype(np.float64)
    return out, mean_out


def full_logit_losses(bridge, passages, targets, *, heads=(), mode="zero", means=None) -> np.ndarray:
    """The plain TransformerLens way to the losses of :func:`passage_losses` (the reference).

    ``bridge.run_with_hooks`` on the whole batch with full logits at every position, then the
    losses at ``targets``; a BOS is prepended when the tokenizer has one.
    """
    import torch

    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    bos = bos_id(bridge)
    ids = torch.as_tensor(passages[:, : int(targets.max())])
    offset = 0
    if bos is not None:
        ids = torch.cat([torch.full((ids.shape[0], 1), int(bos), dtype=torch.long), ids], dim=1)
        offset = 1
    hooks = ablation_hooks(heads, mode, means) if heads else []
    device, _ = placement(bridge)
    with torch.inference_mode():
        logits = bridge.run_with_hooks(ids.to(device), fwd_hooks=hooks)
        gold = torch.as_tensor(passages[:, targets])
        return (-host_logprob(logits[:, torch.as_tensor(targets + offset - 1, device=device)], gold)).numpy()


# --- many head sets per passage: the ablation test's engine ------------------------------------

#: model families whose decoder (embed, rotary, layers, norm, lm_head) the engine runs directly
DIRECT_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")

_PLAIN = {}  # id(bridge) -> (weakref to the bridge, plain model or None)


def plain_model(bridge):
    """The bridge's Hugging Face model as a plain module with SDPA attention, or None.

    The bridge wraps every submodule of its model with hooks; the ablation engine and
    generation need none of them (heads are ablated at the input of each layer's attention
    output projection, which is ``hook_z`` flattened: :func:`zeroed_heads`). A plain module
    sharing the bridge's weight tensors and buffers (no second copy) is built once per bridge;
    None when the architecture cannot be rebuilt from its configuration (then callers go through
    the bridge). Generation runs here rather than through the bridge, whose attention components
    read the key-value cache only under its older keyword (``past_key_values``; transformers
    5.24 passes ``cache``), so that cached generation through the bridge ignores the prompt.
    """
    import weakref

    key = id(bridge)
    if key in _PLAIN and _PLAIN[key][0]() is bridge:
        return _PLAIN[key][1]
    plain = _build_plain(bridge)
    _PLAIN[key] = (weakref.ref(bridge), plain)
    return plain


def _build_plain(bridge):
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    hf = getattr(bridge, "original_model", None)
    config = getattr(hf, "config", None)
    if config is None:
        return None
    _, dtype = placement(bridge)
    config = copy.deepcopy(config)
    config._attn_implementation = "sdpa"
    try:
        with torch.device("meta"):  # no memory: the tensors are the bridge's own (assigned below)
            plain = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype, trust_remote_code=False)
    except (ValueError, KeyError, TypeError, ImportError):  # no plain class or no SDPA for this architecture
        return None
    state = {_plain_name(k): v for k, v in hf.state_dict().items()}
    missing, _ = plain.load_state_dict(state, strict=False, assign=True)
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
        missing = [k for k in missing if not k.startswith("lm_head.")]
    if missing:
        return None
    buffers = {_plain_name(k): v for k, v in hf.named_buffers()}  # non-persistent ones too (rotary frequencies)
    for name, buffer in list(plain.named_buffers()):
        if buffer.is_meta and name in buffers:
            owner, _, leaf = name.rpartition(".")
            plain.get_submodule(owner)._buffers[leaf] = buffers[name]
    if any(t.is_meta for t in (*plain.parameters(), *plain.buffers())):
        return None
    return plain.eval()


def _plain_name(name: str) -> str:
    """A module or tensor name of the bridge's model without the bridge's wrapper levels."""
    return name.replace("._original_component", "").replace("_original_component.", "")


def output_projections(bridge, plain) -> list:
    """Per layer, the module of ``plain`` whose input is the heads' outputs side by side (``hook_z`` flattened).

    Found through the bridge's own map of each block's attention output (``blocks.{l}.attn.o``):
    the module of ``plain`` holding the same weight tensor (``o_proj``, GPT-2's ``c_proj``, ...),
    so it holds for every architecture the bridge supports.
    """
    import torch

    by_weight = {}
    for module in plain.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor):
            by_weight.setdefault(weight.data_ptr(), []).append(module)
    projections = []
    for layer, block in enumerate(bridge.blocks):
        module = getattr(getattr(getattr(block, "attn", None), "o", None), "original_component", None)
        weight = getattr(module, "weight", None)
        found = by_weight.get(weight.data_ptr(), []) if weight is not None else []
        if len(found) != 1:
            raise ParameterError(f"layer {layer} of this model has no attention output projection to ablate heads at")
        projections.append(found[0])
    return projections


@contextlib.contextmanager
def zeroed_heads(bridge, plain, heads):
    """Zero-ablate ``heads`` ((layer, head) pairs) in ``plain`` while the block runs: their slices of
    the input of each layer's output projection are set to 0 at every position (as zeroing ``hook_z``)."""
    import torch

    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), set()).add(int(head))
    if not by_layer:
        yield
        return
    projections = output_projections(bridge, plain)
    n_layers, n_heads = geometry(bridge)
    width = int(bridge.cfg.d_head)
    device, dtype = placement(bridge)
    handles = []
    try:
        for layer, chosen in sorted(by_layer.items()):
            if not 0 <= layer < n_layers or not chosen <= set(range(n_heads)):
                raise ParameterError(f"heads must lie in layers 0..{n_layers - 1} and heads 0..{n_heads - 1}; "
                                     f"got layer {layer}, heads {sorted(chosen)}")
            keep = torch.ones(n_heads, width, device=device, dtype=dtype)
            keep[sorted(chosen)] = 0.0
            keep = keep.reshape(-1)

            def hook(module, args, keep=keep):
                return (args[0] * keep, *args[1:])
            handles.append(projections[layer].register_forward_pre_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()
